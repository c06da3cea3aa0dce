package pgstore_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestRuntimeDoesNotLinkPgx guards the reason this package is apart: a
// program that keeps its agent state in memory imports runtime/agents and
// must not link pgx (or this package) through it.
func TestRuntimeDoesNotLinkPgx(t *testing.T) {
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/runtime/agents") {
		if strings.HasPrefix(dep, "github.com/jackc/") || strings.HasSuffix(dep, "/pgstore") {
			t.Errorf("runtime/agents depends on %s", dep)
		}
	}
}
