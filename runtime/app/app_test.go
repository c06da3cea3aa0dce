package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/tools/fixture"
	toolhttp "github.com/aidgen/aid/runtime/agents/tools/http"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// TestLinksNeitherIRNorCUENorPgx keeps the runtime's assembly free of the
// IR, of CUE (which would validate at start-up and triple the import
// graph), of pgx (which a program keeping its state in memory must not
// link) and of every kind's package, which a program links only when its
// description names the kind; nor the features a program links only when
// it uses them: the eval package (and gonum's statistics, through
// runtime/app/appeval) and CEL (through Description.Conditions).
func TestLinksNeitherIRNorCUENorPgx(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/aidgen/aid/ir", strings.HasPrefix(dep, "cuelang.org/"), strings.HasPrefix(dep, "github.com/jackc/"),
			strings.HasPrefix(dep, "github.com/aidgen/aid/runtime/agents/tools/"),
			dep == "github.com/aidgen/aid/runtime/gateway/fake", dep == "github.com/aidgen/aid/runtime/gateway/openaicompat",
			dep == "github.com/aidgen/aid/runtime/retrieval/pgvector",
			strings.HasPrefix(dep, "github.com/openai/"),
			dep == "github.com/aidgen/aid/runtime/eval", dep == "github.com/aidgen/aid/runtime/app/appeval",
			strings.HasPrefix(dep, "gonum.org/v1/gonum/stat"), strings.HasPrefix(dep, "gonum.org/v1/gonum/mat"),
			strings.HasPrefix(dep, "cel.dev/"), dep == "github.com/aidgen/aid/runtime/agents/policy/cel":
			t.Errorf("runtime/app links %s", dep)
		}
	}
}

// stubRefund is the tool plan of the evals whose target can refund.
var stubRefund = []appeval.EvalTool{{Tool: "refund", Mode: eval.ToolStub, Result: json.RawMessage(`"stubbed"`)}}

// write writes a file under dir and returns its name relative to dir.
func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

const dataset = `{"name": "qa", "version": "1", "cases": [
	{"id": "a", "input": "Capital of France?", "expected": "Paris"},
	{"id": "b", "input": "Capital of Japan?", "expected": "Tokyo"}
]}`

// desk is a small application: one fake provider with an answer key and an
// agent script, one chat model, an agent whose script calls a fixture tool
// and then answers from the key, and an eval of that agent.
func desk(t *testing.T) evalApp {
	t.Helper()
	dir := t.TempDir()
	write(t, dir, "qa.json", dataset)
	write(t, dir, "lookup.json", `[{"args": {"q": "x"}, "result": "found x"}]`)
	write(t, dir, "script.json", `{"agents": {
		"desk": [
			{"toolCalls": [{"name": "lookup", "arguments": {"q": "x"}}]},
			{"answer": true, "text": "demo answer"}
		],
		"refunder": [
			{"toolCalls": [{"name": "refund", "arguments": {}}]},
			{"answer": true, "text": "refunded"}
		]
	}}`)
	return evalApp{Description: app.Description{
		Name: "desk", Version: "0.1.0", Dir: dir,
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 3, Analyzer: analysis.English{},
			AnswerKey: &fake.AnswerKeyFile{Dataset: "qa.json", Accuracy: 1}, Script: "script.json"}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", ContextWindow: 8192, MaxOutputTokens: 64,
			Cost:         gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002},
			Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON}}}},
		Budgets: []gateway.Budget{{Name: "cap", MaxUSD: 10, Scope: gateway.ScopeRun}},
		Tools: []app.Tool{
			{Decl: agents.Tool{Name: "lookup", Description: "Look something up.", Input: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
				Kind: fixture.Kind{File: "lookup.json"}},
			{Decl: agents.Tool{Name: "refund", Description: "Refund.", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		},
		Agents: []agents.Agent{
			{Name: "desk", Model: "m", Instructions: "Answer.", Tools: []string{"lookup"}},
			{Name: "refunder", Model: "m", Instructions: "Refund.", Tools: []string{"refund"}},
		},
	},
		Evals: []appeval.Eval{
			{Name: "qa", Dataset: "qa.json", Target: appeval.EvalTarget{Agent: "desk"}, Runs: 3, Concurrency: 2,
				Metrics: []string{"exact_match"}, Budget: "cap", Baseline: "qa-baseline.json",
				Thresholds: []eval.Threshold{{Metric: "exact_match", MaxRegression: 0.1, Alpha: 0.05}}},
			{Name: "refunds", Dataset: "qa.json", Target: appeval.EvalTarget{Agent: "refunder"}, Runs: 1, Concurrency: 1,
				Metrics: []string{"exact_match"}, Tools: stubRefund},
		},
	}
}

// evalApp is an application's description with its evals, as aidgen eval
// assembles it (appeval.Assemble); the tests of this package that run
// evals use it, and the others its Description.
type evalApp struct {
	app.Description
	Evals []appeval.Eval
}

// assemble assembles d with its evals.
func assemble(ctx context.Context, d evalApp, opts app.Options) (*appeval.App, error) {
	return appeval.Assemble(ctx, d.Description, d.Evals, opts)
}

// noTools is a tool kind that builds nothing.
type noTools struct{}

func (noTools) ToolKind() string { return "none" }

func (noTools) NewTools(context.Context, agents.Tool, kind.Env) ([]agents.BuiltTool, error) {
	return nil, nil
}

func goTools() map[string]agents.Implementation {
	return map[string]agents.Implementation{"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "done", nil })}
}

// TestAgentEvalTarget runs an eval whose target is an agent: each sample is
// a run that plays the script (a fixture tool call, then the answer key's
// answer), is charged to one account of the eval's run, and scores.
func TestAgentEvalTarget(t *testing.T) {
	a, err := assemble(t.Context(), desk(t), app.Options{Implementations: goTools()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Eval("qa")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(e.Baseline, "qa-baseline.json") || !filepath.IsAbs(e.Baseline) && !strings.Contains(e.Baseline, string(filepath.Separator)) {
		t.Errorf("baseline path %q is not resolved against the description's directory", e.Baseline)
	}
	res, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: e.Concurrency})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("%d samples failed, first: %v", len(errs), errs[0])
	}
	stats, err := res.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if m := stats["exact_match"].Mean; m != 1 {
		t.Errorf("exact_match mean %g, want 1 (accuracy 1)", m)
	}
	if len(res.Models) != 1 || res.Models[0] != "fake-1" || res.CostUSD <= 0 {
		t.Errorf("models %v cost %g", res.Models, res.CostUSD)
	}
	sum, err := a.Gateway.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Two model calls per sample (the tool call, the answer), 2 cases × 3.
	if sum.Calls != 12 {
		t.Errorf("%d model calls, want 12", sum.Calls)
	}
	if len(sum.ByAccount) != 1 || sum.ByAccount[0].Account.Key != "eval/qa/"+e.RunID {
		t.Errorf("accounts %+v, want one for the eval run %s", sum.ByAccount, e.RunID)
	}
}

// TestAgentEvalTargetPauseFailsTheSample: a sample whose run pauses for
// approval has no answer; it fails with an error naming the waiting tool.
func TestAgentEvalTargetPauseFailsTheSample(t *testing.T) {
	a, err := assemble(t.Context(), desk(t), app.Options{Implementations: goTools()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Eval("refunds")
	if err != nil {
		t.Fatal(err)
	}
	res, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 1, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	errs := res.Errors()
	if len(errs) != 2 {
		t.Fatalf("%d failed samples, want 2: %v", len(errs), errs)
	}
	var se *appeval.AgentSampleError
	if !errors.As(errs[0], &se) || se.Status != agents.StatusPaused || se.Pending != "refund" || !strings.Contains(se.Error(), "approve") {
		t.Fatalf("error %v, want an AgentSampleError paused on refund", errs[0])
	}
}

// TestAssembleReportsEveryProblem: a description with several mistakes
// fails once, naming each.
func TestAssembleReportsEveryProblem(t *testing.T) {
	d := desk(t)
	d.Tools = append(d.Tools,
		app.Tool{Decl: agents.Tool{Name: "gone", Description: "x"}, Kind: fixture.Kind{File: "missing.json"}},
		app.Tool{Decl: agents.Tool{Name: "remote", Description: "x"}, Kind: toolhttp.Kind{URL: "http://127.0.0.1:1/", HeadersFromEnv: map[string]string{"Authorization": "REMOTE_TOKEN"}}},
		app.Tool{Decl: agents.Tool{Name: "none", Description: "x"}, Kind: noTools{}},
	)
	impls := goTools()
	impls["lookup"] = impls["refund"]     // lookup is a fixture tool
	impls["undeclared"] = impls["refund"] // not a tool of the application
	_, err := assemble(t.Context(), d, app.Options{Implementations: impls, LookupEnv: func(string) (string, bool) { return "", false }})
	if err == nil {
		t.Fatal("Assemble succeeded")
	}
	for _, want := range []string{`tool "gone"`, "missing.json", "REMOTE_TOKEN", `tool "none": its none kind provides no tool`, `tool "lookup" is implemented by its fixture kind`, `"undeclared"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s:\n%v", want, err)
		}
	}
}

// TestMissingGoToolNamesIt: a go tool an agent offers without registered
// code fails Assemble with the agents runtime's typed error naming it.
func TestMissingGoToolNamesIt(t *testing.T) {
	_, err := assemble(t.Context(), desk(t), app.Options{})
	var mt *agents.MissingToolImplementationError
	if !errors.As(err, &mt) || mt.Tool != "refund" {
		t.Fatalf("Assemble = %v, want a MissingToolImplementationError for refund", err)
	}
}

// TestHTTPToolHeadersFromEnv: an http tool posts to its URL with the
// headers read from the environment Options gives.
func TestHTTPToolHeadersFromEnv(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Write([]byte("pong"))
	}))
	defer srv.Close()
	d := desk(t)
	d.Tools[1].Kind = toolhttp.Kind{URL: srv.URL, HeadersFromEnv: map[string]string{"Authorization": "REFUND_TOKEN"}}
	d.Tools[1].Decl.Approval = agents.ApprovalNever
	a, err := assemble(t.Context(), d, app.Options{LookupEnv: func(k string) (string, bool) { return "Bearer s3cret", k == "REFUND_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Agents.Run(t.Context(), "refunder", "Capital of France?", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("run: %s %v", res.Status, err)
	}
	if obs := res.Steps[0].ToolCalls[0].Observation; obs != "pong" || got != "Bearer s3cret" {
		t.Errorf("observation %q, header %q", obs, got)
	}
}

// memoryKind is a store kind that holds agents' memory, reading its DSN
// from the environment it is lent and closing with the application.
type memoryKind struct {
	dsn    *string
	closed *bool
}

func (memoryKind) StoreKind() string { return "held" }
func (memoryKind) InMemory() bool    { return false }
func (memoryKind) OpenVectorStore(context.Context, kind.Env, string, retrieval.Distance, int) (retrieval.VectorStore, error) {
	return nil, errors.New("no vectors here")
}
func (k memoryKind) OpenMemoryStore(_ context.Context, env kind.Env, store string) (agents.MemoryStore, error) {
	*k.dsn, _ = env.Lookup("APP_DSN")
	return kind.Shared(env.Scope, store, func() (agents.MemoryStore, func() error, error) {
		return agents.NewInMemoryMemory(), func() error { *k.closed = true; return nil }, nil
	})
}

// inDatabase is a store kind that keeps its stores in a PostgreSQL
// database, whose DSN it reads from DB_DSN: the application opens agents'
// memory there with Options.OpenMemory.
type inDatabase struct{ vectorsOnly }

func (inDatabase) StoreKind() string { return "database" }
func (inDatabase) DatabaseDSN(env kind.Env, store string) (string, error) {
	dsn, ok := env.Lookup("DB_DSN")
	if !ok {
		return "", fmt.Errorf("store %q: DB_DSN is not set", store)
	}
	return dsn, nil
}

// vectorsOnly is a store kind that cannot hold agents' memory.
type vectorsOnly struct{}

func (vectorsOnly) StoreKind() string { return "vectors-only" }
func (vectorsOnly) InMemory() bool    { return false }
func (vectorsOnly) OpenVectorStore(context.Context, kind.Env, string, retrieval.Distance, int) (retrieval.VectorStore, error) {
	return nil, errors.New("unused")
}

// TestStateAndStores: PostgreSQL state comes only through Options, so this
// package links no driver, and without it Assemble says what to pass.
// Agents' memory is opened by its store's kind when the kind can hold it,
// with the environment Options gives, and closed with the application; a
// store whose kind cannot hold memory is refused as not built.
func TestStateAndStores(t *testing.T) {
	var memDSN string
	var closed bool
	d := desk(t)
	d.Service.State = app.State{Kind: app.StatePostgres, DSNEnv: "APP_DSN"}
	d.Stores = []retrieval.StoreConfig{{Name: "pg", Kind: memoryKind{&memDSN, &closed}}, {Name: "vec", Kind: vectorsOnly{}}}
	d.Agents[0].Memory = &agents.Memory{User: &agents.StoredMemory{Store: "pg"}}
	env := func(k string) (string, bool) { return "postgres://x", k == "APP_DSN" }

	_, err := assemble(t.Context(), d, app.Options{Implementations: goTools(), LookupEnv: env})
	if err == nil || !strings.Contains(err.Error(), "Options.OpenState") {
		t.Fatalf("Assemble without OpenState = %v", err)
	}

	var stateDSN string
	opts := app.Options{
		Implementations: goTools(),
		LookupEnv:       env,
		OpenState: func(_ context.Context, _ kind.Env, dsn string) (agents.Store, gateway.Ledger, error) {
			stateDSN = dsn
			return agents.NewInMemoryStore(), gateway.NewMemoryLedger(), nil
		},
	}
	a, err := assemble(t.Context(), d, opts)
	if err != nil {
		t.Fatal(err)
	}
	if stateDSN != "postgres://x" || memDSN != "postgres://x" || a.MemoryStores["pg"] == nil {
		t.Errorf("state DSN %q, memory DSN %q, stores %v", stateDSN, memDSN, a.MemoryStores)
	}
	if err := a.Close(); err != nil || !closed {
		t.Errorf("Close = %v; the memory store closed: %v", err, closed)
	}

	d.Agents[1].Memory = &agents.Memory{Global: &agents.StoredMemory{Store: "vec"}}
	_, err = assemble(t.Context(), d, opts)
	var de *kind.DeferredError
	if !errors.As(err, &de) || de.Feature != "memory in a vectors-only store" {
		t.Fatalf("memory in a store that cannot hold it: %v", err)
	}
}

// TestMemoryInDatabase: agents' memory in a store whose kind keeps it in
// PostgreSQL (retrieval.DatabaseKind) is opened by Options.OpenMemory, on
// the DSN the kind reads, once per store; without OpenMemory, or without
// the DSN, Assemble says what is missing.
func TestMemoryInDatabase(t *testing.T) {
	d := desk(t)
	d.Stores = []retrieval.StoreConfig{{Name: "db", Kind: inDatabase{}}}
	d.Agents[0].Memory = &agents.Memory{User: &agents.StoredMemory{Store: "db"}, Global: &agents.StoredMemory{Store: "db"}}
	env := func(k string) (string, bool) { return "postgres://db", k == "DB_DSN" }

	_, err := app.Assemble(t.Context(), d.Description, app.Options{Implementations: goTools(), LookupEnv: env})
	if err == nil || !strings.Contains(err.Error(), `memory store "db" is a database store, in PostgreSQL: set Options.OpenMemory`) {
		t.Fatalf("Assemble without OpenMemory = %v", err)
	}

	var opened []string
	mem := agents.NewInMemoryMemory()
	opts := app.Options{
		Implementations: goTools(),
		LookupEnv:       env,
		OpenMemory: func(_ context.Context, _ kind.Env, dsn, store string) (agents.MemoryStore, error) {
			opened = append(opened, store+"@"+dsn)
			return mem, nil
		},
	}
	a, err := app.Assemble(t.Context(), d.Description, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if want := []string{"db@postgres://db"}; !slices.Equal(opened, want) || a.MemoryStores["db"] != agents.MemoryStore(mem) {
		t.Errorf("opened %q, stores %v; want %q", opened, a.MemoryStores, want)
	}

	opts.LookupEnv = func(string) (string, bool) { return "", false }
	if _, err := app.Assemble(t.Context(), d.Description, opts); err == nil || !strings.Contains(err.Error(), `memory store "db": store "db": DB_DSN is not set`) {
		t.Errorf("Assemble without the DSN = %v", err)
	}
}

func TestUnknownEvalAndTarget(t *testing.T) {
	d := desk(t)
	a, err := assemble(t.Context(), d, app.Options{Implementations: goTools()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Eval("nope"); err == nil || !strings.Contains(err.Error(), "qa") {
		t.Errorf("Eval(nope) = %v, want the known evals listed", err)
	}
	d.Evals[0].Target.Agent = "ghost"
	_, err = assemble(t.Context(), d, app.Options{Implementations: goTools()})
	var ua *agents.UnknownAgentError
	if !errors.As(err, &ua) || ua.Agent != "ghost" {
		t.Errorf("Assemble with an unknown target agent = %v", err)
	}
}

// TestDescriptionIsPlainData walks the Description type: gen emits it as a
// Go literal, so it may hold no func, channel, interface or unsafe pointer,
// and pointers only to plain values, anywhere inside, but for the
// interfaces a kind's configuration implements, and the condition
// language's, whose values gen spells with their own types
// (internal/lower's test checks every kind's type).
func TestDescriptionIsPlainData(t *testing.T) {
	kinds := []reflect.Type{reflect.TypeFor[gateway.ProviderKind](), reflect.TypeFor[agents.ToolKind](), reflect.TypeFor[retrieval.StoreKind](), reflect.TypeFor[kind.ResourceKind](), reflect.TypeFor[policy.Language]()}
	if err := gen.Spellable(reflect.TypeFor[app.Description](), kinds...); err != nil {
		t.Error(err)
	}
}

// countingProvider counts the calls that reach the adapter it wraps.
type countingProvider struct {
	gateway.Provider
	calls *atomic.Int64
}

func (p countingProvider) Generate(ctx context.Context, m gateway.ModelSpec, r gateway.Request) (gateway.Response, error) {
	p.calls.Add(1)
	return p.Provider.Generate(ctx, m, r)
}

// TestWrappersSeeEveryCall checks the seam a service measures through:
// every provider call and every tool call of a run goes through the
// wrappers Options names.
func TestWrappersSeeEveryCall(t *testing.T) {
	var modelCalls, toolCalls atomic.Int64
	opts := app.Options{
		Implementations: goTools(),
		WrapProvider:    func(p gateway.Provider) gateway.Provider { return countingProvider{p, &modelCalls} },
		WrapTool: func(name string, impl agents.Implementation) agents.Implementation {
			return agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
				toolCalls.Add(1)
				return impl.Call(ctx, args)
			})
		},
	}
	a, err := assemble(t.Context(), desk(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Eval("qa")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 1, Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	sum, err := a.Gateway.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if modelCalls.Load() != int64(sum.Calls) || modelCalls.Load() == 0 {
		t.Errorf("the provider wrapper saw %d calls, the ledger %d", modelCalls.Load(), sum.Calls)
	}
	if toolCalls.Load() != 2 { // one tool call per case, 2 cases
		t.Errorf("the tool wrapper saw %d calls, want 2", toolCalls.Load())
	}
}

// TestAgentEvalApprovals: under an approval policy a paused sample is
// resumed with the policy's decision, each time it pauses, and the answer
// lists the decisions; a run that still pauses after
// eval.MaxSampleDecisions fails its sample; and a policy is refused on a
// target that is not an agent.
func TestAgentEvalApprovals(t *testing.T) {
	d := desk(t)
	steps := make([]string, 0, eval.MaxSampleDecisions+2)
	for range eval.MaxSampleDecisions + 2 {
		steps = append(steps, `{"toolCalls": [{"name": "refund"}]}`)
	}
	write(t, d.Dir, "script.json", `{"agents": {
		"refunder": [{"toolCalls": [{"name": "refund", "arguments": {}}]}, {"text": "refunded"}],
		"looper": [`+strings.Join(steps, ",")+`]
	}}`)
	d.Agents = append(d.Agents, agents.Agent{Name: "looper", Model: "m", Instructions: "Refund.", Tools: []string{"refund"}, MaxSteps: eval.MaxSampleDecisions + 2})
	d.Evals = []appeval.Eval{
		{Name: "refunds", Dataset: "qa.json", Target: appeval.EvalTarget{Agent: "refunder"}, Runs: 1, Concurrency: 1, Metrics: []string{"exact_match"}, Approvals: eval.ApprovalsApprove, Tools: stubRefund},
		{Name: "loop", Dataset: "qa.json", Target: appeval.EvalTarget{Agent: "looper"}, Runs: 1, Concurrency: 1, Metrics: []string{"exact_match"}, Approvals: eval.ApprovalsReject, Tools: stubRefund},
	}
	a, err := assemble(t.Context(), d, app.Options{Implementations: goTools()})
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Eval("refunds")
	if err != nil {
		t.Fatal(err)
	}
	res, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 1, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("approved samples failed: %v", errs)
	}
	for _, c := range res.Cases {
		if ans := c.Samples[0].Answer; ans.Text != "refunded" || len(ans.Decisions) != 1 || ans.Decisions[0] != (eval.Decision{Tool: "refund", Approved: true}) {
			t.Errorf("case %s: answer %+v", c.CaseID, ans)
		}
	}

	e, err = a.Eval("loop")
	if err != nil {
		t.Fatal(err)
	}
	res, err = eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 1, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	var se *appeval.AgentSampleError
	if errs := res.Errors(); len(errs) != 2 || !errors.As(errs[0], &se) || se.Decisions != eval.MaxSampleDecisions || !strings.Contains(se.Error(), "still paused") {
		t.Fatalf("errors %v, want samples still paused after %d decisions", errs, eval.MaxSampleDecisions)
	}

	d = desk(t)
	d.Evals = []appeval.Eval{{Name: "m", Dataset: "qa.json", Target: appeval.EvalTarget{Model: "m"}, Runs: 1, Concurrency: 1, Metrics: []string{"exact_match"}, Approvals: eval.ApprovalsApprove}}
	if _, err := assemble(t.Context(), d, app.Options{Implementations: goTools()}); err == nil || !strings.Contains(err.Error(), "the target is not an agent") {
		t.Errorf("approvals on a model target: %v", err)
	}
}
