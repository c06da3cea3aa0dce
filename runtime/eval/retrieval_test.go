package eval_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// supportDeskRetriever builds and ingests the kb retriever of
// examples/support-desk over the fake embedding model.
func supportDeskRetriever(t *testing.T) *retrieval.Retriever {
	t.Helper()
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "embed", Spec: gateway.ModelSpec{
			ID: "fake-embed-2024-06-01", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 256,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00002},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	rs, err := retrieval.Build(t.Context(), gw,
		[]retrieval.StoreConfig{{Name: "kb", Kind: memory.Kind{}}},
		[]retrieval.Config{{
			Name:      "kb",
			Source:    retrieval.Source{Dir: filepath.Join("..", "..", "examples", "support-desk"), Files: []string{"docs/**/*.md"}},
			ChunkSize: 600, ChunkOverlap: 80, EmbedModel: "embed", Store: "kb", TopK: 4, Rerank: retrieval.RerankLexical,
		}}, retrieval.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs["kb"].Ingest(t.Context()); err != nil {
		t.Fatal(err)
	}
	return rs["kb"]
}

func supportDeskDataset(t *testing.T) *eval.Dataset {
	t.Helper()
	ds, err := eval.ParseDatasetJSONL("kb.jsonl", []byte(strings.Join([]string{
		`{"id": "return-window", "input": "how long do I have to return an item", "expected": ["docs/refunds.md"]}`,
		`{"id": "damaged", "input": "can I get a refund for a damaged item", "expected": {"docs/refunds.md": 2}}`,
		`{"id": "tracking", "input": "where is the tracking link for my order", "expected": ["docs/shipping.md"]}`,
		`{"id": "countries", "input": "do you ship to Switzerland", "expected": ["docs/shipping.md"]}`,
		`{"id": "password", "input": "I forgot my password and cannot sign in", "expected": ["docs/troubleshooting/login.md"]}`,
		`{"id": "locked", "input": "my account is locked", "expected": ["docs/troubleshooting/login.md"]}`,
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// reversed searches like its inner searcher but returns the hits in the
// opposite order: the worst retriever that still finds the same documents.
type reversed struct{ eval.Searcher }

func (r reversed) Search(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
	hits, err := r.Searcher.Search(ctx, q, k)
	slices.Reverse(hits)
	return hits, err
}

// TestRetrievalGate runs a retrieval evaluation of the support-desk
// retriever as a standard eval run, records it as a baseline and gates
// against it: the same retriever passes, one that ranks the right document
// last regresses on MRR while its recall at 4 is unchanged.
func TestRetrievalGate(t *testing.T) {
	r := supportDeskRetriever(t)
	ds := supportDeskDataset(t)
	metrics := eval.RetrievalMetrics(retrieval.RecallAtK{K: 1}, retrieval.RecallAtK{K: 4}, retrieval.MRR{K: 4}, retrieval.NDCGAtK{K: 4})
	run := func(s eval.Searcher) map[string]eval.MetricStats {
		t.Helper()
		res, err := eval.Run(t.Context(), ds, &eval.RetrievalRunner{Searcher: s, BySource: true}, metrics, eval.Options{Runs: 2, Concurrency: 3})
		if err != nil {
			t.Fatal(err)
		}
		if errs := res.Errors(); len(errs) > 0 {
			t.Fatalf("sample errors: %v", errs)
		}
		st, err := res.Stats()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	base := run(r)
	for _, m := range []string{"recall@1", "recall@4", "mrr@4", "ndcg@4"} {
		if base[m].Mean != 1 || base[m].Cases != 6 || base[m].Runs != 2 {
			t.Errorf("%s: %+v, want a mean of 1 over 6 cases", m, base[m])
		}
	}
	baseline := &eval.Baseline{Dataset: ds.Name, Metrics: base}
	thresholds := []eval.Threshold{{Metric: "mrr@4", MaxRegression: 0.05, Alpha: 0.05}, {Metric: "recall@4", MaxRegression: 0.05, Alpha: 0.05}}
	same, err := eval.Gate(thresholds, run(r), baseline)
	if err != nil {
		t.Fatal(err)
	}
	// Six queries whose runs never vary cannot show that the retriever holds within
	// 0.05 (the gate floors the uncertainty of variance-free data), but the same
	// retriever must never be called a regression.
	if same.Verdict == eval.Regression {
		t.Errorf("the same retriever: %+v", same)
	}
	worse := run(reversed{r})
	if worse["mrr@4"].Mean >= 0.5 || worse["recall@4"].Mean != 1 {
		t.Errorf("reversed ranking: mrr@4 %v, recall@4 %v", worse["mrr@4"].Mean, worse["recall@4"].Mean)
	}
	rep, err := eval.Gate(thresholds, worse, baseline)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != eval.Regression || rep.Results[0].Verdict != eval.Regression || rep.Results[1].Verdict == eval.Regression {
		t.Errorf("reversed ranking: %+v", rep)
	}
}

func TestRetrievalMetricRefusals(t *testing.T) {
	m := eval.RetrievalMetric{Metric: retrieval.MRR{K: 3}}
	good := `{"ranked": ["a", "b"]}`
	for _, tc := range []struct{ expected, answer string }{
		{`["b"]`, "not json"},
		{"", good},
		{"b", good},
	} {
		if _, err := m.Score(t.Context(), eval.Case{ID: "c", Expected: tc.expected}, tc.answer); err == nil {
			t.Errorf("expected %q, answer %q: scored", tc.expected, tc.answer)
		}
	}
	if s, err := m.Score(t.Context(), eval.Case{ID: "c", Expected: `["b"]`}, good); err != nil || s != 0.5 {
		t.Errorf("mrr: %v %v", s, err)
	}
	g := eval.RetrievalMetric{Metric: retrieval.CitationGrounding{}}
	ans := `{"ranked": ["a"], "passages": {"a": "the refund window is 30 days"}, "citations": [{"id": "a", "quote": "30 days"}]}`
	if s, err := g.Score(t.Context(), eval.Case{ID: "c"}, ans); err != nil || s != 1 {
		t.Errorf("citation grounding without a judgement: %v %v", s, err)
	}
	if g.ModelDerived() || g.Name() != "citation_grounding" {
		t.Error("citation grounding must be a gating metric named citation_grounding")
	}
}

// TestParseRetrievalMetric checks that every name the parser accepts reads
// back as the metric's own Name (so a baseline keyed by the IR's name finds
// it), and that near misses are refused rather than read loosely.
func TestParseRetrievalMetric(t *testing.T) {
	for _, name := range []string{"recall@1", "recall@4", "mrr@10", "ndcg@100"} {
		m, err := eval.ParseRetrievalMetric(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if m.Name() != name || m.ModelDerived() {
			t.Errorf("%s: parsed as %q (model-derived %v)", name, m.Name(), m.ModelDerived())
		}
	}
	for _, name := range []string{"", "recall", "recall@", "recall@0", "recall@-1", "recall@04", "recall@+4", "recall@4x", "precision@4", "citation_grounding", "Recall@4", "recall@ 4"} {
		if m, err := eval.ParseRetrievalMetric(name); err == nil {
			t.Errorf("%q parsed as %q", name, m.Name())
		}
	}
}
