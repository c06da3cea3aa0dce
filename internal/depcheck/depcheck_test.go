package depcheck_test

import (
	"slices"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestDeps checks that Deps lists the package itself and what it imports,
// and nothing it does not.
func TestDeps(t *testing.T) {
	deps := depcheck.Deps(t, "github.com/aidgen/aid/internal/depcheck")
	for _, want := range []string{"github.com/aidgen/aid/internal/depcheck", "os/exec", "testing"} {
		if !slices.Contains(deps, want) {
			t.Errorf("deps lack %s: %v", want, deps)
		}
	}
	if slices.Contains(deps, "net/http") {
		t.Errorf("deps list net/http, which depcheck does not import: %v", deps)
	}
}
