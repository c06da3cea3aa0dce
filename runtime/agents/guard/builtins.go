package guard

import (
	"math/big"
	"regexp"
	"strings"
)

// builtins are the named built-in patterns. Each is an RE2 expression that
// finds candidates and, where a number carries a check digit, the check
// that keeps only real ones: a card number passes Luhn, an IBAN mod 97.
var builtins = map[string]namedRE{
	"email": {name: "email", re: regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`), may: func(s string) bool {
		return strings.IndexByte(s, '@') >= 0
	}},
	"phone": {name: "phone", re: regexp.MustCompile(`\+?\(?\d[\d ().-]{6,}\d`), valid: func(m string) bool {
		n := digits(m)
		return len(n) >= 8 && len(n) <= 15
	}, may: atLeastDigits(8)},
	"card": {name: "card", re: regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`), valid: func(m string) bool {
		return luhn(digits(m))
	}, may: atLeastDigits(13)},
	"iban": {name: "iban", re: regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b`), valid: validIBAN, may: atLeastDigits(2)},
	"injection": {name: "injection", re: regexp.MustCompile(`(?i)\b(?:` + strings.Join([]string{
		`ignore (?:all |any )?(?:the |your )?(?:previous|prior|above|earlier|preceding) (?:instructions|prompts|rules|messages|directions)`,
		`disregard (?:all |any )?(?:the |your )?(?:previous|prior|above|earlier) (?:instructions|prompts|rules|messages)`,
		`forget (?:all |everything )?(?:of )?(?:your|the|about your) (?:previous |prior )?(?:instructions|rules|prompt)`,
		`(?:reveal|print|show|repeat|output) (?:me )?(?:your|the) (?:system |hidden |initial )?(?:prompt|instructions)`,
		`you are now (?:in )?(?:developer|dan|jailbreak|god) mode`,
		`override (?:your|the) (?:instructions|rules|safety)`,
		`new instructions:`,
	}, "|") + `)`), may: mayInject},
}

// injectionVerbs are the first words of the injection phrasings.
var injectionVerbs = []string{"ignore", "disregard", "forget", "reveal", "print", "show", "repeat", "output", "you are now", "override", "new instructions"}

// mayInject reports whether a word of s starts one of the injection
// phrasings, in any case, in one pass and without allocating.
func mayInject(s string) bool {
	for i := 0; i < len(s); i++ {
		if i > 0 && isLetter(s[i-1]) {
			continue // not the start of a word
		}
		c := s[i] | 0x20
		for _, w := range injectionVerbs {
			if w[0] == c && len(s)-i >= len(w) && strings.EqualFold(s[i:i+len(w)], w) {
				return true
			}
		}
	}
	return false
}

func isLetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }

// atLeastDigits is a quick test that text has at least n decimal digits.
func atLeastDigits(n int) func(string) bool {
	return func(s string) bool {
		c := 0
		for i := range len(s) {
			if s[i] >= '0' && s[i] <= '9' {
				if c++; c >= n {
					return true
				}
			}
		}
		return false
	}
}

// digits returns the decimal digits of s.
func digits(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// luhn reports whether n, 13 to 19 digits, passes the Luhn check.
func luhn(n string) bool {
	if len(n) < 13 || len(n) > 19 {
		return false
	}
	sum := 0
	for i := range len(n) {
		d := int(n[len(n)-1-i] - '0')
		if i%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// validIBAN reports whether m is an IBAN whose check digits pass mod 97.
func validIBAN(m string) bool {
	s := strings.ReplaceAll(m, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	var b strings.Builder
	for _, r := range s[4:] + s[:4] {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteString(big.NewInt(int64(r - 'A' + 10)).String())
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(b.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}
