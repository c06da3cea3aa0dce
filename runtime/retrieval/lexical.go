package retrieval

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/aidgen/aid/runtime/internal/analysis"
	"github.com/aidgen/aid/runtime/rules"
)

// AnalyzerVersion names the analyzer of the lexical index (Analyze). A
// store that keeps terms records it and rebuilds its index when it differs.
const AnalyzerVersion = analysis.Version

// Analyze returns the terms of text as the lexical index counts them, in
// order, repeats included: Unicode (UAX #29) word segmentation keeping the
// words with a letter or digit, lower-casing, the English stop words of the
// Snowball project dropped, and the Snowball English stemmer
// (github.com/kljensen/snowball), so "refunds" and "refunded" are one
// term. Queries and chunks go through the same analyzer.
func Analyze(text string) []string { return analysis.Terms(text) }

// LexicalText is what the lexical index holds of a chunk: what is embedded
// of it (EmbedText), its heading trail and its text, so that a chunk cut
// from the middle of a section matches the section's title, and a chunk
// that starts with its own heading does not count the heading twice.
func LexicalText(c Chunk) string { return EmbedText(c) }

// TermCounts returns the distinct terms of text in ascending byte order,
// how often each occurs, and the number of terms (the document length
// BM25 normalises by). Stores index a record by it.
func TermCounts(text string) (terms []string, tfs []int32, length int) {
	counts := make(map[string]int32)
	analysis.Each(text, func(t string) {
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
// a term repeated in the query counts once.
func QueryTerms(query string) []string {
	return slices.Compact(slices.Sorted(slices.Values(analysis.Terms(query))))
}

// LexicalSearcher is a store that also keeps a lexical (BM25) index of its
// records' LexicalText, maintained by the same Upsert and Delete that
// write the vectors. Both built stores implement it, and rank identically:
// package storetest checks them against one reference.
type LexicalSearcher interface {
	// SearchLexical returns the k records that match filter with the best
	// BM25 score for the query terms (distinct, ascending, as QueryTerms
	// returns them), best first: by Score descending, then id ascending.
	// Only records holding at least one of the terms are returned. The
	// statistics (record count, mean length, document frequencies) are
	// those of the whole store: a filter selects records, it does not
	// change how terms are weighted, as in Lucene.
	SearchLexical(ctx context.Context, terms []string, k int, filter Filter, p BM25) ([]Hit, error)
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

// lexIndex is the memory store's inverted index. Records are numbered by
// slot; a deleted record's slot is dead until the next compaction, which
// renumbers the live ones, so that deleting is O(its terms) and postings
// of dead slots are skipped by searches.
type lexIndex struct {
	dict     map[string]int32 // term → term number
	terms    []string         // term number → term
	df       []int64          // live records holding the term
	postings [][]posting      // term number → slots holding it, dead ones included
	docs     []lexDoc         // slot → record
	live     int64            // live records
	total    int64            // their summed length
	dead     int              // postings of dead slots
	alive    int              // postings of live slots
}

type posting struct {
	slot int32
	tf   int32
}

type lexDoc struct {
	row    int // the record's row in the vector matrix; -1 when dead
	length int32
	terms  []int32 // term numbers, for deletion and compaction
	tfs    []int32
}

// lexEntry is a record's analysed text, computed outside the store's lock.
type lexEntry struct {
	terms  []string
	tfs    []int32
	length int
}

func newLexIndex() lexIndex { return lexIndex{dict: make(map[string]int32)} }

// add indexes a record at row and returns its slot.
func (x *lexIndex) add(e lexEntry, row int) int32 {
	slot := int32(len(x.docs))
	d := lexDoc{row: row, length: int32(e.length), terms: make([]int32, len(e.terms)), tfs: e.tfs}
	for i, t := range e.terms {
		id, ok := x.dict[t]
		if !ok {
			id = int32(len(x.terms))
			x.dict[t] = id
			x.terms = append(x.terms, t)
			x.df = append(x.df, 0)
			x.postings = append(x.postings, nil)
		}
		d.terms[i] = id
		x.df[id]++
		x.postings[id] = append(x.postings[id], posting{slot: slot, tf: e.tfs[i]})
	}
	x.docs = append(x.docs, d)
	x.alive += len(e.terms)
	x.live++
	x.total += int64(e.length)
	return slot
}

// remove kills a slot; its postings stay until compaction.
func (x *lexIndex) remove(slot int32) {
	d := &x.docs[slot]
	for _, id := range d.terms {
		x.df[id]--
	}
	x.dead += len(d.terms)
	x.alive -= len(d.terms)
	x.live--
	x.total -= int64(d.length)
	d.row, d.terms, d.tfs = -1, nil, nil
}

// compact drops dead slots and their postings once they outnumber the live
// postings, renumbering slots; setSlot is told each live record's new slot.
func (x *lexIndex) compact(setSlot func(row int, slot int32)) {
	if x.dead < 1024 || x.dead < x.alive {
		return
	}
	remap := make([]int32, len(x.docs))
	docs := make([]lexDoc, 0, x.live)
	for i, d := range x.docs {
		if d.row < 0 {
			remap[i] = -1
			continue
		}
		remap[i] = int32(len(docs))
		setSlot(d.row, remap[i])
		docs = append(docs, d)
	}
	for id, ps := range x.postings {
		kept := ps[:0]
		for _, p := range ps {
			if s := remap[p.slot]; s >= 0 {
				kept = append(kept, posting{slot: s, tf: p.tf})
			}
		}
		x.postings[id] = slices.Clip(kept)
	}
	x.docs, x.dead = docs, 0
}

// scored is a slot with its BM25 score.
type scored struct {
	slot  int32
	score float64
}

// search scores every live slot holding a query term, summing the terms'
// contributions in the (ascending) order of terms, and returns them
// unsorted; keep says which rows the filter admits.
func (x *lexIndex) search(terms []string, p BM25, keep func(row int) bool) []scored {
	avg := AvgLen(x.total, x.live)
	acc := make(map[int32]float64)
	var order []int32
	for _, t := range terms {
		id, ok := x.dict[t]
		if !ok || x.df[id] <= 0 {
			continue
		}
		idf := IDF(x.live, x.df[id])
		for _, ps := range x.postings[id] {
			d := &x.docs[ps.slot]
			if d.row < 0 {
				continue
			}
			s, seen := acc[ps.slot]
			if !seen {
				if !keep(d.row) {
					acc[ps.slot] = math.NaN() // filtered out; remembered so keep runs once
					continue
				}
				order = append(order, ps.slot)
			} else if s != s {
				continue
			}
			acc[ps.slot] = s + p.TermScore(idf, int64(ps.tf), int64(d.length), avg)
		}
	}
	out := make([]scored, len(order))
	for i, slot := range order {
		out[i] = scored{slot: slot, score: acc[slot]}
	}
	return out
}

// CheckLexicalQuery returns the error every LexicalSearcher gives for a
// query it must refuse, so that the stores refuse the same ones with the
// same words: k not positive, BM25 parameters out of range (BM25.Check),
// terms not sorted (QueryTerms sorts them), or ctx already done (its
// error, as is).
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

// SearchLexical implements LexicalSearcher.
func (s *MemoryStore) SearchLexical(ctx context.Context, terms []string, k int, filter Filter, p BM25) ([]Hit, error) {
	if err := CheckLexicalQuery(ctx, terms, k, p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := s.lex.search(slices.Compact(slices.Clone(terms)), p, func(row int) bool {
		return len(filter) == 0 || filter.Matches(s.recs[row].meta)
	})
	id := func(sc scored) string { return s.recs[s.lex.docs[sc.slot].row].chunk.ID }
	slices.SortFunc(found, func(a, b scored) int { return CompareRanked(a.score, id(a), b.score, id(b)) })
	found = found[:min(k, len(found))]
	hits := make([]Hit, len(found))
	for i, f := range found {
		r := s.recs[s.lex.docs[f.slot].row]
		hits[i] = Hit{Chunk: r.chunk, Metadata: maps.Clone(r.meta), Score: f.score}
	}
	return hits, nil
}
