package pgvector_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestRuntimeDoesNotLinkPgx guards the reason this package is apart: a
// program that keeps its vectors in memory imports runtime/retrieval and
// must not link pgx, pgvector-go or this package through it.
func TestRuntimeDoesNotLinkPgx(t *testing.T) {
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/runtime/retrieval") {
		if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "github.com/pgvector/") || strings.HasSuffix(dep, "/retrieval/pgvector") {
			t.Errorf("runtime/retrieval depends on %s", dep)
		}
	}
}
