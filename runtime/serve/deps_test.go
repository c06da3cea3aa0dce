package serve_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestServeDoesNotLinkPgx guards why the PostgreSQL openers live in
// runtime/serve/postgres: a generated service that keeps everything in
// memory imports only this package and must not link pgx; the one that
// passes postgres.Open does.
func TestServeDoesNotLinkPgx(t *testing.T) {
	for pkg, wantPGX := range map[string]bool{
		"github.com/aidgen/aid/runtime/serve":          false,
		"github.com/aidgen/aid/runtime/serve/postgres": true,
	} {
		var got bool
		for _, dep := range depcheck.Deps(t, pkg) {
			got = got || strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "github.com/pgvector/")
		}
		if got != wantPGX {
			t.Errorf("%s links pgx = %v, want %v", pkg, got, wantPGX)
		}
	}
}
