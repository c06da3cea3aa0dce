package pgvector_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRuntimeDoesNotLinkPgx guards the reason this package is apart: a
// program that keeps its vectors in memory imports runtime/retrieval and
// must not link pgx, pgvector-go or this package through it.
func TestRuntimeDoesNotLinkPgx(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "github.com/aidgen/aid/runtime/retrieval").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "github.com/pgvector/") || strings.HasSuffix(dep, "/retrieval/pgvector") {
			t.Errorf("runtime/retrieval depends on %s", dep)
		}
	}
}
