package cases_test

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// built is a valid case written as aidgen build writes it from this
// checkout.
type built struct {
	testCase
	desc app.Description
	opts gen.Options
}

// TestCasesBuild writes every valid case as aidgen build would from this
// checkout (go.mod with the runtime's requirements and a replace by its
// absolute path, go.sum, the application's files under app/) into a
// temporary directory, and, offline, as a user builds a service:
//
//   - runs go vet in each generated service, so that a case whose files do
//     not compile fails here;
//   - lists what each links: every kind package its description names,
//     and no other (a fake-only service links no openai-go, an
//     openai-compatible one no fake, an anthropic-only one no openai-go), pgx only when its state or a store is
//     in PostgreSQL, CEL only when its approval rules or guardrails
//     have conditions (Description.Conditions), the text analyzer and
//     its Snowball stemmer only when a store keeps a lexical index or a
//     fake provider embeds, gonum's BLAS kernels only with a memory store
//     and nothing else of gonum, and never the eval package (a service
//     runs no eval);
//   - runs a drift program that loads each case's app file, lowers it with
//     internal/lower and compares the result (reflect.DeepEqual, with a
//     go-cmp diff when they differ) with the description the generated
//     aid_gen.go literal evaluates to, compiled, so that a literal that
//     drops or changes a field fails.
func TestCasesBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every case with the go command")
	}
	t.Chdir(filepath.Join("..", ".."))
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goSum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	var valid []built
	for _, c := range cases(t) {
		doc, err := ir.Load(c.app)
		if _, invalid := ir.IsInvalid(err); invalid {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		desc, err := lower.Document(doc)
		if err != nil {
			t.Fatal(err)
		}
		opts := optionsFor(t, doc, desc)
		golden, err := gen.Generate(desc, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Runtime, opts.RuntimeGoMod, opts.GoSum = filepath.ToSlash(repo), goMod, goSum
		files, err := gen.Generate(desc, opts)
		if err != nil {
			t.Fatal(err)
		}
		for p, b := range files {
			if p != gen.FileGoMod && p != gen.FileGoSum && !bytes.Equal(b, golden[p]) {
				t.Errorf("%s: %s depends on the runtime's module files", c.name, p)
			}
			writeFile(t, filepath.Join(work, c.name, filepath.FromSlash(p)), b)
		}
		valid = append(valid, built{c, desc, opts})
	}
	if len(valid) < 6 {
		t.Fatalf("%d valid cases, want at least 6", len(valid))
	}
	run := func(dir string, args ...string) string {
		out, err := servicetest.GoCommand(dir, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}
	for _, b := range valid {
		run(filepath.Join(work, b.name), "vet", "./...")
		deps := strings.Fields(run(filepath.Join(work, b.name), "list", "-deps", "."))
		links(t, b, deps)
	}
	drift(t, work, valid, goSum, run)
}

// links checks that a case's service links the package of every kind its
// description names and of no other kind lowering knows, and pgx exactly
// when its state or a store lives in PostgreSQL.
func links(t *testing.T, b built, deps []string) {
	t.Helper()
	used := map[string]bool{}
	for _, p := range b.desc.Providers {
		used[reflect.TypeOf(p.Kind).PkgPath()] = true
	}
	for _, tool := range b.desc.Tools {
		if tool.Kind != nil {
			used[reflect.TypeOf(tool.Kind).PkgPath()] = true
		}
	}
	postgres := b.desc.Service.State.Kind == app.StatePostgres
	for _, s := range b.desc.Stores {
		if s.Kind != nil {
			used[reflect.TypeOf(s.Kind).PkgPath()] = true
			postgres = postgres || s.Kind.StoreKind() == kind.StorePGVector
		}
	}
	known := map[string]bool{}
	for _, k := range lower.ProviderKinds {
		known[reflect.TypeOf(k).PkgPath()] = true
	}
	for _, k := range lower.ToolKinds {
		if k != nil {
			known[reflect.TypeOf(k).PkgPath()] = true
		}
	}
	for _, k := range lower.StoreKinds {
		known[reflect.TypeOf(k).PkgPath()] = true
	}
	for pkg := range known {
		if got := slices.Contains(deps, pkg); got != used[pkg] {
			t.Errorf("%s: links %s = %v, want %v (its description names the kind: %v)", b.name, pkg, got, used[pkg], used[pkg])
		}
	}
	pgx := slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, "github.com/jackc/pgx") })
	if pgx != postgres {
		t.Errorf("%s: links pgx = %v, want %v", b.name, pgx, postgres)
	}
	openai := slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, "github.com/openai/openai-go") })
	if want := used["github.com/aidgen/aid/runtime/gateway/openaicompat"]; openai != want {
		t.Errorf("%s: links openai-go = %v, want %v", b.name, openai, want)
	}
	claude := slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, "github.com/anthropics/anthropic-sdk-go") })
	if want := used["github.com/aidgen/aid/runtime/gateway/anthropic"]; claude != want {
		t.Errorf("%s: links anthropic-sdk-go = %v, want %v", b.name, claude, want)
	}
	// Features as well as kinds: CEL only with conditions to compile (an
	// approval rule's When, a cel guardrail), through
	// Description.Conditions.
	cel := slices.ContainsFunc(deps, func(d string) bool {
		return strings.HasPrefix(d, "cel.dev/") || strings.HasPrefix(d, "github.com/google/cel-go")
	})
	if want := b.desc.Conditions != nil; cel != want {
		t.Errorf("%s: links CEL = %v, want %v (its rules or guardrails have conditions: %v)", b.name, cel, want, want)
	}
	if want := b.desc.Conditions != nil; slices.Contains(deps, "github.com/aidgen/aid/runtime/agents/policy/cel") != want {
		t.Errorf("%s: links runtime/agents/policy/cel = %v, want %v", b.name, !want, want)
	}
	// The text analyzer (runtime/analysis, the Snowball stemmer) only for a
	// store that keeps a lexical index (memory, pgvector) or a fake
	// provider that embeds (fake.Kind.Analyzer, set by lowering); gonum's
	// BLAS kernels only for a memory store, and nothing else of gonum.
	analyzer := used["github.com/aidgen/aid/runtime/retrieval/memory"] || used["github.com/aidgen/aid/runtime/retrieval/pgvector"]
	for _, p := range b.desc.Providers {
		if k, ok := p.Kind.(fake.Kind); ok && k.Analyzer != nil {
			analyzer = true
		}
	}
	for _, f := range []struct {
		prefix string
		want   bool
	}{
		{"github.com/aidgen/aid/runtime/analysis", analyzer},
		{"github.com/kljensen/snowball/", analyzer},
		{"gonum.org/v1/gonum/", used["github.com/aidgen/aid/runtime/retrieval/memory"]},
	} {
		if got := slices.ContainsFunc(deps, func(d string) bool { return strings.HasPrefix(d, f.prefix) }); got != f.want {
			t.Errorf("%s: links %s = %v, want %v", b.name, f.prefix, got, f.want)
		}
	}
	for _, d := range deps {
		blas := d == "gonum.org/v1/gonum/blas" || strings.HasPrefix(d, "gonum.org/v1/gonum/blas/") || strings.HasPrefix(d, "gonum.org/v1/gonum/internal/")
		if strings.HasPrefix(d, "gonum.org/v1/gonum/") && !blas {
			t.Errorf("%s: links %s; of gonum, a service links only the BLAS kernels of its memory stores (the statistics are the eval's)", b.name, d)
		}
	}
	// A service runs no eval: it links no eval package (the evals are not
	// in its description).
	for _, d := range deps {
		for _, p := range []string{"github.com/aidgen/aid/runtime/eval", "github.com/aidgen/aid/runtime/app/appeval"} {
			if d == p || (strings.HasPrefix(d, p+"/") && d != "github.com/aidgen/aid/runtime/eval/dataset") {
				t.Errorf("%s: links %s, and a service runs no eval", b.name, d)
			}
		}
	}
}

// drift compiles a program holding every valid case's aid_gen.go literal,
// each in a package of its own, which compares it with what lowering the
// case's app file gives.
func drift(t *testing.T, work string, valid []built, goSum []byte, run func(string, ...string) string) {
	t.Helper()
	var imports, checks strings.Builder
	for i, b := range valid {
		pkg := fmt.Sprintf("case%d", i)
		lit, err := os.ReadFile(filepath.Join(work, b.name, gen.FileDesc))
		if err != nil {
			t.Fatal(err)
		}
		lit = bytes.Replace(lit, []byte("\npackage main\n"), []byte("\npackage "+pkg+"\n"), 1)
		writeFile(t, filepath.Join(work, "drift", pkg, "aid_gen.go"), lit)
		writeFile(t, filepath.Join(work, "drift", pkg, "export.go"), []byte("package "+pkg+"\n\nimport \"github.com/aidgen/aid/runtime/app\"\n\n// Description exports the literal.\nfunc Description() app.Description { return description() }\n"))
		fmt.Fprintf(&imports, "\t%s \"github.com/aidgen/aid/gen/drift/%s\"\n", pkg, pkg)
		dir := ""
		if len(b.opts.Files) > 0 {
			dir = path.Join(gen.DirFiles, b.opts.AppDir)
		}
		fmt.Fprintf(&checks, "\tcheck(%q, %q, %q, %s.Description())\n", b.name, b.app, dir, pkg)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	program := `package main

import (
	"fmt"
	"os"
	"reflect"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/app"
` + imports.String() + `)

var failed bool

func main() {
	if err := os.Chdir(` + fmt.Sprintf("%q", root) + `); err != nil {
		panic(err)
	}
` + checks.String() + `	if failed {
		os.Exit(1)
	}
}

func check(name, path, dir string, got app.Description) {
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
	want.Dir = dir // the service's files are its embedded copies
	if !reflect.DeepEqual(want, got) {
		fmt.Printf("%s: the generated literal differs from lowering (-lower +literal):\n%s\n", name, cmp.Diff(want, got))
		failed = true
		return
	}
	fmt.Println(name, "ok")
}
`
	writeFile(t, filepath.Join(work, "drift", "main.go"), []byte(program))
	// The drift module's path is under the runtime's, so that it may
	// import internal/lower; its requirements are a service's.
	mod, err := os.ReadFile(filepath.Join(work, valid[0].name, gen.FileGoMod))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(mod), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "module ") {
			lines[i] = "module github.com/aidgen/aid/gen/drift"
		}
	}
	writeFile(t, filepath.Join(work, "drift", "go.mod"), []byte(strings.Join(lines, "\n")))
	writeFile(t, filepath.Join(work, "drift", "go.sum"), goSum)
	out := run(filepath.Join(work, "drift"), "run", ".")
	for _, b := range valid {
		if !strings.Contains(out, b.name+" ok") {
			t.Errorf("drift program did not check %s:\n%s", b.name, out)
		}
	}
}
