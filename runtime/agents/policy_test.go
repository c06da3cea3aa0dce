package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

var amountSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"amount_usd":{"type":"number"}},"required":["order"]}`)

// policyDesk is a desk agent with a read tool (lookup), a write tool
// (refund) and a second write tool (credit), under a policy, counting the
// calls that ran.
type policyDesk struct {
	fx       fixture
	store    agents.Store
	policy   policy.Policy
	tools    []agents.Tool
	tracer   *sdktrace.TracerProvider
	maxSteps int
	mu       sync.Mutex
	ran      []string
}

func newPolicyDesk(t *testing.T, p policy.Policy, script map[string][]fake.Step) *policyDesk {
	return &policyDesk{
		fx: newFixture(t, fake.Config{Agents: script}), store: agents.NewInMemoryStore(), policy: p,
		tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: amountSchema},
			{Name: "refund", Description: "d", Input: amountSchema, Effects: agents.EffectsWrite},
			{Name: "credit", Description: "d", Input: amountSchema, Effects: agents.EffectsWrite},
		},
	}
}

func (d *policyDesk) runtime(t *testing.T) *agents.Runtime {
	impl := func(name string) agents.Implementation {
		return agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			d.ran = append(d.ran, name+" "+string(args))
			return name + " done", nil
		})
	}
	cfg := agents.Config{
		Gateway: d.fx.gw, Store: d.store, Approvals: d.policy, Conditions: cel.Language{}, Tools: d.tools,
		Agents:          []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund", "credit"}, MaxSteps: d.maxSteps}},
		Implementations: map[string]agents.Implementation{"lookup": impl("lookup"), "refund": impl("refund"), "credit": impl("credit")},
	}
	if d.tracer != nil {
		cfg.Tracer = d.tracer.Tracer("agents")
	}
	return newRuntime(t, cfg)
}

func (d *policyDesk) calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.ran...)
}

// TestPolicyDeniesWithAReason denies big refunds by a rule with a
// condition: the model reads which rule and why, the refund never runs,
// the decision is in the record and the span; a small refund is allowed.
func TestPolicyDeniesWithAReason(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	d := newPolicyDesk(t, policy.Policy{Rules: []policy.Rule{
		{Tool: "refund", When: "args.amount_usd > 100", Action: policy.Deny, Reason: "refunds above 100 USD need a manager"},
	}}, map[string][]fake.Step{"desk": {
		calls(call("r1", "refund", `{"order":"A","amount_usd":250}`), call("r2", "refund", `{"order":"B","amount_usd":20}`)),
		answer("refunded B only"),
	}})
	d.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	res := mustRun(t, d.runtime(t), "desk", "refund", agents.RunOptions{})
	if res.Status != agents.StatusCompleted {
		t.Fatalf("status %s", res.Status)
	}
	big, small := res.Steps[0].ToolCalls[0], res.Steps[0].ToolCalls[1]
	if big.ErrorKind != agents.KindDenied || big.Observation != "error: the approval policy denies this call (rule 1): refunds above 100 USD need a manager" {
		t.Fatalf("denied call %+v", big)
	}
	if p := big.Policy; p == nil || p.Action != policy.Deny || p.Source != policy.SourceRule || p.Rule != 1 || p.At.IsZero() {
		t.Fatalf("denial record %+v", big.Policy)
	}
	if p := small.Policy; p == nil || p.Action != policy.Allow || p.Source != policy.SourceDefault || small.Observation != "refund done" {
		t.Fatalf("allowed call %+v policy %+v", small, small.Policy)
	}
	if got := d.calls(); len(got) != 1 || !strings.Contains(got[0], `"B"`) {
		t.Fatalf("calls that ran %v", got)
	}
	var decisions []map[string]string
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			if e.Name != agents.EventApprovalDecision {
				continue
			}
			m := map[string]string{}
			for _, kv := range e.Attributes {
				m[string(kv.Key)] = kv.Value.String()
			}
			decisions = append(decisions, m)
		}
	}
	if len(decisions) != 2 || decisions[0]["aid.approval.action"] != "deny" || decisions[0]["aid.approval.rule"] != "1" ||
		decisions[0]["gen_ai.tool.call.id"] != "r1" || decisions[1]["aid.approval.source"] != "default" {
		t.Fatalf("span events %v", decisions)
	}
}

// TestPolicyAskWithScopes answers an ask with each scope: a call grant
// covers the call; a run grant every later call of the tool in the run,
// also after the run was continued; a thread grant the thread's later
// runs too, in another runtime sharing the store, and no other thread.
func TestPolicyAskWithScopes(t *testing.T) {
	askRefunds := policy.Policy{Rules: []policy.Rule{{Tool: "refund", Action: policy.Ask, Reason: "refunds move money"}}}
	twoRefunds := map[string][]fake.Step{"desk": {
		calls(call("r1", "refund", `{"order":"A"}`)),
		calls(call("r2", "refund", `{"order":"B"}`)),
		answer("done"),
	}}
	t.Run("call", func(t *testing.T) {
		d := newPolicyDesk(t, askRefunds, twoRefunds)
		r := d.runtime(t)
		res := mustRun(t, r, "desk", "refund", agents.RunOptions{})
		if res.Status != agents.StatusPaused {
			t.Fatalf("status %s", res.Status)
		}
		res, err := r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, By: "alice"})
		if err != nil || res.Status != agents.StatusPaused || res.Checkpoint.Pending.Step.Number != 2 {
			t.Fatalf("after a call grant: %s %v", res.Status, err)
		}
		a := res.Steps[0].ToolCalls[0].Approval
		if a == nil || !a.Approved || a.By != "alice" || a.Scope != agents.GrantCall || a.At.IsZero() || len(res.Checkpoint.Grants) != 0 {
			t.Fatalf("approval %+v, grants %+v", a, res.Checkpoint.Grants)
		}
	})
	t.Run("run", func(t *testing.T) {
		d := newPolicyDesk(t, askRefunds, twoRefunds)
		r := d.runtime(t)
		res := mustRun(t, r, "desk", "refund", agents.RunOptions{ThreadID: "th"})
		res, err := r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, Scope: agents.GrantRun, By: "alice"})
		if err != nil || res.Status != agents.StatusCompleted || len(d.calls()) != 2 {
			t.Fatalf("after a run grant: %s %v, calls %v", res.Status, err, d.calls())
		}
		second := res.Steps[1].ToolCalls[0]
		if second.Approval != nil || second.Policy == nil || second.Policy.Action != policy.Ask || second.Policy.Grant == nil ||
			second.Policy.Grant.Scope != agents.GrantRun || second.Policy.Grant.By != "alice" || second.Policy.Grant.RunID != res.RunID {
			t.Fatalf("second call %+v policy %+v", second, second.Policy)
		}
		// A run grant is not the thread's.
		if gs, _ := d.store.Grants(context.Background(), "th"); len(gs) != 0 {
			t.Fatalf("a run grant was kept for the thread: %+v", gs)
		}
	})
	t.Run("run grant across a continuation", func(t *testing.T) {
		d := newPolicyDesk(t, askRefunds, twoRefunds)
		d.maxSteps = 1
		res := mustRun(t, d.runtime(t), "desk", "refund", agents.RunOptions{})
		// Approved for the run: the first refund runs, then the agent is
		// out of steps.
		res, err := d.runtime(t).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, Scope: agents.GrantRun})
		if res.Status != agents.StatusMaxSteps {
			t.Fatalf("resume: %s %v", res.Status, err)
		}
		// Continued in another runtime, the second refund runs on the
		// grant kept with the run.
		res, err = d.runtime(t).Continue(context.Background(), res.RunID, agents.ContinueOptions{Steps: 2})
		if err != nil || res.Status != agents.StatusCompleted || len(d.calls()) != 2 {
			t.Fatalf("continue: %s %v, calls %v", res.Status, err, d.calls())
		}
		if g := res.Steps[1].ToolCalls[0].Policy.Grant; g == nil || g.Scope != agents.GrantRun {
			t.Fatalf("second refund's grant %+v", g)
		}
	})
	t.Run("thread", func(t *testing.T) {
		d := newPolicyDesk(t, askRefunds, map[string][]fake.Step{"desk": {
			calls(call("r1", "refund", `{"order":"A"}`)),
			answer("done"),
		}})
		res := mustRun(t, d.runtime(t), "desk", "refund", agents.RunOptions{ThreadID: "th-1"})
		res, err := d.runtime(t).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, Scope: agents.GrantThread, By: "bob"})
		if err != nil || res.Status != agents.StatusCompleted {
			t.Fatalf("resume: %s %v", res.Status, err)
		}
		gs, err := d.store.Grants(context.Background(), "th-1")
		if err != nil || len(gs) != 1 || gs[0].Tool != "refund" || gs[0].By != "bob" || gs[0].Scope != agents.GrantThread {
			t.Fatalf("thread grants %+v %v", gs, err)
		}
		// The thread's next run, in another runtime: no question.
		res = mustRun(t, d.runtime(t), "desk", "refund again", agents.RunOptions{ThreadID: "th-1"})
		if res.Status != agents.StatusCompleted || res.Steps[0].ToolCalls[0].Policy.Grant == nil {
			t.Fatalf("the thread's next run: %s", res.Status)
		}
		// Another thread asks.
		if res := mustRun(t, d.runtime(t), "desk", "refund", agents.RunOptions{ThreadID: "th-2"}); res.Status != agents.StatusPaused {
			t.Fatalf("another thread: %s", res.Status)
		}
	})
	t.Run("a rejection is for the call", func(t *testing.T) {
		d := newPolicyDesk(t, askRefunds, twoRefunds)
		res := mustRun(t, d.runtime(t), "desk", "refund", agents.RunOptions{})
		_, err := d.runtime(t).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Reject, Scope: agents.GrantRun})
		if err == nil || !strings.Contains(err.Error(), "applies to the call only") {
			t.Fatalf("reject for the run: %v", err)
		}
		_, err = d.runtime(t).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, Scope: "forever"})
		if err == nil {
			t.Fatal("an unknown scope was accepted")
		}
	})
}

// TestPolicyShorthandsAndDefault keeps approval always/never working: an
// allow rule with a condition refines a tool that says always, and a
// default of ask applies to tools that say nothing.
func TestPolicyShorthandsAndDefault(t *testing.T) {
	d := newPolicyDesk(t, policy.Policy{Default: policy.Ask, Rules: []policy.Rule{
		{Tool: "refund", When: "args.amount_usd <= 10", Action: policy.Allow},
	}}, map[string][]fake.Step{"desk": {
		calls(call("r1", "refund", `{"order":"A","amount_usd":5}`), call("l1", "lookup", `{"order":"A"}`)),
		calls(call("r2", "refund", `{"order":"B","amount_usd":50}`)),
		calls(call("c1", "credit", `{"order":"C"}`)),
	}})
	d.tools[0].Approval = agents.ApprovalNever
	d.tools[1].Approval = agents.ApprovalAlways
	r := d.runtime(t)
	res := mustRun(t, r, "desk", "go", agents.RunOptions{})
	if res.Status != agents.StatusPaused || res.Checkpoint.Pending.Step.Number != 2 {
		t.Fatalf("status %s at step %d", res.Status, res.Checkpoint.Pending.Step.Number)
	}
	s1 := res.Steps[0].ToolCalls
	if s1[0].Policy.Source != policy.SourceRule || s1[1].Policy.Source != policy.SourceTool || s1[1].Policy.Action != policy.Allow {
		t.Fatalf("step 1 decisions %+v, %+v", s1[0].Policy, s1[1].Policy)
	}
	if p := res.Checkpoint.Pending.Step.ToolCalls[0].Policy; p.Source != policy.SourceTool || p.Action != policy.Ask {
		t.Fatalf("the big refund: %+v", p)
	}
	res, err := r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusPaused {
		t.Fatalf("resume: %s %v", res.Status, err)
	}
	if p := res.Checkpoint.Pending.Step.ToolCalls[0].Policy; p.Source != policy.SourceDefault || p.Action != policy.Ask {
		t.Fatalf("credit: %+v", p)
	}
}

// TestPolicyRefusedAtNew checks that New refuses a policy with problems,
// and one that could ask inside a delegated run, which cannot pause; a
// delegated agent whose tools are only allowed or denied is fine.
func TestPolicyRefusedAtNew(t *testing.T) {
	fx := newFixture(t, fake.Config{})
	tools := []agents.Tool{{Name: "refund", Description: "d", Input: amountSchema}}
	impls := map[string]agents.Implementation{"refund": echoTool}
	_, err := agents.New(agents.Config{Gateway: fx.gw, Tools: tools, Implementations: impls,
		Agents:    []agents.Agent{{Name: "a", Model: "small", Tools: []string{"refund"}}},
		Approvals: policy.Policy{Rules: []policy.Rule{{Tool: "refnud", Action: policy.Ask}}}})
	var pe *policy.Error
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), `there is no tool "refnud"`) {
		t.Fatalf("New with a bad policy: %v", err)
	}
	delegating := func(p policy.Policy) error {
		_, err := agents.New(agents.Config{Gateway: fx.gw, Tools: tools, Implementations: impls, Approvals: p, Conditions: cel.Language{},
			Agents: []agents.Agent{{Name: "lead", Model: "small", Delegates: []string{"helper"}}, {Name: "helper", Model: "small", Tools: []string{"refund"}}}})
		return err
	}
	var de *kind.DeferredError
	if err := delegating(policy.Policy{Rules: []policy.Rule{{Tool: "refund", When: "args.amount_usd > 5", Action: policy.Ask}}}); !errors.As(err, &de) {
		t.Fatalf("a delegated tool that may ask: %v", err)
	}
	if err := delegating(policy.Policy{Default: policy.Deny}); err != nil {
		t.Fatalf("a delegated tool that is denied: %v", err)
	}
}

// TestPolicyInParallelReads denies one of several read calls: the others
// still run concurrently, the denied one is told why.
func TestPolicyInParallelReads(t *testing.T) {
	d := newPolicyDesk(t, policy.Policy{Rules: []policy.Rule{{Tool: "lookup", When: `args.order == "secret"`, Action: policy.Deny}}},
		map[string][]fake.Step{"desk": {
			calls(call("l1", "lookup", `{"order":"A"}`), call("l2", "lookup", `{"order":"secret"}`), call("l3", "lookup", `{"order":"B"}`)),
			answer("done"),
		}})
	res := mustRun(t, d.runtime(t), "desk", "look", agents.RunOptions{})
	cs := res.Steps[0].ToolCalls
	if cs[1].ErrorKind != agents.KindDenied || cs[0].Observation != "lookup done" || cs[2].Observation != "lookup done" || len(d.calls()) != 2 {
		t.Fatalf("calls %+v, ran %v", cs, d.calls())
	}
}

// TestPersonDecisionsInTheSpans approves a refund for the run: the span of
// the resumed drive has the person's decision (who, the scope), and the
// next refund's decision names the grant that let it run without asking.
func TestPersonDecisionsInTheSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	d := newPolicyDesk(t, policy.Policy{Rules: []policy.Rule{{Tool: "refund", Action: policy.Ask}}}, map[string][]fake.Step{"desk": {
		calls(call("r1", "refund", `{"order":"A"}`)),
		calls(call("r2", "refund", `{"order":"B"}`)),
		answer("done"),
	}})
	d.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := d.runtime(t)
	res := mustRun(t, r, "desk", "refund", agents.RunOptions{})
	res, err := r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, Scope: agents.GrantRun, By: "alice"})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("resume: %s %v", res.Status, err)
	}
	byCall := map[string][]map[string]string{}
	for _, s := range rec.Ended() {
		for _, e := range s.Events() {
			if e.Name != agents.EventApprovalDecision {
				continue
			}
			m := map[string]string{}
			for _, kv := range e.Attributes {
				m[string(kv.Key)] = kv.Value.String()
			}
			byCall[m["gen_ai.tool.call.id"]] = append(byCall[m["gen_ai.tool.call.id"]], m)
		}
	}
	r1, r2 := byCall["r1"], byCall["r2"]
	if len(r1) != 2 || r1[0]["aid.approval.action"] != "ask" || r1[0]["aid.approval.source"] != "rule" {
		t.Fatalf("r1's decisions %v", r1)
	}
	if p := r1[1]; p["aid.approval.action"] != "approve" || p["aid.approval.source"] != "person" || p["aid.approval.by"] != "alice" || p["aid.approval.scope"] != "run" {
		t.Fatalf("the person's decision %v", p)
	}
	if len(r2) != 1 || r2[0]["aid.approval.action"] != "ask" || r2[0]["aid.approval.scope"] != "run" || r2[0]["aid.approval.by"] != "alice" {
		t.Fatalf("r2's decision %v", r2)
	}
}
