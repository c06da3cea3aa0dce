// Package analysis is the text analyzer of aid's lexical index and of the
// keyless fake embedder: it turns text into the terms a BM25 index counts.
// The store kinds that keep a lexical index (runtime/retrieval/memory,
// runtime/retrieval/pgvector) and the fake provider's embeddings, when an
// application embeds with it (fake.Kind.Analyzer), import it; it lives
// apart from runtime/retrieval so that a service that neither searches
// words nor embeds with the fake does not link the Snowball stemmer.
//
// The analyzer, in order: Unicode word segmentation (UAX #29, by
// github.com/rivo/uniseg), keeping the segments that hold a letter or a
// digit; lower-casing; dropping the English stop words of the Snowball
// project's list (IsStopWord); and the Snowball English (Porter2)
// stemmer of github.com/kljensen/snowball, so that "refunds", "refunded"
// and "refunding" are one term. Version names this pipeline: an index built
// by another version has other terms and must be rebuilt.
//
// What it is not: not language detection (every text is read as English;
// other languages are segmented and lower-cased correctly but stemmed as
// English would be, which leaves most of their words as they are), and not
// a query parser (no phrases, no operators).
package analysis

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"github.com/rivo/uniseg"
)

// Version identifies the analyzer. A store that keeps terms (the pgvector
// lexical index) records it and rebuilds its terms when it changes.
const Version = "aid-analysis/1 uax29 lower snowball-english-stop snowball-english-stem"

// Words calls fn with each lower-cased word of text, in order: the UAX #29
// word segments that hold at least one letter or digit. Stop words are
// included and nothing is stemmed.
func Words(text string, fn func(word string)) {
	state := -1
	for len(text) > 0 {
		var seg string
		seg, text, state = uniseg.FirstWordInString(text, state)
		if !wordLike(seg) {
			continue
		}
		fn(lower(seg))
	}
}

// Each calls fn with each term of text, in order: the words of Words that
// are not stop words, stemmed.
func Each(text string, fn func(term string)) {
	Words(text, func(w string) {
		if IsStopWord(w) {
			return
		}
		fn(Stem(w))
	})
}

// Terms returns the terms of text, in order, repeats included.
func Terms(text string) []string {
	var out []string
	Each(text, func(t string) { out = append(out, t) })
	return out
}

// TermCounts returns the distinct terms of text in ascending byte order,
// how often each occurs, and the number of terms (the document length
// BM25 normalises by). Stores index a record by it.
func TermCounts(text string) (terms []string, tfs []int32, length int) {
	counts := make(map[string]int32)
	Each(text, func(t string) {
		counts[t]++
		length++
	})
	terms = make([]string, 0, len(counts))
	for t := range counts {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	tfs = make([]int32, len(terms))
	for i, t := range terms {
		tfs[i] = counts[t]
	}
	return terms, tfs, length
}

// QueryTerms returns the distinct terms of a query in ascending byte order:
// a term repeated in the query counts once. It is what a store keeping a
// lexical index by TermCounts answers to retrieval.LexicalSearcher's
// QueryTerms.
func QueryTerms(query string) []string {
	return slices.Compact(slices.Sorted(slices.Values(Terms(query))))
}

// English is the analyzer as a value: what the fake provider's embeddings
// ask of an analyzer (fake.Analyzer), which lowering sets on a fake
// provider one of whose models embeds, so that a generated service links
// this package only then.
type English struct{}

// Words calls Words.
func (English) Words(text string, fn func(word string)) { Words(text, fn) }

// IsStopWord calls IsStopWord.
func (English) IsStopWord(w string) bool { return IsStopWord(w) }

// Stem calls Stem.
func (English) Stem(w string) string { return Stem(w) }

// Stem returns the Snowball English stem of a lower-cased word. Words of
// two letters or fewer, and words with a digit, are returned unchanged: a
// stemmer would turn "v2" or "404s" into something nobody searches for.
func Stem(word string) string {
	if len(word) <= 2 {
		return word
	}
	for _, r := range word {
		if unicode.IsDigit(r) {
			return word
		}
	}
	return english.Stem(word, true)
}

// IsStopWord reports whether a lower-cased word is an English stop word:
// one of the 174 words of the Snowball project's English stop list (as
// github.com/kljensen/snowball ships it), which goes with its stemmer. It
// drops pronouns and question words too ("my", "your", "how"), which
// Lucene's shorter list keeps: on the support-desk questions "my" decided
// "my account is locked" for the page about deleting one's data.
func IsStopWord(w string) bool { return english.IsStopWord(w) }

// wordLike reports whether a segment holds a letter or a digit.
func wordLike(seg string) bool {
	for _, r := range seg {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// lower lower-cases s, without allocating when it is already lower-case
// ASCII, the common case.
func lower(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}
