package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIndexTwiceInOneProcess indexes a memory store twice in one process,
// the only way a memory store outlives one ingest: the second run adds
// nothing, and an edited article changes only its own chunk.
func TestIndexTwiceInOneProcess(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "examples", "support-desk"))); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	s := &streams{in: strings.NewReader(""), out: &out, err: &errb}
	ra, err := openRetrievers(t.Context(), s, filepath.Join(dir, "app.cue"), nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.close()
	index := func(want string) {
		t.Helper()
		out.Reset()
		if err := ra.index(t.Context(), s, "none"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("index printed\n%s\nwant %q", out.String(), want)
		}
	}
	index("kb: 9 files: 9 added, 0 unchanged, 0 removed")
	index("kb: 9 files: 0 added, 9 unchanged, 0 removed")
	login := filepath.Join(dir, "docs", "troubleshooting", "login.md")
	if err := os.WriteFile(login, []byte("# Cannot sign in\n\nReset your password from the sign-in page.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	index("kb: 9 files: 1 added, 8 unchanged, 1 removed")
	if err := os.Remove(login); err != nil {
		t.Fatal(err)
	}
	index("kb: 8 files: 0 added, 8 unchanged, 1 removed")
}

func TestSnippet(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"  a\n\n b\tc ", 10, "a b c"},
		{"abcdef", 3, "abc…"},
		{"ab cdef", 3, "ab…"},
		{"ééééé", 2, "éé…"},
		{"", 3, ""},
	}
	for _, tt := range tests {
		if got := snippet(tt.text, tt.n); got != tt.want {
			t.Errorf("snippet(%q, %d) = %q, want %q", tt.text, tt.n, got, tt.want)
		}
	}
}
