// Package storetest is the contract suite of retrieval.VectorStore and
// retrieval.LexicalSearcher. Every store (the memory store, the pgvector
// store) runs the same suite on the same data, so that they answer the
// same searches the same way: exact stores return exactly the exact top k,
// approximate ones (HNSW) at least a stated recall of it; filtered
// searches return k results whenever k rows match; a vector of another
// width is refused with a typed error; cosine, inner product and l2 scores
// mean the same thing everywhere; BM25 scores equal a brute-force
// reference to the bit, through replacements and deletions, so that
// lexical rankings, ties included, are the same in every store; and
// hybrid, vector and lexical searches (retrieval.SearchStore) return the
// reference searches fused.
//
// It is test support: it imports package testing and is meant for _test.go
// files only.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Opener returns a new, empty store of the given width and distance. It is
// called once per subtest; the store must not see other subtests' data.
type Opener func(t *testing.T, dims int, d retrieval.Distance) retrieval.VectorStore

// Options adapts the suite to a store.
type Options struct {
	// MinRecall is the least mean recall@k against exact search an
	// approximate store must reach (the pgvector HNSW store uses 0.95).
	// Zero means the store is exact: it must return exactly the exact top
	// k, in order, with equal scores ordered by id.
	MinRecall float64
	// Distances lists the distances to test; nil means all three.
	Distances []retrieval.Distance
	// NoLexical skips the lexical half of the suite, for a store that
	// keeps no lexical index (it is not a retrieval.LexicalSearcher), and
	// so serves only retrievers in mode "vector".
	NoLexical bool
}

// scoreTol is how far a store's score may be from the float64 reference:
// stores compute in float32.
const scoreTol = 1e-4

// Run runs the contract suite.
func Run(t *testing.T, open Opener, opts Options) {
	dists := opts.Distances
	if dists == nil {
		dists = []retrieval.Distance{retrieval.DistanceCosine, retrieval.DistanceInnerProduct, retrieval.DistanceL2}
	}
	t.Run("Width", func(t *testing.T) { testWidth(t, open) })
	t.Run("Refusals", func(t *testing.T) { testRefusals(t, open) })
	t.Run("Empty", func(t *testing.T) { testEmpty(t, open) })
	t.Run("Ties", func(t *testing.T) { testTies(t, open) })
	t.Run("UpsertReplaces", func(t *testing.T) { testUpsertReplaces(t, open) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, open) })
	t.Run("IDs", func(t *testing.T) { testIDs(t, open) })
	t.Run("Canceled", func(t *testing.T) { testCanceled(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open) })
	if !opts.NoLexical {
		t.Run("Lexical", func(t *testing.T) { testLexical(t, open) })
	}
	for _, d := range dists {
		t.Run(string(d), func(t *testing.T) {
			t.Run("Semantics", func(t *testing.T) { testSemantics(t, open, d) })
			t.Run("Search", func(t *testing.T) { testSearch(t, open, d, opts) })
			t.Run("Filter", func(t *testing.T) { testFilter(t, open, d, opts) })
			t.Run("Delete", func(t *testing.T) { testDelete(t, open, d, opts) })
		})
	}
}

func rec(id string, v []float32, meta map[string]string) retrieval.Record {
	return retrieval.Record{
		Chunk:    retrieval.Chunk{ID: id, Source: "docs/" + id + ".md", Start: 1, End: 1 + len(id), Heading: "H " + id, Text: "text " + id},
		Vector:   v,
		Metadata: meta,
	}
}

func upsert(t *testing.T, s retrieval.VectorStore, recs ...retrieval.Record) {
	t.Helper()
	if err := s.Upsert(t.Context(), recs); err != nil {
		t.Fatalf("upsert: %v", err)
	}
}

func search(t *testing.T, s retrieval.VectorStore, q []float32, k int, f retrieval.Filter) []retrieval.Hit {
	t.Helper()
	hits, err := s.Search(t.Context(), q, k, f)
	if err != nil {
		t.Fatalf("search: %v", err)
	}
	return hits
}

func ids(hits []retrieval.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func testWidth(t *testing.T, open Opener) {
	s := open(t, 4, retrieval.DistanceCosine)
	if s.Dimensions() != 4 || s.Distance() != retrieval.DistanceCosine {
		t.Fatalf("store reports width %d and distance %q, opened with 4 and cosine", s.Dimensions(), s.Distance())
	}
	for _, w := range []int{3, 5} {
		v := make([]float32, w)
		v[0] = 1
		// A good record beside the bad one: the batch is all or nothing.
		err := s.Upsert(t.Context(), []retrieval.Record{rec("good", []float32{1, 0, 0, 0}, nil), rec("bad", v, nil)})
		var de *retrieval.DimensionError
		if !errors.As(err, &de) || de.Got != w || de.Want != 4 || de.ID != "bad" {
			t.Errorf("upsert of width %d: got %v, want a *DimensionError{ID: bad, Got: %d, Want: 4}", w, err, w)
		}
		_, err = s.Search(t.Context(), v, 1, nil)
		if !errors.As(err, &de) || de.Got != w || de.Want != 4 {
			t.Errorf("search of width %d: got %v, want a *DimensionError", w, err)
		}
	}
	if got, _ := s.IDs(t.Context(), nil); len(got) != 0 {
		t.Errorf("a refused batch left records behind: %v", got)
	}
}

func testRefusals(t *testing.T, open Opener) {
	s := open(t, 2, retrieval.DistanceCosine)
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	bad := []struct {
		name string
		recs []retrieval.Record
	}{
		{"NaN", []retrieval.Record{rec("a", []float32{nan, 1}, nil)}},
		{"Inf", []retrieval.Record{rec("a", []float32{1, inf}, nil)}},
		{"empty id", []retrieval.Record{rec("", []float32{1, 1}, nil)}},
		{"zero vector under cosine", []retrieval.Record{rec("a", []float32{0, 0}, nil)}},
		{"duplicate id in a batch", []retrieval.Record{rec("a", []float32{1, 0}, nil), rec("a", []float32{0, 1}, nil)}},
		{"nil vector", []retrieval.Record{rec("a", nil, nil)}},
	}
	for _, b := range bad {
		if err := s.Upsert(t.Context(), b.recs); err == nil {
			t.Errorf("%s: upsert accepted", b.name)
		}
	}
	if got, _ := s.IDs(t.Context(), nil); len(got) != 0 {
		t.Errorf("refused upserts left records: %v", got)
	}
	upsert(t, s, rec("a", []float32{1, 0}, nil))
	for _, q := range [][]float32{{nan, 0}, {0, 0}} {
		if _, err := s.Search(t.Context(), q, 1, nil); err == nil {
			t.Errorf("search with %v accepted", q)
		}
	}
	for _, k := range []int{0, -1} {
		if _, err := s.Search(t.Context(), []float32{1, 0}, k, nil); err == nil {
			t.Errorf("search with k=%d accepted", k)
		}
	}
}

func testEmpty(t *testing.T, open Opener) {
	s := open(t, 3, retrieval.DistanceCosine)
	if hits := search(t, s, []float32{1, 2, 3}, 5, nil); len(hits) != 0 {
		t.Errorf("empty store returned %v", ids(hits))
	}
	if err := s.Delete(t.Context(), []string{"nothing"}); err != nil {
		t.Errorf("deleting an unknown id: %v", err)
	}
}

func testTies(t *testing.T, open Opener) {
	s := open(t, 3, retrieval.DistanceCosine)
	v := []float32{0.3, 0.4, 0.5}
	for _, id := range []string{"e", "b", "d", "a", "c"} {
		upsert(t, s, rec(id, v, nil))
	}
	upsert(t, s, rec("z-best", []float32{0.3, 0.4, 0.6}, nil))
	got := ids(search(t, s, []float32{0.3, 0.4, 0.6}, 4, nil))
	if want := []string{"z-best", "a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("equal scores are not ordered by id: got %v, want %v", got, want)
	}
}

func testUpsertReplaces(t *testing.T, open Opener) {
	s := open(t, 2, retrieval.DistanceInnerProduct)
	upsert(t, s, rec("x", []float32{1, 0}, map[string]string{"v": "1"}), rec("y", []float32{0.5, 0}, nil))
	r := rec("x", []float32{0, 1}, map[string]string{"v": "2"})
	r.Text, r.Heading, r.Source, r.Start, r.End = "new text", "New > Heading", "docs/new.md", 10, 18
	upsert(t, s, r)
	if got, _ := s.IDs(t.Context(), nil); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("after replacing x: ids %v", got)
	}
	hits := search(t, s, []float32{0, 1}, 1, nil)
	if len(hits) != 1 || hits[0].ID != "x" || math.Abs(hits[0].Score-1) > scoreTol {
		t.Fatalf("replaced vector not searched: %+v", hits)
	}
	h := hits[0]
	if h.Text != r.Text || h.Heading != r.Heading || h.Source != r.Source || h.Start != r.Start || h.End != r.End || h.Metadata["v"] != "2" {
		t.Errorf("replaced record comes back as %+v, want %+v", h, r)
	}
	if got := search(t, s, []float32{0, 1}, 1, retrieval.Filter{"v": "1"}); len(got) != 0 {
		t.Errorf("old metadata still matches: %v", ids(got))
	}
}

func testIsolation(t *testing.T, open Opener) {
	s := open(t, 2, retrieval.DistanceInnerProduct)
	v := []float32{1, 0}
	meta := map[string]string{"k": "v"}
	upsert(t, s, rec("a", v, meta))
	v[0], meta["k"] = 100, "changed"
	hits := search(t, s, []float32{1, 0}, 1, retrieval.Filter{"k": "v"})
	if len(hits) != 1 || math.Abs(hits[0].Score-1) > scoreTol {
		t.Fatalf("the store shares the caller's vector or metadata: %+v", hits)
	}
	hits[0].Metadata["k"] = "mutated"
	if again := search(t, s, []float32{1, 0}, 1, retrieval.Filter{"k": "v"}); len(again) != 1 {
		t.Errorf("a hit shares the store's metadata")
	}
}

func testIDs(t *testing.T, open Opener) {
	s := open(t, 2, retrieval.DistanceCosine)
	upsert(t, s,
		rec("c", []float32{1, 0}, map[string]string{"retriever": "kb", "source": "a.md"}),
		rec("a", []float32{1, 1}, map[string]string{"retriever": "kb", "source": "b.md"}),
		rec("b", []float32{0, 1}, map[string]string{"retriever": "other"}),
	)
	tests := []struct {
		f    retrieval.Filter
		want []string
	}{
		{nil, []string{"a", "b", "c"}},
		{retrieval.Filter{"retriever": "kb"}, []string{"a", "c"}},
		{retrieval.Filter{"retriever": "kb", "source": "b.md"}, []string{"a"}},
		{retrieval.Filter{"retriever": "none"}, nil},
		{retrieval.Filter{"source": ""}, nil},
	}
	for _, tc := range tests {
		got, err := s.IDs(t.Context(), tc.f)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("IDs(%v) = %v, %v; want %v", tc.f, got, err, tc.want)
		}
	}
}

func testCanceled(t *testing.T, open Opener) {
	s := open(t, 2, retrieval.DistanceCosine)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Search(ctx, []float32{1, 0}, 1, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("search on a canceled context: %v", err)
	}
	if err := s.Upsert(ctx, []retrieval.Record{rec("a", []float32{1, 0}, nil)}); !errors.Is(err, context.Canceled) {
		t.Errorf("upsert on a canceled context: %v", err)
	}
}

// testConcurrent writes and searches from several goroutines at once; the
// race detector and the final state check it.
func testConcurrent(t *testing.T, open Opener) {
	const dims, writers, per = 8, 4, 50
	s := open(t, dims, retrieval.DistanceCosine)
	rng := rand.New(rand.NewPCG(1, 2))
	vecs := randomVectors(rng, writers*per, dims)
	var wg sync.WaitGroup
	errs := make(chan error, writers*2)
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				n := w*per + i
				id := fmt.Sprintf("w%d-%03d", w, i)
				if err := s.Upsert(t.Context(), []retrieval.Record{rec(id, vecs[n], map[string]string{"w": fmt.Sprint(w)})}); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 {
					if err := s.Delete(t.Context(), []string{id}); err != nil {
						errs <- err
						return
					}
				}
			}
		})
		wg.Go(func() {
			ls, lexical := s.(retrieval.LexicalSearcher)
			for i := range per {
				if _, err := s.Search(t.Context(), vecs[i], 5, retrieval.Filter{"w": fmt.Sprint(w)}); err != nil {
					errs <- err
					return
				}
				if !lexical {
					continue
				}
				if _, err := ls.SearchLexical(t.Context(), analysis.QueryTerms("text w0"), 5, retrieval.Filter{"w": fmt.Sprint(w)}, retrieval.DefaultBM25); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, _ := s.IDs(t.Context(), nil)
	if len(got) != writers*per/2 {
		t.Errorf("after concurrent writes the store holds %d records, want %d", len(got), writers*per/2)
	}
}

// testSemantics checks the meaning of scores on hand-computed vectors,
// q = (1, 1, 0) against a = (1, 0, 0), b = (0, 2, 0), c = (3, 4, 0):
//
//	cosine:        a 1/√2, b 1/√2, c 7/(5√2)      → c, a, b (a, b tie: by id)
//	inner product: a 1,    b 2,    c 7            → c, b, a
//	l2 (negated):  a −1,   b −√2,  c −√13         → a, b, c
func testSemantics(t *testing.T, open Opener, d retrieval.Distance) {
	s := open(t, 3, d)
	upsert(t, s, rec("b", []float32{0, 2, 0}, nil), rec("c", []float32{3, 4, 0}, nil), rec("a", []float32{1, 0, 0}, nil))
	type scored struct {
		id    string
		score float64
	}
	want := map[retrieval.Distance][]scored{
		retrieval.DistanceCosine:       {{"c", 7 / (5 * math.Sqrt2)}, {"a", 1 / math.Sqrt2}, {"b", 1 / math.Sqrt2}},
		retrieval.DistanceInnerProduct: {{"c", 7}, {"b", 2}, {"a", 1}},
		retrieval.DistanceL2:           {{"a", -1}, {"b", -math.Sqrt2}, {"c", -math.Sqrt(13)}},
	}[d]
	hits := search(t, s, []float32{1, 1, 0}, 3, nil)
	if len(hits) != len(want) {
		t.Fatalf("got %d hits, want %d", len(hits), len(want))
	}
	for i, w := range want {
		if hits[i].ID != w.id || math.Abs(hits[i].Score-w.score) > scoreTol {
			t.Errorf("hit %d is %s with score %v, want %s with %v", i, hits[i].ID, hits[i].Score, w.id, w.score)
		}
	}
}

func randomVectors(rng *rand.Rand, n, dims int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// reference is exact search in float64: the truth every store is judged by.
func reference(d retrieval.Distance, q []float32, data map[string][]float32, k int) []retrieval.Hit {
	var hits []retrieval.Hit
	for id, v := range data {
		var dot, qq, vv float64
		for i := range v {
			dot += float64(q[i]) * float64(v[i])
			qq += float64(q[i]) * float64(q[i])
			vv += float64(v[i]) * float64(v[i])
		}
		var s float64
		switch d {
		case retrieval.DistanceCosine:
			s = dot / math.Sqrt(qq*vv)
		case retrieval.DistanceInnerProduct:
			s = dot
		case retrieval.DistanceL2:
			s = -math.Sqrt(max(0, qq-2*dot+vv))
		}
		hits = append(hits, retrieval.Hit{Chunk: retrieval.Chunk{ID: id}, Score: s})
	}
	retrieval.SortHits(hits)
	return hits[:min(k, len(hits))]
}

// compare judges one search against the exact reference: an exact store
// must return the same ids in the same order (a swap is allowed only
// between scores closer than the store's float32 precision), with scores
// that match; an approximate one is scored by recall. It returns the recall.
func compare(t *testing.T, got, want []retrieval.Hit, exact bool) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d hits, want %d", len(got), len(want))
		return 0
	}
	for i := 1; i < len(got); i++ {
		if got[i].Score > got[i-1].Score || got[i].Score == got[i-1].Score && got[i].ID < got[i-1].ID {
			t.Errorf("hits %d and %d are out of order: %s %v before %s %v", i-1, i, got[i-1].ID, got[i-1].Score, got[i].ID, got[i].Score)
		}
	}
	inWant := make(map[string]bool, len(want))
	for _, h := range want {
		inWant[h.ID] = true
	}
	found := 0
	for _, h := range got {
		if inWant[h.ID] {
			found++
		}
	}
	if !exact || len(want) == 0 {
		if len(want) == 0 {
			return 1
		}
		return float64(found) / float64(len(want))
	}
	last := want[len(want)-1].Score
	for i, h := range got {
		if math.Abs(h.Score-want[i].Score) > scoreTol {
			t.Errorf("hit %d: %s scores %v, exact search has %s at %v", i, h.ID, h.Score, want[i].ID, want[i].Score)
		}
		if !inWant[h.ID] && math.Abs(h.Score-last) > scoreTol {
			t.Errorf("hit %d: %s (score %v) is not in the exact top %d", i, h.ID, h.Score, len(want))
		}
	}
	return float64(found) / float64(len(want))
}

func testSearch(t *testing.T, open Opener, d retrieval.Distance, opts Options) {
	const n, dims, queries, k = 3000, 32, 25, 10
	rng := rand.New(rand.NewPCG(7, uint64(len(d))))
	vecs := randomVectors(rng, n, dims)
	s := open(t, dims, d)
	data := make(map[string][]float32, n)
	recs := make([]retrieval.Record, n)
	for i, v := range vecs {
		id := fmt.Sprintf("r%05d", i)
		data[id] = v
		recs[i] = rec(id, v, nil)
	}
	upsert(t, s, recs...)
	var recall float64
	for _, q := range randomVectors(rng, queries, dims) {
		recall += compare(t, search(t, s, q, k, nil), reference(d, q, data, k), opts.MinRecall == 0)
	}
	if recall /= queries; opts.MinRecall > 0 && recall < opts.MinRecall {
		t.Errorf("mean recall@%d is %.3f, want at least %.3f", k, recall, opts.MinRecall)
	}
}

// testFilter checks that a selective filter still yields k results when k
// rows match (an approximate index that filters after searching would
// silently return fewer), all of them when fewer match, and only matching
// rows.
func testFilter(t *testing.T, open Opener, d retrieval.Distance, opts Options) {
	const n, dims, rare = 3000, 16, 30
	rng := rand.New(rand.NewPCG(11, uint64(len(d))))
	vecs := randomVectors(rng, n, dims)
	s := open(t, dims, d)
	groups := map[string]map[string][]float32{"rare": {}, "common": {}}
	recs := make([]retrieval.Record, n)
	for i, v := range vecs {
		id := fmt.Sprintf("f%05d", i)
		g := "common"
		if i%(n/rare) == 0 {
			g = "rare"
		}
		groups[g][id] = v
		recs[i] = rec(id, v, map[string]string{"group": g, "parity": fmt.Sprint(i % 2)})
	}
	upsert(t, s, recs...)
	if len(groups["rare"]) != rare {
		t.Fatalf("fixture has %d rare rows", len(groups["rare"]))
	}
	for _, q := range randomVectors(rng, 5, dims) {
		for _, k := range []int{1, 10, rare, rare + 10} {
			hits := search(t, s, q, k, retrieval.Filter{"group": "rare"})
			if len(hits) != min(k, rare) {
				t.Errorf("k=%d over %d matching rows returned %d hits", k, rare, len(hits))
			}
			for _, h := range hits {
				if h.Metadata["group"] != "rare" {
					t.Errorf("hit %s of group %q does not match the filter", h.ID, h.Metadata["group"])
				}
			}
			want := reference(d, q, groups["rare"], k)
			if r := compare(t, hits, want, opts.MinRecall == 0); r < opts.MinRecall {
				t.Errorf("k=%d: filtered recall %.3f below %.3f", k, r, opts.MinRecall)
			}
		}
		both := search(t, s, q, 5, retrieval.Filter{"group": "common", "parity": "1"})
		for _, h := range both {
			if h.Metadata["group"] != "common" || h.Metadata["parity"] != "1" {
				t.Errorf("hit %s breaks a two-key filter: %v", h.ID, h.Metadata)
			}
		}
		if len(both) != 5 {
			t.Errorf("two-key filter returned %d hits, want 5", len(both))
		}
		if none := search(t, s, q, 5, retrieval.Filter{"group": "absent"}); len(none) != 0 {
			t.Errorf("a filter nothing matches returned %v", ids(none))
		}
	}
}

// testDelete deletes a scattered third of the rows and checks that search
// still equals exact search over what remains.
func testDelete(t *testing.T, open Opener, d retrieval.Distance, opts Options) {
	const n, dims, k = 600, 16, 10
	rng := rand.New(rand.NewPCG(13, uint64(len(d))))
	vecs := randomVectors(rng, n, dims)
	s := open(t, dims, d)
	data := make(map[string][]float32, n)
	recs := make([]retrieval.Record, n)
	for i, v := range vecs {
		id := fmt.Sprintf("d%04d", i)
		data[id] = v
		recs[i] = rec(id, v, nil)
	}
	upsert(t, s, recs...)
	var del []string
	for i := 0; i < n; i += 3 {
		id := fmt.Sprintf("d%04d", i)
		del = append(del, id)
		delete(data, id)
	}
	for range 2 { // deleting twice is harmless
		if err := s.Delete(t.Context(), append(del, "unknown")); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.IDs(t.Context(), nil)
	want := make([]string, 0, len(data))
	for id := range data {
		want = append(want, id)
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after deleting %d of %d rows the store holds %d ids", len(del), n, len(got))
	}
	for _, q := range randomVectors(rng, 10, dims) {
		hits := search(t, s, q, k, nil)
		for _, h := range hits {
			if _, ok := data[h.ID]; !ok {
				t.Errorf("deleted row %s returned", h.ID)
			}
		}
		if r := compare(t, hits, reference(d, q, data, k), opts.MinRecall == 0); r < opts.MinRecall {
			t.Errorf("recall after deletes %.3f below %.3f", r, opts.MinRecall)
		}
	}
}
