package app_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// TestRetrieverSourceIsRelativeToDir ingests a retriever whose source names
// no directory, as internal/lower leaves it: its patterns are relative to
// the description's Dir, whatever the working directory.
func TestRetrieverSourceIsRelativeToDir(t *testing.T) {
	d := desk(t)
	if err := os.MkdirAll(filepath.Join(d.Dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, d.Dir, filepath.Join("docs", "a.md"), "# Refunds\n\nRefunds take five days.\n")
	d.Models = append(d.Models, gateway.PinnedModel{Alias: "embed", Spec: gateway.ModelSpec{ID: "fake-embed-1", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 16}})
	d.Stores = []retrieval.StoreConfig{{Name: "kb", Distance: retrieval.DistanceCosine, Kind: memory.Kind{}}}
	d.Retrievers = []retrieval.Config{{Name: "kb", Source: retrieval.Source{Files: []string{"docs/*.md"}}, ChunkSize: 200, EmbedModel: "embed", Store: "kb", TopK: 2}}
	t.Chdir(t.TempDir()) // not the description's directory
	a, err := assemble(t.Context(), d, app.Options{Implementations: goTools(), RunStore: agents.NewInMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := a.Retrievers["kb"].Ingest(t.Context())
	if err != nil || stats.Files != 1 || stats.Added == 0 {
		t.Fatalf("ingest: %+v, %v; want the one file under Dir", stats, err)
	}
}
