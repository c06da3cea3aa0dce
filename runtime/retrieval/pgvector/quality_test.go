package pgvector_test

import (
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/internal/quality"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestRankingsMatchMemory searches the quality harness's collection (1,906
// documents, 100 questions, 100 hits each) in every ranking of the harness
// on the memory store and on pgvector: the chunk rankings must be the
// same, hit for hit.
func TestRankingsMatchMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("ingests 2,200 chunks twice")
	}
	pool := pgtest.NewPool(t)
	pg, err := pgvector.New(t.Context(), pool, pgvector.Config{Table: "godoc", Dimensions: quality.Dims})
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := retrieval.NewMemoryStore(quality.Dims, retrieval.DistanceCosine)
	want := quality.EvaluateAll(t, mem)
	got := quality.EvaluateAll(t, pg)
	for _, cfg := range quality.Configs() {
		if diff := quality.Diff(got[cfg.Name], want[cfg.Name]); len(diff) > 0 {
			t.Errorf("%s: pgvector ranks differently from the memory store in %d of 100 queries: %v", cfg.Name, len(diff), diff)
		}
	}
}

// BenchmarkQuality scores every ranking of the quality harness on a
// pgvector store, as BenchmarkQuality in package retrieval does on the
// memory store. It needs AID_TEST_DATABASE_URL:
//
//	go test -run '^$' -bench Quality -benchtime 1x ./runtime/retrieval/pgvector/
func BenchmarkQuality(b *testing.B) {
	pool := pgtest.NewPool(b)
	quality.Bench(b, func(b *testing.B) retrieval.VectorStore {
		s, err := pgvector.New(b.Context(), pool, pgvector.Config{Table: "godoc", Dimensions: quality.Dims})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
