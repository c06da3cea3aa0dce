package app_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// TestReadFiles lists what a service reads: the files the kinds name (the
// fake's script and answer key, a fixture) and the retrievers' documents,
// each once, by the description's names; not the evals' datasets or
// baselines, which a service never reads.
func TestReadFiles(t *testing.T) {
	d := desk(t)
	if err := os.MkdirAll(filepath.Join(d.Dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, d.Dir, "docs/a.md", "# A\n")
	d.Stores = []retrieval.StoreConfig{{Name: "kb", Kind: memory.Kind{}}}
	d.Retrievers = []retrieval.Config{{Name: "kb", Source: retrieval.Source{Files: []string{"docs/*.md"}}, EmbedModel: "embed", Store: "kb", ChunkSize: 100, TopK: 1}}
	got, err := d.ReadFiles(kind.DirFiles(d.Dir))
	if err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(got))
	if want := []string{"docs/a.md", "lookup.json", "qa.json", "script.json"}; !slices.Equal(names, want) {
		t.Errorf("files %q, want %q (qa.json as the answer key, not as an eval's dataset)", names, want)
	}
	if string(got["docs/a.md"]) != "# A\n" {
		t.Errorf("docs/a.md holds %q", got["docs/a.md"])
	}

	os.Remove(filepath.Join(d.Dir, "script.json"))
	d.Retrievers[0].Source.Files = []string{"nope/*.md"}
	_, err = d.ReadFiles(kind.DirFiles(d.Dir))
	for _, want := range []string{"script.json", `retriever "kb"`, "match no file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing files: %v, want it to say %q", err, want)
		}
	}
}
