package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

func TestNewRefusesBadConfig(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}})
	noTools := newFixture(t, fake.Config{Analyzer: analysis.English{}, Capabilities: []gateway.Capability{gateway.CapabilityJSON}})
	base := func() agents.Config {
		return agents.Config{
			Gateway: fx.gw,
			Agents: []agents.Agent{
				{Name: "triage", Model: "small", Tools: []string{"lookup"}},
				{Name: "billing", Model: "small"},
			},
			Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
			Implementations: map[string]agents.Implementation{"lookup": echoTool},
			Budgets:         []gateway.Budget{{Name: "nightly", MaxUSD: 1, Scope: gateway.ScopeRun}},
			MemoryStores:    map[string]agents.MemoryStore{"mem": agents.NewInMemoryMemory()},
		}
	}
	if _, err := agents.New(base()); err != nil {
		t.Fatalf("base config refused: %v", err)
	}
	// A declared tool may take a reserved prefix when the agents listing
	// it generate no tool of that name, as vet allows it.
	own := base()
	own.Tools = append(own.Tools, agents.Tool{Name: "search_web"})
	own.Implementations["search_web"] = echoTool
	own.Agents[0].Tools = append(own.Agents[0].Tools, "search_web")
	if _, err := agents.New(own); err != nil {
		t.Fatalf("a tool named search_web without a retriever web: %v", err)
	}
	tests := []struct {
		name   string
		change func(*agents.Config)
		want   string
		as     any
	}{
		{"no gateway", func(c *agents.Config) { c.Gateway = nil }, "Gateway is nil", nil},
		{"missing implementation", func(c *agents.Config) { c.Implementations = nil }, `tool "lookup" (used by agent triage) has no implementation`, new(*agents.MissingToolImplementationError)},
		{"undeclared tool", func(c *agents.Config) { c.Agents[0].Tools = []string{"nope"} }, `tool "nope" is not declared`, nil},
		{"unknown handoff", func(c *agents.Config) { c.Agents[0].Handoffs = []string{"ghost"} }, `unknown agent "ghost"`, new(*agents.UnknownAgentError)},
		{"self delegate", func(c *agents.Config) { c.Agents[0].Delegates = []string{"triage"} }, `agent "triage": delegates[0]: agent "triage" cannot name itself`, nil},
		{"a tool named like a handoff", func(c *agents.Config) {
			c.Tools = append(c.Tools, agents.Tool{Name: "transfer_to_billing"})
			c.Implementations["transfer_to_billing"] = echoTool
			c.Agents[0].Tools = append(c.Agents[0].Tools, "transfer_to_billing")
			c.Agents[0].Handoffs = []string{"billing"}
		}, `tool "transfer_to_billing" has the name the runtime gives the tool for the handoff to agent "billing"`, nil},
		{"a tool name too long", func(c *agents.Config) {
			c.Tools = append(c.Tools, agents.Tool{Name: strings.Repeat("x", 65)})
		}, "has 65 characters; the model API accepts function names of at most 64", nil},
		{"a tool whose input is not an object", func(c *agents.Config) {
			c.Tools[0].Input = json.RawMessage(`{"type":"string"}`)
		}, `tool "lookup": input: a tool's input schema must have type: "object"`, nil},
		{"a tool listed twice", func(c *agents.Config) { c.Agents[0].Tools = []string{"lookup", "lookup"} }, `tools[1]: tool "lookup" is listed twice`, nil},
		{"unconfigured retriever", func(c *agents.Config) { c.Agents[0].Retrievers = []string{"kb"} }, `retriever "kb" is not in Config.Retrievers`, nil},
		{"degrade without lower rung", func(c *agents.Config) {
			c.Agents[0].Ladder, c.Agents[0].OnBudgetExhausted, c.Agents[0].Budget = []string{"large", "small"}, agents.BudgetDegrade, "nightly"
		}, `needs a strictly cheaper alias below "small" on the ladder, but "small" is its last rung`, nil},
		{"degrade without budget", func(c *agents.Config) {
			c.Agents[0].Ladder, c.Agents[0].OnBudgetExhausted = []string{"small", "tiny"}, agents.BudgetDegrade
		}, `onBudgetExhausted "degrade" reacts to a budget breach, but the agent has no budget`, nil},
		{"ladder without model", func(c *agents.Config) { c.Agents[0].Ladder = []string{"large"} }, `the ladder must contain the agent's model "small"`, nil},
		{"ladder up in price", func(c *agents.Config) { c.Agents[0].Ladder = []string{"small", "large"} }, `rung "large" ($0.01 in / $0.03 out per 1k) is not strictly cheaper than the rung above it, "small"`, nil},
		{"falling back to itself", func(c *agents.Config) { c.Agents[0].Fallbacks = []string{"small"} }, `fallback "small" is the agent's model`, nil},
		{"a thread that does not fit", func(c *agents.Config) {
			c.Agents[0].Memory = &agents.Memory{ThreadTokenBudget: 7950}
		}, `thread tokenBudget 7950 plus the 100 output tokens "m-small" may answer with is 8050 tokens, more than its context window of 8000`, nil},
		{"unknown alias", func(c *agents.Config) { c.Agents[1].Model = "huge" }, `unknown model alias "huge"`, new(*gateway.UnknownModelAliasError)},
		{"unknown budget", func(c *agents.Config) { c.Agents[0].Budget = "weekly" }, `budget "weekly" is not in Config.Budgets`, nil},
		{"unknown memory store", func(c *agents.Config) {
			c.Agents[0].Memory = &agents.Memory{User: &agents.StoredMemory{Store: "pg"}}
		}, `memory store "pg"`, nil},
		{"bad output schema", func(c *agents.Config) { c.Agents[0].Output = json.RawMessage(`{"type": 3}`) }, "output", nil},
		{"bad input schema", func(c *agents.Config) { c.Tools[0].Input = json.RawMessage(`{"type":`) }, "input", nil},
		{"stray implementation", func(c *agents.Config) { c.Implementations["other"] = echoTool }, `implementation "other" matches no declared tool`, nil},
		{"approval inside delegate", func(c *agents.Config) {
			c.Tools = append(c.Tools, agents.Tool{Name: "refund", Approval: agents.ApprovalAlways})
			c.Implementations["refund"] = echoTool
			c.Agents[1].Tools = []string{"refund"}
			c.Agents[0].Delegates = []string{"billing"}
		}, "human approval inside a delegated run", new(*kind.DeferredError)},
		{"capability missing", func(c *agents.Config) { c.Gateway = noTools.gw }, "lacks [tools]", new(*gateway.CapabilityMismatchError)},
		{"budget without scope", func(c *agents.Config) { c.Budgets[0].Scope = "" }, `budget "nightly" has scope ""`, nil},
		{"duplicate agent", func(c *agents.Config) { c.Agents = append(c.Agents, agents.Agent{Name: "billing", Model: "small"}) }, "declared twice", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.change(&cfg)
			_, err := agents.New(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got %v, want an error containing %q", err, tt.want)
			}
			if tt.as != nil && !errors.As(err, tt.as) {
				t.Fatalf("New: %v is not a %T", err, tt.as)
			}
		})
	}
}

func TestToolLoopWithTypedTool(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
		calls(call("c1", "lookup", `{"id":"A-1"}`)),
		answer("order A-1 has shipped"),
	}})
	type in struct {
		ID string `json:"id"`
	}
	type out struct {
		Status string `json:"status"`
	}
	var gotInfo agents.RunInfo
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw,
		Agents:  []agents.Agent{{Name: "triage", Model: "small", Instructions: "be brief", Tools: []string{"lookup"}}},
		Tools:   []agents.Tool{{Name: "lookup", Description: "look up an order", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": agents.Typed(func(ctx context.Context, i in) (out, error) {
			gotInfo, _ = agents.RunInfoFromContext(ctx)
			return out{Status: "shipped " + i.ID}, nil
		})},
	})
	res := mustRun(t, r, "triage", "where is A-1?", agents.RunOptions{ThreadID: "t1", UserID: "u1"})
	if res.Status != agents.StatusCompleted || res.Answer != "order A-1 has shipped" {
		t.Fatalf("result %s %q", res.Status, res.Answer)
	}
	if !strings.HasPrefix(res.RunID, "run_") || len(res.Steps) != 2 || res.Steps[0].Number != 1 || res.Steps[1].Number != 2 {
		t.Fatalf("run id %q, steps %+v", res.RunID, res.Steps)
	}
	tc := res.Steps[0].ToolCalls[0]
	if tc.Observation != `{"status":"shipped A-1"}` || tc.ErrorKind != "" || !tc.Done {
		t.Fatalf("tool call %+v", tc)
	}
	if gotInfo != (agents.RunInfo{RunID: res.RunID, Agent: "triage", ThreadID: "t1", UserID: "u1", CallID: "c1"}) {
		t.Fatalf("run info %+v", gotInfo)
	}
	if res.Usage.TotalTokens == 0 || res.CostUSD <= 0 || res.Steps[0].Alias != "small" || res.Steps[0].Model != "m-small" {
		t.Fatalf("usage %+v cost %v step %+v", res.Usage, res.CostUSD, res.Steps[0])
	}
	reqs := fx.fake.Requests()
	if d := cmp.Diff([]string{"system", "user", "assistant", "tool:c1"}, roles(reqs[1].Messages)); d != "" {
		t.Fatalf("second request (-want +got):\n%s", d)
	}
	if len(reqs[0].Tools) != 1 || reqs[0].Tools[0].Name != "lookup" {
		t.Fatalf("tools offered %+v", reqs[0].Tools)
	}
	if d := cmp.Diff([]string{"user", "assistant", "tool:c1", "assistant"}, roles(res.Messages)); d != "" {
		t.Fatalf("thread after the run (-want +got):\n%s", d)
	}
	// The store holds the completed run and the call's one result.
	rec, err := r.Store().LoadRun(context.Background(), res.RunID)
	if err != nil || rec.Status != agents.StatusCompleted {
		t.Fatalf("stored run %+v, %v", rec, err)
	}
	cs, _ := r.Store().Calls(context.Background(), res.RunID)
	if len(cs) != 1 || cs[0].Key != "1.0" || cs[0].Result == nil {
		t.Fatalf("stored calls %+v", cs)
	}
}

func TestToolFailuresBecomeObservations(t *testing.T) {
	tools := []agents.Tool{
		{Name: "lookup", Description: "d", Input: lookupSchema},
		{Name: "broken", Description: "d"},
		{Name: "panics", Description: "d"},
		{Name: "slow", Description: "d", Timeout: 20 * time.Millisecond},
	}
	impls := map[string]agents.Implementation{
		"lookup": echoTool,
		"broken": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "", errors.New("db down") }),
		"panics": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { panic("boom") }),
		"slow": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		}),
	}
	tests := []struct {
		name string
		call gateway.ToolCall
		kind agents.ErrorKind
		want string
	}{
		{"missing property", call("c", "lookup", `{}`), agents.KindInvalidArguments, "invalid arguments for lookup"},
		{"extra property", call("c", "lookup", `{"id":"1","x":2}`), agents.KindInvalidArguments, "invalid arguments"},
		{"not json", call("c", "lookup", `{"id":`), agents.KindInvalidArguments, "not valid JSON"},
		{"wrong type", call("c", "lookup", `[1]`), agents.KindInvalidArguments, "invalid arguments"},
		{"unknown tool", call("c", "delete_everything", `{}`), agents.KindUnknownTool, `unknown tool "delete_everything"; available tools: lookup, broken, panics, slow`},
		{"tool error", call("c", "broken", `{}`), agents.KindToolFailed, "db down"},
		{"panic", call("c", "panics", ``), agents.KindToolFailed, "panic: boom"},
		{"timeout", call("c", "slow", `{}`), agents.KindTimeout, "timed out after 20ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(tt.call), answer("sorry")}})
			r := newRuntime(t, agents.Config{
				Gateway:         fx.gw,
				Agents:          []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup", "broken", "panics", "slow"}}},
				Tools:           tools,
				Implementations: impls,
			})
			res := mustRun(t, r, "a", "go", agents.RunOptions{})
			tc := res.Steps[0].ToolCalls[0]
			if res.Status != agents.StatusCompleted || tc.ErrorKind != tt.kind || !strings.Contains(tc.Observation, tt.want) {
				t.Fatalf("status %s, call %+v; want kind %s and %q", res.Status, tc, tt.kind, tt.want)
			}
			// The model saw the error as the call's result, marked failed
			// for a provider that can say so.
			last := fx.fake.Requests()[1].Messages
			if m := last[len(last)-1]; m.Role != gateway.RoleTool || m.Content != tc.Observation || !m.Failed {
				t.Fatalf("model was told %+v", m)
			}
		})
	}
}

// TestParallelReadsKeepCallOrder runs three read calls that can only finish
// when all three have started, so the test deadlocks (and times out) unless
// they run concurrently; their observations still come back in call order.
func TestParallelReadsKeepCallOrder(t *testing.T) {
	var started sync.WaitGroup
	started.Add(3)
	impl := agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		started.Done()
		started.Wait()
		var in struct{ ID string }
		_ = json.Unmarshal(args, &in)
		if in.ID == "1" {
			time.Sleep(10 * time.Millisecond) // the first finishes last
		}
		return "obs " + in.ID, nil
	})
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
		calls(call("a", "lookup", `{"id":"1"}`), call("b", "lookup", `{"id":"2"}`), call("c", "lookup", `{"id":"3"}`)),
		answer("done"),
	}})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}}},
		Tools: []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}}, Implementations: map[string]agents.Implementation{"lookup": impl},
	})
	res := mustRun(t, r, "a", "go", agents.RunOptions{})
	var obs []string
	for _, c := range res.Steps[0].ToolCalls {
		obs = append(obs, c.Observation)
	}
	if d := cmp.Diff([]string{"obs 1", "obs 2", "obs 3"}, obs); d != "" {
		t.Fatalf("observations (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"user", "assistant", "tool:a", "tool:b", "tool:c", "assistant"}, roles(res.Messages)); d != "" {
		t.Fatalf("thread (-want +got):\n%s", d)
	}
}

// TestConcurrencyBounds checks that reads run at most MaxParallelTools at a
// time, and that a step with a write runs its calls one at a time.
func TestConcurrencyBounds(t *testing.T) {
	for _, tt := range []struct {
		name    string
		second  string
		wantMax int32
	}{
		{"reads bounded", "lookup", 2},
		{"write serialises", "update", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cur, peak atomic.Int32
			impl := agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
				n := cur.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(50 * time.Millisecond)
				cur.Add(-1)
				return "ok", nil
			})
			step := calls(call("1", "lookup", `{"id":"1"}`), call("2", tt.second, `{"id":"2"}`), call("3", "lookup", `{"id":"3"}`), call("4", "lookup", `{"id":"4"}`), call("5", "lookup", `{"id":"5"}`))
			fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{step, answer("done")}})
			r := newRuntime(t, agents.Config{
				Gateway: fx.gw, MaxParallelTools: 2,
				Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup", "update"}}},
				Tools: []agents.Tool{
					{Name: "lookup", Description: "d", Input: lookupSchema},
					{Name: "update", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite},
				},
				Implementations: map[string]agents.Implementation{"lookup": impl, "update": impl},
			})
			res := mustRun(t, r, "a", "go", agents.RunOptions{})
			if res.Status != agents.StatusCompleted {
				t.Fatal(res.Status)
			}
			if peak.Load() != tt.wantMax {
				t.Fatalf("peak concurrency %d, want %d", peak.Load(), tt.wantMax)
			}
		})
	}
}

func TestMaxSteps(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{calls(call("c", "lookup", `{"id":"1"}`))}, Loop: true})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}, MaxSteps: 3}},
		Tools: []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}}, Implementations: map[string]agents.Implementation{"lookup": echoTool},
	})
	res, err := r.Run(context.Background(), "a", "loop forever", agents.RunOptions{})
	var ms *agents.MaxStepsError
	if !errors.As(err, &ms) || ms.MaxSteps != 3 || ms.Agent != "a" {
		t.Fatalf("err %v, want *MaxStepsError for 3 steps", err)
	}
	if res.Status != agents.StatusMaxSteps || len(res.Steps) != 3 || fx.fake.Calls() != 3 {
		t.Fatalf("status %s, %d steps, %d model calls", res.Status, len(res.Steps), fx.fake.Calls())
	}
	rec, _ := r.Store().LoadRun(context.Background(), res.RunID)
	if rec.Status != agents.StatusMaxSteps {
		t.Fatalf("stored status %s", rec.Status)
	}
}

func TestUnknownAgent(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small"}}})
	_, err := r.Run(context.Background(), "b", "hi", agents.RunOptions{})
	var ua *agents.UnknownAgentError
	if !errors.As(err, &ua) || ua.Agent != "b" || len(ua.Known) != 1 {
		t.Fatalf("err %v", err)
	}
}

// TestProviderFailureFails checks that a model call failing for a reason
// other than a budget ends the run as failed, with the gateway's error.
func TestProviderFailureFails(t *testing.T) {
	boom := &gateway.ProviderError{Provider: "fake", StatusCode: 400, Err: errors.New("bad request")}
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Err: boom}}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small"}}})
	res, err := r.Run(context.Background(), "a", "hi", agents.RunOptions{})
	var pe *gateway.ProviderError
	if res.Status != agents.StatusFailed || !errors.As(err, &pe) {
		t.Fatalf("status %s err %v", res.Status, err)
	}
}

func TestFallbacksRecordedOnStep(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"m-large": {{Err: &gateway.ProviderError{Provider: "fake", StatusCode: 503, Retryable: true, Err: errors.New("down")}}},
		"m-small": {answer("from small")},
	}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "large", Fallbacks: []string{"small"}}}})
	res := mustRun(t, r, "a", "hi", agents.RunOptions{})
	if s := res.Steps[0]; s.Requested != "large" || s.Alias != "small" || s.Model != "m-small" || s.DegradedFrom != "" {
		t.Fatalf("step %+v", s)
	}
	if !res.FellBack {
		t.Fatal("RunResult.FellBack is false for a run answered by a fallback")
	}
}

// TestFellBackOnlyWhenAFallbackAnswered checks the run-level flag both
// ways: a run its own model answers did not fall back, even with fallbacks
// configured; a run whose delegate fell back did.
func TestFellBackOnlyWhenAFallbackAnswered(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{"m-large": {answer("from large")}}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "large", Fallbacks: []string{"small"}}}})
	if res := mustRun(t, r, "a", "hi", agents.RunOptions{}); res.FellBack || res.Steps[0].Alias != "large" {
		t.Fatalf("FellBack %v, steps %+v", res.FellBack, res.Steps)
	}

	fx = newFixture(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"m-small": {calls(call("d1", "delegate_to_research", `{"input":"look it up"}`)), answer("done")},
		"m-tiny":  {{Err: &gateway.ProviderError{Provider: "fake", StatusCode: 500, Err: errors.New("down")}}},
		"m-large": {answer("found by large")},
	}})
	cfg := team(fx)
	cfg.Agents[2].Fallbacks = []string{"large"} // research, on tiny
	res := mustRun(t, newRuntime(t, cfg), "triage", "hi", agents.RunOptions{})
	if !res.FellBack || res.Steps[0].Alias != "small" || res.Steps[0].ToolCalls[0].Observation != "found by large" {
		t.Fatalf("FellBack %v, steps %+v", res.FellBack, res.Steps)
	}
}

// TestFallbackSkipsTheAliasCalled degrades an agent onto a rung that is
// also its fallback: when that rung fails, the gateway must not try it a
// second time as its own fallback.
func TestFallbackSkipsTheAliasCalled(t *testing.T) {
	const maxUSD = 0.003 // large's worst case is above it, small's below
	b := gateway.Budget{Name: "b", MaxUSD: maxUSD, Scope: gateway.ScopeRun}
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"m-small": {{Err: &gateway.ProviderError{Provider: "fake", StatusCode: 500, Err: errors.New("down")}}, answer("second try of small")},
	}}, b)
	cfg := degradeConfig(fx, maxUSD)
	cfg.Agents[0].Fallbacks = []string{"small"}
	res, err := newRuntime(t, cfg).Run(context.Background(), "a", "hi", agents.RunOptions{})
	var pe *gateway.ProviderError
	if res.Status != agents.StatusFailed || !errors.As(err, &pe) {
		t.Fatalf("status %s, err %v; want the failure of small, not a second try of it", res.Status, err)
	}
	if fx.fake.Calls() != 1 {
		t.Fatalf("%d provider calls, want 1", fx.fake.Calls())
	}
}
