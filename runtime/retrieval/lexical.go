package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/aidgen/aid/runtime/rules"
)

// LexicalText is what the lexical index holds of a chunk: what is embedded
// of it (EmbedText), its heading trail and its text, so that a chunk cut
// from the middle of a section matches the section's title, and a chunk
// that starts with its own heading does not count the heading twice.
func LexicalText(c Chunk) string { return EmbedText(c) }

// LexicalSearcher is a store that also keeps a lexical (BM25) index of its
// records' LexicalText, maintained by the same Upsert and Delete that
// write the vectors. Both built stores implement it (memory.Store,
// pgvector.Store), analysing text with runtime/analysis, and rank
// identically: package storetest checks them against one reference.
type LexicalSearcher interface {
	// SearchLexical returns the k records that match filter with the best
	// BM25 score for the query terms (distinct, ascending, as QueryTerms
	// below returns them), best first: by Score descending, then id
	// ascending. Only records holding at least one of the terms are returned. The
	// statistics (record count, mean length, document frequencies) are
	// those of the whole store: a filter selects records, it does not
	// change how terms are weighted, as in Lucene.
	SearchLexical(ctx context.Context, terms []string, k int, filter Filter, p BM25) ([]Hit, error)
	// QueryTerms returns the distinct terms of a query in ascending byte
	// order, as the store's index analyses text, so that a Retriever asks
	// SearchLexical in the index's own terms without linking an analyzer
	// itself (both built stores answer runtime/analysis's QueryTerms).
	QueryTerms(query string) []string
}

// BM25 are the parameters of Okapi BM25. A record's score for query terms
// is the sum, over the terms in ascending byte order, of
//
//	idf(t) · (tf · (K1 + 1)) / (tf + K1 · ((1 − B) + B · (len / avglen)))
//
// with tf the term's count in the record, len the record's term count,
// avglen the mean over the store, and Lucene's never-negative
// idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5)), N the store's record count
// and df the number of records holding t. Every store evaluates it in
// exactly this order, in float64 (TermScore), so that their scores are
// equal to the bit and their rankings, ties included, identical.
type BM25 struct {
	// K1 is the term-frequency saturation, at least 0.
	K1 float64
	// B is the length normalisation, from 0 to 1.
	B float64
}

// DefaultBM25 are the BM25 parameters of a retriever that sets none,
// chosen on the retrieval quality harness (internal/quality): the values
// of Anserini's BM25 baselines, which served hybrid search best there.
var DefaultBM25 = BM25{K1: 0.9, B: 0.4}

// Check refuses parameters outside their ranges.
func (p BM25) Check() error {
	if msg := rules.BM25(p.K1, p.B); msg != "" {
		return errors.New(msg)
	}
	return nil
}

// IDF is Lucene's inverse document frequency of a term held by df of n
// records.
func IDF(n, df int64) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// AvgLen is the mean record length of a store holding n records of total
// length total; zero for an empty store.
func AvgLen(total, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(total) / float64(n)
}

// TermScore is one term's BM25 contribution to a record's score, in the
// order of operations BM25 documents. The explicit conversions forbid the
// compiler to fuse a multiply and an add, which would round differently
// from PostgreSQL.
func (p BM25) TermScore(idf float64, tf, length int64, avgLen float64) float64 {
	ftf := float64(tf)
	ratio := 0.0
	if avgLen > 0 {
		ratio = float64(float64(length) / avgLen)
	}
	norm := float64(p.K1 * float64((1-p.B)+float64(p.B*ratio)))
	return float64(idf * float64(float64(ftf*(p.K1+1))/float64(ftf+norm)))
}

// CheckLexicalQuery returns the error every LexicalSearcher gives for a
// query it must refuse, so that the stores refuse the same ones with the
// same words: k not positive, BM25 parameters out of range (BM25.Check),
// terms not sorted (LexicalSearcher.QueryTerms sorts them), or ctx
// already done (its error, as is).
func CheckLexicalQuery(ctx context.Context, terms []string, k int, p BM25) error {
	if k <= 0 {
		return fmt.Errorf("lexical search: k must be positive, got %d", k)
	}
	if err := p.Check(); err != nil {
		return fmt.Errorf("lexical search: %w", err)
	}
	if !slices.IsSorted(terms) {
		return fmt.Errorf("lexical search: terms must be sorted (QueryTerms)")
	}
	return ctx.Err()
}
