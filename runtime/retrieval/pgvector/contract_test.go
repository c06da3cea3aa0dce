package pgvector_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
	"github.com/aidgen/aid/runtime/retrieval/storetest"
)

// TestContract runs the suite the memory store passes, on the same data:
// every subtest gets a table of its own in one database, searched through
// the HNSW index, and must reach recall 0.95 against exact search.
func TestContract(t *testing.T) {
	pool := pgtest.NewPool(t)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T, dims int, d retrieval.Distance) retrieval.VectorStore {
		s, err := pgvector.New(t.Context(), pool, pgvector.Config{
			Table: fmt.Sprintf("contract_%d", n.Add(1)), Dimensions: dims, Distance: d,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{MinRecall: 0.95})
}
