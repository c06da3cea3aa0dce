package fake

import (
	"math"
	"unicode"
	"unicode/utf8"
)

// Feature weights of the fake embedding. A content word counts fully; a
// function word ("the", "to", "how") a quarter, so that a question is
// placed by what it asks about rather than by how it is phrased; a pair of
// adjacent words half, so that a shared phrase weighs more than the same
// words scattered; and the character trigrams of a word together as much as
// the word itself, so that "return", "returns" and "returned" share most of
// their features without any language-specific stemmer.
const (
	weightWord     = 1.0
	weightStopWord = 0.25
	weightPair     = 0.5
	weightTrigrams = 1.0
)

// Feature kinds, mixed into each feature's hash so that the word "ion" and
// the trigram "ion" land in unrelated buckets.
const (
	tagWord    = 0x517cc1b727220a95
	tagPair    = 0x2545f4914f6cdd1d
	tagTrigram = 0x9e3779b97f4a7c15
)

// embed returns the unit vector of text for a model of the given width.
//
// It is feature hashing (Weinberger et al., 2009): the text is cut into
// lower-cased words (runs of letters and digits); each word, each pair of
// adjacent words, and each character trigram of a word padded with "<" and
// ">" is hashed, seeded by the provider seed and the model id, to one
// coordinate and a sign, and adds its weight there. The sum is scaled to
// unit length, so the inner product of two vectors is their cosine and
// approximates the weighted overlap of their features: texts sharing words
// and word stems are near each other, unrelated texts are nearly orthogonal
// once the width is in the hundreds. Signs make collisions cancel on
// average instead of adding up. A text without any letter or digit hashes
// as one feature, so that every text, even the empty one, has a unit vector.
//
// The cost is linear in the text's length and independent of the width, so
// embedding a corpus for a benchmark or a demo is fast. It is deterministic
// but not a language model: it knows no synonyms.
func (p *Provider) embed(model, text string, dims int) []float32 {
	acc := make([]float64, dims)
	base := hashString(mix(p.cfg.Seed), model)
	add := func(h uint64, w float64) {
		h = mix(h)
		if h>>63 != 0 {
			w = -w
		}
		acc[(h&(1<<63-1))%uint64(dims)] += w
	}
	var prev uint64 // hash of the previous word, 0 before the first
	var prevW float64
	words := 0
	forEachWord(text, func(word string) {
		words++
		w := weightWord
		if isStopWord(word) {
			w = weightStopWord
		}
		hw := hashString(base, word)
		add(hw^tagWord, w)
		if prev != 0 {
			add(hashPair(prev, hw)^tagPair, weightPair*min(w, prevW))
		}
		prev, prevW = hw, w
		addTrigrams(word, base, w*weightTrigrams, add)
	})
	if words == 0 {
		add(hashString(base, text)^tagWord, weightWord)
	}
	var norm float64
	for _, v := range acc {
		norm += v * v
	}
	norm = math.Sqrt(norm)
	out := make([]float32, dims)
	if norm == 0 {
		// Every feature cancelled out (possible only in very small widths):
		// fall back to a fixed coordinate so the vector stays a unit vector.
		out[base%uint64(dims)] = 1
		return out
	}
	for j, v := range acc {
		out[j] = float32(v / norm)
	}
	return out
}

// forEachWord calls fn with each lower-cased run of letters and digits of
// text, in order.
func forEachWord(text string, fn func(word string)) {
	buf := make([]byte, 0, 32)
	flush := func() {
		if len(buf) > 0 {
			fn(string(buf))
			buf = buf[:0]
		}
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
			continue
		}
		flush()
	}
	flush()
}

// addTrigrams adds the character trigrams of "<word>" with a total weight
// of w: each of the n trigrams weighs w/√n, so that the trigram block of a
// word has the same length whatever the word's length.
func addTrigrams(word string, base uint64, w float64, add func(uint64, float64)) {
	runes := make([]rune, 0, len(word)+2)
	runes = append(runes, '<')
	for _, r := range word {
		runes = append(runes, r)
	}
	runes = append(runes, '>')
	n := len(runes) - 2
	each := w / math.Sqrt(float64(n))
	for i := 0; i+3 <= len(runes); i++ {
		h := base ^ tagTrigram
		for _, r := range runes[i : i+3] {
			h = mix(h ^ uint64(r))
		}
		add(h, each)
	}
}

// hashPair combines the hashes of two adjacent words, order-sensitively.
func hashPair(a, b uint64) uint64 { return mix(a*31 + b) }

// isStopWord reports whether word is an English function word. Such words
// are weighted down, not dropped, so that a text made only of them still has
// a vector. It is a switch rather than a map so that the package holds no
// mutable state.
func isStopWord(word string) bool {
	switch word {
	case "a", "about", "after", "all", "am", "an", "and", "any", "are", "as", "at",
		"be", "been", "before", "but", "by", "can", "could", "did", "do", "does",
		"for", "from", "had", "has", "have", "he", "her", "his", "how", "i", "if",
		"in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or",
		"our", "she", "should", "so", "some", "than", "that", "the", "their", "them",
		"then", "there", "these", "they", "this", "to", "us", "was", "we", "were",
		"what", "when", "where", "which", "who", "why", "will", "with", "would", "you",
		"your":
		return true
	}
	return false
}
