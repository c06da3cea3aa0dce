package aid_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// module is this module's path, as go.mod spells it.
const module = "github.com/aidgen/aid"

// TestRuntimeUsesNoModuleInternal holds the layering issue 35 asked for:
// no package under runtime/, gen/ or ir/ links a module-root internal/
// package, directly or through another package, so the runtime a team
// imports and the generator never depend on the CLI's helpers, and what
// the runtime needs privately lives under runtime/internal/. It follows
// the import graph go list prints (the packages' own imports, not their
// tests'), so a helper that imported the runtime back would show up here
// as the first rule's breach.
func TestRuntimeUsesNoModuleInternal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}",
		"./runtime/...", "./gen/...", "./ir/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) > 0 {
			imports[f[0]] = f[1:]
		}
	}
	for _, bad := range layeringBreaches(imports) {
		t.Error(bad)
	}
}

// TestLayeringBreaches checks that the rule above sees a breach: a runtime
// package importing a module-root internal package, and such a package
// importing the runtime back.
func TestLayeringBreaches(t *testing.T) {
	got := layeringBreaches(map[string][]string{
		module + "/runtime/agents":            {module + "/internal/pgutil", module + "/runtime/internal/jsonschemas"},
		module + "/internal/pgutil":           {module + "/runtime/gateway"},
		module + "/runtime/gateway":           {"context"},
		module + "/runtime/internal/analysis": nil,
		module + "/gen":                       {module + "/runtime/app"},
	})
	want := []string{
		module + "/internal/pgutil, a module-root internal package, imports the runtime package " + module + "/runtime/gateway",
		module + "/runtime/agents imports the module-root internal package " + module + "/internal/pgutil; move it under runtime/internal/ or make it public",
	}
	if !slices.Equal(got, want) {
		t.Errorf("breaches:\n got %q\nwant %q", got, want)
	}
}

// layeringBreaches returns, sorted, the edges of imports (package → what it
// imports) that break the layering: a package under runtime/, gen/ or ir/
// importing a module-root internal/ package, and a module-root internal
// package the runtime links importing the runtime.
func layeringBreaches(imports map[string][]string) []string {
	under := func(p, dir string) bool { return p == module+"/"+dir || strings.HasPrefix(p, module+"/"+dir+"/") }
	var bad []string
	for p, imps := range imports {
		for _, imp := range imps {
			switch {
			case (under(p, "runtime") || under(p, "gen") || under(p, "ir")) && under(imp, "internal"):
				bad = append(bad, p+" imports the module-root internal package "+imp+"; move it under runtime/internal/ or make it public")
			case under(p, "internal") && under(imp, "runtime"):
				bad = append(bad, p+", a module-root internal package, imports the runtime package "+imp)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// TestFilesAPersonCanHold holds issue 35's bound on a source file: no
// non-test Go file over 1,000 lines, so that a file holds one concern.
func TestFilesAPersonCanHold(t *testing.T) {
	const limit = 1000
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != "." && (n == "testdata" || strings.HasPrefix(n, ".") || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > limit {
			t.Errorf("%s has %d lines, over %d: split it by concern", p, n, limit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
