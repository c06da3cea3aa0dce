package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
)

// TestEmbeddingCache: a memory store re-ingested by the next command
// embeds nothing it embedded before; a provider whose configuration
// changes (the fake's seed) embeds again, and so does a command with the
// cache off.
func TestEmbeddingCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("AID_EMBED_CACHE", cache)
	dir := copySupportDesk(t)
	appFile := filepath.Join(dir, "app.cue")
	index := func(wantCalls string) {
		t.Helper()
		code, out, errOut := run(t, "index", "--progress", "none", appFile)
		if code != cli.ExitOK || !strings.Contains(out, "kb: 9 files: 9 added") || !strings.Contains(out, "embedding: "+wantCalls) {
			t.Fatalf("exit %d, want %q\nstdout:\n%s\nstderr:\n%s", code, wantCalls, out, errOut)
		}
	}
	index("1 call")
	index("0 calls, $0.000000")
	if files, _ := filepath.Glob(filepath.Join(cache, "v1", "*", "*")); len(files) != 9 {
		t.Errorf("the cache holds %d files, want the 9 chunks' vectors", len(files))
	}
	// The query of a search is cached too: the second search embeds nothing.
	code, out, errOut := run(t, "search", "--progress", "none", appFile, "kb", "refund window")
	if code != cli.ExitOK || !strings.Contains(out, "docs/refunds.md") {
		t.Fatalf("search: exit %d\n%s\n%s", code, out, errOut)
	}

	src, err := os.ReadFile(appFile)
	if err != nil {
		t.Fatal(err)
	}
	const fake = "seed: 7"
	if !strings.Contains(string(src), fake) {
		t.Fatalf("the example no longer says %s", fake)
	}
	if err := os.WriteFile(appFile, []byte(strings.Replace(string(src), fake, "seed: 8", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	index("1 call")
	t.Setenv("AID_EMBED_CACHE", "off")
	index("1 call")
}
