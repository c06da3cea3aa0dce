package retrieval_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/storetest"
)

func TestMemoryStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dims int, d retrieval.Distance) retrieval.VectorStore {
		s, err := retrieval.NewMemoryStore(dims, d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{})
}

func TestNewMemoryStoreRefusals(t *testing.T) {
	for _, tc := range []struct {
		dims int
		d    retrieval.Distance
	}{{0, retrieval.DistanceCosine}, {-3, retrieval.DistanceL2}, {4, "euclid"}, {4, ""}} {
		if _, err := retrieval.NewMemoryStore(tc.dims, tc.d); err == nil {
			t.Errorf("NewMemoryStore(%d, %q) accepted", tc.dims, tc.d)
		}
	}
}

// TestMemoryStoreContractParallel runs the contract suite with every search
// split over the cores from the first row, so that the merge of per-core
// heaps is held to exact search too (the suite's data is below the size
// where a search splits by itself).
func TestMemoryStoreContractParallel(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dims int, d retrieval.Distance) retrieval.VectorStore {
		s, err := retrieval.NewMemoryStore(dims, d)
		if err != nil {
			t.Fatal(err)
		}
		retrieval.SetParallelMin(s, 1)
		return s
	}, storetest.Options{})
}
