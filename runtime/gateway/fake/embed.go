package fake

import "math"

// Analyzer is the text analysis of the fake's embeddings: the words of a
// text, which of them are stop words, and a word's stem. runtime/analysis's
// English is the one aid uses (Config.Analyzer, Kind.Analyzer); the
// embeddings are a function of the analyzer, the seed and the model.
type Analyzer interface {
	// Words calls fn with each lower-cased word of text, in order.
	Words(text string, fn func(word string))
	// IsStopWord reports whether a lower-cased word is a stop word.
	IsStopWord(word string) bool
	// Stem returns a lower-cased word's stem.
	Stem(word string) string
}

// Feature weights of the fake embedding. A content word counts fully; a
// function word ("the", "to", "how") a quarter, so that a question is
// placed by what it asks about rather than by how it is phrased; a pair of
// adjacent words half, so that a shared phrase weighs more than the same
// words scattered; and the character trigrams of a word together twice as
// much as the word itself, so that "return", "returns" and "returned", or
// "readstring" and "read a string", share most of their features. The
// weights were chosen on aid's retrieval quality harness
// (runtime/retrieval/internal/quality).
const (
	weightWord     = 1.0
	weightStopWord = 0.25
	weightPair     = 0.5
	weightTrigrams = 2.0
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
// It is feature hashing (Weinberger et al., 2009) over the words of the
// provider's Analyzer (runtime/analysis: Unicode word segmentation,
// lower-casing): each word's Snowball English stem, each pair of adjacent
// stems, and each character trigram of the word padded with "<" and ">" is
// a feature with the weight above. A feature's weights are summed over the
// text and damped sublinearly (a sum v above 1 counts 1 + ln v), so that a
// word repeated ten times does not drown the others. Each feature is
// hashed, seeded by the provider seed and the model id, to one coordinate
// and a sign, and the vector is scaled to unit length, so the inner
// product of two vectors is their cosine and approximates the weighted
// overlap of their features: texts sharing words and word stems are near
// each other, unrelated texts are nearly orthogonal once the width is in
// the hundreds. Signs make collisions cancel on average instead of adding
// up. A text without any letter or digit hashes as one feature, so that
// every text, even the empty one, has a unit vector.
//
// The cost is linear in the text's length and independent of the width, so
// embedding a corpus for a benchmark or a demo is fast. It is deterministic
// but not a language model: it knows no synonyms.
func (p *Provider) embed(model, text string, dims int) []float32 {
	base := hashString(mix(p.cfg.Seed), model)
	// Features in the order they first occur, so that the sums below run
	// in one order and the vector is the same to the bit on every call.
	var feats features
	var prev uint64 // hash of the previous word, 0 before the first
	var prevW float64
	words := 0
	an := p.cfg.Analyzer
	an.Words(text, func(word string) {
		words++
		w := weightWord
		if an.IsStopWord(word) {
			w = weightStopWord
		}
		hw := hashString(base, an.Stem(word))
		feats.add(hw^tagWord, w)
		if prev != 0 {
			feats.add(hashPair(prev, hw)^tagPair, weightPair*min(w, prevW))
		}
		prev, prevW = hw, w
		addTrigrams(word, base, w*weightTrigrams, feats.add)
	})
	if words == 0 {
		feats.add(hashString(base, text)^tagWord, weightWord)
	}
	acc := make([]float64, dims)
	for i, h := range feats.keys {
		w := feats.sums[i]
		if w > 1 {
			w = 1 + math.Log(w)
		}
		h = mix(h)
		if h>>63 != 0 {
			w = -w
		}
		acc[(h&(1<<63-1))%uint64(dims)] += w
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

// features sums the weights of hashed features in the order they first
// occur.
type features struct {
	at   map[uint64]int
	keys []uint64
	sums []float64
}

func (f *features) add(h uint64, w float64) {
	if f.at == nil {
		f.at = make(map[uint64]int)
	}
	i, ok := f.at[h]
	if !ok {
		i = len(f.keys)
		f.at[h] = i
		f.keys = append(f.keys, h)
		f.sums = append(f.sums, 0)
	}
	f.sums[i] += w
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
