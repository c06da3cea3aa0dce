package memory_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/storetest"
)

func TestStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dims int, d retrieval.Distance) retrieval.VectorStore {
		s, err := memory.NewStore(dims, d)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, storetest.Options{})
}

func TestNewStoreRefusals(t *testing.T) {
	for _, tc := range []struct {
		dims int
		d    retrieval.Distance
	}{{0, retrieval.DistanceCosine}, {-3, retrieval.DistanceL2}, {4, "euclid"}, {4, ""}} {
		if _, err := memory.NewStore(tc.dims, tc.d); err == nil {
			t.Errorf("NewStore(%d, %q) accepted", tc.dims, tc.d)
		}
	}
}

// TestStoreContractParallel runs the contract suite with every search
// split over the cores from the first row, so that the merge of per-core
// heaps is held to exact search too (the suite's data is below the size
// where a search splits by itself).
func TestStoreContractParallel(t *testing.T) {
	storetest.Run(t, func(t *testing.T, dims int, d retrieval.Distance) retrieval.VectorStore {
		s, err := memory.NewStore(dims, d)
		if err != nil {
			t.Fatal(err)
		}
		memory.SetParallelMin(s, 1)
		return s
	}, storetest.Options{})
}
