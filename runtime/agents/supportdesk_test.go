package agents_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	fixturetool "github.com/aidgen/aid/runtime/agents/tools/fixture"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// supportDesk is examples/support-desk, built by hand: the runtime never
// reads the IR. It mirrors app.cue: its tools are the example's fixtures,
// the researcher's kb retriever is a real retrieval.Retriever over the
// example's docs (memory store, the fake embedding model through the
// gateway, lexical rerank, top 4), and the fake plays the example's
// script.
const supportDesk = "../../examples/support-desk"

func supportDeskRuntime(t *testing.T, fc fake.Config) (*agents.Runtime, *fake.Provider) {
	t.Helper()
	cfg, p := supportDeskConfig(t, fc)
	return newRuntime(t, cfg), p
}

// supportDeskConfig is supportDeskRuntime's configuration.
func supportDeskConfig(t *testing.T, fc fake.Config) (agents.Config, *fake.Provider) {
	t.Helper()
	p, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	caps := []gateway.Capability{gateway.CapabilityJSON, gateway.CapabilityStreaming, gateway.CapabilityTools}
	// As in app.cue: the gateway reserves a call's worst case before it
	// runs (4096 output tokens of the large model are $0.041), so per_run
	// leaves room for the refund flow's calls.
	budgets := []gateway.Budget{
		{Name: "per_run", MaxUSD: 0.5, MaxTotalTokens: 200_000, Scope: gateway.ScopeRun},
		{Name: "daily", MaxUSD: 25, Scope: gateway.ScopeGlobal},
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{
			{Alias: "large", Spec: gateway.ModelSpec{ID: "fake-large-2024-06-01", Provider: "fake", ContextWindow: 128000, MaxOutputTokens: 4096, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01}}},
			{Alias: "small", Spec: gateway.ModelSpec{ID: "fake-small-2024-06-01", Provider: "fake", ContextWindow: 128000, MaxOutputTokens: 4096, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006}}},
			{Alias: "embed", Spec: gateway.ModelSpec{ID: "fake-embed-2024-06-01", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 256, Cost: gateway.CostProfile{InputPer1kUSD: 0.00002}}},
		},
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets:   budgets,
	})
	if err != nil {
		t.Fatal(err)
	}
	billing, err := os.ReadFile(filepath.Join(supportDesk, "prompts", "billing.md"))
	if err != nil {
		t.Fatal(err)
	}
	impls := map[string]agents.Implementation{}
	for _, name := range []string{"lookup_order", "get_invoice", "issue_refund", "update_ticket"} {
		rows, err := fixturetool.Load(filepath.Join(supportDesk, "fixtures", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if impls[name], err = fixturetool.New(rows); err != nil {
			t.Fatal(err)
		}
	}
	kb, err := retrieval.Build(t.Context(), gw,
		[]retrieval.StoreConfig{{Name: "kb", Distance: retrieval.DistanceCosine, Kind: memory.Kind{}}},
		[]retrieval.Config{{
			Name: "kb", Source: retrieval.Source{Dir: supportDesk, Files: []string{"docs/**/*.md"}},
			ChunkSize: 600, ChunkOverlap: 80, EmbedModel: "embed", Store: "kb", TopK: 4, Rerank: retrieval.RerankLexical,
		}}, retrieval.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kb["kb"].Ingest(t.Context()); err != nil {
		t.Fatal(err)
	}
	mem := &agents.StoredMemory{Store: "memory"}
	return agents.Config{
		Gateway: gw,
		Budgets: budgets,
		Tools: []agents.Tool{
			{Name: "lookup_order", Description: "Look up an order by id: status, items, amount and shipping.",
				Input: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{6}$"}},"required":["order_id"],"additionalProperties":false}`)},
			{Name: "get_invoice", Description: "Fetch the invoice of an order as plain text.",
				Input: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
			{Name: "issue_refund", Description: "Refund part or all of an order to the original payment method.",
				Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways, Timeout: 10 * time.Second,
				Input: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount_usd":{"type":"number","exclusiveMinimum":0},"reason":{"type":"string"}},"required":["order_id","amount_usd","reason"]}`)},
			{Name: "update_ticket", Description: "Add a note to the customer's support ticket and set its status.", Effects: agents.EffectsWrite,
				Input: json.RawMessage(`{"type":"object","properties":{"note":{"type":"string"},"status":{"enum":["open","pending","solved"]}},"required":["note"]}`)},
		},
		Implementations: impls,
		Retrievers:      map[string]agents.Searcher{"kb": kb["kb"]},
		MemoryStores:    map[string]agents.MemoryStore{"memory": agents.NewInMemoryMemory()},
		Agents: []agents.Agent{
			{Name: "triage", Description: "Greets the customer and routes the conversation.", Model: "large", Ladder: []string{"large", "small"},
				OnBudgetExhausted: agents.BudgetDegrade, Budget: "per_run", Instructions: "You are the front desk of an online shop.",
				Tools: []string{"lookup_order"}, Handoffs: []string{"billing", "tech"},
				Memory: &agents.Memory{ThreadTokenBudget: 4000, User: mem}},
			{Name: "billing", Description: "Answers invoice and refund questions and issues refunds.", Model: "large", Budget: "per_run",
				Instructions: string(billing), Tools: []string{"lookup_order", "get_invoice", "issue_refund"}, Delegates: []string{"researcher"},
				Memory: &agents.Memory{ThreadTokenBudget: 6000, User: mem, Global: mem},
				Output: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"refunded":{"type":"boolean"}},"required":["answer"]}`)},
			{Name: "tech", Description: "Solves product and account problems from the help centre.", Model: "small", Budget: "per_run",
				Instructions: "You solve technical problems.", Tools: []string{"update_ticket"}, Handoffs: []string{"billing"}, Delegates: []string{"researcher"}},
			{Name: "researcher", Description: "Searches the help centre and summarises what it says.", Model: "small", MaxSteps: 4,
				Instructions: "Search the knowledge base and answer in at most five sentences, citing article titles.", Retrievers: []string{"kb"}},
		},
	}, p
}

func loadSupportDeskScript(t *testing.T) fake.Config {
	t.Helper()
	sc, err := fake.LoadScript(filepath.Join(supportDesk, "fake-script.json"))
	if err != nil {
		t.Fatal(err)
	}
	return fake.Config{Analyzer: analysis.English{}, Seed: 7, Agents: sc.Agents}
}

// callNames lists a run's tool calls as agent:tool, and fails on any error
// observation: every call of the script must match a fixture row.
func callNames(t *testing.T, steps []agents.StepRecord) []string {
	t.Helper()
	var out []string
	for _, s := range steps {
		for _, c := range s.ToolCalls {
			if c.ErrorKind != "" {
				t.Errorf("%s: %s(%s) failed: %s", s.Agent, c.Name, c.Arguments, c.Observation)
			}
			out = append(out, s.Agent+":"+c.Name)
		}
	}
	return out
}

func TestSupportDeskRefund(t *testing.T) {
	r, _ := supportDeskRuntime(t, loadSupportDeskScript(t))
	res := mustRun(t, r, "triage", "I want a refund for order AB-123456", agents.RunOptions{UserID: "u1", ThreadID: "th1"})
	if res.Status != agents.StatusPaused || res.Agent != "billing" || !slices.Equal(res.Path, []string{"triage", "billing"}) {
		t.Fatalf("status %s agent %s path %v", res.Status, res.Agent, res.Path)
	}
	pending, ok := res.Checkpoint.Pending.Call()
	if !ok || pending.Name != "issue_refund" || res.Checkpoint.Pending.Reason != agents.PauseApproval {
		t.Fatalf("pending %+v", res.Checkpoint.Pending)
	}
	lookup := res.Steps[0].ToolCalls[0]
	if !strings.Contains(lookup.Observation, `"status":"delivered"`) {
		t.Errorf("lookup_order observation %q", lookup.Observation)
	}
	delegated := res.Steps[2].ToolCalls[0]
	if delegated.Delegate == nil || delegated.Delegate.Agent != "researcher" || !strings.HasPrefix(delegated.Observation, `According to "Refunds"`) {
		t.Fatalf("delegation %+v", delegated)
	}
	checkResearch(t, delegated.Delegate.Steps, delegated.Observation)

	res, err := r.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("resume: %s %v", res.Status, err)
	}
	want := []string{"triage:lookup_order", "triage:transfer_to_billing", "billing:delegate_to_researcher", "billing:get_invoice", "billing:issue_refund"}
	if got := callNames(t, res.Steps); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	refund := res.Steps[4].ToolCalls[0]
	if refund.Approval == nil || !refund.Approval.Approved || !strings.Contains(refund.Observation, `"refund_id":"RF-0001"`) {
		t.Errorf("refund %+v", refund)
	}
	var out struct {
		Answer   string `json:"answer"`
		Refunded *bool  `json:"refunded"`
	}
	if err := json.Unmarshal([]byte(res.Answer), &out); err != nil || out.Refunded == nil || !*out.Refunded || !strings.Contains(out.Answer, "AB-123456") {
		t.Fatalf("answer %q: %v", res.Answer, err)
	}
}

// checkResearch checks the researcher's part of the script: two searches
// of kb, in one step, whose best passages come from the documents that
// answer them, and an answer whose every citation is the cite of a passage
// the searches returned.
func checkResearch(t *testing.T, steps []agents.StepRecord, answer string) {
	t.Helper()
	if len(steps) != 2 || len(steps[0].ToolCalls) != 2 {
		t.Fatalf("researcher steps %+v", steps)
	}
	cites := map[string]bool{}
	for i, want := range []struct {
		source string
		n      int
	}{
		{"docs/refunds.md", 2},               // k 2
		{"docs/troubleshooting/login.md", 4}, // the retriever's topK
	} {
		c := steps[0].ToolCalls[i]
		if c.Name != "search_kb" || c.ErrorKind != "" {
			t.Fatalf("researcher call %d: %s %s", i, c.Name, c.Observation)
		}
		var obs struct {
			Passages []struct{ Cite, Source, Text string }
		}
		if err := json.Unmarshal([]byte(c.Observation), &obs); err != nil {
			t.Fatalf("search_kb observation %q: %v", c.Observation, err)
		}
		if len(obs.Passages) != want.n || obs.Passages[0].Source != want.source {
			t.Fatalf("search_kb(%s) found %+v, want %d passages, %s first", c.Arguments, obs.Passages, want.n, want.source)
		}
		for _, p := range obs.Passages {
			cites[p.Cite] = true
		}
	}
	// The answer cites [source#heading]; each must be a passage it read.
	n := 0
	for rest := answer; ; {
		i := strings.Index(rest, "[")
		if i < 0 {
			break
		}
		j := strings.Index(rest[i:], "]")
		if j < 0 {
			t.Fatalf("unclosed citation in %q", answer)
		}
		if cite := rest[i+1 : i+j]; !cites[cite] {
			t.Errorf("the answer cites %q, which no search returned (returned: %v)", cite, cites)
		}
		n++
		rest = rest[i+j:]
	}
	if n != 2 || !strings.Contains(answer, "[docs/refunds.md#Refunds]") {
		t.Errorf("answer %q: want two citations, refunds.md among them", answer)
	}
}

// The other entry points of the script play too: tech delegates and
// updates the ticket; the researcher searches and answers alone.
func TestSupportDeskOtherAgents(t *testing.T) {
	r, _ := supportDeskRuntime(t, loadSupportDeskScript(t))
	res := mustRun(t, r, "tech", "I cannot log in", agents.RunOptions{UserID: "u1"})
	if res.Status != agents.StatusCompleted || !strings.Contains(res.Answer, "Reset your password") {
		t.Fatalf("tech: %s %q", res.Status, res.Answer)
	}
	if got, want := callNames(t, res.Steps), []string{"tech:delegate_to_researcher", "tech:update_ticket"}; !slices.Equal(got, want) {
		t.Fatalf("tech calls %v, want %v", got, want)
	}
	checkResearch(t, res.Steps[0].ToolCalls[0].Delegate.Steps, res.Steps[0].ToolCalls[0].Observation)
	res = mustRun(t, r, "researcher", "refund policy?", agents.RunOptions{})
	if res.Status != agents.StatusCompleted || !strings.HasPrefix(res.Answer, "According to") {
		t.Fatalf("researcher: %s %q", res.Status, res.Answer)
	}
	if got, want := callNames(t, res.Steps), []string{"researcher:search_kb", "researcher:search_kb"}; !slices.Equal(got, want) {
		t.Fatalf("researcher calls %v, want %v", got, want)
	}
	checkResearch(t, res.Steps, res.Answer)
}

// evalCases reads the example's eval dataset as answer-key cases.
func evalCases(t *testing.T) []fake.Case {
	t.Helper()
	f, err := os.Open(filepath.Join(supportDesk, "evals", "refunds.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []fake.Case
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row struct{ ID, Input, Expected string }
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, fake.Case{ID: row.ID, Input: row.Input, Answer: row.Expected})
	}
	return cases
}

// With an answer key, an agent target answers the case's expected answer
// (here with accuracy 1) as a document valid for its output schema: the
// example's eval of billing runs on the fake, scripted or not.
func TestSupportDeskAnswerKey(t *testing.T) {
	cases := evalCases(t)
	key := &fake.AnswerKey{Cases: cases, Accuracy: 1}
	tests := []struct {
		name  string
		cfg   fake.Config
		agent string
		calls []string
	}{
		{"billing without a script answers at once", fake.Config{Analyzer: analysis.English{}, AnswerKey: key}, "billing", nil},
		{"tech's script ends with the key's answer", fake.Config{Analyzer: analysis.English{}, AnswerKey: key, Agents: loadSupportDeskScript(t).Agents}, "tech", []string{"tech:delegate_to_researcher", "tech:update_ticket"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := supportDeskRuntime(t, tt.cfg)
			for i, c := range cases {
				ctx := gateway.WithSample(t.Context(), gateway.SampleKey{Case: c.ID, Index: i})
				res, err := r.Run(ctx, tt.agent, c.Input, agents.RunOptions{UserID: "eval"})
				if err != nil || res.Status != agents.StatusCompleted {
					t.Fatalf("case %s: %s %v", c.ID, res.Status, err)
				}
				if got := callNames(t, res.Steps); !slices.Equal(got, tt.calls) {
					t.Fatalf("case %s: calls %v, want %v", c.ID, got, tt.calls)
				}
				want := c.Answer
				if tt.agent == "billing" {
					b, _ := json.Marshal(map[string]string{"answer": c.Answer})
					want = string(b)
				}
				if res.Answer != want {
					t.Fatalf("case %s: answer %q, want %q", c.ID, res.Answer, want)
				}
			}
		})
	}
}
