// Package depcheck lets a test see what a package links: the tests that
// guard why a PostgreSQL backend lives in a package of its own ask it
// whether the in-memory package still links pgx. It is for tests only.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// Deps returns the import paths pkg depends on, itself and the standard
// library included, as `go list -deps` prints them. It skips the test under
// -short and when no go command is on PATH, since it runs one, and fails it
// when go list does.
func Deps(t testing.TB, pkg string) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}
