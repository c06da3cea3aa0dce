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
	for _, bad := range featureBreaches(imports) {
		t.Error(bad)
	}
}

// TestLayeringBreaches checks that the rule above sees a breach: a runtime
// package importing a module-root internal package, such a package
// importing the runtime back, a lower layer importing a higher one, and
// the retrieval package importing a store kind under it, but not the leaf
// a lower layer may import under a higher one's directory nor a store
// kind importing the retrieval package.
func TestLayeringBreaches(t *testing.T) {
	got := layeringBreaches(map[string][]string{
		module + "/runtime/agents":             {module + "/internal/pgutil", module + "/runtime/internal/jsonschemas"},
		module + "/internal/pgutil":            {module + "/runtime/gateway"},
		module + "/runtime/gateway":            {"context"},
		module + "/runtime/analysis":           nil,
		module + "/gen":                        {module + "/runtime/app"},
		module + "/runtime/gateway/fake":       {module + "/runtime/eval", module + "/runtime/eval/dataset", module + "/runtime/gateway"},
		module + "/runtime/retrieval/pgvector": {module + "/runtime/agents/pgstore", module + "/runtime/retrieval", module + "/runtime/kind"},
		module + "/runtime/retrieval":          {module + "/runtime/retrieval/memory", module + "/runtime/kind"},
		module + "/runtime/retrieval/memory":   {module + "/runtime/retrieval", module + "/runtime/analysis"},
	})
	want := []string{
		module + "/internal/pgutil, a module-root internal package, imports the runtime package " + module + "/runtime/gateway",
		module + "/runtime/agents imports the module-root internal package " + module + "/internal/pgutil; move it under runtime/internal/ or make it public",
		module + "/runtime/gateway/fake, under runtime/gateway, imports " + module + "/runtime/eval, a layer above it; move what they share down",
		module + "/runtime/retrieval, under runtime/retrieval, imports " + module + "/runtime/retrieval/memory, a layer above it; move what they share down",
		module + "/runtime/retrieval/pgvector, under runtime/retrieval, imports " + module + "/runtime/agents/pgstore, a layer above it; move what they share down",
	}
	if !slices.Equal(got, want) {
		t.Errorf("breaches:\n got %q\nwant %q", got, want)
	}
}

// lowerLayers are the runtime's lower layers, each with the higher
// packages it must not import (a directory stands for the packages under
// it), and the exceptions: leaves kept under a higher package's directory
// because they hold its format, importing nothing of it.
var lowerLayers = []struct {
	dir           string
	above, except []string
	// exact restricts the entry to the package dir itself, not those
	// under it.
	exact bool
}{
	// The model gateway serves every layer above it; its fake provider
	// reads an eval dataset's format (runtime/eval/dataset), never the
	// eval, which links the statistics.
	{dir: "runtime/gateway", above: []string{"runtime/retrieval", "runtime/agents", "runtime/eval", "runtime/app", "runtime/service", "runtime/serve"}, except: []string{"runtime/eval/dataset"}},
	// Retrieval serves the agents and the eval; a store kind that holds
	// agents' memory says where (retrieval.DatabaseKind), and the
	// application opens it (serve/postgres.OpenMemory).
	{dir: "runtime/retrieval", above: []string{"runtime/agents", "runtime/eval", "runtime/app", "runtime/service", "runtime/serve", "runtime/jobs"}},
	// The retrieval package itself, whose types every layer above names,
	// builds stores through their kinds and opens none of its own: the
	// store kinds are packages under it that a program links only when it
	// names them (issue 35).
	{dir: "runtime/retrieval", exact: true, above: []string{"runtime/retrieval/memory", "runtime/retrieval/pgvector", "runtime/retrieval/storetest"}},
}

// layeringBreaches returns, sorted, the edges of imports (package → what it
// imports) that break the layering: a package under runtime/, gen/ or ir/
// importing a module-root internal/ package, a module-root internal
// package the runtime links importing the runtime, and a lower layer of
// the runtime importing one above it (lowerLayers).
func layeringBreaches(imports map[string][]string) []string {
	under := func(p, dir string) bool { return p == module+"/"+dir || strings.HasPrefix(p, module+"/"+dir+"/") }
	underAny := func(p string, dirs []string) bool {
		return slices.ContainsFunc(dirs, func(d string) bool { return under(p, d) })
	}
	var bad []string
	for p, imps := range imports {
		for _, imp := range imps {
			switch {
			case (under(p, "runtime") || under(p, "gen") || under(p, "ir")) && under(imp, "internal"):
				bad = append(bad, p+" imports the module-root internal package "+imp+"; move it under runtime/internal/ or make it public")
			case under(p, "internal") && under(imp, "runtime"):
				bad = append(bad, p+", a module-root internal package, imports the runtime package "+imp)
			}
			for _, l := range lowerLayers {
				in := under(p, l.dir)
				if l.exact {
					in = p == module+"/"+l.dir
				}
				if in && underAny(imp, l.above) && !underAny(imp, l.except) {
					bad = append(bad, p+", under "+l.dir+", imports "+imp+", a layer above it; move what they share down")
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// featureLinks are the third-party packages a generated service links only
// when its application uses the feature that needs them, each with the
// runtime packages every service links (or a service links for every
// application of a kind), which therefore must not link them, directly or
// through another package. internal/cases' TestCasesBuild checks what each
// case's service links; this holds the packages those services are made
// of, so that the cut cannot come back through a new import.
var featureLinks = []struct {
	prefix, feature string
	not             []string
}{
	{"gonum.org/v1/gonum/", "the memory store's kernels (runtime/retrieval/memory) or the eval's statistics",
		[]string{"runtime/retrieval", "runtime/agents", "runtime/app", "runtime/service", "runtime/serve", "runtime/gateway/fake"}},
	{"github.com/kljensen/snowball/", "the text analyzer (runtime/analysis) of a lexical index or of the fake's embeddings",
		[]string{"runtime/retrieval", "runtime/agents", "runtime/app", "runtime/service", "runtime/serve", "runtime/gateway/fake"}},
	{"cel.dev/", "conditions (runtime/agents/policy/cel)",
		[]string{"runtime/agents", "runtime/app", "runtime/service", "runtime/serve"}},
}

// featureBreaches returns, sorted, what featureLinks forbids that imports
// (package → what it imports) links: a package of a feature's not list that
// reaches a package of the feature, with the first path found.
func featureBreaches(imports map[string][]string) []string {
	var bad []string
	for _, f := range featureLinks {
		for _, p := range f.not {
			from := module + "/" + p
			if _, ok := imports[from]; !ok {
				continue
			}
			// Breadth first, so that the path reported is a shortest one.
			prev := map[string]string{from: ""}
			queue := []string{from}
			for len(queue) > 0 {
				cur := queue[0]
				queue = queue[1:]
				if strings.HasPrefix(cur, f.prefix) {
					path := []string{cur}
					for at := prev[cur]; at != ""; at = prev[at] {
						path = append(path, at)
					}
					slices.Reverse(path)
					bad = append(bad, from+" links "+cur+", which only "+f.feature+" needs: "+strings.Join(path, " → "))
					break
				}
				for _, imp := range imports[cur] {
					if _, seen := prev[imp]; !seen {
						prev[imp] = cur
						queue = append(queue, imp)
					}
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// TestFeatureBreaches checks that the rule above sees a feature's package
// linked through another one, and not one a package of no not list links.
func TestFeatureBreaches(t *testing.T) {
	got := featureBreaches(map[string][]string{
		module + "/runtime/retrieval":        {module + "/runtime/analysis", "context"},
		module + "/runtime/analysis":         {"github.com/kljensen/snowball/english"},
		module + "/runtime/retrieval/memory": {"gonum.org/v1/gonum/blas/blas32"},
		module + "/runtime/gateway/fake":     {"context"},
	})
	want := []string{
		module + "/runtime/retrieval links github.com/kljensen/snowball/english, which only the text analyzer (runtime/analysis) of a lexical index or of the fake's embeddings needs: " +
			module + "/runtime/retrieval → " + module + "/runtime/analysis → github.com/kljensen/snowball/english",
	}
	if !slices.Equal(got, want) {
		t.Errorf("breaches:\n got %q\nwant %q", got, want)
	}
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
