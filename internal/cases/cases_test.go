package cases_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/agents/tools/sandbox"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/serve"
)

var update = flag.Bool("update", false, "rewrite what the cases under testdata/cases expect")

// root is where the cases are, relative to the repository root, where the
// tests run so that paths read as `aidgen vet` prints them from there.
const root = "testdata/cases"

// goldenRuntime stands, in a case's gen/go.mod, for the absolute path of
// the checkout aidgen build writes into go.mod's replace; TestCasesBuild
// builds with the real one.
const goldenRuntime = "/src/aid"

// testCase is one folder of testdata/cases.
type testCase struct {
	name string // the folder's name
	dir  string // the folder, relative to the repository root
	app  string // the app file, relative to the repository root
}

// cases lists the cases, from the repository root.
func cases(t testing.TB) []testCase {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var out []testCase
	for _, e := range entries {
		dir := path.Join(root, e.Name())
		c := testCase{name: e.Name(), dir: dir, app: path.Join(dir, "app.cue")}
		if src, err := os.ReadFile(filepath.FromSlash(path.Join(dir, "source"))); err == nil {
			c.app = strings.TrimSpace(string(src))
		} else if _, err := os.Stat(filepath.FromSlash(c.app)); err != nil {
			continue // shared inputs, such as files/
		}
		out = append(out, c)
	}
	if len(out) < 60 {
		t.Fatalf("found %d cases under %s, want at least 60", len(out), root)
	}
	return out
}

// TestCases checks every case through every stage: vet's output, and, for
// a valid application, the document it loads to, the files aidgen build
// writes (twice, to the same bytes), the runtime it assembles into, and
// the answers of its service.
func TestCases(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	repo, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			doc := vet(t, c)
			if doc == nil {
				return
			}
			b, err := json.MarshalIndent(doc, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, path.Join(c.dir, "document.json"), append(b, '\n'))
			desc, err := lower.Document(doc)
			if err != nil {
				t.Fatal(err)
			}
			generated(t, c, doc, desc, repo)
			assembled(t, desc, lower.Evals(doc))
			requests(t, c, desc)
		})
	}
}

// vet runs `aidgen vet` on the case and compares what it prints with
// vet.txt. It returns the loaded document of a valid application, nil for
// an invalid one, whose every error must carry its position.
func vet(t *testing.T, c testCase) *ir.Document {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main([]string{"vet", c.app}, strings.NewReader(""), &out, &errOut)
	golden(t, path.Join(c.dir, "vet.txt"), append(out.Bytes(), errOut.Bytes()...))
	if code == cli.ExitOK {
		if out.String() != c.app+": ok\n" || errOut.Len() > 0 {
			t.Errorf("vet exited 0 but printed %q, %q", out.String(), errOut.String())
		}
		doc, err := ir.Load(c.app)
		if err != nil {
			t.Fatalf("vet says ok, ir.Load says %v", err)
		}
		return doc
	}
	if code != cli.ExitInvalid || out.Len() > 0 {
		t.Fatalf("vet: exit %d, stdout %q; want exit %d and nothing on stdout", code, out.String(), cli.ExitInvalid)
	}
	// Errors are at a position in the app file, or in a file it names
	// under the case's folder (a skill's SKILL.md).
	pos := regexp.MustCompile(`^(` + regexp.QuoteMeta(c.app) + `|` + regexp.QuoteMeta(c.dir) + `/[^:]+):\d+:\d+: `)
	for _, line := range strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n") {
		if !pos.MatchString(line) && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "    ") {
			t.Errorf("error without file:line:col: %q", line)
		}
		if strings.Contains(line, "mem://") {
			t.Errorf("error shows the schema compiler's internal URL: %q", line)
		}
	}
	return nil
}

// optionsFor are the options aidgen build uses from a source checkout:
// the application's files read and laid out, go.mod's replace (standing
// for the checkout as goldenRuntime), without the runtime's module files
// (which TestCasesBuild adds), so that a dependency bump of the runtime
// does not rewrite every case.
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

// generated generates the case's service twice, checks the two are the
// same bytes and name no absolute path, and compares them with gen/.
func generated(t *testing.T, c testCase, doc *ir.Document, desc app.Description, repo string) {
	t.Helper()
	opts := optionsFor(t, doc, desc)
	got, err := gen.Generate(desc, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := gen.Generate(desc, opts)
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
		if bytes.Contains(b, []byte(repo)) {
			t.Errorf("%s names the absolute path %s", p, repo)
		}
	}
	want := filepath.FromSlash(path.Join(c.dir, "gen"))
	if *update {
		if err := os.RemoveAll(want); err != nil {
			t.Fatal(err)
		}
		for p, b := range got {
			writeFile(t, filepath.Join(want, filepath.FromSlash(p)), b)
		}
		return
	}
	wantFiles := readTree(t, want)
	if diff := cmp.Diff(slices.Sorted(maps.Keys(wantFiles)), slices.Sorted(maps.Keys(got))); diff != "" {
		t.Errorf("generated files (-want +got):\n%s", diff)
	}
	for p, w := range wantFiles {
		if g, ok := got[p]; ok {
			if diff := cmp.Diff(string(w), string(g)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", p, diff)
			}
		}
	}
}

// standIns returns the description with what a test cannot have replaced:
// stores in memory rather than in PostgreSQL (runtime/retrieval/pgvector's
// tests open the real kind), and the options with a memory run store and
// ledger, Go code that answers "ok" for every tool implemented in Go or by
// an MCP server, and an environment holding the keys and DSNs the cases
// name.
func standIns(desc app.Description) (app.Description, app.Options, func(string) (string, bool)) {
	for i := range desc.Stores {
		desc.Stores[i].Kind = memory.Kind{}
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "sk-ant-test", "PROXY_ANTHROPIC_KEY": "sk-ant-proxy", "REMOTE_API_KEY": "sk-test", "DATABASE_URL": "postgres://test", "NOTIFY_TOKEN": "t", "TRACKING_URL": "https://tracking.example.com/track", "DESK_TOKEN": "desk-token"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	opts := app.Options{
		RunStore:        agents.NewInMemoryStore(),
		Ledger:          gateway.NewMemoryLedger(),
		Implementations: map[string]agents.Implementation{},
		LookupEnv:       lookup,
	}
	for i, tool := range desc.Tools {
		if _, ok := tool.Kind.(mcp.Kind); ok {
			// An MCP server is not there to connect to: its tools are
			// runtime/agents/tools/mcp's to test, against real servers.
			desc.Tools[i].Kind, tool.Kind = nil, nil
			if desc.Tools[i].Decl.Input == nil {
				desc.Tools[i].Decl.Input = json.RawMessage(`{"type":"object"}`)
			}
		}
		if tool.Kind == nil {
			opts.Implementations[tool.Decl.Name] = agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
		}
	}
	for _, g := range desc.Guardrails {
		if g.Kind == guard.KindGo {
			if opts.GuardrailFuncs == nil {
				opts.GuardrailFuncs = map[string]guard.Func{}
			}
			opts.GuardrailFuncs[g.Func] = func(context.Context, guard.Value) (guard.Finding, error) { return guard.Finding{}, nil }
		}
	}
	return desc, opts, lookup
}

// assembled assembles the case's runtime with its evals, as aidgen eval
// does, and builds each of its evals.
func assembled(t *testing.T, desc app.Description, evals []appeval.Eval) {
	t.Helper()
	desc, opts, _ := standIns(desc)
	a, err := appeval.Assemble(t.Context(), desc, evals, opts)
	if err != nil {
		skipWithoutSandbox(t, err)
		t.Fatal(err)
	}
	defer a.Close()
	for _, name := range a.EvalNames() {
		if _, ok := a.RunsSource(name); ok {
			// Its cases are sampled from recorded runs when it runs.
			if _, err := a.EvalOn(name, &eval.Dataset{Name: name}); err != nil {
				t.Errorf("EvalOn(%s): %v", name, err)
			}
			continue
		}
		if _, err := a.Eval(name); err != nil {
			t.Errorf("Eval(%s): %v", name, err)
		}
	}
}

// skipWithoutSandbox skips a case whose sandbox tool's backend is not
// installed here, saying so, unless CI is set (CI installs bubblewrap).
func skipWithoutSandbox(t *testing.T, err error) {
	t.Helper()
	var ue *sandbox.UnavailableError
	if errors.As(err, &ue) && os.Getenv("CI") == "" {
		t.Skipf("the case's sandbox tool needs bwrap, which is not installed (Debian: apt-get install bubblewrap): %v", err)
	}
}

// request is one request of a case's requests.json and the answer
// expected.
type request struct {
	// Request is the method and the path, such as "POST /v1/chat/completions".
	Request string `json:"request"`
	// Body is the request's JSON body; none when absent.
	Body json.RawMessage `json:"body,omitempty"`
	// Status is the answer's status.
	Status int `json:"status"`
	// Answer is the answer's JSON body, with what varies between runs
	// written as placeholders (varying).
	Answer json.RawMessage `json:"answer"`
}

// requests serves the case's description in process, through serve.Run
// as a generated service does, sends each request of requests.json, and
// compares the answers (rewritten by -update).
func requests(t *testing.T, c testCase, desc app.Description) {
	t.Helper()
	file := filepath.FromSlash(path.Join(c.dir, "requests.json"))
	data, err := os.ReadFile(file)
	if err != nil {
		return // the case has no requests
	}
	var reqs []request
	if err := json.Unmarshal(data, &reqs); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	desc, opts, lookup := standIns(desc)
	ctx, cancel := context.WithCancel(t.Context())
	logs := &servicetest.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- serve.Run(ctx, desc, serve.Options{Implementations: opts.Implementations, GuardrailFuncs: opts.GuardrailFuncs}, serve.Process{Args: []string{"-listen", "127.0.0.1:0"}, LookupEnv: lookup, Stderr: logs})
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the service did not stop")
		}
	}()
	var addr string
	servicetest.WaitFor(t, func() bool {
		line, ok := logs.LogLine("serving")
		if ok {
			addr = line["addr"].(string)
		}
		select {
		case code := <-done:
			done <- code
			if strings.Contains(logs.String(), "sandbox backend bubblewrap is not available") && os.Getenv("CI") == "" {
				t.Skipf("the case's sandbox tool needs bwrap, which is not installed (Debian: apt-get install bubblewrap):\n%s", logs)
			}
			t.Fatalf("the service stopped with %d before serving:\n%s", code, logs)
		default:
		}
		return ok
	})
	client := &http.Client{Timeout: time.Minute}
	for i, r := range reqs {
		method, route, _ := strings.Cut(r.Request, " ")
		var body *bytes.Reader
		if len(r.Body) > 0 {
			body = bytes.NewReader(r.Body)
		}
		var status int
		var got []byte
		if body != nil {
			status, _, got = servicetest.Do(t, client, method, "http://"+addr+route, "", body)
		} else {
			status, _, got = servicetest.Do(t, client, method, "http://"+addr+route, "", nil)
		}
		answer, err := varying(got)
		if err != nil {
			t.Fatalf("%s: the answer is not JSON: %v\n%s", r.Request, err, got)
		}
		if *update {
			reqs[i].Status, reqs[i].Answer = status, answer
			continue
		}
		if status != r.Status {
			t.Errorf("%s: status %d, want %d: %s", r.Request, status, r.Status, got)
		}
		if diff := cmp.Diff(indent(t, r.Answer), indent(t, answer)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", r.Request, diff)
		}
	}
	if *update {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // placeholders read <id>, not \u003cid\u003e
		enc.SetIndent("", "  ")
		if err := enc.Encode(reqs); err != nil {
			t.Fatal(err)
		}
		writeFile(t, file, b.Bytes())
	}
}

// volatile are the answers' fields whose values differ between runs, and
// the patterns of the values that do, wherever they are.
var (
	volatile   = map[string]bool{"at": true, "created": true, "created_at": true, "updated_at": true}
	volatileRe = regexp.MustCompile(`(run|chatcmpl|call)[_-][0-9a-zA-Z]{8,}`)
)

// varying rewrites an answer with what differs between runs as
// placeholders: run and completion ids, times.
func varying(b []byte) (json.RawMessage, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if volatile[k] {
					x[k] = "<" + k + ">"
					continue
				}
				x[k] = walk(e)
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e)
			}
		case string:
			return volatileRe.ReplaceAllStringFunc(x, func(id string) string { return id[:strings.IndexAny(id, "_-")] + "_<id>" })
		}
		return v
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(walk(v)); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(out.Bytes()), nil
}

// indent writes JSON one value per line, for readable diffs.
func indent(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	file := filepath.FromSlash(path)
	if *update {
		writeFile(t, file, got)
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("reading %s (go test ./internal/cases -update writes it): %v", file, err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func readTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("reading %s (go test ./internal/cases -update writes it): %v", dir, err)
	}
	return out
}

func writeFile(t testing.TB, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
