package retrieval_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// TestDeferredKinds asks every constructor that takes a kind string for
// each kind that is not built: each fails with a *gateway.DeferredError
// whose message is "<feature> is not built yet", the words `aidgen vet`
// reports (the module root's schema test holds the two to one list). A
// misspelt kind is a plain error, not a deferred one: it is a typo, not a
// missing feature.
func TestDeferredKinds(t *testing.T) {
	type ctor struct {
		what string
		call func(kind string) error
	}
	ctors := []struct {
		ctor
		kinds []string
	}{
		{ctor{"store kind", func(k string) error {
			_, err := retrieval.OpenStore(retrieval.StoreConfig{Name: "kb", Kind: k}, 8, nil)
			return err
		}}, retrieval.DeferredStoreKinds()},
		{ctor{"retriever source kind", func(k string) error {
			_, err := retrieval.Source{Kind: k, Dir: t.TempDir(), Files: []string{"*.md"}}.Load(t.Context())
			return err
		}}, retrieval.DeferredSourceKinds()},
		{ctor{"retriever source kind", func(k string) error {
			e, err := retrieval.NewGatewayEmbedder(newGateway(t), "embed")
			if err != nil {
				t.Fatal(err)
			}
			s, _ := retrieval.NewMemoryStore(embedWidth, retrieval.DistanceCosine)
			_, err = retrieval.New(retrieval.Binding{Name: "kb", Source: retrieval.Source{Kind: k}, Chunker: mustChunker(t, 100, 0), Embedder: e, Store: s, TopK: 1})
			return err
		}}, retrieval.DeferredSourceKinds()},
		{ctor{"chunking strategy", func(k string) error {
			_, err := retrieval.NewChunker(k, 100, 10)
			return err
		}}, retrieval.DeferredChunkingStrategies()},
		{ctor{"rerank kind", func(k string) error {
			_, err := retrieval.NewReranker(k)
			return err
		}}, retrieval.DeferredRerankKinds()},
	}
	for _, c := range ctors {
		if len(c.kinds) == 0 {
			t.Fatalf("no deferred %s listed", c.what)
		}
		for _, kind := range c.kinds {
			t.Run(c.what+" "+kind, func(t *testing.T) {
				err := c.call(kind)
				var de *gateway.DeferredError
				if !errors.As(err, &de) {
					t.Fatalf("got %v, want a *gateway.DeferredError", err)
				}
				if want := fmt.Sprintf("%s %q", c.what, kind); de.Feature != want {
					t.Errorf("feature %q, want %q", de.Feature, want)
				}
				if want := fmt.Sprintf("%s %q is not built yet", c.what, kind); !strings.HasSuffix(err.Error(), want) {
					t.Errorf("error %q does not end with %q", err, want)
				}
			})
		}
		t.Run(c.what+" misspelt", func(t *testing.T) {
			err := c.call(c.kinds[0] + "x")
			var de *gateway.DeferredError
			if err == nil || errors.As(err, &de) {
				t.Fatalf("misspelt kind: got %v, want a plain error", err)
			}
		})
	}
}

// TestBuildReportsEveryDeferredKind builds an application that asks for a
// store, a source, a chunking strategy and a reranker that are not built:
// Build reports all four in one error, each a *gateway.DeferredError, and
// a store of a deferred kind fails even when no retriever uses it.
func TestBuildReportsEveryDeferredKind(t *testing.T) {
	gw := newGateway(t)
	stores := []retrieval.StoreConfig{{Name: "kb", Kind: retrieval.StoreMemory}, {Name: "vec", Kind: "qdrant"}, {Name: "idle", Kind: "pinecone"}}
	retrievers := []retrieval.Config{
		{Name: "a", Source: retrieval.Source{Kind: "web"}, Chunking: "semantic", ChunkSize: 100, EmbedModel: "embed", Store: "kb", TopK: 1, Rerank: "cohere"},
		{Name: "b", Source: retrieval.Source{Dir: t.TempDir(), Files: []string{"*.md"}}, ChunkSize: 100, EmbedModel: "embed", Store: "vec", TopK: 1},
	}
	_, err := retrieval.Build(gw, stores, retrievers, retrieval.BuildOptions{})
	if err == nil {
		t.Fatal("Build succeeded")
	}
	for _, want := range []string{
		`retriever "a": retriever source kind "web" is not built yet`,
		`retriever "a": chunking strategy "semantic" is not built yet`,
		`retriever "a": rerank kind "cohere" is not built yet`,
		`opening store "vec": store kind "qdrant" is not built yet`,
		`opening store "idle": store kind "pinecone" is not built yet`,
	} {
		if strings.Count(err.Error(), want) != 1 {
			t.Errorf("error does not say %q once:\n%v", want, err)
		}
	}
	var de *gateway.DeferredError
	if !errors.As(err, &de) {
		t.Errorf("errors.As finds no *gateway.DeferredError in %v", err)
	}

	// A team's own opener for a deferred kind is used.
	opened := false
	open := func(cfg retrieval.StoreConfig, dims int) (retrieval.VectorStore, error) {
		opened = true
		return retrieval.NewMemoryStore(dims, cfg.Distance)
	}
	if _, err := retrieval.Build(gw, stores[1:2], retrievers[1:], retrieval.BuildOptions{Openers: map[string]retrieval.StoreOpener{"qdrant": open}}); err != nil || !opened {
		t.Fatalf("Build with a qdrant opener: %v, opened %v", err, opened)
	}
}

// TestStoreInMemory holds StoreConfig.InMemory to what OpenStore builds
// without an opener: a memory store for no kind and for StoreMemory, and
// nothing in this process for the others.
func TestStoreInMemory(t *testing.T) {
	for _, tt := range []struct {
		kind string
		want bool
	}{
		{"", true},
		{retrieval.StoreMemory, true},
		{retrieval.StorePGVector, false},
		{"Memory", false},
		{"qdrant", false},
	} {
		cfg := retrieval.StoreConfig{Name: "kb", Kind: tt.kind}
		if got := cfg.InMemory(); got != tt.want {
			t.Errorf("StoreConfig{Kind: %q}.InMemory() = %v, want %v", tt.kind, got, tt.want)
		}
		s, err := retrieval.OpenStore(cfg, 8, nil)
		if _, mem := s.(*retrieval.MemoryStore); tt.want != (err == nil && mem) {
			t.Errorf("kind %q: OpenStore gave %T, %v; InMemory says %v", tt.kind, s, err, tt.want)
		}
	}
}
