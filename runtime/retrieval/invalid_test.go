package retrieval_test

import (
	"errors"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"slices"
	"strings"
	"testing"
)

// badFiles are files an ingest cannot read as text, each for its own
// reason, in path order.
var badFiles = map[string]string{
	"docs/latin1.md":      "caf\xe9 au lait\n",
	"docs/manual.pdf":     "%PDF-1.7",
	"docs/nul.txt":        "first line\nsecond\x00line\n",
	"docs/sub/utf16.md":   "\xff\xfeh\x00i\x00",
	"docs/sub/good-z.txt": "a good file after the bad ones",
}

func invalidRetriever(t *testing.T, f *fixture, onInvalid string) *retrieval.Retriever {
	t.Helper()
	e, _ := retrieval.NewGatewayEmbedder(f.gw, "embed")
	r, err := retrieval.New(retrieval.Binding{
		Name: "kb", Source: retrieval.Source{Dir: f.dir, Files: []string{"docs/**/*.md", "docs/**/*.txt", "docs/**/*.pdf"}, Exclude: []string{"docs/ignored/**"}, OnInvalid: onInvalid},
		Chunker: mustChunker(t, 120, 20), Embedder: e, Store: f.store, TopK: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestIngestReportsEveryInvalidFile: one bad file used to fail the ingest
// of every document with the first bad file's error alone. Every bad file
// is named, with why, in one error, and nothing is stored.
func TestIngestReportsEveryInvalidFile(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	writeFiles(t, f.dir, badFiles)
	_, err := invalidRetriever(t, f, "").Ingest(t.Context())
	var ie *retrieval.InvalidFilesError
	if !errors.As(err, &ie) {
		t.Fatalf("got %v, want an *InvalidFilesError", err)
	}
	var paths []string
	for _, b := range ie.Files {
		paths = append(paths, b.Path)
	}
	if want := []string{"docs/latin1.md", "docs/manual.pdf", "docs/nul.txt", "docs/sub/utf16.md"}; !slices.Equal(paths, want) {
		t.Errorf("reported %v, want %v", paths, want)
	}
	for _, want := range []string{"byte 0xe9 at offset 3 (line 1)", ".pdf files", "NUL byte at offset 17 (line 2)", "UTF-16", `onInvalid: "skip"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	var de *kind.DeferredError
	if !errors.As(err, &de) || !strings.Contains(de.Feature, "docs/manual.pdf") {
		t.Errorf("errors.As finds no *kind.DeferredError for the PDF in %v", err)
	}
	if n := f.store.Len(); n != 0 {
		t.Errorf("a failed ingest stored %d chunks", n)
	}
}

// TestIngestSkipsInvalidFiles: with onInvalid "skip" the other files are
// ingested and the bad ones listed; a file that turns bad keeps what the
// store held of it, since it was not read.
func TestIngestSkipsInvalidFiles(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	r := invalidRetriever(t, f, retrieval.OnInvalidSkip)
	clean, err := r.Ingest(t.Context())
	if err != nil || len(clean.Skipped) != 0 {
		t.Fatalf("clean ingest: %+v, %v", clean, err)
	}
	refunds, _ := f.store.IDs(t.Context(), retrieval.Filter{retrieval.MetaSource: "docs/refunds.md"})
	writeFiles(t, f.dir, badFiles)
	writeFiles(t, f.dir, map[string]string{"docs/refunds.md": "refunds \xff broken"})
	st, err := r.Ingest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var skipped []string
	for _, b := range st.Skipped {
		skipped = append(skipped, b.Path)
	}
	if want := []string{"docs/latin1.md", "docs/manual.pdf", "docs/nul.txt", "docs/refunds.md", "docs/sub/utf16.md"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if st.Removed != 0 || st.Added == 0 {
		t.Errorf("stats %+v: want the good new file added and nothing removed", st)
	}
	if kept, _ := f.store.IDs(t.Context(), retrieval.Filter{retrieval.MetaSource: "docs/refunds.md"}); !slices.Equal(kept, refunds) {
		t.Errorf("the chunks of a skipped file changed: %v, were %v", kept, refunds)
	}
	hits, err := r.Search(t.Context(), "a good file after the bad ones", 1)
	if err != nil || len(hits) != 1 || hits[0].Source != "docs/sub/good-z.txt" {
		t.Errorf("the good file is not searchable: %v, %v", retrieval.Sources(hits), err)
	}
}

func TestUnknownOnInvalid(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	e, _ := retrieval.NewGatewayEmbedder(f.gw, "embed")
	_, err := retrieval.New(retrieval.Binding{Name: "kb", Source: retrieval.Source{Dir: f.dir, Files: []string{"*.md"}, OnInvalid: "ignore"}, Chunker: mustChunker(t, 100, 0), Embedder: e, Store: f.store, TopK: 1})
	if err == nil || !strings.Contains(err.Error(), `unknown onInvalid "ignore"`) {
		t.Errorf("onInvalid ignore: %v", err)
	}
}
