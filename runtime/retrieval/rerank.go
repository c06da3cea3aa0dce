package retrieval

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"
)

// Rerank kinds, as the IR spells them.
const (
	RerankNone    = "none"
	RerankLexical = "lexical"
)

// NewReranker returns the reranker of a kind: RerankNone (or empty) keeps
// vector order, RerankLexical is a Lexical reranker with default
// parameters.
func NewReranker(kind string) (Reranker, error) {
	switch kind {
	case "", RerankNone:
		return NoRerank{}, nil
	case RerankLexical:
		return Lexical{}, nil
	}
	if err := deferredKind(DeferredRerankKinds(), "rerank kind", kind); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("unknown rerank kind %q; use %q or %q", kind, RerankNone, RerankLexical)
}

// NoRerank keeps the vector order and scores.
type NoRerank struct{}

// Rerank implements Reranker.
func (NoRerank) Rerank(ctx context.Context, _ string, hits []Hit) ([]Hit, error) {
	return hits, ctx.Err()
}

// Lexical reranks candidates by blending the vector ranking with Okapi
// BM25 of the query's terms, by reciprocal rank fusion (Cormack et al.,
// 2009): a candidate's score is 1/(RRFK + vector rank) + 1/(RRFK + BM25
// rank), ranks counted from 1, candidates with equal BM25 sharing the best
// of their ranks. Fusing ranks rather than scores needs no calibration
// between cosine similarities and BM25 values; lexical evidence moves a
// candidate only as far as it outranks the vector evidence, and candidates
// the query's terms do not tell apart keep their vector order. Equal fused
// scores keep vector order too. The hits' Score becomes the fused score.
//
// BM25 is computed over the candidate set itself: document frequencies and
// the average length come from the candidates, not from the whole index,
// so the cost is bounded by the candidates and no corpus statistics need
// to be kept. A candidate's text is its heading trail and its text; terms
// are lower-cased runs of letters and digits (Terms), each distinct query
// term counted once. The idf is Lucene's, ln(1 + (N − df + 0.5)/(df +
// 0.5)), which is never negative.
type Lexical struct {
	// K1 is BM25's term-frequency saturation; zero means 1.2.
	K1 float64
	// B is BM25's length normalisation in [0, 1]; zero means 0.75.
	B float64
	// RRFK damps the fusion's preference for top ranks; zero means 60.
	RRFK float64
}

// Rerank implements Reranker.
func (l Lexical) Rerank(ctx context.Context, query string, hits []Hit) ([]Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	bm, err := l.BM25(query, hits)
	if err != nil {
		return nil, err
	}
	rrfk := l.RRFK
	if rrfk == 0 {
		rrfk = 60
	}
	if rrfk < 0 || math.IsNaN(rrfk) {
		return nil, fmt.Errorf("lexical rerank: RRFK must be positive, got %v", l.RRFK)
	}
	out := slices.Clone(hits)
	for i := range out {
		rank := 1
		for _, s := range bm {
			if s > bm[i] {
				rank++
			}
		}
		out[i].Score = 1/(rrfk+float64(i+1)) + 1/(rrfk+float64(rank))
	}
	slices.SortStableFunc(out, func(x, y Hit) int {
		switch {
		case x.Score > y.Score:
			return -1
		case x.Score < y.Score:
			return 1
		}
		return 0
	})
	return out, nil
}

// BM25 returns the BM25 score of each candidate for the query, computed
// over the candidates as the type's documentation says.
func (l Lexical) BM25(query string, hits []Hit) ([]float64, error) {
	k1, b := l.K1, l.B
	if k1 == 0 {
		k1 = 1.2
	}
	if b == 0 {
		b = 0.75
	}
	if k1 < 0 || b < 0 || b > 1 || math.IsNaN(k1) || math.IsNaN(b) {
		return nil, fmt.Errorf("lexical rerank: K1 must be positive and B in [0, 1], got %v and %v", l.K1, l.B)
	}
	qterms := slices.Compact(slices.Sorted(slices.Values(Terms(query))))
	docs := make([]map[string]int, len(hits))
	lens := make([]float64, len(hits))
	df := make(map[string]int, len(qterms))
	var total float64
	for i, h := range hits {
		tf := make(map[string]int)
		terms := Terms(h.Heading + "\n" + h.Text)
		for _, t := range terms {
			tf[t]++
		}
		docs[i], lens[i] = tf, float64(len(terms))
		total += lens[i]
		for _, t := range qterms {
			if tf[t] > 0 {
				df[t]++
			}
		}
	}
	n := float64(len(hits))
	avg := total / max(n, 1)
	scores := make([]float64, len(hits))
	for i := range hits {
		for _, t := range qterms {
			f := float64(docs[i][t])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[t])+0.5)/(float64(df[t])+0.5))
			norm := 1 - b
			if avg > 0 {
				norm += b * lens[i] / avg
			}
			scores[i] += idf * f * (k1 + 1) / (f + k1*norm)
		}
	}
	return scores, nil
}

// Terms splits text into the lower-cased runs of letters and digits the
// lexical reranker matches on.
func Terms(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
