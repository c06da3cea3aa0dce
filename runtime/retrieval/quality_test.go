package retrieval_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/internal/quality"
)

// BenchmarkQuality scores every ranking of the quality harness on the
// memory store: nDCG@10, recall@100 and MRR over each collection (GoDoc,
// GoSpec), and the median and 95th-percentile latency of a search for 100
// hits. Run it once per configuration:
//
//	go test -run '^$' -bench Quality -benchtime 1x ./runtime/retrieval/
func BenchmarkQuality(b *testing.B) {
	quality.Bench(b, func(b *testing.B, _ string) retrieval.VectorStore {
		s, err := retrieval.NewMemoryStore(quality.Dims, retrieval.DistanceCosine)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// BenchmarkSearchLatency times a search for 100 hits in every ranking of
// the quality harness on the memory store, over about 2,400 chunks:
//
//	go test -run '^$' -bench SearchLatency -benchtime 200x ./runtime/retrieval/
func BenchmarkSearchLatency(b *testing.B) {
	quality.Latency(b, func(b *testing.B) retrieval.VectorStore {
		s, err := retrieval.NewMemoryStore(quality.Dims, retrieval.DistanceCosine)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
