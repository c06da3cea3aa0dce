package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// kbDocs is the corpus of the test retriever: two documents, one with a
// nested heading, so that sources, heading trails and cites can be checked.
var kbDocs = map[string]string{
	"refunds.md":  "# Refunds\n\nYou can ask for a refund within 30 days of delivery. The money goes back to the card you paid with.\n\n## Damaged items\n\nDamaged items are refunded in full, shipping included, when reported within 7 days.\n",
	"shipping.md": "# Shipping\n\nOrders ship within two business days. A tracking link arrives by email once the parcel leaves the warehouse.\n",
}

// embedModel is the embedding model of the search tests, priced so that a
// long text costs more than a small budget allows.
var embedModel = gateway.PinnedModel{Alias: "embed", Spec: gateway.ModelSpec{
	ID: "fake-embed", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 64,
	Cost: gateway.CostProfile{InputPer1kUSD: 0.01},
}}

type searchFixture struct {
	fixture
	kb *retrieval.Retriever
}

// newSearchFixture builds a gateway over a recording fake with the test
// catalog and an embedding model, and the retriever kb over kbDocs
// (chunks of 120 characters, lexical rerank, top 2), ingested outside any
// budget.
func newSearchFixture(t testing.TB, fc fake.Config, tp trace.TracerProvider, budgets ...gateway.Budget) searchFixture {
	t.Helper()
	fc.Record = true
	p, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	gc := gateway.Config{
		Models:    append(catalog(), embedModel),
		Providers: map[string]gateway.Provider{"fake": p}, Budgets: budgets,
		Retry: gateway.RetryPolicy{MaxAttempts: 1},
	}
	if tp != nil {
		gc.Tracer = tp.Tracer("gateway")
	}
	gw, err := gateway.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range kbDocs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	emb, err := retrieval.NewGatewayEmbedder(gw, "embed")
	if err != nil {
		t.Fatal(err)
	}
	chunker, err := retrieval.NewTextChunker(120, 0)
	if err != nil {
		t.Fatal(err)
	}
	store, err := memory.NewStore(64, retrieval.DistanceCosine)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := retrieval.New(retrieval.Binding{
		Name: "kb", Source: retrieval.Source{Dir: dir, Files: []string{"*.md"}},
		Chunker: chunker, Embedder: emb, Store: store, Reranker: retrieval.Lexical{}, TopK: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kb.Ingest(context.Background()); err != nil {
		t.Fatal(err)
	}
	return searchFixture{fixture: fixture{gw: gw, fake: p}, kb: kb}
}

// searchObservation is the observation of a search_ call, decoded.
type searchObservation struct {
	Query    string `json:"query"`
	Passages []struct {
		Cite    string   `json:"cite"`
		Source  string   `json:"source"`
		Heading string   `json:"heading"`
		ID      string   `json:"id"`
		Start   int      `json:"start"`
		End     int      `json:"end"`
		Score   *float64 `json:"score"`
		Text    string   `json:"text"`
	} `json:"passages"`
}

func decodeSearch(t *testing.T, obs string) searchObservation {
	t.Helper()
	var o searchObservation
	dec := json.NewDecoder(strings.NewReader(obs))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("search observation %q: %v", obs, err)
	}
	return o
}

// describedSearcher is a searcher that describes its corpus.
type describedSearcher struct{ agents.Searcher }

func (describedSearcher) Description() string { return "The shop's help-centre articles." }

func TestSearchToolOfferedToTheModel(t *testing.T) {
	tests := []struct {
		name     string
		searcher func(*retrieval.Retriever) agents.Searcher
		desc     string
	}{
		{"default description names the retriever", func(kb *retrieval.Retriever) agents.Searcher { return kb }, `Search the documents of retriever "kb"`},
		{"a searcher describes itself", func(kb *retrieval.Retriever) agents.Searcher { return describedSearcher{kb} }, "The shop's help-centre articles. Returns JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{answer("hi")}}, nil)
			r := newRuntime(t, agents.Config{
				Gateway:    fx.gw,
				Agents:     []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}, Retrievers: []string{"kb"}}},
				Tools:      []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
				Retrievers: map[string]agents.Searcher{"kb": tt.searcher(fx.kb)},
				Implementations: map[string]agents.Implementation{
					"lookup": echoTool,
				},
			})
			mustRun(t, r, "a", "hello", agents.RunOptions{})
			tools := fx.fake.Requests()[0].Tools
			var names []string
			for _, d := range tools {
				names = append(names, d.Name)
			}
			if d := cmp.Diff([]string{"lookup", "search_kb"}, names); d != "" {
				t.Fatalf("tools (-want +got):\n%s", d)
			}
			def := tools[1]
			if !strings.HasPrefix(def.Description, tt.desc) || !strings.Contains(def.Description, "cite") {
				t.Errorf("description %q, want prefix %q and a word on citing", def.Description, tt.desc)
			}
			var schema struct {
				Type       string `json:"type"`
				Properties map[string]struct {
					Type    string `json:"type"`
					Minimum *int   `json:"minimum"`
					Maximum *int   `json:"maximum"`
				} `json:"properties"`
				Required             []string `json:"required"`
				AdditionalProperties *bool    `json:"additionalProperties"`
			}
			if err := json.Unmarshal(def.Parameters, &schema); err != nil {
				t.Fatal(err)
			}
			k := schema.Properties["k"]
			if schema.Type != "object" || schema.Properties["query"].Type != "string" || k.Type != "integer" ||
				k.Minimum == nil || *k.Minimum != 1 || k.Maximum == nil || *k.Maximum != agents.MaxSearchK ||
				!slices.Equal(schema.Required, []string{"query"}) || schema.AdditionalProperties == nil || *schema.AdditionalProperties {
				t.Errorf("parameters %s", def.Parameters)
			}
		})
	}
}

func TestSearchReturnsPassagesWithSources(t *testing.T) {
	fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
		calls(call("s1", "search_kb", `{"query":"refund for a damaged item","k":1}`), call("s2", "search_kb", `{"query":"when does my parcel ship"}`)),
		answer("Damaged items are refunded in full [refunds.md#Damaged items]."),
	}}, nil)
	r := newRuntime(t, agents.Config{
		Gateway:    fx.gw,
		Agents:     []agents.Agent{{Name: "a", Model: "small", Retrievers: []string{"kb"}}},
		Retrievers: map[string]agents.Searcher{"kb": fx.kb},
	})
	res := mustRun(t, r, "a", "my item arrived broken", agents.RunOptions{})
	tc := res.Steps[0].ToolCalls
	for _, c := range tc {
		if c.ErrorKind != "" {
			t.Fatalf("%s: %s", c.Name, c.Observation)
		}
	}

	damaged := decodeSearch(t, tc[0].Observation)
	if damaged.Query != "refund for a damaged item" || len(damaged.Passages) != 1 {
		t.Fatalf("k=1 search: %+v", damaged)
	}
	p := damaged.Passages[0]
	if p.Source != "refunds.md" || p.Heading != "Refunds > Damaged items" || p.Cite != "refunds.md#Damaged items" ||
		!strings.Contains(p.Text, "refunded in full") || p.Score == nil || p.ID == "" {
		t.Fatalf("passage %+v", p)
	}
	if doc := kbDocs[p.Source]; p.Start < 0 || p.End > len(doc) || doc[p.Start:p.End] != p.Text {
		t.Fatalf("offsets [%d,%d) do not locate the text in %s", p.Start, p.End, p.Source)
	}

	// k omitted: the retriever's topK, best first.
	ship := decodeSearch(t, tc[1].Observation)
	if len(ship.Passages) != 2 || ship.Passages[0].Source != "shipping.md" || ship.Passages[0].Cite != "shipping.md#Shipping" {
		t.Fatalf("default-k search: %+v", ship)
	}
	if *ship.Passages[0].Score < *ship.Passages[1].Score {
		t.Fatalf("passages not best first: %v, %v", *ship.Passages[0].Score, *ship.Passages[1].Score)
	}
	// The model read both observations, in call order.
	req := fx.fake.Requests()[1]
	if d := cmp.Diff([]string{"user", "assistant", "tool:s1", "tool:s2"}, roles(req.Messages)); d != "" {
		t.Fatalf("second request (-want +got):\n%s", d)
	}
	if req.Messages[2].Content != tc[0].Observation {
		t.Fatalf("the model read %q", req.Messages[2].Content)
	}
}

// TestSearchArguments checks that arguments are validated against the
// schema before the searcher runs, k within 1..MaxSearchK.
func TestSearchArguments(t *testing.T) {
	tests := []struct {
		name   string
		args   string
		wantK  int
		reject string
	}{
		{"k omitted", `{"query":"refunds"}`, 0, ""},
		{"k lowest", `{"query":"refunds","k":1}`, 1, ""},
		{"k highest", `{"query":"refunds","k":20}`, 20, ""},
		{"k zero", `{"query":"refunds","k":0}`, 0, "minimum"},
		{"k above bound", `{"query":"refunds","k":21}`, 0, "maximum"},
		{"k negative", `{"query":"refunds","k":-3}`, 0, "minimum"},
		{"k fractional", `{"query":"refunds","k":1.5}`, 0, "integer"},
		{"k string", `{"query":"refunds","k":"3"}`, 0, "integer"},
		{"no query", `{"k":2}`, 0, "query"},
		{"empty query", `{"query":""}`, 0, "minLength"},
		{"blank query", `{"query":"  \n\t"}`, 0, "blank"},
		{"query not a string", `{"query":["refunds"]}`, 0, "string"},
		{"extra field", `{"query":"refunds","filter":"x"}`, 0, "filter"},
		{"not JSON", `{"query":`, 0, "invalid arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var gotK atomic.Int64
			var calls atomic.Int32
			s := agents.SearchFunc(func(_ context.Context, query string, k int) ([]retrieval.Hit, error) {
				calls.Add(1)
				gotK.Store(int64(k))
				return []retrieval.Hit{{Chunk: retrieval.Chunk{ID: "c1", Source: "a.md", Text: "x"}, Score: 1}}, nil
			})
			fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
				{ToolCalls: []gateway.ToolCall{{ID: "s", Name: "search_kb", Arguments: json.RawMessage(tt.args)}}},
				answer("done"),
			}})
			r := newRuntime(t, agents.Config{
				Gateway:    fx.gw,
				Agents:     []agents.Agent{{Name: "a", Model: "small", Retrievers: []string{"kb"}}},
				Retrievers: map[string]agents.Searcher{"kb": s},
			})
			res := mustRun(t, r, "a", "go", agents.RunOptions{})
			c := res.Steps[0].ToolCalls[0]
			if tt.reject == "" {
				if c.ErrorKind != "" || calls.Load() != 1 || gotK.Load() != int64(tt.wantK) {
					t.Fatalf("kind %q obs %q, %d calls with k=%d, want k=%d", c.ErrorKind, c.Observation, calls.Load(), gotK.Load(), tt.wantK)
				}
				return
			}
			if c.ErrorKind != agents.KindInvalidArguments || !strings.Contains(c.Observation, tt.reject) {
				t.Fatalf("kind %q obs %q, want invalid arguments mentioning %q", c.ErrorKind, c.Observation, tt.reject)
			}
			if calls.Load() != 0 {
				t.Fatalf("the searcher ran %d times on invalid arguments", calls.Load())
			}
		})
	}
}

func TestNewRefusesBadRetrievers(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}})
	kb := agents.SearchFunc(func(context.Context, string, int) ([]retrieval.Hit, error) { return nil, nil })
	tests := []struct {
		name       string
		retrievers []string
		configured map[string]agents.Searcher
		want       string
	}{
		{"not configured", []string{"kb", "faq"}, map[string]agents.Searcher{"kb": kb}, `agent "a": retriever "faq" is not in Config.Retrievers`},
		{"no retrievers at all", []string{"kb"}, nil, `agent "a": retriever "kb" is not in Config.Retrievers`},
		{"nil searcher", []string{"kb"}, map[string]agents.Searcher{"kb": nil}, `agent "a": retriever "kb" is not in Config.Retrievers`},
		{"named twice", []string{"kb", "kb"}, map[string]agents.Searcher{"kb": kb}, `agent "a": retrievers[1]: retriever "kb" is listed twice`},
		{"empty name", []string{""}, map[string]agents.Searcher{"": kb}, `agent "a" names a retriever without a name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agents.New(agents.Config{
				Gateway:    fx.gw,
				Agents:     []agents.Agent{{Name: "a", Model: "small", Retrievers: tt.retrievers}},
				Retrievers: tt.configured,
			})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", err, tt.want)
			}
		})
	}
}

// TestSearchFailuresAreObservations checks that whatever a searcher does
// wrong, the model reads an error (or a well-formed observation) and the
// run goes on.
func TestSearchFailuresAreObservations(t *testing.T) {
	hit := func(id string, score float64) retrieval.Hit {
		return retrieval.Hit{Chunk: retrieval.Chunk{ID: id, Source: id + ".md", Heading: "T", Text: "text " + id}, Score: score}
	}
	tests := []struct {
		name     string
		search   func(context.Context, string, int) ([]retrieval.Hit, error)
		kind     agents.ErrorKind
		contains string
		check    func(*testing.T, searchObservation)
	}{
		{"error", func(context.Context, string, int) ([]retrieval.Hit, error) {
			return nil, errors.New("index offline")
		}, agents.KindToolFailed, "error: tool search_kb failed: index offline", nil},
		{"panic", func(context.Context, string, int) ([]retrieval.Hit, error) {
			panic("corrupt index")
		}, agents.KindToolFailed, "panic: corrupt index", nil},
		{"a typed error that is not a budget breach", func(context.Context, string, int) ([]retrieval.Hit, error) {
			return nil, &kind.DeferredError{Feature: "pdf sources"}
		}, agents.KindToolFailed, "pdf sources", nil},
		{"nothing found", func(context.Context, string, int) ([]retrieval.Hit, error) {
			return nil, nil
		}, "", `"passages":[]`, nil},
		{"more hits than asked", func(context.Context, string, int) ([]retrieval.Hit, error) {
			return []retrieval.Hit{hit("a", 3), hit("b", 2), hit("c", 1)}, nil
		}, "", "", func(t *testing.T, o searchObservation) {
			if len(o.Passages) != 2 || o.Passages[1].Source != "b.md" {
				t.Fatalf("passages %+v, want the first 2", o.Passages)
			}
		}},
		{"non-finite scores", func(context.Context, string, int) ([]retrieval.Hit, error) {
			return []retrieval.Hit{hit("a", math.NaN()), hit("b", math.Inf(-1))}, nil
		}, "", "", func(t *testing.T, o searchObservation) {
			if len(o.Passages) != 2 || o.Passages[0].Score != nil || o.Passages[1].Score != nil || o.Passages[0].Cite != "a.md#T" {
				t.Fatalf("passages %+v, want null scores", o.Passages)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(call("s", "search_kb", `{"query":"q","k":2}`)), answer("done")}})
			r := newRuntime(t, agents.Config{
				Gateway:    fx.gw,
				Agents:     []agents.Agent{{Name: "a", Model: "small", Retrievers: []string{"kb"}}},
				Retrievers: map[string]agents.Searcher{"kb": agents.SearchFunc(tt.search)},
			})
			res := mustRun(t, r, "a", "go", agents.RunOptions{})
			c := res.Steps[0].ToolCalls[0]
			if res.Status != agents.StatusCompleted || c.ErrorKind != tt.kind || !strings.Contains(c.Observation, tt.contains) {
				t.Fatalf("status %s kind %q obs %q, want kind %q containing %q", res.Status, c.ErrorKind, c.Observation, tt.kind, tt.contains)
			}
			if tt.check != nil {
				tt.check(t, decodeSearch(t, c.Observation))
			}
		})
	}
}

// TestSearchChargesTheRunBudget checks that the searcher's context carries
// the agent's budget under the run's scope key, and that the embedding of
// a real retriever is settled on that account.
func TestSearchChargesTheRunBudget(t *testing.T) {
	budgets := []gateway.Budget{
		{Name: "per_run", MaxUSD: 1, Scope: gateway.ScopeRun},
		{Name: "per_thread", MaxUSD: 1, Scope: gateway.ScopeThread},
	}
	tests := []struct {
		name, budget, thread string
		wantKey              func(runID string) string
	}{
		{"run scope", "per_run", "th", func(id string) string { return id }},
		{"thread scope", "per_thread", "th", func(string) string { return "th" }},
		{"thread scope without a thread", "per_thread", "", func(id string) string { return id }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(call("s", "search_kb", `{"query":"refund"}`)), answer("done")}}, nil, budgets...)
			var seen []gateway.BudgetRef
			s := agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
				seen = gateway.BudgetsFromContext(ctx)
				return fx.kb.Search(ctx, q, k)
			})
			r := newRuntime(t, agents.Config{
				Gateway: fx.gw, Budgets: budgets,
				Agents:     []agents.Agent{{Name: "a", Model: "small", Budget: tt.budget, Retrievers: []string{"kb"}}},
				Retrievers: map[string]agents.Searcher{"kb": s},
			})
			res := mustRun(t, r, "a", "go", agents.RunOptions{ThreadID: tt.thread})
			key := tt.wantKey(res.RunID)
			if d := cmp.Diff([]gateway.BudgetRef{{Name: tt.budget, Key: key}}, seen); d != "" {
				t.Fatalf("budgets on the searcher's context (-want +got):\n%s", d)
			}
			// The run's account is closed now that the run ended; its
			// budget's totals keep what it settled.
			spend, err := fx.gw.SpendByBudget(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var calls int64
			for _, b := range spend {
				if b.Budget == tt.budget {
					calls = b.Calls
				}
			}
			if calls != 3 { // two model calls and the query's embedding
				t.Fatalf("budget %s settled %d calls, want 3: %+v", tt.budget, calls, spend)
			}
		})
	}
}

// TestSearchBudgetBreach checks what a breach in a search's embedding does
// under each budget policy. The searcher embeds a long text, worth more
// than $0.1 at the embedding model's price, on the run's budget.
func TestSearchBudgetBreach(t *testing.T) {
	long := strings.Repeat("refund policy ", 1000)
	tests := []struct {
		name    string
		maxUSD  float64
		policy  agents.OnBudgetExhausted
		status  agents.Status
		kind    agents.ErrorKind
		aliases []string // the alias of each step
	}{
		// A failing agent stops, as on a refused model call.
		{"fail stops the run", 0.01, agents.BudgetFail, agents.StatusBudgetExceeded, agents.KindToolFailed, []string{"large"}},
		// A degrading agent reads the breach and goes on; the budget
		// still has room for the next model call on its rung.
		{"degrade goes on without the passages", 0.05, agents.BudgetDegrade, agents.StatusCompleted, agents.KindBudgetExceeded, []string{"large", "large"}},
		// An agent that already degraded (large's worst case does not fit
		// $0.002) stops at its second breach.
		{"a second breach stops a degraded agent", 0.002, agents.BudgetDegrade, agents.StatusBudgetExceeded, agents.KindToolFailed, []string{"small"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := gateway.Budget{Name: "per_run", MaxUSD: tt.maxUSD, Scope: gateway.ScopeRun}
			fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(call("s", "search_kb", `{"query":"refund"}`)), answer("done")}}, nil, budget)
			s := agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
				if _, err := fx.gw.Embed(ctx, "embed", []string{long}); err != nil {
					return nil, err
				}
				return fx.kb.Search(ctx, q, k)
			})
			r := newRuntime(t, agents.Config{
				Gateway: fx.gw, Budgets: []gateway.Budget{budget},
				Agents: []agents.Agent{{Name: "a", Model: "large", Ladder: []string{"large", "small"}, OnBudgetExhausted: tt.policy,
					Budget: "per_run", Retrievers: []string{"kb"}}},
				Retrievers: map[string]agents.Searcher{"kb": s},
			})
			res, err := r.Run(context.Background(), "a", "go", agents.RunOptions{})
			if res.Status != tt.status {
				t.Fatalf("status %s, want %s (err %v)", res.Status, tt.status, err)
			}
			var aliases []string
			for _, st := range res.Steps {
				aliases = append(aliases, st.Alias)
			}
			if d := cmp.Diff(tt.aliases, aliases); d != "" {
				t.Fatalf("step aliases (-want +got):\n%s", d)
			}
			c := res.Steps[0].ToolCalls[0]
			if c.ErrorKind != tt.kind || !strings.Contains(c.Observation, "budget") {
				t.Fatalf("call kind %q obs %q, want %q", c.ErrorKind, c.Observation, tt.kind)
			}
			if tt.status == agents.StatusCompleted {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var be *agents.BudgetExceededError
			var gbe *gateway.BudgetExceededError
			if !errors.As(err, &be) || be.Tool != "search_kb" || be.Agent != "a" || be.RunID != res.RunID || !errors.As(err, &gbe) || gbe.Budget != "per_run" {
				t.Fatalf("err %v, want *agents.BudgetExceededError of tool search_kb wrapping the gateway's", err)
			}
			if rec, lerr := r.Store().LoadRun(context.Background(), res.RunID); lerr != nil || rec.Status != agents.StatusBudgetExceeded {
				t.Fatalf("stored run %s %v", rec.Status, lerr)
			}
		})
	}
}

// TestSearchInDelegatedRunBreachStopsTheCaller checks that a breach in a
// delegated agent's search ends the whole run, as a breach of its model
// call does.
func TestSearchInDelegatedRunBreachStopsTheCaller(t *testing.T) {
	budget := gateway.Budget{Name: "per_run", MaxUSD: 0.01, Scope: gateway.ScopeRun}
	fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{
		"boss":   {calls(call("d", "delegate_to_reader", `{"input":"find the refund policy"}`)), answer("unreachable")},
		"reader": {calls(call("s", "search_kb", `{"query":"refund"}`)), answer("unreachable")},
	}}, nil, budget)
	s := agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
		if _, err := fx.gw.Embed(ctx, "embed", []string{strings.Repeat("refund ", 3000)}); err != nil {
			return nil, err
		}
		return fx.kb.Search(ctx, q, k)
	})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Budgets: []gateway.Budget{budget},
		Agents: []agents.Agent{
			{Name: "boss", Model: "small", Delegates: []string{"reader"}},
			{Name: "reader", Model: "tiny", Budget: "per_run", Retrievers: []string{"kb"}},
		},
		Retrievers: map[string]agents.Searcher{"kb": s},
	})
	res, err := r.Run(context.Background(), "boss", "go", agents.RunOptions{})
	var be *agents.BudgetExceededError
	if res.Status != agents.StatusBudgetExceeded || !errors.As(err, &be) || be.Agent != "reader" || be.Tool != "search_kb" {
		t.Fatalf("status %s err %v", res.Status, err)
	}
	// The result shows the call that stopped the run, inside the
	// delegation that made it.
	if len(res.Steps) != 1 || res.Steps[0].ToolCalls[0].Delegate == nil {
		t.Fatalf("steps %+v", res.Steps)
	}
	d := res.Steps[0].ToolCalls[0].Delegate
	if d.Status != agents.StatusBudgetExceeded || len(d.Steps) != 1 || d.Steps[0].ToolCalls[0].Name != "search_kb" ||
		!strings.Contains(d.Steps[0].ToolCalls[0].Observation, "budget") {
		t.Fatalf("delegated run %+v", d)
	}
}

func TestSearchSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(call("s1", "search_kb", `{"query":"damaged item refund","k":2}`)), answer("done")}}, tp)
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Tracer: tp.Tracer("agents"),
		Agents:     []agents.Agent{{Name: "a", Model: "small", Retrievers: []string{"kb"}}},
		Retrievers: map[string]agents.Searcher{"kb": fx.kb},
	})
	res := mustRun(t, r, "a", "go", agents.RunOptions{})
	var agent, tool sdktrace.ReadOnlySpan
	var embeds []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch {
		case s.Name() == "invoke_agent a":
			agent = s
		case s.Name() == "execute_tool search_kb":
			tool = s
		case strings.HasPrefix(s.Name(), "embeddings"):
			embeds = append(embeds, s)
		}
	}
	if agent == nil || tool == nil {
		t.Fatalf("spans: agent %v tool %v", agent, tool)
	}
	if tool.Parent().SpanID() != agent.SpanContext().SpanID() {
		t.Fatal("execute_tool search_kb is not a child of invoke_agent a")
	}
	for key, want := range map[string]string{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search_kb", "gen_ai.tool.call.id": "s1",
		"gen_ai.tool.type": "datastore", "gen_ai.data_source.id": "kb", "aid.run.id": res.RunID,
	} {
		if v, ok := attr(tool, key); !ok || v.AsString() != want {
			t.Errorf("%s = %q, want %q", key, v.AsString(), want)
		}
	}
	v, ok := attr(tool, "gen_ai.retrieval.documents")
	var docs []struct {
		ID    string  `json:"id"`
		Score float64 `json:"score"`
	}
	if !ok || json.Unmarshal([]byte(v.AsString()), &docs) != nil || len(docs) != 2 {
		t.Fatalf("gen_ai.retrieval.documents = %q", v.AsString())
	}
	obs := decodeSearch(t, res.Steps[0].ToolCalls[0].Observation)
	for i, d := range docs {
		if d.ID != obs.Passages[i].ID {
			t.Errorf("document %d is %s, the observation's passage %s", i, d.ID, obs.Passages[i].ID)
		}
	}
	if _, ok := attr(tool, "gen_ai.retrieval.query.text"); ok {
		t.Error("the query, which may be sensitive, is on the span")
	}
	// The query's embedding is traced under the tool's span; the ingest's
	// embeddings (before the run) are not.
	var under int
	for _, e := range embeds {
		if e.Parent().SpanID() == tool.SpanContext().SpanID() {
			under++
		}
	}
	if under != 1 {
		t.Fatalf("%d embedding spans under execute_tool search_kb, want 1", under)
	}
}

// TestSearchFailureSpan checks that a failed search marks its span.
func TestSearchFailureSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(call("s1", "search_kb", `{"query":"q"}`)), answer("done")}})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Tracer: tp.Tracer("agents"),
		Agents: []agents.Agent{{Name: "a", Model: "small", Retrievers: []string{"kb"}}},
		Retrievers: map[string]agents.Searcher{"kb": agents.SearchFunc(func(context.Context, string, int) ([]retrieval.Hit, error) {
			return nil, errors.New("index offline")
		})},
	})
	mustRun(t, r, "a", "go", agents.RunOptions{})
	for _, s := range rec.Ended() {
		if s.Name() == "execute_tool search_kb" {
			if v, _ := attr(s, "aid.tool.error_kind"); v.AsString() != string(agents.KindToolFailed) || s.Status().Code.String() != "Error" {
				t.Fatalf("error kind %q status %v", v.AsString(), s.Status())
			}
			return
		}
	}
	t.Fatal("no execute_tool search_kb span")
}

// TestRetrieverSharedByTwoAgents runs two agents over one retriever at
// once, each searching concurrently with another read tool in the same
// answer; both read the same document.
func TestRetrieverSharedByTwoAgents(t *testing.T) {
	var started sync.WaitGroup
	started.Add(4) // two runs, each a search and a lookup that wait for each other
	var inFlight sync.Map
	fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{
		"billing": {calls(call("b1", "search_kb", `{"query":"refund within 30 days"}`), call("b2", "lookup", `{"id":"billing"}`)), answer("billing done")},
		"tech":    {calls(call("t1", "lookup", `{"id":"tech"}`), call("t2", "search_kb", `{"query":"refund within 30 days","k":1}`)), answer("tech done")},
	}}, nil)
	barrier := func() {
		started.Done()
		started.Wait()
	}
	s := agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
		ri, _ := agents.RunInfoFromContext(ctx)
		inFlight.Store(ri.Agent+":search", true)
		barrier()
		return fx.kb.Search(ctx, q, k)
	})
	lookup := agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		barrier()
		return "ok", nil
	})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw,
		Agents: []agents.Agent{
			{Name: "billing", Model: "small", Tools: []string{"lookup"}, Retrievers: []string{"kb"}},
			{Name: "tech", Model: "tiny", Tools: []string{"lookup"}, Retrievers: []string{"kb"}},
		},
		Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": lookup},
		Retrievers:      map[string]agents.Searcher{"kb": s},
	})
	results := make([]agents.RunResult, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, a := range []string{"billing", "tech"} {
		wg.Go(func() { results[i], errs[i] = r.Run(context.Background(), a, "refund?", agents.RunOptions{}) })
	}
	wg.Wait()
	for i, want := range []struct {
		call  int
		count int
	}{{0, 2}, {1, 1}} {
		res := results[i]
		if errs[i] != nil || res.Status != agents.StatusCompleted {
			t.Fatalf("%s: %s %v", res.Agent, res.Status, errs[i])
		}
		c := res.Steps[0].ToolCalls[want.call]
		o := decodeSearch(t, c.Observation)
		if len(o.Passages) != want.count || o.Passages[0].Source != "refunds.md" {
			t.Fatalf("%s: passages %+v", res.Agent, o.Passages)
		}
	}
	for _, k := range []string{"billing:search", "tech:search"} {
		if _, ok := inFlight.Load(k); !ok {
			t.Errorf("%s never reached the searcher with its run info", k)
		}
	}
}

// TestRunStoppedMidStepKeepsItsCalls checks that a run stopped by a call
// (here a search's budget breach) still reports the step: the call that
// stopped it, with its one result, and the calls after it, not run.
func TestRunStoppedMidStepKeepsItsCalls(t *testing.T) {
	budget := gateway.Budget{Name: "per_run", MaxUSD: 0.01, Scope: gateway.ScopeRun}
	fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
		calls(call("s", "search_kb", `{"query":"refund"}`), call("n", "note", `{"id":"x"}`)), answer("unreachable"),
	}}, nil, budget)
	var notes atomic.Int32
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Budgets: []gateway.Budget{budget},
		Agents: []agents.Agent{{Name: "a", Model: "small", Budget: "per_run", Tools: []string{"note"}, Retrievers: []string{"kb"}}},
		Tools:  []agents.Tool{{Name: "note", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite}},
		Implementations: map[string]agents.Implementation{"note": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			notes.Add(1)
			return "noted", nil
		})},
		Retrievers: map[string]agents.Searcher{"kb": agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
			_, err := fx.gw.Embed(ctx, "embed", []string{strings.Repeat("refund ", 3000)})
			return nil, err
		})},
	})
	res, err := r.Run(context.Background(), "a", "go", agents.RunOptions{})
	if res.Status != agents.StatusBudgetExceeded || err == nil {
		t.Fatalf("status %s err %v", res.Status, err)
	}
	if len(res.Steps) != 1 || len(res.Steps[0].ToolCalls) != 2 {
		t.Fatalf("steps %+v", res.Steps)
	}
	search, note := res.Steps[0].ToolCalls[0], res.Steps[0].ToolCalls[1]
	if !search.Done || !strings.HasPrefix(search.Observation, "error: the run stopped during this call") {
		t.Errorf("search %+v", search)
	}
	if note.ErrorKind != agents.KindNotRun || notes.Load() != 0 {
		t.Errorf("note %+v, ran %d times", note, notes.Load())
	}
	recs, err := r.Store().Calls(context.Background(), res.RunID)
	if err != nil || len(recs) != 1 || recs[0].Tool != "search_kb" || recs[0].Result == nil {
		t.Fatalf("call records %+v %v: want only the search, with its result", recs, err)
	}
}

// TestInterruptedSearchIsRunAgain checks that a search interrupted by a
// crash, being a read, is run again by Recover without asking anyone.
func TestInterruptedSearchIsRunAgain(t *testing.T) {
	fx := newSearchFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
		calls(call("s", "search_kb", `{"query":"damaged item refund","k":1}`)), answer("refunded in full"),
	}}, nil)
	var searches atomic.Int32
	shared := agents.NewInMemoryStore()
	cfg := func(store agents.Store) agents.Config {
		return agents.Config{
			Gateway: fx.gw, Store: store,
			Agents: []agents.Agent{{Name: "a", Model: "small", Retrievers: []string{"kb"}}},
			Retrievers: map[string]agents.Searcher{"kb": agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
				searches.Add(1)
				return fx.kb.Search(ctx, q, k)
			})},
		}
	}
	res, err := newRuntime(t, cfg(&crashingStore{Store: shared, tool: "search_kb"})).Run(context.Background(), "a", "broken item", agents.RunOptions{})
	if !errors.Is(err, errCrashed) {
		t.Fatalf("crashed run: %s %v", res.Status, err)
	}
	res, err = newRuntime(t, cfg(shared)).Drive(context.Background(), res.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusCompleted || searches.Load() != 2 {
		t.Fatalf("recovered: %s %v after %d searches", res.Status, err, searches.Load())
	}
	if o := decodeSearch(t, res.Steps[0].ToolCalls[0].Observation); len(o.Passages) != 1 || o.Passages[0].Source != "refunds.md" {
		t.Fatalf("re-run search %+v", o)
	}
}
