package retrieval_test

import (
	"errors"
	"fmt"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"strings"
	"testing"
)

// TestDeferredKinds asks every constructor that takes a kind string for
// each kind that is not built: each fails with a *kind.DeferredError
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
		{ctor{"retriever source kind", func(k string) error {
			_, err := retrieval.Source{Kind: k, Dir: t.TempDir(), Files: []string{"*.md"}}.Load(t.Context())
			return err
		}}, retrieval.DeferredSourceKinds()},
		{ctor{"retriever source kind", func(k string) error {
			e, err := retrieval.NewGatewayEmbedder(newGateway(t), "embed")
			if err != nil {
				t.Fatal(err)
			}
			s, _ := memory.NewStore(embedWidth, retrieval.DistanceCosine)
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
		for _, name := range c.kinds {
			t.Run(c.what+" "+name, func(t *testing.T) {
				err := c.call(name)
				var de *kind.DeferredError
				if !errors.As(err, &de) {
					t.Fatalf("got %v, want a *kind.DeferredError", err)
				}
				if want := fmt.Sprintf("%s %q", c.what, name); de.Feature != want {
					t.Errorf("feature %q, want %q", de.Feature, want)
				}
				if want := fmt.Sprintf("%s %q is not built yet", c.what, name); !strings.HasSuffix(err.Error(), want) {
					t.Errorf("error %q does not end with %q", err, want)
				}
			})
		}
		t.Run(c.what+" misspelt", func(t *testing.T) {
			err := c.call(c.kinds[0] + "x")
			var de *kind.DeferredError
			if err == nil || errors.As(err, &de) {
				t.Fatalf("misspelt kind: got %v, want a plain error", err)
			}
		})
	}
}

// TestBuildReportsEveryDeferredKind builds an application that asks for a
// source, a chunking strategy and a reranker that are not built: Build
// reports all three in one error, each a *kind.DeferredError. (A store
// kind that is not built cannot be named in a description: lowering
// refuses it.)
func TestBuildReportsEveryDeferredKind(t *testing.T) {
	gw := newGateway(t)
	stores := []retrieval.StoreConfig{{Name: "kb", Kind: memory.Kind{}}}
	retrievers := []retrieval.Config{
		{Name: "a", Source: retrieval.Source{Kind: "web"}, Chunking: "semantic", ChunkSize: 100, EmbedModel: "embed", Store: "kb", TopK: 1, Rerank: "cohere"},
	}
	_, err := retrieval.Build(t.Context(), gw, stores, retrievers, retrieval.BuildOptions{})
	if err == nil {
		t.Fatal("Build succeeded")
	}
	for _, want := range []string{
		`retriever "a": retriever source kind "web" is not built yet`,
		`retriever "a": chunking strategy "semantic" is not built yet`,
		`retriever "a": rerank kind "cohere" is not built yet`,
	} {
		if strings.Count(err.Error(), want) != 1 {
			t.Errorf("error does not say %q once:\n%v", want, err)
		}
	}
	var de *kind.DeferredError
	if !errors.As(err, &de) {
		t.Errorf("errors.As finds no *kind.DeferredError in %v", err)
	}
}

// TestStoreInMemory holds StoreConfig.InMemory to what OpenStore builds:
// a memory store for memory.Kind, nothing in this process for a kind that
// keeps its vectors elsewhere, and a store naming no kind is refused,
// since runtime/retrieval links no store of its own.
func TestStoreInMemory(t *testing.T) {
	var opened []string
	for _, tt := range []struct {
		kind retrieval.StoreKind
		want bool
	}{
		{memory.Kind{}, true},
		{recordingKind{&opened}, false},
	} {
		cfg := retrieval.StoreConfig{Name: "kb", Kind: tt.kind}
		if got := cfg.InMemory(); got != tt.want {
			t.Errorf("StoreConfig{Kind: %#v}.InMemory() = %v, want %v", tt.kind, got, tt.want)
		}
		s, err := retrieval.OpenStore(t.Context(), kind.Env{}, cfg, 8)
		if _, mem := s.(*memory.Store); err != nil || (tt.want && !mem) {
			t.Errorf("kind %#v: OpenStore gave %T, %v; InMemory says %v", tt.kind, s, err, tt.want)
		}
	}
	none := retrieval.StoreConfig{Name: "kb"}
	if none.KindName() != "" || none.InMemory() {
		t.Errorf("a store without a kind is of kind %q, in memory %v", none.KindName(), none.InMemory())
	}
	if _, err := retrieval.OpenStore(t.Context(), kind.Env{}, none, 8); err == nil || !strings.Contains(err.Error(), `store "kb": it names no kind`) {
		t.Errorf("OpenStore of a store without a kind: %v", err)
	}
}
