package retrieval_test

import (
	"path/filepath"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// supportDesk builds the kb retriever of examples/support-desk as its app
// file declares it (memory store, cosine, chunks of 600 with overlap 80,
// top 4), over the fake embedding model of width 256, and ingests it.
func supportDesk(t testing.TB, rerank string) *retrieval.Retriever {
	t.Helper()
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "embed", Spec: gateway.ModelSpec{
			ID: "fake-embed-2024-06-01", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 256,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00002},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := retrieval.Build(t.Context(), gw,
		[]retrieval.StoreConfig{{Name: "kb", Distance: retrieval.DistanceCosine, Kind: memory.Kind{}}},
		[]retrieval.Config{{
			Name:      "kb",
			Source:    retrieval.Source{Dir: filepath.Join("..", "..", "examples", "support-desk"), Files: []string{"docs/**/*.md"}},
			ChunkSize: 600, ChunkOverlap: 80, EmbedModel: "embed", Store: "kb", TopK: 4, Rerank: rerank,
		}}, retrieval.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := rs["kb"]
	if _, err := r.Ingest(t.Context()); err != nil {
		t.Fatal(err)
	}
	return r
}

// supportDeskQueries are natural questions a customer asks and the
// document that answers each.
var supportDeskQueries = []struct{ query, want string }{
	{"how long do I have to return an item", "docs/refunds.md"},
	{"can I get a refund for a damaged item", "docs/refunds.md"},
	{"where is the tracking link for my order", "docs/shipping.md"},
	{"do you ship to Switzerland", "docs/shipping.md"},
	{"I forgot my password and cannot sign in", "docs/troubleshooting/login.md"},
	{"my account is locked", "docs/troubleshooting/login.md"},
}

// TestSupportDeskFixture checks that the fake embedder, through the whole
// retrieval path, ranks the document that answers each question first.
func TestSupportDeskFixture(t *testing.T) {
	for _, rerank := range []string{retrieval.RerankNone, retrieval.RerankLexical} {
		r := supportDesk(t, rerank)
		for _, q := range supportDeskQueries {
			hits, err := r.Search(t.Context(), q.query, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 || hits[0].Source != q.want {
				t.Errorf("rerank %s: %q ranks %v first, want %s", rerank, q.query, retrieval.Sources(hits), q.want)
			}
		}
	}
}
