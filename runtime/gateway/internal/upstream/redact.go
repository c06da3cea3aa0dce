// Package upstream holds what every provider kind that calls a remote
// service shares: hiding the service's API key in whatever the service
// says before it can reach an error, a log line or a span (Redactor);
// telling a failure worth retrying from one that is not (RetryableStatus,
// Transient); bounding an attempt, and a stream's wait for each event, by
// the provider's timeout (Attempt, StreamAttempt); capturing an error
// answer before the SDK hides it in an error that holds the key
// (CaptureErrorAnswer, Exchange); and the skeleton of classifying a
// failure (Classifier), around what each provider reads its own way. It
// is internal to runtime/gateway: the kinds under it (openaicompat,
// anthropic) call it, so that each hides an echoed key, times out and
// classifies a failure the same way, and a third provider starts from it.
package upstream

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"
)

// redacted replaces whatever gave the key away.
const redacted = "[redacted]"

// fragmentLen is the shortest run of the key's characters that is hidden
// wherever it appears: long enough that ordinary text does not match it by
// chance, short enough that an upstream cutting the key in pieces, or
// echoing a truncated key, still gives nothing useful away.
const fragmentLen = 8

// Redactor hides an API key in text that came from the upstream. It finds
// the key however the upstream may have echoed it: as sent or in the
// Authorization header's value ("Bearer <key>"), in any letter case,
// percent-encoded, JSON- or HTML-escaped, base64-encoded (a Basic header or
// a token), or cut into pieces of fragmentLen or more characters. A nil
// Redactor, for a provider without a key, changes nothing. It is safe for
// concurrent use.
type Redactor struct {
	// windows holds every fragmentLen-long run of the lower-cased key (the
	// whole key when it is shorter).
	windows map[string]struct{}
	width   int
	// cores are the base64 encodings of the key at each of the three byte
	// alignments, in the standard and URL-safe alphabets, cut to the
	// characters that depend on the key alone.
	cores []string
}

// NewRedactor returns the Redactor of key; nil for an empty key.
func NewRedactor(key string) *Redactor {
	if key == "" {
		return nil
	}
	low := strings.ToLower(key)
	r := &Redactor{windows: map[string]struct{}{}, width: min(fragmentLen, len(low))}
	for i := 0; i+r.width <= len(low); i++ {
		r.windows[low[i:i+r.width]] = struct{}{}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for pad := range 3 {
			b := enc.EncodeToString(append(make([]byte, pad), key...))
			// Quantum q encodes input bytes 3q..3q+2: keep the quanta
			// made of key bytes only.
			start, end := 4*((pad+2)/3), 4*((pad+len(key))/3)
			if end-start >= fragmentLen {
				r.cores = append(r.cores, b[start:end])
			}
		}
	}
	return r
}

// String returns s with every echo of the key replaced by "[redacted]".
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	hide := make([]bool, len(s))
	found := false
	// Decode the escapes an echo may hide behind, remembering for each
	// decoded byte the source bytes it came from, and look for the key's
	// runs in the decoded, lower-cased text.
	dec := make([]byte, 0, len(s))
	from := make([]int32, 0, len(s)) // source start of each decoded byte
	to := make([]int32, 0, len(s))   // source end
	for i := 0; i < len(s); {
		start := len(dec)
		var n int
		dec, n = appendUnescaped(dec, s, i)
		for k := start; k < len(dec); k++ {
			if c := dec[k]; 'A' <= c && c <= 'Z' {
				dec[k] = c + 'a' - 'A'
			}
			from = append(from, int32(i))
			to = append(to, int32(i+n))
		}
		i += n
	}
	for j := 0; j+r.width <= len(dec); j++ {
		if _, ok := r.windows[string(dec[j:j+r.width])]; ok {
			for k := from[j]; k < to[j+r.width-1]; k++ {
				hide[k] = true
			}
			found = true
		}
	}
	// Base64 is case-sensitive and has no escapes: look in s itself, and
	// hide the whole base64 token around each match.
	for _, core := range r.cores {
		for off := 0; ; {
			i := strings.Index(s[off:], core)
			if i < 0 {
				break
			}
			i += off
			start, end := i, i+len(core)
			for start > 0 && isBase64(s[start-1]) {
				start--
			}
			for end < len(s) && isBase64(s[end]) {
				end++
			}
			for k := start; k < end; k++ {
				hide[k] = true
			}
			found = true
			off = i + 1
		}
	}
	if !found {
		return s
	}
	var out strings.Builder
	out.Grow(len(s))
	for i := 0; i < len(s); {
		if !hide[i] {
			out.WriteByte(s[i])
			i++
			continue
		}
		out.WriteString(redacted)
		for i < len(s) && hide[i] {
			i++
		}
	}
	return out.String()
}

// appendUnescaped decodes the escape at s[i] (%XX, \uXXXX, \xXX, \/, \",
// \\, &#N;, &#xH;, &amp; and the other HTML entities html.EscapeString
// writes), appending the bytes it stands for to dst and returning its
// length in s; any other byte stands for itself. It appends rather than
// returns the bytes so that decoding a string costs no allocation per byte.
func appendUnescaped(dst []byte, s string, i int) ([]byte, int) {
	c := s[i]
	switch c {
	case '%':
		if i+3 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				return append(dst, byte(v)), 3
			}
		}
	case '\\':
		if i+1 < len(s) {
			switch s[i+1] {
			case 'u':
				if i+6 <= len(s) {
					if v, err := strconv.ParseUint(s[i+2:i+6], 16, 16); err == nil {
						return utf8.AppendRune(dst, rune(v)), 6
					}
				}
			case 'x':
				if i+4 <= len(s) {
					if v, err := strconv.ParseUint(s[i+2:i+4], 16, 8); err == nil {
						return append(dst, byte(v)), 4
					}
				}
			case '/', '"', '\\', '\'':
				return append(dst, s[i+1]), 2
			}
		}
	case '&':
		end := strings.IndexByte(s[i:min(len(s), i+12)], ';')
		if end > 1 {
			ent := s[i+1 : i+end]
			switch ent {
			case "amp":
				return append(dst, '&'), end + 1
			case "lt":
				return append(dst, '<'), end + 1
			case "gt":
				return append(dst, '>'), end + 1
			case "quot":
				return append(dst, '"'), end + 1
			case "apos":
				return append(dst, '\''), end + 1
			}
			if ent[0] == '#' && len(ent) > 1 {
				base, digits := 10, ent[1:]
				if digits[0] == 'x' || digits[0] == 'X' {
					base, digits = 16, digits[1:]
				}
				if v, err := strconv.ParseUint(digits, base, 21); err == nil && v <= utf8.MaxRune {
					return utf8.AppendRune(dst, rune(v)), end + 1
				}
			}
		}
	}
	return append(dst, c), 1
}

func isBase64(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
}

// Error returns an error with err's message, the key redacted. It never
// wraps err, so nothing err holds (a request whose headers carry the key,
// say) can be reached or printed through it.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: r.String(err.Error())}
}

// redactedError carries the redacted message of an error it does not keep.
type redactedError struct{ msg string }

// Error implements error.
func (e *redactedError) Error() string { return e.msg }

// maxExcerpt bounds the text of an error answer kept in an error.
const maxExcerpt = 512

// Excerpt returns what of a service's text (an error message, the start of
// an error body) an error may show: s with the key redacted, its white
// space collapsed, cut to 512 bytes at a character boundary. It redacts
// before it cuts, so that a cut cannot split an echo of the key into
// pieces too short to be found.
func (r *Redactor) Excerpt(s string) string {
	s = strings.Join(strings.Fields(r.String(s)), " ")
	if len(s) <= maxExcerpt {
		return s
	}
	cut := maxExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
