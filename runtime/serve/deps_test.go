package serve_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestServeDoesNotLinkPgx guards why the PostgreSQL openers live in
// runtime/serve/postgres: a generated service that keeps everything in
// memory imports only this package and must not link pgx; the one that
// passes postgres.OpenState does.
func TestServeDoesNotLinkPgx(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for pkg, wantPGX := range map[string]bool{
		"github.com/aidgen/aid/runtime/serve":          false,
		"github.com/aidgen/aid/runtime/serve/postgres": true,
	} {
		out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		var got bool
		for _, dep := range strings.Fields(string(out)) {
			got = got || strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "github.com/pgvector/")
		}
		if got != wantPGX {
			t.Errorf("%s links pgx = %v, want %v", pkg, got, wantPGX)
		}
	}
}
