package cli_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/internal/cli"
)

const buildApp = `name: "shop"
version: "0.1.0"
providers: fake: kind: "fake"
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
tools: lookup: {description: "Look up.", input: {type: "object", properties: id: type: "string", required: ["id"]}}
agents: desk: {model: "m", instructions: "Help.", tools: [TOOLS]}
`

// writeShopApp writes an app file declaring the given go tools (lookup is
// always there) and returns its path.
func writeShopApp(t *testing.T, dir string, extraTools ...string) string {
	t.Helper()
	src := buildApp
	names := []string{`"lookup"`}
	for _, tool := range extraTools {
		src += "tools: " + tool + ": description: \"More.\"\n"
		names = append(names, `"`+tool+`"`)
	}
	src = strings.Replace(src, "TOOLS", strings.Join(names, ", "), 1)
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestBuildWritesAndKeeps builds twice (same bytes, "unchanged"), then
// edits a stub and rebuilds after the app gains a tool: the edited stub is
// untouched, the new tool's stub appears, the generated files follow.
func TestBuildWritesAndKeeps(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "svc")
	app := writeShopApp(t, dir)
	code, stdout, stderr := run(t, "build", app, "-o", out)
	if code != cli.ExitOK {
		t.Fatalf("build: exit %d, stderr %q", code, stderr)
	}
	first := readAll(t, out)
	for _, want := range []string{"go.mod", "go.sum", "main.go", "aid_gen.go", "business/tools_gen.go", "business/lookup_tool.go"} {
		if _, ok := first[want]; !ok {
			t.Errorf("build did not write %s; wrote %v", want, first)
		}
		if !strings.Contains(stdout, filepath.Join(out, filepath.FromSlash(want))) {
			t.Errorf("stdout does not name %s:\n%s", want, stdout)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first["go.mod"], "replace github.com/aidgen/aid => "+filepath.ToSlash(root)+"\n") || strings.Contains(first["go.mod"], dir) {
		t.Errorf("go.mod does not replace the runtime with this checkout's absolute path:\n%s", first["go.mod"])
	}
	if strings.Contains(first["aid_gen.go"], dir) {
		t.Errorf("aid_gen.go names the absolute path %s", dir)
	}

	code, stdout, _ = run(t, "build", app, "-o", out)
	if code != cli.ExitOK || strings.Contains(stdout, "wrote ") {
		t.Fatalf("second build: exit %d, stdout:\n%s", code, stdout)
	}
	if diff := cmp.Diff(first, readAll(t, out)); diff != "" {
		t.Fatalf("a second build changed files (-first +second):\n%s", diff)
	}

	stub := filepath.Join(out, "business", "lookup_tool.go")
	mine := strings.Replace(first["business/lookup_tool.go"], `return "", &kind.DeferredError{Feature: "tool lookup"}`, `_ = kind.DeferredError{}; return "found " + in.ID, nil`, 1)
	if mine == first["business/lookup_tool.go"] {
		t.Fatal("the stub's body was not found to edit")
	}
	if err := os.WriteFile(stub, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	writeShopApp(t, dir, "refund_order")
	code, stdout, stderr = run(t, "build", app, "-o", out)
	if code != cli.ExitOK {
		t.Fatalf("rebuild: exit %d, stderr %q", code, stderr)
	}
	after := readAll(t, out)
	if after["business/lookup_tool.go"] != mine {
		t.Errorf("the team's edited stub was overwritten:\n%s", after["business/lookup_tool.go"])
	}
	if !strings.Contains(stdout, "kept "+stub) {
		t.Errorf("stdout does not say the stub was kept:\n%s", stdout)
	}
	if !strings.Contains(after["business/refund_order_tool.go"], "func RefundOrder(ctx context.Context, in RefundOrderInput) (string, error)") {
		t.Errorf("the new tool's stub is missing or wrong:\n%s", after["business/refund_order_tool.go"])
	}
	if !strings.Contains(after["business/tools_gen.go"], `"refund_order": agents.Typed(RefundOrder)`) {
		t.Errorf("tools_gen.go does not register the new tool:\n%s", after["business/tools_gen.go"])
	}
	leftovers, _ := filepath.Glob(filepath.Join(out, "*", ".*.tmp"))
	top, _ := filepath.Glob(filepath.Join(out, ".*.tmp"))
	if len(leftovers)+len(top) > 0 {
		t.Errorf("temporary files left behind: %v %v", leftovers, top)
	}

	// The tool goes away: its stub stays (it is the team's), and build says so.
	writeShopApp(t, dir)
	code, _, stderr = run(t, "build", app, "-o", out)
	if code != cli.ExitOK || !strings.Contains(stderr, "refund_order_tool.go implements a tool the application no longer declares") {
		t.Errorf("build after removing a tool: exit %d, stderr %q", code, stderr)
	}
}

// TestBuildCheck checks --check: clean after a build, exit 1 with a
// unified diff after an edit of a generated file or a missing one, and
// blind to edits of the team's stubs.
func TestBuildCheck(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "svc")
	app := writeShopApp(t, dir)
	if code, _, stderr := run(t, "build", app, "-o", out); code != cli.ExitOK {
		t.Fatalf("build: exit %d, stderr %q", code, stderr)
	}
	if code, stdout, stderr := run(t, "build", app, "-o", out, "--check"); code != cli.ExitOK || stdout != "" {
		t.Fatalf("check after build: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	stub := filepath.Join(out, "business", "lookup_tool.go")
	if err := os.WriteFile(stub, []byte("package business\n// the team's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := run(t, "build", app, "-o", out, "--check"); code != cli.ExitOK {
		t.Fatalf("check after a stub edit: exit %d, stdout:\n%s", code, stdout)
	}
	main := filepath.Join(out, "main.go")
	b, _ := os.ReadFile(main)
	if err := os.WriteFile(main, []byte(strings.Replace(string(b), "func main() {", "func main() { // edited", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(out, "aid_gen.go")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, "build", app, "-o", out, "--check")
	if code != cli.ExitInvalid {
		t.Fatalf("check after edits: exit %d, want %d", code, cli.ExitInvalid)
	}
	for _, want := range []string{"--- " + main, "+++ " + main, "-func main() { // edited", "+func main() {", "--- /dev/null", "+++ " + filepath.Join(out, "aid_gen.go")} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diff lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "2 generated file(s)") {
		t.Errorf("stderr %q does not count the stale files", stderr)
	}
	if got, _ := os.ReadFile(main); !strings.Contains(string(got), "// edited") {
		t.Error("--check wrote main.go")
	}
}

// deskApp writes an application that reads files when it serves: an agent
// script, a fixture tool and documents, one of them in a sibling directory.
func deskApp(t *testing.T, dir string) string {
	t.Helper()
	files := map[string]string{
		"app/app.cue": `name: "desk"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: {
	"fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
	"fake-embed-2024-01-01": {provider: "fake", kind: "embedding", dimensions: 16, cost: inputPer1kUSD: 0}
}
aliases: {m: "fake-2024-01-01", embed: "fake-embed-2024-01-01"}
tools: lookup: {description: "Look up.", implementation: {kind: "fixture", file: "fixtures/lookup.json"}}
stores: kb: {}
retrievers: kb: {source: files: ["docs/*.md", "../shared/*.md"], embedModel: "embed", store: "kb"}
agents: desk: {model: "m", instructions: "Help.", tools: ["lookup"], retrievers: ["kb"]}
`,
		"app/script.json":          `{"agents": {"desk": [{"text": "hello"}]}}`,
		"app/fixtures/lookup.json": `[{"args": {}, "result": "found"}]`,
		"app/docs/a.md":            "# A\n\nAlpha.\n",
		"app/docs/b.md":            "# B\n\nBeta.\n",
		"shared/c.md":              "# C\n\nGamma.\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "app", "app.cue")
}

// TestBuildCopiesFiles checks the copies of the application's files under
// app/, which the service embeds: every file it reads when it serves, laid
// out so that a name reaching above the app file's directory stays inside
// the tree (the description's Dir is the app file's directory in it), a
// copy the application no longer reads removed by the next build and
// reported by --check, and nothing else copied.
func TestBuildCopiesFiles(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "svc")
	app := deskApp(t, dir)
	if code, _, stderr := run(t, "build", app, "-o", out); code != cli.ExitOK {
		t.Fatalf("build: exit %d, stderr %q", code, stderr)
	}
	got := readAll(t, out)
	var copies []string
	for p := range got {
		if strings.HasPrefix(p, "app/") {
			copies = append(copies, p)
		}
	}
	slices.Sort(copies)
	want := []string{"app/app/docs/a.md", "app/app/docs/b.md", "app/app/fixtures/lookup.json", "app/app/script.json", "app/shared/c.md"}
	if diff := cmp.Diff(want, copies); diff != "" {
		t.Errorf("copies (-want +got):\n%s", diff)
	}
	if got["app/shared/c.md"] != "# C\n\nGamma.\n" {
		t.Errorf("the copy of shared/c.md holds %q", got["app/shared/c.md"])
	}
	if !strings.Contains(got["aid_gen.go"], `Dir:     "app/app",`) || !strings.Contains(got["main.go"], "//go:embed all:app") {
		t.Errorf("the service does not read its embedded copies:\n%s\n%s", got["aid_gen.go"], got["main.go"])
	}

	if err := os.Remove(filepath.Join(dir, "app", "docs", "b.md")); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(out, "app", "stray.txt")
	if err := os.WriteFile(stray, []byte("not the application's"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := run(t, "build", app, "-o", out, "--check")
	if code != cli.ExitInvalid || !strings.Contains(stdout, "--- "+filepath.Join(out, "app", "app", "docs", "b.md")) || !strings.Contains(stdout, "--- "+stray) {
		t.Errorf("--check with a stale and a stray copy: exit %d, stdout:\n%s", code, stdout)
	}
	code, stdout, stderr := run(t, "build", app, "-o", out)
	if code != cli.ExitOK || !strings.Contains(stdout, "removed "+stray) {
		t.Fatalf("rebuild: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, gone := range []string{stray, filepath.Join(out, "app", "app", "docs", "b.md")} {
		if _, err := os.Stat(gone); err == nil {
			t.Errorf("%s is still there", gone)
		}
	}
	if code, stdout, _ := run(t, "build", app, "-o", out, "--check"); code != cli.ExitOK {
		t.Errorf("--check after the rebuild: exit %d:\n%s", code, stdout)
	}
}

// TestBuildRuntimeVersion: a published version is required without a
// replace and without the checkout's go.sum.
func TestBuildRuntimeVersion(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "svc")
	if code, _, stderr := run(t, "build", writeShopApp(t, dir), "-o", out, "--runtime-version", "v0.2.0"); code != cli.ExitOK {
		t.Fatalf("build: exit %d, stderr %q", code, stderr)
	}
	got := readAll(t, out)
	if !strings.Contains(got["go.mod"], "require github.com/aidgen/aid v0.2.0\n") || strings.Contains(got["go.mod"], "replace") {
		t.Errorf("go.mod:\n%s", got["go.mod"])
	}
	if _, ok := got["go.sum"]; ok {
		t.Error("go.sum copies a checkout's, which the service does not build against")
	}
}

func TestBuildErrors(t *testing.T) {
	dir := t.TempDir()
	app := writeShopApp(t, dir)
	bad := filepath.Join(dir, "bad.cue")
	if err := os.WriteFile(bad, []byte(strings.Replace(buildApp, "TOOLS", `"nope"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no output", []string{"build", app}, cli.ExitUsage, "needs an output directory"},
		{"no file", []string{"build", "-o", dir}, cli.ExitUsage, "needs one application file"},
		{"invalid app", []string{"build", bad, "-o", filepath.Join(dir, "x")}, cli.ExitInvalid, "bad.cue:7:"},
		{"not a checkout", []string{"build", app, "-o", filepath.Join(dir, "y"), "--runtime", dir}, cli.ExitUsage, "is not an aid checkout"},
		{"a version and a checkout", []string{"build", app, "-o", filepath.Join(dir, "z"), "--runtime-version", "v0.2.0", "--runtime", dir}, cli.ExitUsage, "--runtime-version requires a published runtime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := run(t, tt.args...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.code, tt.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("an invalid app created its output directory")
	}
}

// BenchmarkBuild measures aidgen build end to end (load, validate,
// generate, write) for the support-desk example and a generated app of
// 200 agents, each with a go tool; the target is under a second.
func BenchmarkBuild(b *testing.B) {
	root, _ := filepath.Abs("../..")
	dir := b.TempDir()
	var big strings.Builder
	big.WriteString(`name: "big"
version: "0.1.0"
providers: fake: kind: "fake"
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
`)
	for i := range 200 {
		fmt.Fprintf(&big, "tools: tool_%03d: {description: \"Tool %d.\", input: {type: \"object\", properties: {id: {type: \"string\"}, n: {type: \"integer\"}, tags: {type: \"array\", items: type: \"string\"}}, required: [\"id\"]}}\n", i, i)
		fmt.Fprintf(&big, "agents: agent_%03d: {model: \"m\", instructions: \"Agent %d.\", tools: [\"tool_%03d\"]}\n", i, i, i)
	}
	bigApp := filepath.Join(dir, "big.cue")
	if err := os.WriteFile(bigApp, []byte(big.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, app string }{
		{"support-desk", filepath.Join(root, "examples", "support-desk", "app.cue")},
		{"200-agents", bigApp},
	} {
		b.Run(bc.name, func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "svc")
			for b.Loop() {
				if code := cli.Main([]string{"build", bc.app, "-o", out}, strings.NewReader(""), io.Discard, io.Discard); code != cli.ExitOK {
					b.Fatalf("build: exit %d", code)
				}
			}
		})
	}
}

// TestBuildInARepositoryReplacesRelatively: a service written into a git
// repository that holds the aid checkout too (a repository vendoring aid,
// here as a copy of this checkout's module files) replaces the runtime by
// a relative path, so the repository can be committed and built anywhere;
// into a repository without the checkout, the replace stays absolute and
// build says how to make it committable; outside any repository it stays
// absolute and build says nothing.
func TestBuildInARepositoryReplacesRelatively(t *testing.T) {
	repo := t.TempDir()
	if err := os.Mkdir(filepath.Join(repo, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	vendored := filepath.Join(repo, "third_party", "aid")
	if err := os.MkdirAll(vendored, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(vendored, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	app := writeShopApp(t, t.TempDir())
	out := filepath.Join(repo, "services", "shop")
	code, _, stderr := run(t, "build", app, "-o", out, "--runtime", vendored)
	if code != cli.ExitOK {
		t.Fatalf("build: exit %d, stderr %q", code, stderr)
	}
	mod, err := os.ReadFile(filepath.Join(out, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mod), "replace github.com/aidgen/aid => ../../third_party/aid\n") || strings.Contains(stderr, "note:") {
		t.Errorf("go.mod should replace the runtime by its path relative to the service, quietly; stderr %q, go.mod:\n%s", stderr, mod)
	}

	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(repo, "services", "other")
	code, _, stderr = run(t, "build", app, "-o", out, "--runtime", root)
	mod, _ = os.ReadFile(filepath.Join(out, "go.mod"))
	if code != cli.ExitOK || !strings.Contains(string(mod), "replace github.com/aidgen/aid => "+filepath.ToSlash(root)+"\n") ||
		!strings.Contains(stderr, "outside the repository at "+repo+": the service builds on this machine only; to commit it, give --runtime-version") {
		t.Errorf("a checkout outside the repository: exit %d, stderr %q, go.mod:\n%s", code, stderr, mod)
	}

	out = filepath.Join(t.TempDir(), "svc")
	code, _, stderr = run(t, "build", app, "-o", out, "--runtime", vendored)
	mod, _ = os.ReadFile(filepath.Join(out, "go.mod"))
	if code != cli.ExitOK || !strings.Contains(string(mod), "replace github.com/aidgen/aid => "+filepath.ToSlash(vendored)+"\n") || strings.Contains(stderr, "note:") {
		t.Errorf("outside a repository: exit %d, stderr %q, go.mod:\n%s", code, stderr, mod)
	}
}
