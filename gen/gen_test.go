package gen_test

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/dave/jennifer/jen"
	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/internal/depcheck"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/gen")

// goldenCase is a folder of testdata/gen: the app file (app.cue, or the
// repository-relative path in source) and the files it generates (want/).
type goldenCase struct {
	name, app, want string
}

func cases(t *testing.T) []goldenCase {
	t.Helper()
	root := repoRoot(t)
	dirs, err := os.ReadDir(filepath.Join(root, "testdata", "gen"))
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenCase
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		dir := filepath.Join(root, "testdata", "gen", d.Name())
		c := goldenCase{name: d.Name(), app: filepath.Join(dir, "app.cue"), want: filepath.Join(dir, "want")}
		if src, err := os.ReadFile(filepath.Join(dir, "source")); err == nil {
			c.app = filepath.Join(root, filepath.FromSlash(strings.TrimSpace(string(src))))
		}
		out = append(out, c)
	}
	if len(out) < 5 {
		t.Fatalf("found %d golden cases, want at least 5", len(out))
	}
	return out
}

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// goldenRuntime stands, in the goldens, for the absolute path of the aid
// checkout that aidgen build writes into go.mod's replace; TestGoldensBuild
// builds with the real one.
const goldenRuntime = "/src/aid"

// optionsFor are the options aidgen build would use from a source checkout
// (the application's files read and laid out, go.mod's replace), without
// the runtime's module files (which the build test adds), so that a
// dependency bump of the runtime does not rewrite every golden.
func optionsFor(t testing.TB, doc *ir.Document, desc app.Description) gen.Options {
	t.Helper()
	files, err := desc.ReadFiles(kind.DirFiles(doc.Dir))
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(doc.Dir)
	if err != nil {
		t.Fatal(err)
	}
	opts := gen.Options{Runtime: goldenRuntime}
	if opts.Files, opts.AppDir, err = gen.LayOut(files, filepath.ToSlash(abs)); err != nil {
		t.Fatal(err)
	}
	return opts
}

// descDir is the Dir the generated literal holds: the application's
// directory in the embedded tree.
func descDir(opts gen.Options) string {
	if len(opts.Files) == 0 {
		return ""
	}
	return path.Join(gen.DirFiles, opts.AppDir)
}

func load(t testing.TB, path string) *ir.Document {
	t.Helper()
	doc, err := ir.Load(path)
	if err != nil {
		t.Fatalf("loading %s: %v", path, err)
	}
	return doc
}

// describe loads and lowers an app file, as aidgen build does before it
// generates.
func describe(t testing.TB, path string) app.Description {
	t.Helper()
	desc, err := lower.Document(load(t, path))
	if err != nil {
		t.Fatal(err)
	}
	return desc
}

// TestGolden generates every case twice, checks the bytes are the same,
// and compares them with the case's want/ folder (rewritten by -update).
func TestGolden(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			doc := load(t, c.app)
			opts := optionsFor(t, doc, describe(t, c.app))
			got, err := gen.Generate(describe(t, c.app), opts)
			if err != nil {
				t.Fatal(err)
			}
			again, err := gen.Generate(describe(t, c.app), opts)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Fatalf("two builds of the same file differ (-first +second):\n%s", diff)
			}
			for p, b := range got {
				if gen.FileKind(p) == gen.Copied {
					continue // the application's bytes
				}
				if !bytes.HasPrefix(b, []byte("// ")) {
					t.Errorf("%s does not open with a comment header", p)
				}
				if gen.FileKind(p) == gen.Owned && !bytes.Contains(b, []byte(gen.Header)) {
					t.Errorf("%s lacks the header %q", p, gen.Header)
				}
				if bytes.Contains(b, []byte(repoRoot(t))) {
					t.Errorf("%s names the absolute path %s", p, repoRoot(t))
				}
			}
			if *update {
				if err := os.RemoveAll(c.want); err != nil {
					t.Fatal(err)
				}
				for p, b := range got {
					target := filepath.Join(c.want, filepath.FromSlash(p))
					if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(target, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			want := readTree(t, c.want)
			if diff := cmp.Diff(keys(want), keys(got)); diff != "" {
				t.Errorf("generated files (-want +got):\n%s", diff)
			}
			for p, w := range want {
				if diff := cmp.Diff(string(w), string(got[p])); diff != "" && got[p] != nil {
					t.Errorf("%s (-want +got):\n%s", p, diff)
				}
			}
		})
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s (run go test ./gen -update to create it): %v", dir, err)
	}
	return out
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestLinksNoCUE keeps the generator free of CUE and of the IR: it reads a
// description, which aidgen build lowers first, so that generating a
// service does not link the 96 packages of CUE's evaluator. Nor does it
// link a kind: the description holds the kinds' values, and Literal spells
// them by reflection.
func TestLinksNoCUE(t *testing.T) {
	for _, dep := range depcheck.Deps(t, "github.com/aidgen/aid/gen") {
		switch {
		case strings.HasPrefix(dep, "cuelang.org/"), dep == "github.com/aidgen/aid/ir", dep == "github.com/aidgen/aid/internal/lower",
			strings.HasPrefix(dep, "github.com/openai/"), strings.HasPrefix(dep, "github.com/jackc/"):
			t.Errorf("gen links %s", dep)
		}
	}
}

// TestLiteralRefuses checks that a value a literal cannot hold is an error
// naming where it is, never a silently dropped field.
func TestLiteralRefuses(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"func", struct{ F func() }{F: func() {}}, ".F is a func"},
		{"chan", struct{ C chan int }{C: make(chan int)}, ".C is a chan"},
		{"func in an interface", struct{ I any }{I: func() {}}, ".I is a func"},
		{"unexported", struct{ x int }{x: 1}, ".x is unexported"},

		{"nan float", struct{ F float64 }{F: nan}, ".F is NaN"},
		{"nan in a pointer", app.Description{Agents: nil, Models: nil, Evals: []app.Eval{{Thresholds: nil, Judge: nil}}, Providers: []app.Provider{{Kind: fake.Kind{AnswerKey: &fake.AnswerKeyFile{Accuracy: nan}}}}}, "Providers[0].Kind.AnswerKey.Accuracy is NaN"},
		{"nil", nil, "nil interface"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gen.Literal(tt.v)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Literal: error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestLiteralSpelling checks the spellings a reader sees: durations in
// their largest unit, pointers to basic values through new, maps sorted,
// an empty slice kept apart from a nil one, and what an interface holds
// with its own type, so that it keeps it.
func TestLiteralSpelling(t *testing.T) {
	half := 0.5
	v := struct {
		D, E, F time.Duration
		P       *float64
		M       map[string]string
		Empty   []string
		Nil     []string
		Text    string
		Kind    any
		Ptr     any
		Named   any
		Zero    any
		NilPtr  any
		None    any
	}{D: 90 * time.Second, E: time.Hour, F: 1500 * time.Microsecond, P: &half, M: map[string]string{"b": "2", "a": "1", "c": "3"}, Empty: []string{}, Text: "a\nb",
		Kind: jen.Options{Open: "(", Multi: true}, Ptr: &jen.Options{Close: ")"}, Named: time.Minute, Zero: time.Duration(0), NilPtr: (*jen.Options)(nil)}
	code, err := gen.Literal(v)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(strings.Fields(strings.ReplaceAll(fmtCode(code), ",", " ")), " ")
	for _, want := range []string{
		"D: 90 * time.Second", "E: time.Hour", "F: 1500 * time.Microsecond",
		"P: new(float64(0.5))", `M: map[string]string{ "a": "1" "b": "2" "c": "3" }`, "Empty: []string{}", "Text: `a\nb`",
		`Kind: jen.Options{ Open: "(" Multi: true }`, `Ptr: &jen.Options{ Close: ")" }`, "Named: time.Minute", "Zero: time.Duration(0)", "NilPtr: (*jen.Options)(nil)",
	} {
		want = strings.Join(strings.Fields(strings.ReplaceAll(want, ",", " ")), " ")
		if !strings.Contains(got, want) {
			t.Errorf("literal lacks %q:\n%s", want, got)
		}
	}
	for _, zero := range []string{"Nil:", "None:"} {
		if strings.Contains(got, zero) {
			t.Errorf("literal spells the nil field %s\n%s", zero, got)
		}
	}
}

func fmtCode(c jen.Code) string { return fmt.Sprintf("%#v", jen.Null().Add(c)) }
