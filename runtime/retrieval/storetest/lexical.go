package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/retrieval"
)

// The lexical half of the contract: a store that is a
// retrieval.LexicalSearcher scores BM25 exactly as retrieval.BM25
// documents (store-wide statistics, terms summed in ascending order), so
// its scores equal the reference's to the bit and its rankings, ties
// included, are the reference's. Every store that passes therefore ranks
// identically to every other.

// vocabulary is small, so that terms repeat, documents share them and
// scores tie.
var vocabulary = strings.Fields("refund parcel courier password invoice warranty damaged tracking customs " +
	"refunds refunded delivery account locked email address payment card order cancel return " +
	"the a of to and is")

func lexStore(t *testing.T, open Opener) (retrieval.VectorStore, retrieval.LexicalSearcher) {
	t.Helper()
	s := open(t, 4, retrieval.DistanceCosine)
	ls, ok := s.(retrieval.LexicalSearcher)
	if !ok {
		t.Fatalf("%T keeps no lexical index (it is not a retrieval.LexicalSearcher); set Options.NoLexical if it never will", s)
	}
	return s, ls
}

// lexCorpus returns n records with texts drawn from vocabulary, some of
// them repeated word for word under other ids (exact ties), with a
// heading on some and metadata splitting them into groups.
func lexCorpus(rng *rand.Rand, n int) []retrieval.Record {
	recs := make([]retrieval.Record, n)
	for i := range recs {
		var words []string
		for range 1 + rng.IntN(25) {
			words = append(words, vocabulary[rng.IntN(len(vocabulary))])
		}
		text := strings.Join(words, " ")
		if i > 0 && i%7 == 0 {
			text = recs[i-1].Text // the same text under another id: a tie
		}
		heading := ""
		if i%3 == 0 {
			heading = "Section " + vocabulary[rng.IntN(len(vocabulary))]
		}
		g := "common"
		if i%10 == 0 {
			g = "rare"
		}
		v := randomVectors(rng, 1, 4)[0]
		recs[i] = retrieval.Record{
			Chunk:    retrieval.Chunk{ID: fmt.Sprintf("l%04d", (i*7919)%n), Source: fmt.Sprintf("docs/%d.md", i), Heading: heading, Text: text},
			Vector:   v,
			Metadata: map[string]string{"group": g},
		}
	}
	return recs
}

// referenceLexical is BM25 as retrieval.BM25 documents it, by brute force
// over every record the store holds: statistics over all of them, scores
// for those filter admits, best first, ties by id.
func referenceLexical(recs map[string]retrieval.Record, terms []string, k int, filter retrieval.Filter, p retrieval.BM25) []retrieval.Hit {
	type entry struct {
		tf     map[string]int64
		length int64
	}
	entries := make(map[string]entry, len(recs))
	df := map[string]int64{}
	var total int64
	for id, r := range recs {
		ts, tfs, n := analysis.TermCounts(retrieval.LexicalText(r.Chunk))
		e := entry{tf: map[string]int64{}, length: int64(n)}
		for i, t := range ts {
			e.tf[t] = int64(tfs[i])
			df[t]++
		}
		total += int64(n)
		entries[id] = e
	}
	n := int64(len(recs))
	avg := retrieval.AvgLen(total, n)
	var hits []retrieval.Hit
	for id, e := range entries {
		if !filter.Matches(recs[id].Metadata) {
			continue
		}
		score, matched := 0.0, false
		for _, t := range terms { // ascending
			if tf := e.tf[t]; tf > 0 {
				score += p.TermScore(retrieval.IDF(n, df[t]), tf, e.length, avg)
				matched = true
			}
		}
		if matched {
			hits = append(hits, retrieval.Hit{Chunk: recs[id].Chunk, Score: score})
		}
	}
	retrieval.SortHits(hits)
	return hits[:min(k, len(hits))]
}

// sameLexical requires got to be want exactly: the same ids in the same
// order with scores equal to the bit.
func sameLexical(t *testing.T, what string, got, want []retrieval.Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d hits, want %d: got %v, want %v", what, len(got), len(want), ids(got), ids(want))
		return
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Score != want[i].Score {
			t.Errorf("%s: hit %d is %s scoring %v, want %s scoring %v", what, i, got[i].ID, got[i].Score, want[i].ID, want[i].Score)
			return
		}
	}
}

func queries(rng *rand.Rand, n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		var words []string
		for range 1 + rng.IntN(4) {
			words = append(words, vocabulary[rng.IntN(len(vocabulary))])
		}
		out[i] = analysis.QueryTerms(strings.Join(words, " "))
	}
	return out
}

func testLexical(t *testing.T, open Opener) {
	t.Run("Reference", func(t *testing.T) { testLexicalReference(t, open) })
	t.Run("Filter", func(t *testing.T) { testLexicalFilter(t, open) })
	t.Run("Writes", func(t *testing.T) { testLexicalWrites(t, open) })
	t.Run("Ties", func(t *testing.T) { testLexicalTies(t, open) })
	t.Run("Refusals", func(t *testing.T) { testLexicalRefusals(t, open) })
	t.Run("Hybrid", func(t *testing.T) { testHybrid(t, open) })
	t.Run("QueryTerms", func(t *testing.T) { testQueryTerms(t, open) })
}

func testLexicalReference(t *testing.T, open Opener) {
	s, ls := lexStore(t, open)
	rng := rand.New(rand.NewPCG(21, 22))
	recs := lexCorpus(rng, 400)
	upsert(t, s, recs...)
	all := make(map[string]retrieval.Record, len(recs))
	for _, r := range recs {
		all[r.ID] = r
	}
	for _, p := range []retrieval.BM25{retrieval.DefaultBM25, {K1: 1.2, B: 0.75}, {K1: 0, B: 1}} {
		for _, q := range queries(rng, 15) {
			for _, k := range []int{1, 10, 500} {
				got, err := ls.SearchLexical(t.Context(), q, k, nil, p)
				if err != nil {
					t.Fatal(err)
				}
				sameLexical(t, fmt.Sprintf("%v k=%d %+v", q, k, p), got, referenceLexical(all, q, k, nil, p))
			}
		}
	}
	// A hit carries its record.
	got, err := ls.SearchLexical(t.Context(), analysis.QueryTerms("refund"), 1, nil, retrieval.DefaultBM25)
	if err != nil || len(got) != 1 {
		t.Fatalf("search for refund: %v, %v", ids(got), err)
	}
	want := all[got[0].ID]
	if h := got[0]; h.Text != want.Text || h.Heading != want.Heading || h.Source != want.Source || h.Metadata["group"] != want.Metadata["group"] {
		t.Errorf("hit %s comes back as %+v, stored as %+v", h.ID, h.Chunk, want.Chunk)
	}
}

func testLexicalFilter(t *testing.T, open Opener) {
	s, ls := lexStore(t, open)
	rng := rand.New(rand.NewPCG(23, 24))
	recs := lexCorpus(rng, 300)
	upsert(t, s, recs...)
	all := make(map[string]retrieval.Record, len(recs))
	for _, r := range recs {
		all[r.ID] = r
	}
	for _, q := range queries(rng, 10) {
		for _, k := range []int{1, 5, 100} {
			f := retrieval.Filter{"group": "rare"}
			got, err := ls.SearchLexical(t.Context(), q, k, f, retrieval.DefaultBM25)
			if err != nil {
				t.Fatal(err)
			}
			// Statistics stay store-wide: the reference scores every
			// record and keeps the rare ones.
			sameLexical(t, fmt.Sprintf("%v k=%d rare", q, k), got, referenceLexical(all, q, k, f, retrieval.DefaultBM25))
		}
		if got, _ := ls.SearchLexical(t.Context(), q, 5, retrieval.Filter{"group": "absent"}, retrieval.DefaultBM25); len(got) != 0 {
			t.Errorf("a filter nothing matches returned %v", ids(got))
		}
	}
}

// testLexicalWrites replaces and deletes records and checks that the index
// and its statistics follow: a replaced text matches by its new words
// only, a deleted record is gone, and scores stay the reference's.
func testLexicalWrites(t *testing.T, open Opener) {
	s, ls := lexStore(t, open)
	rng := rand.New(rand.NewPCG(25, 26))
	recs := lexCorpus(rng, 300)
	upsert(t, s, recs...)
	all := make(map[string]retrieval.Record, len(recs))
	for _, r := range recs {
		all[r.ID] = r
	}
	// Replace a tenth with new texts, in one batch and one by one.
	var batch []retrieval.Record
	for i, r := range recs {
		if i%10 != 3 {
			continue
		}
		r.Text = "zeppelin " + r.Text
		r.Heading = ""
		all[r.ID] = r
		if i%20 == 3 {
			batch = append(batch, r)
		} else {
			upsert(t, s, r)
		}
	}
	upsert(t, s, batch...)
	// Delete a third, twice (harmlessly), with an unknown id.
	var del []string
	for i, r := range recs {
		if i%3 == 1 {
			del = append(del, r.ID)
			delete(all, r.ID)
		}
	}
	for range 2 {
		if err := s.Delete(t.Context(), append(slices.Clone(del), "unknown")); err != nil {
			t.Fatal(err)
		}
	}
	qs := append(queries(rng, 10), analysis.QueryTerms("zeppelin"), analysis.QueryTerms("zeppelin refund"))
	for _, q := range qs {
		got, err := ls.SearchLexical(t.Context(), q, 50, nil, retrieval.DefaultBM25)
		if err != nil {
			t.Fatal(err)
		}
		sameLexical(t, fmt.Sprintf("%v after writes", q), got, referenceLexical(all, q, 50, nil, retrieval.DefaultBM25))
	}
	// Everything deleted: nothing matches, and new records score against
	// statistics of the records that are there, not of those once there.
	var rest []string
	for id := range all {
		rest = append(rest, id)
	}
	if err := s.Delete(t.Context(), rest); err != nil {
		t.Fatal(err)
	}
	if got, _ := ls.SearchLexical(t.Context(), analysis.QueryTerms("refund zeppelin the"), 10, nil, retrieval.DefaultBM25); len(got) != 0 {
		t.Errorf("an emptied store matches %v", ids(got))
	}
	fresh := map[string]retrieval.Record{}
	for i, text := range []string{"refund a damaged parcel", "refund", "parcel tracking"} {
		r := rec(fmt.Sprintf("n%d", i), []float32{1, 0, 0, 0}, nil)
		r.Heading, r.Text = "", text
		fresh[r.ID] = r
		upsert(t, s, r)
	}
	q := analysis.QueryTerms("refund parcel")
	got, err := ls.SearchLexical(t.Context(), q, 10, nil, retrieval.DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	sameLexical(t, "after emptying and refilling", got, referenceLexical(fresh, q, 10, nil, retrieval.DefaultBM25))
}

func testLexicalTies(t *testing.T, open Opener) {
	s, ls := lexStore(t, open)
	for _, id := range []string{"e", "b", "d", "a", "c"} {
		r := rec(id, []float32{1, 0, 0, 0}, nil)
		r.Heading, r.Text = "", "refund policy"
		upsert(t, s, r)
	}
	r := rec("z-best", []float32{1, 0, 0, 0}, nil)
	r.Heading, r.Text = "", "refund refund"
	upsert(t, s, r)
	got, err := ls.SearchLexical(t.Context(), analysis.QueryTerms("refund"), 4, nil, retrieval.DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"z-best", "a", "b", "c"}; !slices.Equal(ids(got), want) {
		t.Errorf("equal BM25 scores are not ordered by id: got %v, want %v", ids(got), want)
	}
}

// testLexicalRefusals checks that the store refuses what every lexical
// searcher refuses (retrieval.CheckLexicalQuery), with its words.
func testLexicalRefusals(t *testing.T, open Opener) {
	s, ls := lexStore(t, open)
	upsert(t, s, rec("a", []float32{1, 0, 0, 0}, nil))
	ctx := t.Context()
	done, cancel := context.WithCancel(ctx)
	cancel()
	for _, q := range []struct {
		what  string
		ctx   context.Context
		terms []string
		k     int
		p     retrieval.BM25
	}{
		{"k=0", ctx, []string{"text"}, 0, retrieval.DefaultBM25},
		{"k=-1", ctx, []string{"text"}, -1, retrieval.DefaultBM25},
		{"unsorted terms", ctx, []string{"b", "a"}, 1, retrieval.DefaultBM25},
		{"k1 < 0", ctx, []string{"text"}, 1, retrieval.BM25{K1: -1, B: 0.5}},
		{"b > 1", ctx, []string{"text"}, 1, retrieval.BM25{K1: 1, B: 1.5}},
		{"a cancelled context", done, []string{"text"}, 1, retrieval.DefaultBM25},
	} {
		want := retrieval.CheckLexicalQuery(q.ctx, q.terms, q.k, q.p)
		if want == nil {
			t.Fatalf("%s: CheckLexicalQuery accepts it", q.what)
		}
		if _, err := ls.SearchLexical(q.ctx, q.terms, q.k, nil, q.p); err == nil || err.Error() != want.Error() {
			t.Errorf("%s: %v, want %q", q.what, err, want)
		}
	}
	for _, q := range [][]string{nil, {"absent"}, {"bad\x00term"}} {
		if got, err := ls.SearchLexical(ctx, q, 5, nil, retrieval.DefaultBM25); err != nil || len(got) != 0 {
			t.Errorf("terms %q: %v, %v; want no hits", q, ids(got), err)
		}
	}
}

// testHybrid runs retrieval.SearchStore on a store small enough that an
// approximate vector index searches it exhaustively, and checks each mode
// against the reference searches fused by retrieval.Fuse.
func testHybrid(t *testing.T, open Opener) {
	s, _ := lexStore(t, open)
	rng := rand.New(rand.NewPCG(27, 28))
	recs := lexCorpus(rng, 80)
	upsert(t, s, recs...)
	texts := make(map[string]retrieval.Record, len(recs))
	vecs := make(map[string][]float32, len(recs))
	for _, r := range recs {
		texts[r.ID], vecs[r.ID] = r, r.Vector
	}
	for _, q := range queries(rng, 10) {
		qv := randomVectors(rng, 1, 4)[0]
		vec := reference(retrieval.DistanceCosine, qv, vecs, 30)
		lex := referenceLexical(texts, q, 30, nil, retrieval.DefaultBM25)
		for _, mode := range []string{retrieval.ModeHybrid, retrieval.ModeVector, retrieval.ModeLexical} {
			r := retrieval.Ranking{Mode: mode, Depth: 30}
			got, err := retrieval.SearchStore(t.Context(), s, retrieval.Query{Vector: qv, Terms: q}, 10, nil, r)
			if err != nil {
				t.Fatal(err)
			}
			var want []retrieval.Hit
			switch mode {
			case retrieval.ModeHybrid:
				want = retrieval.Fuse(vec, lex, r)
			case retrieval.ModeVector:
				want = vec
			case retrieval.ModeLexical:
				want = lex
			}
			want = want[:min(10, len(want))]
			if !slices.Equal(ids(got), ids(want)) {
				t.Errorf("%s %v: got %v, want %v", mode, q, ids(got), ids(want))
			}
			for i, h := range got {
				if mode == retrieval.ModeVector && h.VectorRank != i+1 || mode == retrieval.ModeLexical && h.LexicalRank != i+1 ||
					mode == retrieval.ModeHybrid && h.VectorRank == 0 && h.LexicalRank == 0 {
					t.Errorf("%s: hit %d (%s) has ranks vector %d, lexical %d", mode, i+1, h.ID, h.VectorRank, h.LexicalRank)
				}
			}
		}
	}
}

// testQueryTerms holds a store's analysis of a query to runtime/analysis's,
// which the reference ranks by: a Retriever asks the store for the terms
// it searches (LexicalSearcher.QueryTerms).
func testQueryTerms(t *testing.T, open Opener) {
	_, ls := lexStore(t, open)
	for _, q := range []string{"Refunds refunded the parcel", "how do I reset my password?", "", "v2 404s réembourser"} {
		if got, want := ls.QueryTerms(q), analysis.QueryTerms(q); !slices.Equal(got, want) {
			t.Errorf("QueryTerms(%q) = %q, want %q (runtime/analysis)", q, got, want)
		}
	}
}
