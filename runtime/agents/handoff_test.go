package agents_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// team is triage (small), which hands off to billing (large) and delegates
// to research (tiny); billing may hand back to triage and delegate to
// research; research may delegate to billing.
func team(fx fixture) agents.Config {
	return agents.Config{
		Gateway: fx.gw,
		Agents: []agents.Agent{
			{Name: "triage", Model: "small", Instructions: "you triage", Handoffs: []string{"billing"}, Delegates: []string{"research"}},
			{Name: "billing", Model: "large", Instructions: "you bill", Description: "handles invoices", Handoffs: []string{"triage"}, Delegates: []string{"research"}},
			{Name: "research", Model: "tiny", Instructions: "you research", Delegates: []string{"billing"}},
		},
	}
}

func TestTransferHandsOverTheConversation(t *testing.T) {
	fx := newFixture(t, fake.Config{ByModel: map[string][]fake.Step{
		"m-small": {calls(call("t1", "transfer_to_billing", `{}`), call("x", "delegate_to_research", `{"input":"never"}`))},
		"m-large": {answer("your invoice is paid")},
	}})
	r := newRuntime(t, team(fx))
	res := mustRun(t, r, "triage", "is my invoice paid?", agents.RunOptions{})
	if res.Agent != "billing" || res.Answer != "your invoice is paid" {
		t.Fatalf("agent %q answer %q", res.Agent, res.Answer)
	}
	if d := cmp.Diff([]string{"triage", "billing"}, res.Path); d != "" {
		t.Fatalf("path (-want +got):\n%s", d)
	}
	tc := res.Steps[0].ToolCalls
	if tc[0].ErrorKind != "" || tc[1].ErrorKind != agents.KindNotRun {
		t.Fatalf("calls %+v", tc)
	}
	if res.Steps[1].Agent != "billing" || res.Steps[1].Alias != "large" {
		t.Fatalf("second step %+v", res.Steps[1])
	}
	// Billing got the whole conversation under its own instructions.
	req := fx.fake.Requests()[1]
	if req.Messages[0].Content != "you bill" {
		t.Fatalf("billing's system message %q", req.Messages[0].Content)
	}
	if d := cmp.Diff([]string{"system", "user", "assistant", "tool:t1", "tool:x"}, roles(req.Messages)); d != "" {
		t.Fatalf("billing's request (-want +got):\n%s", d)
	}
	names := []string{}
	for _, d := range req.Tools {
		names = append(names, d.Name)
	}
	if d := cmp.Diff([]string{"transfer_to_triage", "delegate_to_research"}, names); d != "" {
		t.Fatalf("billing's tools (-want +got):\n%s", d)
	}
}

func TestDelegateRunsInIsolation(t *testing.T) {
	fx := newFixture(t, fake.Config{ByModel: map[string][]fake.Step{
		"m-small": {calls(call("d1", "delegate_to_research", `{"input":"find the refund policy"}`)), answer("refunds take 5 days")},
		"m-tiny":  {answer("policy: 5 days")},
	}})
	r := newRuntime(t, team(fx))
	res := mustRun(t, r, "triage", "SECRET user question", agents.RunOptions{})
	if res.Agent != "triage" || res.Answer != "refunds take 5 days" {
		t.Fatalf("agent %q answer %q", res.Agent, res.Answer)
	}
	if d := cmp.Diff([]string{"triage"}, res.Path); d != "" {
		t.Fatalf("path changed by a delegation (-want +got):\n%s", d)
	}
	tc := res.Steps[0].ToolCalls[0]
	if tc.Observation != "policy: 5 days" || tc.Delegate == nil || tc.Delegate.Agent != "research" || tc.Delegate.Status != agents.StatusCompleted || len(tc.Delegate.Steps) != 1 {
		t.Fatalf("delegate call %+v", tc)
	}
	// The delegate saw exactly [system, user]: its instructions and the task.
	sub := fx.fake.Requests()[1]
	if d := cmp.Diff([]gateway.Message{{Role: "system", Content: "you research"}, {Role: "user", Content: "find the refund policy"}}, sub.Messages); d != "" {
		t.Fatalf("delegate's context (-want +got):\n%s", d)
	}
	// Its usage is the run's.
	var sum int64
	for _, s := range res.Steps {
		sum += s.Usage.TotalTokens
	}
	if res.Usage.TotalTokens != sum+tc.Delegate.Usage.TotalTokens || tc.Delegate.Usage.TotalTokens == 0 {
		t.Fatalf("run usage %d, steps %d, delegate %d", res.Usage.TotalTokens, sum, tc.Delegate.Usage.TotalTokens)
	}
}

func TestReentryIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name  string
		steps map[string][]fake.Step
		check func(t *testing.T, res agents.RunResult)
	}{
		{
			name: "transfer back",
			steps: map[string][]fake.Step{
				"m-small": {calls(call("t1", "transfer_to_billing", `{}`))},
				"m-large": {calls(call("t2", "transfer_to_triage", `{}`)), answer("I keep it")},
			},
			check: func(t *testing.T, res agents.RunResult) {
				c := res.Steps[1].ToolCalls[0]
				if c.ErrorKind != agents.KindReentry || !strings.Contains(c.Observation, `agent "triage" is already on the path triage > billing`) {
					t.Fatalf("call %+v", c)
				}
				if res.Agent != "billing" || len(res.Path) != 2 {
					t.Fatalf("agent %q path %v", res.Agent, res.Path)
				}
			},
		},
		{
			name: "delegate to an agent on the path",
			steps: map[string][]fake.Step{
				"m-small": {calls(call("t1", "transfer_to_billing", `{}`))},
				"m-large": {calls(call("d", "delegate_to_research", `{"input":"ask billing"}`)), answer("done")},
				"m-tiny":  {calls(call("d2", "delegate_to_billing", `{"input":"x"}`)), answer("billing is busy")},
			},
			check: func(t *testing.T, res agents.RunResult) {
				sub := res.Steps[1].ToolCalls[0].Delegate
				if sub == nil || sub.Steps[0].ToolCalls[0].ErrorKind != agents.KindReentry {
					t.Fatalf("delegate record %+v", sub)
				}
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, fake.Config{ByModel: tt.steps})
			res := mustRun(t, newRuntime(t, team(fx)), "triage", "hi", agents.RunOptions{})
			tt.check(t, res)
		})
	}
}

func TestDelegationBounds(t *testing.T) {
	// Depth: triage delegates to research (depth 1), which may not delegate
	// to billing (depth 2) with MaxDelegationDepth 1.
	fx := newFixture(t, fake.Config{ByModel: map[string][]fake.Step{
		"m-small": {calls(call("d", "delegate_to_research", `{"input":"a"}`)), answer("top")},
		"m-tiny":  {calls(call("d", "delegate_to_billing", `{"input":"b"}`)), answer("mid")},
	}})
	cfg := team(fx)
	cfg.MaxDelegationDepth = 1
	res := mustRun(t, newRuntime(t, cfg), "triage", "hi", agents.RunOptions{})
	inner := res.Steps[0].ToolCalls[0].Delegate.Steps[0].ToolCalls[0]
	if inner.ErrorKind != agents.KindDelegationLimit || !strings.Contains(inner.Observation, "at most 1 deep") || inner.Delegate != nil {
		t.Fatalf("second-level delegation %+v", inner)
	}

	// Count: one delegation allowed per run.
	fx = newFixture(t, fake.Config{ByModel: map[string][]fake.Step{
		"m-small": {calls(call("d1", "delegate_to_research", `{"input":"a"}`), call("d2", "delegate_to_research", `{"input":"b"}`)), answer("top")},
		"m-tiny":  {answer("one")},
	}})
	cfg = team(fx)
	cfg.MaxDelegations = 1
	res = mustRun(t, newRuntime(t, cfg), "triage", "hi", agents.RunOptions{})
	tc := res.Steps[0].ToolCalls
	if tc[0].Observation != "one" || tc[1].ErrorKind != agents.KindDelegationLimit {
		t.Fatalf("calls %+v", tc)
	}
	if fx.fake.Calls() != 3 {
		t.Fatalf("%d model calls, want 3", fx.fake.Calls())
	}
}

func TestDelegateFailureIsAnObservation(t *testing.T) {
	fx := newFixture(t, fake.Config{ByModel: map[string][]fake.Step{
		"m-small": {calls(call("d", "delegate_to_research", `{"input":"x"}`)), answer("gave up")},
		"m-tiny":  {calls(call("d", "delegate_to_research", `{}`))}, // research cannot call itself: unknown tool, then runs out
	}, Loop: false})
	cfg := team(fx)
	cfg.Agents[2].MaxSteps = 1
	res := mustRun(t, newRuntime(t, cfg), "triage", "hi", agents.RunOptions{})
	c := res.Steps[0].ToolCalls[0]
	if c.ErrorKind != agents.KindDelegateFailed || !strings.Contains(c.Observation, "reached its 1 steps") || c.Delegate.Status != agents.StatusMaxSteps {
		t.Fatalf("call %+v", c)
	}
	// Invalid delegate arguments never start a run.
	fx = newFixture(t, fake.Config{ByModel: map[string][]fake.Step{"m-small": {calls(call("d", "delegate_to_research", `{"input":3}`)), answer("ok")}}})
	res = mustRun(t, newRuntime(t, team(fx)), "triage", "hi", agents.RunOptions{})
	if c := res.Steps[0].ToolCalls[0]; c.ErrorKind != agents.KindInvalidArguments || c.Delegate != nil {
		t.Fatalf("call %+v", c)
	}
}

func TestBudgetBreachStopsTheRun(t *testing.T) {
	b := gateway.Budget{Name: "b", MaxUSD: 0.00001, Scope: gateway.ScopeRun}
	fx := newFixture(t, fake.Config{Script: []fake.Step{answer("never")}}, b)
	cfg := team(fx)
	cfg.Budgets = []gateway.Budget{b}
	cfg.Agents[0].Budget = "b"
	res, err := newRuntime(t, cfg).Run(context.Background(), "triage", "hi", agents.RunOptions{})
	var be *agents.BudgetExceededError
	var gbe *gateway.BudgetExceededError
	if !errors.As(err, &be) || !errors.As(err, &gbe) || be.Alias != "small" || gbe.Budget != "b" || gbe.Key != res.RunID {
		t.Fatalf("err %v", err)
	}
	if res.Status != agents.StatusBudgetExceeded || fx.fake.Calls() != 0 || len(res.Steps) != 0 {
		t.Fatalf("status %s, %d provider calls", res.Status, fx.fake.Calls())
	}
}

// degradeConfig is an agent on large that degrades down [large small tiny]
// with a budget that large cannot fit.
func degradeConfig(fx fixture, maxUSD float64) agents.Config {
	return agents.Config{
		Gateway: fx.gw,
		Budgets: []gateway.Budget{{Name: "b", MaxUSD: maxUSD, Scope: gateway.ScopeRun}},
		Agents: []agents.Agent{{Name: "a", Model: "large", Ladder: []string{"large", "small", "tiny"}, OnBudgetExhausted: agents.BudgetDegrade, Budget: "b",
			Tools: []string{"refund"}}},
		Tools:           []agents.Tool{{Name: "refund", Description: "d", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		Implementations: map[string]agents.Implementation{"refund": echoTool},
	}
}

func TestDegradeOneRung(t *testing.T) {
	const maxUSD = 0.003 // large's worst case is above it, small's below
	fx := newFixture(t, fake.Config{Script: []fake.Step{calls(call("r", "refund", `{}`)), answer("refunded")}}, gateway.Budget{Name: "b", MaxUSD: maxUSD, Scope: gateway.ScopeRun})
	cfg := degradeConfig(fx, maxUSD)
	r := newRuntime(t, cfg)
	res := mustRun(t, r, "a", "refund me", agents.RunOptions{})
	if res.Status != agents.StatusPaused {
		t.Fatalf("status %s", res.Status)
	}
	if s := res.Steps; len(s) != 0 || res.Checkpoint.Pending.Step.DegradedFrom != "large" || res.Checkpoint.Pending.Step.Alias != "small" || res.Checkpoint.Pending.Step.Requested != "small" {
		t.Fatalf("pending step %+v", res.Checkpoint.Pending.Step)
	}
	if res.Checkpoint.Alias != "small" || !res.Checkpoint.Degraded {
		t.Fatalf("checkpoint alias %q degraded %v", res.Checkpoint.Alias, res.Checkpoint.Degraded)
	}
	// A resumed run, in a fresh runtime, continues on the lower rung.
	data, err := agents.MarshalCheckpoint(*res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := agents.UnmarshalCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	res, err = newRuntime(t, cfg).ResumeFrom(context.Background(), cp, agents.Decision{Action: agents.Approve})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agents.StatusCompleted || res.Steps[1].Alias != "small" || res.Steps[1].DegradedFrom != "" {
		t.Fatalf("status %s, steps %+v", res.Status, res.Steps)
	}
	if fx.fake.Calls() != 2 {
		t.Fatalf("%d provider calls, want 2 (large was refused before any call)", fx.fake.Calls())
	}
}

func TestDegradeOnlyOnce(t *testing.T) {
	// Small cannot fit either; tiny could, but the agent steps down once.
	const maxUSD = 0.0002
	fx := newFixture(t, fake.Config{Script: []fake.Step{answer("never")}}, gateway.Budget{Name: "b", MaxUSD: maxUSD, Scope: gateway.ScopeRun})
	res, err := newRuntime(t, degradeConfig(fx, maxUSD)).Run(context.Background(), "a", "hi", agents.RunOptions{})
	var be *agents.BudgetExceededError
	if !errors.As(err, &be) || be.Alias != "small" || be.DegradedFrom != "large" {
		t.Fatalf("err %v", err)
	}
	if res.Status != agents.StatusBudgetExceeded || fx.fake.Calls() != 0 {
		t.Fatalf("status %s, %d provider calls", res.Status, fx.fake.Calls())
	}
	// Proof that tiny would have fitted: the same budget admits a call on it.
	if _, err := fx.gw.Generate(context.Background(), "tiny", gateway.Request{Messages: []gateway.Message{{Role: "user", Content: "hi"}}}, gateway.WithBudget("b", "probe")); err != nil {
		t.Fatalf("tiny does not fit the budget, so the test proves nothing: %v", err)
	}
}

func TestBudgetScopes(t *testing.T) {
	// Each call's worst case is about 110 tokens and its real usage about
	// 12: 115 tokens admit one call per scope key.
	for _, tt := range []struct {
		scope      gateway.Scope
		opts       [2]agents.RunOptions
		secondFits bool
	}{
		{gateway.ScopeRun, [2]agents.RunOptions{{ThreadID: "t"}, {ThreadID: "t"}}, true},
		{gateway.ScopeThread, [2]agents.RunOptions{{ThreadID: "t"}, {ThreadID: "t"}}, false},
		{gateway.ScopeThread, [2]agents.RunOptions{{ThreadID: "t"}, {ThreadID: "u"}}, true},
		{gateway.ScopeGlobal, [2]agents.RunOptions{{ThreadID: "t"}, {ThreadID: "u"}}, false},
	} {
		t.Run(string(tt.scope)+"/"+tt.opts[1].ThreadID, func(t *testing.T) {
			b := gateway.Budget{Name: "b", MaxTotalTokens: 115, Scope: tt.scope}
			fx := newFixture(t, fake.Config{Script: []fake.Step{answer("one"), answer("two")}}, b)
			r := newRuntime(t, agents.Config{Gateway: fx.gw, Budgets: []gateway.Budget{b}, Agents: []agents.Agent{{Name: "a", Model: "small", Budget: "b"}}})
			if _, err := r.Run(context.Background(), "a", "hi", tt.opts[0]); err != nil {
				t.Fatal(err)
			}
			_, err := r.Run(context.Background(), "a", "hi", tt.opts[1])
			if fits := err == nil; fits != tt.secondFits {
				t.Fatalf("second run err %v, want fits=%v", err, tt.secondFits)
			}
		})
	}
}

// TestAgentBudgetAddsToTheCallersBudgets checks that an agent with a budget
// of its own is still capped by the budgets its caller put on the context
// (an eval's, a service request's): the calls are charged to both, and a
// call that fits the agent's budget but not the caller's is refused.
func TestAgentBudgetAddsToTheCallersBudgets(t *testing.T) {
	own := gateway.Budget{Name: "own", MaxTotalTokens: 100_000, Scope: gateway.ScopeRun}
	outer := gateway.Budget{Name: "outer", MaxTotalTokens: 115, Scope: gateway.ScopeGlobal}
	fx := newFixture(t, fake.Config{Script: []fake.Step{answer("one"), answer("two")}}, own, outer)
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Budgets: []gateway.Budget{own, outer}, Agents: []agents.Agent{{Name: "a", Model: "small", Budget: "own"}}})
	ctx := gateway.ContextWithBudget(context.Background(), "outer", "")
	if _, err := r.Run(ctx, "a", "hi", agents.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	// By budget: the run's own account is closed now that the run ended.
	spend, err := fx.gw.SpendByBudget(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	charged := map[string]bool{}
	for _, b := range spend {
		charged[b.Budget] = b.Spent.Tokens > 0
	}
	if !charged["own"] || !charged["outer"] {
		t.Fatalf("accounts charged %v, want both own and outer", charged)
	}
	// The outer budget (115 tokens) holds one call's worst case, not two.
	if _, err := r.Run(ctx, "a", "hi", agents.RunOptions{}); err == nil {
		t.Fatal("a second run fit the caller's budget, which holds one call")
	}
}
