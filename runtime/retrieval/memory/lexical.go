package memory

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/retrieval"
)

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
func (x *lexIndex) search(terms []string, p retrieval.BM25, keep func(row int) bool) []scored {
	avg := retrieval.AvgLen(x.total, x.live)
	acc := make(map[int32]float64)
	var order []int32
	for _, t := range terms {
		id, ok := x.dict[t]
		if !ok || x.df[id] <= 0 {
			continue
		}
		idf := retrieval.IDF(x.live, x.df[id])
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

// SearchLexical implements retrieval.LexicalSearcher.
func (s *Store) SearchLexical(ctx context.Context, terms []string, k int, filter retrieval.Filter, p retrieval.BM25) ([]retrieval.Hit, error) {
	if err := retrieval.CheckLexicalQuery(ctx, terms, k, p); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	found := s.lex.search(slices.Compact(slices.Clone(terms)), p, func(row int) bool {
		return len(filter) == 0 || filter.Matches(s.recs[row].meta)
	})
	id := func(sc scored) string { return s.recs[s.lex.docs[sc.slot].row].chunk.ID }
	slices.SortFunc(found, func(a, b scored) int { return retrieval.CompareRanked(a.score, id(a), b.score, id(b)) })
	found = found[:min(k, len(found))]
	hits := make([]retrieval.Hit, len(found))
	for i, f := range found {
		r := s.recs[s.lex.docs[f.slot].row]
		hits[i] = retrieval.Hit{Chunk: r.chunk, Metadata: maps.Clone(r.meta), Score: f.score}
	}
	return hits, nil
}

// QueryTerms implements retrieval.LexicalSearcher: the index's analyzer,
// runtime/analysis.
func (*Store) QueryTerms(query string) []string { return analysis.QueryTerms(query) }
