package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
)

// TestSearchShowsStageRanks: each hit shows its rank in the lexical and
// the vector list beside the fused score.
func TestSearchShowsStageRanks(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := run(t, "search", "--progress", "none", supportDesk, "kb", "How many days do I have to ask for a refund?")
	if code != cli.ExitOK || !regexp.MustCompile(`(?m)^1\. 0\.\d{4}  lexical \d+  vector \d+  docs/refunds\.md:0-\d+  Refunds$`).MatchString(out) {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestSearchJSON: --json prints one object whose hits carry what the text
// shows, and the whole chunk.
func TestSearchJSON(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := run(t, "search", "--progress", "none", "--json", "-k", "6", supportDesk, "kb", "my parcel arrived broken")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var got struct {
		Retriever, Query, Mode string
		K                      int
		Hits                   []map[string]any
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if got.Retriever != "kb" || got.Query != "my parcel arrived broken" || got.Mode != "hybrid" || got.K != 6 || len(got.Hits) != 6 {
		t.Fatalf("got %+v", got)
	}
	for i, h := range got.Hits {
		for _, f := range []string{"rank", "id", "document", "source", "start", "end", "heading", "score", "lexical_rank", "vector_rank", "text"} {
			if _, ok := h[f]; !ok {
				t.Errorf("hit %d has no %q: %v", i, f, h)
			}
		}
		if h["rank"] != float64(i+1) {
			t.Errorf("hit %d has rank %v", i, h["rank"])
		}
		doc, _ := h["document"].(string)
		src, _ := h["source"].(string)
		if !strings.HasPrefix(doc, "docs/") || !strings.HasPrefix(src, doc+":") {
			t.Errorf("hit %d: document %q, source %q", i, doc, src)
		}
		if h["lexical_rank"] == float64(0) && h["vector_rank"] == float64(0) {
			t.Errorf("hit %d is in neither list: %v", i, h)
		}
	}
	if errOut != "" && strings.Contains(errOut, "{") {
		t.Errorf("JSON on stderr: %s", errOut)
	}
}

// TestSearchStripsEscapes: a document's terminal escape sequences and
// control characters reach neither the terminal in text output nor raw
// bytes in JSON, where they are escaped.
func TestSearchStripsEscapes(t *testing.T) {
	dir := copySupportDesk(t)
	hostile := "# \x1b[31mRed\x1b[0m alert\n\nThe zanzibar \x1b]0;owned\x07title \x07bell\x08 and \u202eevil reversal \u009b2J clear.\n"
	if err := os.WriteFile(filepath.Join(dir, "docs", "hostile.md"), []byte(hostile), 0o644); err != nil {
		t.Fatal(err)
	}
	appFile := filepath.Join(dir, "app.cue")
	code, out, errOut := run(t, "search", "--progress", "none", "--skip-invalid", appFile, "kb", "zanzibar")
	if code != cli.ExitOK || !strings.Contains(out, "Red alert") || !strings.Contains(out, "The zanzibar title bell and evil reversal clear.") {
		t.Fatalf("exit %d\nstdout:\n%q\nstderr:\n%s", code, out, errOut)
	}
	for _, bad := range []string{"\x1b", "\x07", "\x08", "\u202e", "\u009b"} {
		if strings.Contains(out, bad) {
			t.Errorf("stdout holds %q:\n%q", bad, out)
		}
	}
	code, out, _ = run(t, "search", "--progress", "none", "--json", "--skip-invalid", appFile, "kb", "zanzibar")
	if code != cli.ExitOK || strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `\u001b[31mRed`) {
		t.Errorf("--json: exit %d\n%q", code, out)
	}
}

// TestIndexInvalidFiles: a file that is not text fails the index, naming
// it and the way out; --skip-invalid indexes the rest and lists it.
func TestIndexInvalidFiles(t *testing.T) {
	dir := copySupportDesk(t)
	for name, text := range map[string]string{"latin1.md": "caf\xe9", "blob.md": "\x00\x01\x02"} {
		if err := os.WriteFile(filepath.Join(dir, "docs", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	appFile := filepath.Join(dir, "app.cue")
	code, out, errOut := run(t, "index", "--progress", "none", appFile)
	if code != cli.ExitInvalid || !strings.Contains(errOut, "2 files cannot be ingested as text: docs/blob.md: holds a NUL byte") ||
		!strings.Contains(errOut, "docs/latin1.md: is not valid UTF-8") || !strings.Contains(errOut, "--skip-invalid") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, "index", "--progress", "none", "--skip-invalid", appFile)
	if code != cli.ExitOK || !strings.Contains(out, "kb: 9 files: 9 added") || !strings.Contains(errOut, "skipped 2 files that cannot be read as text") ||
		!strings.Contains(errOut, "  docs/latin1.md: is not valid UTF-8: byte 0xe9 at offset 3 (line 1)") {
		t.Errorf("--skip-invalid: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
