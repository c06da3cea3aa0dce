package gen_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/gen"
)

// TestGoldensBuild writes every case, as aidgen build would from this
// checkout (go.mod with the runtime's requirements and a replace, go.sum),
// into a temporary directory, beside a drift program, and runs go vet in
// every generated service, and the drift program, which loads each case's app file, lowers it with
// internal/lower, and compares the result (reflect.DeepEqual, with a
// go-cmp diff when they differ) with the description the generated
// aid_gen.go literal evaluates to, compiled. So a golden that does not
// compile, or a literal that drops or changes a field, fails here.
//
// It builds offline: GOPROXY=off, everything from the module cache.
func TestGoldensBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every golden with the go command")
	}
	root := repoRoot(t)
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	var uses []string
	var drift strings.Builder
	drift.WriteString("package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n\t\"reflect\"\n\n\t\"github.com/google/go-cmp/cmp\"\n\n\t\"github.com/aidgen/aid/internal/lower\"\n\t\"github.com/aidgen/aid/ir\"\n\t\"github.com/aidgen/aid/runtime/app\"\n")
	var checks strings.Builder
	for i, c := range cases(t) {
		doc := load(t, c.app)
		desc := describe(t, c.app)
		dir := filepath.Join(work, c.name)
		opts := optionsFor(t, doc, desc)
		golden, err := gen.Generate(desc, opts)
		if err != nil {
			t.Fatal(err)
		}
		// What aidgen build writes from this checkout into dir.
		opts.Runtime, opts.RuntimeGoMod, opts.GoSum = root, goMod, goSum
		files, err := gen.Generate(desc, opts)
		if err != nil {
			t.Fatal(err)
		}
		for p, b := range files {
			if p != gen.FileGoMod && p != gen.FileGoSum && !bytes.Equal(b, golden[p]) {
				t.Errorf("%s: %s depends on the runtime's module files", c.name, p)
			}
			writeFile(t, filepath.Join(dir, filepath.FromSlash(p)), b)
		}
		uses = append(uses, "./"+c.name)

		// The drift program's copy of the literal, in a package of its own.
		pkg := fmt.Sprintf("case%d", i)
		lit := strings.Replace(string(files[gen.FileDesc]), "\npackage main\n", "\npackage "+pkg+"\n", 1)
		writeFile(t, filepath.Join(work, "drift", pkg, "aid_gen.go"), []byte(lit))
		writeFile(t, filepath.Join(work, "drift", pkg, "export.go"), []byte("package "+pkg+"\n\nimport \"github.com/aidgen/aid/runtime/app\"\n\n// Description exports the literal.\nfunc Description() app.Description { return description() }\n"))
		fmt.Fprintf(&drift, "\t%s \"github.com/aidgen/aid/gen/drift/%s\"\n", pkg, pkg)
		fmt.Fprintf(&checks, "\tcheck(%q, %q, %q, %s.Description())\n", c.name, c.app, descDir(opts), pkg)
	}
	drift.WriteString(")\n\nvar failed bool\n\nfunc main() {\n" + checks.String() + "\tif failed {\n\t\tos.Exit(1)\n\t}\n}\n\n")
	drift.WriteString(`func check(name, path, dir string, got app.Description) {
	doc, err := ir.Load(path)
	if err != nil {
		fmt.Println(name, err)
		failed = true
		return
	}
	want, err := lower.Document(doc)
	if err != nil {
		fmt.Println(name, err)
		failed = true
		return
	}
	want.Dir = dir // the service's files are found relative to itself
	if !reflect.DeepEqual(want, got) {
		fmt.Printf("%s: the generated literal differs from lowering (-lower +literal):\n%s\n", name, cmp.Diff(want, got))
		failed = true
		return
	}
	fmt.Println(name, "ok")
}
`)
	writeFile(t, filepath.Join(work, "drift", "main.go"), []byte(drift.String()))
	// The drift module's path is under the runtime's, so that it may
	// import internal/lower; its requirements are a service's.
	driftMod := string(files(t, work, uses[0], gen.FileGoMod))
	writeFile(t, filepath.Join(work, "drift", "go.mod"), []byte(fixModule(driftMod, "github.com/aidgen/aid/gen/drift")))
	writeFile(t, filepath.Join(work, "drift", "go.sum"), goSum)

	// Each service is its own module, built as a user would build it: no
	// workspace, no network.
	env := append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
	run := func(dir string, args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, u := range uses {
		run(filepath.Join(work, u), "vet", "./...")
	}
	// pgx is linked only by a service that keeps something in PostgreSQL:
	// serve.Main does not link it, the openers main.go passes do.
	for name, wantPGX := range map[string]bool{"minimal": false, "support-desk": false, "orders": true} {
		deps := run(filepath.Join(work, name), "list", "-deps", ".")
		if got := strings.Contains(deps, "github.com/jackc/pgx"); got != wantPGX {
			t.Errorf("%s: links pgx = %v, want %v", name, got, wantPGX)
		}
	}
	out := run(filepath.Join(work, "drift"), "run", ".")
	for _, c := range cases(t) {
		if !strings.Contains(out, c.name+" ok") {
			t.Errorf("drift program did not check %s:\n%s", c.name, out)
		}
	}
}

// files reads a file of a written case.
func files(t *testing.T, work, use, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(work, use, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixModule sets the module line of a go.mod.
func fixModule(mod, path string) string {
	lines := strings.Split(mod, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "module ") {
			lines[i] = "module " + path
		}
	}
	return strings.Join(lines, "\n")
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
