package retrieval_test

import (
	"slices"
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/internal/quality"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// BenchmarkQuality scores every ranking of the quality harness on the
// memory store: nDCG@10, recall@100 and MRR over each collection (GoDoc,
// GoSpec), and the median and 95th-percentile latency of a search for 100
// hits. Run it once per configuration:
//
//	go test -run '^$' -bench Quality -benchtime 1x ./runtime/retrieval/
func BenchmarkQuality(b *testing.B) {
	quality.Bench(b, func(b *testing.B, _ string) retrieval.VectorStore {
		s, err := memory.NewStore(quality.Dims, retrieval.DistanceCosine)
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
		s, err := memory.NewStore(quality.Dims, retrieval.DistanceCosine)
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// TestTopHitsIndependentOfK: a search's first ten hits are the same
// whether it asks for 10 hits or 100, for every question of the harness's
// gospec collection,
// in the default ranking and with the lexical rerank; before hybrid search
// the rerank saw 4×k vector candidates, so they changed with k. Collapsed
// to documents, k hits are k distinct documents.
func TestTopHitsIndependentOfK(t *testing.T) {
	c, err := quality.GoSpec()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := c.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	gw := quality.Gateway(t)
	s, _ := memory.NewStore(quality.Dims, retrieval.DistanceCosine)
	if _, err := quality.Retriever(t, gw, dir, s, quality.Config{}).Ingest(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []quality.Config{{}, {Rerank: retrieval.RerankLexical}, {Ranking: retrieval.Ranking{Fusion: retrieval.FusionWeighted}}} {
		r := quality.Retriever(t, gw, dir, s, cfg) // collapses to documents
		for _, q := range c.Queries {
			top10, err := r.Search(t.Context(), q.Text, 10)
			if err != nil {
				t.Fatal(err)
			}
			top100, err := r.Search(t.Context(), q.Text, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ids(top10), ids(top100)[:10]; !slices.Equal(got, want) {
				t.Errorf("%+v: %s: the top 10 at k=10 are %v, at k=100 %v", cfg, q.ID, got, want)
			}
			if docs := retrieval.Sources(top100); len(docs) != len(top100) || len(top100) != 100 {
				t.Errorf("%+v: %s: 100 hits collapsed to documents hold %d documents in %d hits", cfg, q.ID, len(docs), len(top100))
			}
		}
	}
}
