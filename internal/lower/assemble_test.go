package lower_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

const (
	capitals        = "../../examples/capitals/app.cue"
	supportDesk     = "../../examples/support-desk/app.cue"
	capitalsFixture = "../../fixtures/capitals-baseline.json"
)

func load(t testing.TB, path string) *ir.Document {
	t.Helper()
	doc, err := ir.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// tryAssemble lowers doc and assembles it with its evals, as aidgen eval
// does.
func tryAssemble(doc *ir.Document, opts app.Options) (*appeval.App, error) {
	desc, err := lower.Document(doc)
	if err != nil {
		return nil, err
	}
	return appeval.Assemble(context.Background(), desc, lower.Evals(doc), opts)
}

func assemble(t testing.TB, doc *ir.Document, opts app.Options) *appeval.App {
	t.Helper()
	a, err := tryAssemble(doc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newEval assembles doc and builds one run of the named eval.
func newEval(t testing.TB, doc *ir.Document, opts app.Options, name string) (*appeval.App, *appeval.EvalRun) {
	t.Helper()
	a := assemble(t, doc, opts)
	e, err := a.Eval(name)
	if err != nil {
		t.Fatal(err)
	}
	return a, e
}

// runCapitals samples the capitals eval and returns its baseline, encoded.
func runCapitals(t testing.TB, opts app.Options, note string) []byte {
	t.Helper()
	_, e := newEval(t, load(t, capitals), opts, "capitals")
	res, err := eval.Run(context.Background(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: e.Concurrency})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("%d samples failed, first: %v", len(errs), errs[0])
	}
	b, err := eval.NewBaseline(res, aid.Version, note)
	if err != nil {
		t.Fatal(err)
	}
	data, err := eval.MarshalBaseline(b)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestCapitalsBaselineReproduces proves that the committed baseline is what
// the fake provider (accuracy 0.6, seed 0, 10 runs) produces, byte for
// byte, and that another seed draws a different sample.
func TestCapitalsBaselineReproduces(t *testing.T) {
	want, err := os.ReadFile(capitalsFixture)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := eval.ParseBaseline(capitalsFixture, want)
	if err != nil {
		t.Fatal(err)
	}
	got := runCapitals(t, app.Options{}, committed.Note)
	if !bytes.Equal(got, want) {
		t.Errorf("regenerating %s gives different bytes; if the change is intended, run\n\taidgen eval examples/capitals/app.cue --update-baseline --note %q\nfirst difference at byte %d", capitalsFixture, committed.Note, firstDiff(got, want))
	}
	seed := int64(1)
	other := runCapitals(t, app.Options{Seed: &seed}, committed.Note)
	if bytes.Equal(other, want) {
		t.Error("seed 1 reproduced the seed-0 baseline; the seed does not reach the fake")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSupportDeskGateway checks the gateway lowered from support-desk.
// The whole application does not assemble yet: its researcher searches a
// retriever, which the agents runtime does not build (a DeferredError); the
// gateway is checked through a description without the agents.
func TestSupportDeskGateway(t *testing.T) {
	desc, err := lower.Document(load(t, supportDesk))
	if err != nil {
		t.Fatal(err)
	}
	desc.Agents = nil
	a, err := app.Assemble(context.Background(), desc, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := a.Gateway
	if got, want := g.Aliases(), []string{"embed", "large", "small"}; !reflect.DeepEqual(got, want) {
		t.Errorf("aliases %v, want %v", got, want)
	}
	pm, err := g.Resolve("large")
	if err != nil || pm.Spec.ID != "fake-large-2024-06-01" || pm.Spec.Cost.OutputPer1kUSD != 0.01 {
		t.Errorf("Resolve(large) = %+v, %v", pm, err)
	}
	if err := g.Require("small", gateway.CapabilityTools, gateway.CapabilityJSON); err != nil {
		t.Errorf("Require(small, tools, json) = %v", err)
	}
	emb, err := g.Embed(context.Background(), "embed", []string{"refunds within 30 days"})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Vectors) != 1 || len(emb.Vectors[0]) != 256 {
		t.Errorf("embedding shape %d×%d, want 1×256", len(emb.Vectors), len(emb.Vectors[0]))
	}
	if _, ok := a.Retrievers["kb"]; !ok {
		t.Errorf("retrievers %v, want kb", a.Retrievers)
	}
	// The run-scoped budget is enforced: a call charged to it needs a key.
	_, err = g.Generate(context.Background(), "small", gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}}, gateway.WithBudget("per_run", ""))
	if err == nil || !strings.Contains(err.Error(), "scope key") {
		t.Errorf("a run-scoped budget without a key: %v", err)
	}
}

var update = flag.Bool("update", false, "rewrite the committed baselines these tests regenerate")

// inMemory stands a store in memory in for every store of desc, so that an
// application keeping its vectors and memory in PostgreSQL assembles
// without a database (runtime/retrieval/pgvector's tests open the real
// kind).
func inMemory(desc *app.Description) {
	for i := range desc.Stores {
		desc.Stores[i].Kind = memory.Kind{}
	}
}

func TestOpenAIProviderKeyFromEnv(t *testing.T) {
	desc, err := lower.Document(load(t, "../../testdata/cases/openai/app.cue"))
	if err != nil {
		t.Fatal(err)
	}
	// The gateway and the retrievers, with memory standing in for
	// PostgreSQL.
	desc.Agents = nil
	inMemory(&desc)
	opts := app.Options{
		RunStore:  agents.NewInMemoryStore(),
		Ledger:    gateway.NewMemoryLedger(),
		LookupEnv: func(string) (string, bool) { return "", false },
	}
	_, err = app.Assemble(context.Background(), desc, opts)
	if err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("Assemble without the key = %v, want an error naming OPENAI_API_KEY", err)
	}
	const sentinel = "sk-sentinel-never-print-me"
	if strings.Contains(err.Error(), sentinel) {
		t.Fatal("the error shows the key")
	}
	opts.LookupEnv = func(k string) (string, bool) { return sentinel, k == "OPENAI_API_KEY" }
	a, err := app.Assemble(context.Background(), desc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if pm, err := a.Gateway.Resolve("embed"); err != nil || pm.Spec.Dimensions != 1536 {
		t.Errorf("Resolve(embed) = %+v, %v", pm, err)
	}
	if _, ok := a.Retrievers["kb"]; !ok {
		t.Errorf("retrievers %v, want kb", a.Retrievers)
	}
}

// TestEvalSpendIsBudgeted checks that the eval's calls are charged to the
// budget the IR names, so the ledger, not the runner, reports the cost.
func TestEvalSpendIsBudgeted(t *testing.T) {
	a, e := newEval(t, load(t, capitals), app.Options{}, "capitals")
	res, err := eval.Run(context.Background(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 2, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := a.Gateway.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum.Calls != int64(2*len(e.Dataset.Cases)) {
		t.Errorf("ledger counts %d calls, want %d", sum.Calls, 2*len(e.Dataset.Cases))
	}
	if len(sum.ByAccount) != 1 || sum.ByAccount[0].Account.Budget != "eval" {
		t.Fatalf("spend by account %+v, want the eval budget", sum.ByAccount)
	}
	if d := sum.Total.USD() - res.CostUSD; d > 1e-9 || d < -1e-9 {
		t.Errorf("ledger total $%g differs from the runner's $%g", sum.Total.USD(), res.CostUSD)
	}
}

// BenchmarkCapitalsEval measures the wall time of the capitals eval (30
// cases × 10 runs) against a fake with 20 ms latency, at concurrency 1 and
// 8: what bounded concurrency buys on a slow model.
func BenchmarkCapitalsEval(b *testing.B) {
	for _, c := range []int{1, 8} {
		b.Run("concurrency="+string(rune('0'+c)), func(b *testing.B) {
			doc := load(b, capitals)
			desc, err := lower.Document(doc)
			if err != nil {
				b.Fatal(err)
			}
			for i, p := range desc.Providers {
				k := p.Kind.(fake.Kind)
				k.Latency = 20 * time.Millisecond
				desc.Providers[i].Kind = k
			}
			a, err := appeval.Assemble(context.Background(), desc, lower.Evals(doc), app.Options{})
			if err != nil {
				b.Fatal(err)
			}
			e, err := a.Eval("capitals")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := eval.Run(context.Background(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: c}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// judgedApp writes an app whose eval is answered by one fake and graded by
// another (an echo, whose replies the judge cannot parse: the calls are
// made and charged all the same), under one budget of the given scope.
func judgedApp(t *testing.T, scope string) *ir.Document {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile("../../fixtures/capitals.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capitals.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src := `name: "judged"
version: "0.1.0"
providers: {
	fake: {kind: "fake", answerKey: {dataset: "capitals.json", accuracy: 0.6}}
	grader: {kind: "fake"}
}
models: {
	"fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
	"fake-judge-2024-06-01": {provider: "grader", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
}
aliases: {small: "fake-chat-2024-06-01", judge: "fake-judge-2024-06-01"}
budgets: cap: {maxUSD: 100, scope: "` + scope + `"}
evals: capitals: {
	dataset: "capitals.json"
	target: {model: "small", prompt: "{{.Input}}"}
	runs: 2
	metrics: ["exact_match", "llm_judge"]
	judge: {model: "judge", rubric: "Score 1 when the answer names the right city."}
	budget: "cap"
}
`
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return load(t, path)
}

// runJudged runs the judged eval and returns its result and the ledger.
func runJudged(t *testing.T, doc *ir.Document) (*eval.Result, gateway.SpendSummary) {
	t.Helper()
	a, e := newEval(t, doc, app.Options{}, "capitals")
	res, err := eval.Run(context.Background(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := a.Gateway.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res, sum
}

// TestEvalJudgeSharesTheBudgetAccount checks that the judge's calls are
// charged to the same account as the target's: one account per run under a
// run-scoped budget, one per sample under a thread-scoped one; and that a
// run-scoped cap that fits the target's spend but not the target's and the
// judge's together stops the run at the cap.
func TestEvalJudgeSharesTheBudgetAccount(t *testing.T) {
	for _, tt := range []struct {
		scope    string
		accounts int
	}{{"run", 1}, {"thread", 30 * 2}} {
		t.Run(tt.scope, func(t *testing.T) {
			_, sum := runJudged(t, judgedApp(t, tt.scope))
			if len(sum.ByAlias) != 2 {
				t.Fatalf("spend by alias %+v, want the target and the judge", sum.ByAlias)
			}
			if len(sum.ByAccount) != tt.accounts {
				t.Errorf("%d budget accounts, want %d; first: %+v", len(sum.ByAccount), tt.accounts, sum.ByAccount[0])
			}
		})
	}

	doc := judgedApp(t, "run")
	_, sum := runJudged(t, doc)
	var target, judge float64
	for _, a := range sum.ByAlias {
		switch a.Name {
		case "small":
			target = a.Spent.USD()
		case "judge":
			judge = a.Spent.USD()
		}
	}
	// A cap above either side's spend alone but below both together.
	limit := max(target, judge) + min(target, judge)/2
	if target <= 0 || judge <= 0 {
		t.Fatalf("target spent $%g, judge $%g; both must spend", target, judge)
	}
	doc.Budgets[0].MaxUSD = limit
	res, sum := runJudged(t, doc)
	if sum.Total.USD() > limit {
		t.Errorf("the eval spent $%g under a run budget of $%g (target $%g + judge $%g uncapped)", sum.Total.USD(), limit, target, judge)
	}
	refused := 0
	for _, err := range res.Errors() {
		var be *gateway.BudgetExceededError
		if errors.As(err, &be) {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no call was refused although target and judge together need $%g of $%g", target+judge, limit)
	}
}

// TestEvalRunsHaveTheirOwnAccount checks that two runs of one eval over one
// ledger are charged to two accounts of a run-scoped budget, so that a
// persistent ledger does not add every run up against one cap.
func TestEvalRunsHaveTheirOwnAccount(t *testing.T) {
	doc := judgedApp(t, "run")
	a := assemble(t, doc, app.Options{})
	for range 2 {
		e, err := a.Eval("capitals")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eval.Run(context.Background(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 1, Concurrency: 4}); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := a.Gateway.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.ByAccount) != 2 || sum.ByAccount[0].Account.Key == sum.ByAccount[1].Account.Key {
		t.Errorf("accounts %+v, want one per run", sum.ByAccount)
	}
}

const refundsBaseline = "../../examples/support-desk/evals/refunds-baseline.json"

// TestSupportDeskRefundsBaseline regenerates the support-desk example's
// refunds baseline (an eval whose target is the researcher agent) byte for
// byte, as aidgen eval --update-baseline writes it, and gates a fresh run
// against it. The researcher searches its (unindexed) retriever first; its
// answers come from the answer key. -update rewrites the file.
func TestSupportDeskRefundsBaseline(t *testing.T) {
	doc := load(t, supportDesk)
	desc, err := lower.Document(doc)
	if err != nil {
		t.Fatal(err)
	}
	a, err := appeval.Assemble(t.Context(), desc, lower.Evals(doc), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Eval("refunds")
	if err != nil {
		t.Fatal(err)
	}
	res, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: e.Concurrency})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("%d samples failed, first: %v", len(errs), errs[0])
	}
	const note = "fake provider, accuracy 0.9, seed 7, 5 runs"
	b, err := eval.NewBaseline(res, aid.Version, note)
	if err != nil {
		t.Fatal(err)
	}
	got, err := eval.MarshalBaseline(b)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := eval.WriteBaselineFile(refundsBaseline, b); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(refundsBaseline)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("regenerating %s gives different bytes (go test -update rewrites it); first difference at byte %d", refundsBaseline, firstDiff(got, want))
	}
	stats, err := res.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if m := stats["normalized_contains"].Mean; m <= 0.5 || m >= 1 {
		t.Errorf("normalized_contains mean %g; an answer key of accuracy 0.9 should give about 0.9", m)
	}
	gate, err := eval.Gate(e.Thresholds, stats, b)
	if err != nil || gate.Verdict != eval.Pass {
		t.Fatalf("gate %+v, %v", gate, err)
	}
}
