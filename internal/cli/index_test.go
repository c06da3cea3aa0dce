package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/pgtest"
)

const supportDesk = "examples/support-desk/app.cue"

// TestIndexSupportDesk indexes the example on its embedded default (a
// memory store): every article is added, the cost is printed, and stderr
// says the index ends with the command.
func TestIndexSupportDesk(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := run(t, "index", "--progress", "lines", supportDesk)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"kb: 9 files: 9 added, 0 unchanged, 0 removed (store kb, memory)\n", "embedding: 1 call, $0.0000"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"kb: 9/9 chunks\n", "memory stores are rebuilt on every command"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestSearchSupportDesk searches the example: hits come best first with a
// score, the source and its byte range, and the heading; -k bounds them.
func TestSearchSupportDesk(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := run(t, "search", "--progress", "none", supportDesk, "kb", "How many days do I have to ask for a refund?")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	hit := regexp.MustCompile(`(?m)^(\d+)\. (\d+\.\d{4})  lexical (?:\d+|-)  vector (?:\d+|-)  (\S+):(\d+)-(\d+)`)
	hits := hit.FindAllStringSubmatch(out, -1)
	if len(hits) != 4 { // the retriever's topK
		t.Fatalf("%d hits, want the retriever's topK of 4:\n%s", len(hits), out)
	}
	if hits[0][3] != "docs/refunds.md" || !strings.Contains(out, "  Refunds\n   # Refunds You can ask for a refund within 30 days") {
		t.Errorf("the refunds article is not the first hit, with its heading and text:\n%s", out)
	}
	for i := 1; i < len(hits); i++ {
		if hits[i][2] > hits[i-1][2] {
			t.Errorf("hit %d scores %s, more than hit %d's %s", i+1, hits[i][2], i, hits[i-1][2])
		}
	}
	if !strings.Contains(errOut, "ingested 9 files first: 9 added") {
		t.Errorf("stderr does not say the memory store was ingested first:\n%s", errOut)
	}

	code, out, _ = run(t, "search", "--progress", "none", "-k", "2", supportDesk, "kb", "reset my password")
	if hits := hit.FindAllStringSubmatch(out, -1); code != cli.ExitOK || len(hits) != 2 || hits[0][3] != "docs/troubleshooting/login.md" {
		t.Errorf("-k 2: exit %d, hits %v:\n%s", code, hits, out)
	}
}

func TestIndexSearchUsageErrors(t *testing.T) {
	chdirRoot(t)
	tests := []struct {
		name     string
		args     []string
		inStderr string
	}{
		{"index without a file", []string{"index"}, "exactly one application file"},
		{"index of an unknown retriever", []string{"index", supportDesk, "--retriever", "kbb"}, `has no retriever "kbb"; retrievers: kb`},
		{"index of an app without retrievers", []string{"index", "examples/capitals/app.cue"}, "defines no retrievers"},
		{"index of an invalid app", []string{"index", "testdata/ir/invalid/unknown-alias.cue"}, "not a valid application"},
		{"index with a bad progress", []string{"index", supportDesk, "--progress", "fancy"}, "--progress must be"},
		{"search without a query", []string{"search", supportDesk, "kb"}, "usage: aidgen search FILE RETRIEVER"},
		{"search with an empty query", []string{"search", supportDesk, "kb", "  "}, "the query is empty"},
		{"search of an unknown retriever", []string{"search", supportDesk, "nope", "refunds"}, `has no retriever "nope"`},
		{"search with k 0", []string{"search", supportDesk, "kb", "refunds", "-k", "0"}, "-k must be between 1 and 100"},
		{"search with k 101", []string{"search", supportDesk, "kb", "refunds", "-k", "101"}, "-k must be between 1 and 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, cli.ExitUsage, out, errOut)
			}
			if !strings.Contains(errOut, tt.inStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.inStderr, errOut)
			}
		})
	}
}

// TestIndexUnreadableSource checks that a file the source cannot read as
// text fails the ingest with exit 1, naming it.
func TestIndexUnreadableSource(t *testing.T) {
	dir := copySupportDesk(t)
	if err := os.WriteFile(filepath.Join(dir, "docs", "binary.md"), []byte("# Bad\n\xff\xfe\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "index", "--progress", "none", filepath.Join(dir, "app.cue"))
	if code != cli.ExitInvalid || !strings.Contains(errOut, "indexing kb") || !strings.Contains(errOut, "binary.md") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestIndexSearchHelp(t *testing.T) {
	for _, cmd := range []string{"index", "search"} {
		code, out, _ := run(t, cmd, "--help")
		if code != cli.ExitOK || !strings.Contains(out, "Examples:") || !strings.Contains(out, "memory stores are rebuilt on every command") {
			t.Errorf("%s --help: exit %d\n%s", cmd, code, out)
		}
	}
}

// copySupportDesk copies the support-desk example into a temporary
// directory and returns it, so that a test may edit its files.
func copySupportDesk(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "examples", "support-desk"))); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestIndexPGVector indexes the support-desk example with its kb store in
// PostgreSQL: the second run adds nothing, an edited article changes only
// its own chunks, and search reads the persisted index without ingesting.
func TestIndexPGVector(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	t.Setenv("AID_TEST_KB_DSN", dsn)
	dir := copySupportDesk(t)
	appFile := filepath.Join(dir, "app.cue")
	src, err := os.ReadFile(appFile)
	if err != nil {
		t.Fatal(err)
	}
	memory := `kb: {kind: "memory", distance: "cosine"}`
	if !strings.Contains(string(src), memory) {
		t.Fatalf("the example no longer declares %s", memory)
	}
	pg := strings.Replace(string(src), memory, `kb: {kind: "pgvector", distance: "cosine", dsnEnv: "AID_TEST_KB_DSN", table: "kb_chunks"}`, 1)
	if err := os.WriteFile(appFile, []byte(pg), 0o644); err != nil {
		t.Fatal(err)
	}

	index := func(want string) {
		t.Helper()
		code, out, errOut := run(t, "index", "--progress", "none", appFile)
		if code != cli.ExitOK || !strings.Contains(out, want) {
			t.Fatalf("exit %d, want %q\nstdout:\n%s\nstderr:\n%s", code, want, out, errOut)
		}
		if strings.Contains(errOut, "in memory") {
			t.Errorf("a pgvector store is called a memory store:\n%s", errOut)
		}
	}
	index("kb: 9 files: 9 added, 0 unchanged, 0 removed (store kb, pgvector table kb_chunks)")
	index("kb: 9 files: 0 added, 9 unchanged, 0 removed")

	// The retrieval eval searches the persisted index and passes against
	// the committed baseline, as it does on the memory store.
	code, out, errOut := run(t, "eval", "--progress", "none", "--eval", "retrieval", appFile)
	if code != cli.ExitOK || !regexp.MustCompile(`recall@4\s+0\.972 ± 0\.028\s+0\.972 ± 0\.028`).MatchString(out) || !strings.Contains(out, "verdict: pass") {
		t.Fatalf("eval on pgvector: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	refunds := filepath.Join(dir, "docs", "refunds.md")
	text, err := os.ReadFile(refunds)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(text), "within 30 days of delivery", "within 45 days of delivery", 1)
	if edited == string(text) {
		t.Fatal("the refunds article no longer says 30 days")
	}
	if err := os.WriteFile(refunds, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	index("kb: 9 files: 1 added, 8 unchanged, 1 removed")

	code, out, errOut = run(t, "search", appFile, "kb", "How many days do I have to ask for a refund?")
	if code != cli.ExitOK || !strings.Contains(out, "1. ") || !strings.Contains(out, "docs/refunds.md:0-") || !strings.Contains(out, "within 45 days") {
		t.Errorf("search: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "ingested") {
		t.Errorf("search ingested a pgvector store:\n%s", errOut)
	}
}

// TestSearchPGVectorEmpty searches a pgvector store nobody indexed: no
// hits, and stderr says to index first.
func TestSearchPGVectorEmpty(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	t.Setenv("AID_TEST_KB_DSN", dsn)
	dir := copySupportDesk(t)
	appFile := filepath.Join(dir, "app.cue")
	src, err := os.ReadFile(appFile)
	if err != nil {
		t.Fatal(err)
	}
	pg := strings.Replace(string(src), `kb: {kind: "memory", distance: "cosine"}`, `kb: {kind: "pgvector", dsnEnv: "AID_TEST_KB_DSN", table: "kb_chunks"}`, 1)
	if err := os.WriteFile(appFile, []byte(pg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "search", appFile, "kb", "refunds")
	if code != cli.ExitOK || out != "no hits\n" || !strings.Contains(errOut, "index it first with: aidgen index") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestRetrievalEvalGates runs the support-desk retrieval eval against its
// committed baseline: the shipped retriever passes by clearing the minMean
// floors, and a much worse one (small chunks, a 12-wide embedding, vector
// search alone) is a regression, so the gate is not one that always passes.
func TestRetrievalEvalGates(t *testing.T) {
	dir := copySupportDesk(t) // before chdirRoot: the copy is made from the package directory
	chdirRoot(t)
	code, out, errOut := run(t, "eval", "--progress", "none", "--eval", "retrieval", supportDesk)
	if code != cli.ExitOK || !strings.Contains(out, "recall@4: mean 0.9722 clears minMean 0.9000") || !strings.Contains(out, "mrr@4: mean 1.0000 clears minMean 0.8000") {
		t.Fatalf("the shipped retriever: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	appFile := filepath.Join(dir, "app.cue")
	src, err := os.ReadFile(appFile)
	if err != nil {
		t.Fatal(err)
	}
	worse := string(src)
	for _, r := range [][2]string{{`retrieval: mode: "hybrid"`, `retrieval: mode: "vector"`}, {"size: 600, overlap: 80", "size: 120, overlap: 10"}, {"dimensions: 256", "dimensions: 12"}} {
		if !strings.Contains(worse, r[0]) {
			t.Fatalf("the example no longer says %s", r[0])
		}
		worse = strings.Replace(worse, r[0], r[1], 1)
	}
	if err := os.WriteFile(appFile, []byte(worse), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run(t, "eval", "--progress", "none", "--eval", "retrieval", appFile)
	if code != cli.ExitRegression || !strings.Contains(out, "verdict: regression") {
		t.Errorf("a worse retriever: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
