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
	return nil, fmt.Errorf("unknown rerank kind %q; use %q or %q", kind, RerankNone, RerankLexical)
}

// NoRerank keeps the vector order and scores.
type NoRerank struct{}

// Rerank implements Reranker.
func (NoRerank) Rerank(ctx context.Context, _ string, hits []Hit) ([]Hit, error) {
	return hits, ctx.Err()
}

// Lexical reranks candidates by Okapi BM25 of the query's terms, computed
// over the candidate set itself: document frequencies and the average
// length come from the candidates, not from the whole index, so the cost
// is bounded by the candidates and no corpus statistics need to be kept.
// A candidate's text is its heading trail and its text; terms are
// lower-cased runs of letters and digits, each distinct query term counted
// once. The idf is Lucene's, ln(1 + (N − df + 0.5)/(df + 0.5)), which is
// never negative.
//
// Candidates with equal BM25 (for instance none sharing a term with the
// query) keep their vector order, so lexical evidence reorders only where
// it discriminates: that is how it blends with the vector ranking. The
// hits' Score becomes their BM25 score.
type Lexical struct {
	// K1 is BM25's term-frequency saturation; zero means 1.2.
	K1 float64
	// B is BM25's length normalisation in [0, 1]; zero means 0.75.
	B float64
}

// Rerank implements Reranker.
func (l Lexical) Rerank(ctx context.Context, query string, hits []Hit) ([]Hit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
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
	out := slices.Clone(hits)
	for i := range out {
		var s float64
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
			s += idf * f * (k1 + 1) / (f + k1*norm)
		}
		out[i].Score = s
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

// Terms splits text into the lower-cased runs of letters and digits the
// lexical reranker matches on.
func Terms(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}
