package jobs_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/depcheck"
)

// TestOnlyPgqueueLinksRiver guards why River lives in runtime/jobs/pgqueue:
// a service that keeps its state in memory runs background runs in
// process (jobs.Local) and links neither River nor pgx; only the program
// that opens a pgqueue does.
func TestOnlyPgqueueLinksRiver(t *testing.T) {
	for pkg, want := range map[string]bool{
		"github.com/aidgen/aid/runtime/jobs":         false,
		"github.com/aidgen/aid/runtime/service":      false,
		"github.com/aidgen/aid/runtime/serve":        false,
		"github.com/aidgen/aid/runtime/jobs/pgqueue": true,
	} {
		var got bool
		for _, dep := range depcheck.Deps(t, pkg) {
			got = got || strings.HasPrefix(dep, "github.com/riverqueue/")
		}
		if got != want {
			t.Errorf("%s links River = %v, want %v", pkg, got, want)
		}
	}
}
