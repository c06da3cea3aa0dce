package app_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// kbApp is an application with one retriever over three articles in a
// memory store and a retrieval eval of it. The retriever's Source.Dir is
// empty, as lowering leaves it: the files are relative to the app's Dir.
func kbApp(t *testing.T, cases string) evalApp {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "docs/refunds.md", "# Refunds\n\nAsk for a refund within 30 days of delivery.\n")
	write(t, dir, "docs/shipping.md", "# Shipping\n\nOrders ship within 2 business days to Norway and Switzerland.\n")
	write(t, dir, "docs/login.md", "# Sign in\n\nReset your password from the sign-in page.\n")
	write(t, dir, "kb.jsonl", cases)
	return evalApp{Description: app.Description{
		Name: "kb", Version: "0.1.0", Dir: dir,
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1, Analyzer: analysis.English{}}}},
		Models: []gateway.PinnedModel{{Alias: "embed", Spec: gateway.ModelSpec{ID: "fake-embed-1", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 128,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}}},
		Stores: []retrieval.StoreConfig{{Name: "kb", Kind: memory.Kind{}}},
		Retrievers: []retrieval.Config{{Name: "kb", Source: retrieval.Source{Files: []string{"docs/*.md"}},
			ChunkSize: 200, ChunkOverlap: 20, EmbedModel: "embed", Store: "kb", TopK: 2}},
	},
		Evals: []appeval.Eval{{Name: "kb", Dataset: "kb.jsonl", Target: appeval.EvalTarget{Retriever: "kb"}, Runs: 2, Concurrency: 3,
			Metrics: []string{"recall@1", "mrr@2", "ndcg@2"}}},
	}
}

const kbCases = `{"id": "refund", "input": "how many days for a refund", "expected": ["docs/refunds.md"]}
{"id": "norway", "input": "do you ship to Norway", "expected": {"docs/shipping.md": 2}}
{"id": "password", "input": "reset my password", "expected": ["docs/login.md"]}
`

// TestRetrieverEvalTarget runs a retrieval eval on a memory store: the
// store is ingested once, before the first search, whatever the
// concurrency; every case finds its article first; and the answers name
// the pinned embedding model, so baselines pin it.
func TestRetrieverEvalTarget(t *testing.T) {
	a, err := assemble(t.Context(), kbApp(t, kbCases), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := a.Eval("kb")
	if err != nil {
		t.Fatal(err)
	}
	res, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: e.Concurrency})
	if err != nil {
		t.Fatal(err)
	}
	if errs := res.Errors(); len(errs) > 0 {
		t.Fatalf("sample errors: %v", errs)
	}
	stats, err := res.Stats()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"recall@1", "mrr@2", "ndcg@2"} {
		if s := stats[m]; s.Mean != 1 || s.Cases != 3 {
			t.Errorf("%s: %+v, want 1 over 3 cases", m, s)
		}
	}
	if len(res.Models) != 1 || res.Models[0] != "fake-embed-1" {
		t.Errorf("models %v, want the embedding model", res.Models)
	}
	spend, err := a.Gateway.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// One call embeds the three articles; each of the 6 samples embeds its
	// query. A second ingest would embed nothing and call nothing, so the
	// count also shows the store was filled before the first search.
	if spend.Calls != 1+6 {
		t.Errorf("%d embedding calls, want 7: one ingest and one per sample", spend.Calls)
	}
	// Ingesting again finds everything stored: the eval ingested it.
	st, err := a.Retrievers["kb"].Ingest(t.Context())
	if err != nil || st.Added != 0 || st.Unchanged != 3 {
		t.Errorf("ingest after the eval: %+v, %v", st, err)
	}
}

// TestRetrieverEvalRefusals checks what App.Eval and Assemble refuse for a
// retriever target, before anything is searched or paid for.
func TestRetrieverEvalRefusals(t *testing.T) {
	tests := []struct {
		name  string
		cases string
		edit  func(*evalApp)
		want  string // in the error of Assemble, or of Eval when Assemble passes
	}{
		{"a misspelt source path", `{"id": "a", "input": "refund", "expected": ["docs/refund.md"]}`, nil,
			`case "a": expected names "docs/refund.md", which retriever "kb" does not ingest; its sources are docs/login.md, docs/refunds.md, docs/shipping.md`},
		{"expected text instead of paths", `{"id": "a", "input": "refund", "expected": "30 days"}`, nil,
			`case "a": expected must be the relevant source paths`},
		{"no relevant source", `{"id": "a", "input": "refund", "expected": []}`, nil,
			`case "a": expected names no relevant source`},
		{"an answer metric", kbCases, func(d *evalApp) { d.Evals[0].Metrics = []string{"exact_match"} },
			`the target is retriever "kb": retrieval metric "exact_match"`},
		{"a ranked metric on a model", kbCases, func(d *evalApp) {
			d.Models = append(d.Models, gateway.PinnedModel{Alias: "chat", Spec: gateway.ModelSpec{ID: "fake-chat", Provider: "fake", MaxOutputTokens: 10}})
			d.Evals[0].Target = appeval.EvalTarget{Model: "chat"}
		}, `metric "recall@1" scores a retriever's ranking; the target must be a retriever`},
		{"an unknown retriever", kbCases, func(d *evalApp) { d.Evals[0].Target.Retriever = "kbb" },
			`the target retriever "kbb" is not a retriever of the application (retrievers: [kb])`},
		{"a retriever and an agent", kbCases, func(d *evalApp) { d.Evals[0].Target.Agent = "desk" },
			`names retriever "kb" and an agent or model too`},
		{"a negative k", kbCases, func(d *evalApp) { d.Evals[0].Target.K = -1 },
			`k=-1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := kbApp(t, tt.cases)
			if tt.edit != nil {
				tt.edit(&d)
			}
			a, err := assemble(t.Context(), d, app.Options{})
			if err == nil {
				_, err = a.Eval("kb")
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
