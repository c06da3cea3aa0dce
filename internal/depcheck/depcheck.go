// Package depcheck lets a test see what a package links: the tests that
// guard why a PostgreSQL backend lives in a package of its own ask it
// whether the in-memory package still links pgx, and the test that keeps
// aidgen's size in check asks which symbols the linker kept. It is for
// tests only.
package depcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// Symbol is one symbol of a linked binary, as go tool nm -size prints it.
type Symbol struct {
	Name string
	Size int64
	Type string // T text, R/r read-only data, D/d data, B/b bss
}

// Link builds the main package pkg into a temporary file and returns the
// file's size and its symbols, so that a test can see what a command
// really links (go list -deps names packages, not the code the linker
// keeps of them). It skips like Deps, and fails the test when the build
// or go tool nm does.
func Link(t testing.TB, pkg string) (size int64, syms []Symbol) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds " + pkg)
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	bin := filepath.Join(t.TempDir(), "bin")
	if out, err := exec.Command(gobin, "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gobin, "tool", "nm", "-size", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm %s: %v", bin, err)
	}
	for line := range strings.Lines(string(out)) {
		// address size type name; undefined symbols have no address.
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		syms = append(syms, Symbol{Name: strings.Join(f[3:], " "), Size: n, Type: f[2]})
	}
	return fi.Size(), syms
}
