package agents_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// TestContinueAfterMaxSteps continues a run that used its steps, in a
// fresh runtime sharing the store: it is the same run (id, path, thread,
// user, the run-scoped budget's account), its record lists the
// continuation, and the new allowance bounds it again.
func TestContinueAfterMaxSteps(t *testing.T) {
	b := gateway.Budget{Name: "b", MaxUSD: 10, Scope: gateway.ScopeRun}
	fx := newFixture(t, fake.Config{Agents: map[string][]fake.Step{"desk": {
		calls(call("l1", "lookup", `{"id":"A"}`)),
		calls(call("l2", "lookup", `{"id":"B"}`)),
		calls(call("l3", "lookup", `{"id":"C"}`)),
		calls(call("l4", "lookup", `{"id":"D"}`)),
		answer("found all four"),
	}}}, b)
	store := agents.NewInMemoryStore()
	cfg := agents.Config{
		Gateway: fx.gw, Store: store, Budgets: []gateway.Budget{b},
		Agents:          []agents.Agent{{Name: "desk", Model: "small", MaxSteps: 2, Tools: []string{"lookup"}, Budget: "b"}},
		Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": echoTool},
	}
	res, err := newRuntime(t, cfg).Run(context.Background(), "desk", "find", agents.RunOptions{ThreadID: "th", UserID: "u"})
	var ms *agents.MaxStepsError
	if !errors.As(err, &ms) || res.Status != agents.StatusMaxSteps || len(res.Steps) != 2 || res.Checkpoint == nil {
		t.Fatalf("run: %s %d steps, %v", res.Status, len(res.Steps), err)
	}
	id, firstCost := res.RunID, res.CostUSD

	// Two more steps: still not enough.
	r2 := newRuntime(t, cfg)
	res, err = r2.Continue(context.Background(), id, agents.ContinueOptions{Steps: 2, By: "ops@example.com"})
	if !errors.As(err, &ms) || ms.MaxSteps != 4 || res.Status != agents.StatusMaxSteps || res.RunID != id || len(res.Steps) != 4 {
		t.Fatalf("first continue: %s %d steps, %v", res.Status, len(res.Steps), err)
	}
	// A run that stopped early keeps its run-scoped budget's account, so a
	// continuation is charged to it: every call of both drives so far is
	// on one account, the run's.
	sum, err := fx.gw.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.ByAccount) != 1 || sum.ByAccount[0].Account.Key != id || sum.ByAccount[0].Calls != 4 {
		t.Fatalf("budget accounts %+v, want one keyed %s with 4 calls", sum.ByAccount, id)
	}
	// The default allowance is the agent's MaxSteps again.
	res, err = r2.Continue(context.Background(), id, agents.ContinueOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "found all four" || res.RunID != id {
		t.Fatalf("second continue: %s %v", res.Status, err)
	}
	if res.CostUSD <= firstCost || len(res.Steps) != 5 {
		t.Fatalf("cost %v after %v, %d steps", res.CostUSD, firstCost, len(res.Steps))
	}
	rec, err := store.LoadRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	cp := rec.Checkpoint
	if cp.ThreadID != "th" || cp.UserID != "u" || cmp.Diff([]string{"desk"}, cp.Path) != "" {
		t.Fatalf("continued run lost its identity: thread %q user %q path %v", cp.ThreadID, cp.UserID, cp.Path)
	}
	if len(cp.Continuations) != 2 {
		t.Fatalf("continuations %+v", cp.Continuations)
	}
	c0, c1 := cp.Continuations[0], cp.Continuations[1]
	if c0.From != agents.StatusMaxSteps || c0.AfterStep != 2 || c0.Steps != 2 || c0.By != "ops@example.com" || c0.At.IsZero() {
		t.Fatalf("first continuation %+v", c0)
	}
	if c1.AfterStep != 4 || c1.Steps != 2 || c1.By != "" {
		t.Fatalf("second continuation %+v", c1)
	}
	// The completed run closed its account, having charged all 5 calls to
	// the budget.
	by, err := fx.gw.SpendByBudget(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := fx.gw.Spend(context.Background()); len(sum.ByAccount) != 0 || len(by) != 1 || by[0].Calls != 5 {
		t.Fatalf("after completion: accounts %+v, by budget %+v; want none open and 5 calls on b", sum.ByAccount, by)
	}
	// A completed run is not continued.
	_, err = r2.Continue(context.Background(), id, agents.ContinueOptions{})
	var nc *agents.NotContinuableError
	if !errors.As(err, &nc) || nc.Status != agents.StatusCompleted {
		t.Fatalf("continue of a completed run: %v", err)
	}
}

// TestContinueAfterATimeoutInAToolCall continues runs that timed out in a
// read and in a write call: the read runs again; the write, which may or
// may not have happened, waits for a person, and runs once approved.
func TestContinueAfterATimeoutInAToolCall(t *testing.T) {
	for _, tt := range []struct {
		tool string
		want agents.Status
	}{{"lookup", agents.StatusCompleted}, {"send", agents.StatusPaused}} {
		t.Run(tt.tool, func(t *testing.T) {
			d := newShutdownDesk(t, calls(call("c", tt.tool, `{"id":"A"}`)), answer("done"))
			d.block.Store(true)
			d.timeouts = agents.Timeouts{Step: 30 * time.Millisecond}
			res, _ := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{})
			if res.Status != agents.StatusTimedOut {
				t.Fatalf("run: %s", res.Status)
			}
			d.block.Store(false)
			res, err := d.runtime(t).Continue(context.Background(), res.RunID, agents.ContinueOptions{})
			if err != nil || res.Status != tt.want {
				t.Fatalf("continue: %s %v, want %s", res.Status, err, tt.want)
			}
			if res.Status == agents.StatusPaused {
				if res.Checkpoint.Pending.Reason != agents.PauseInterrupted || d.sends.Load() != 0 {
					t.Fatalf("paused for %q with %d sends", res.Checkpoint.Pending.Reason, d.sends.Load())
				}
				res, err = d.runtime(t).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve})
				if err != nil || res.Status != agents.StatusCompleted {
					t.Fatalf("resume: %s %v", res.Status, err)
				}
			}
			if res.Answer != "done" || d.lookups.Load()+d.sends.Load() != 1 {
				t.Fatalf("answer %q, lookups %d, sends %d", res.Answer, d.lookups.Load(), d.sends.Load())
			}
			c := res.Steps[0].ToolCalls[0]
			if !c.Done || c.Interrupted || c.Observation == "" {
				t.Fatalf("call after the continuation: %+v", c)
			}
		})
	}
}

// TestContinueWithMoreTime continues a timed-out run with a longer run
// timeout than its agent's.
func TestContinueWithMoreTime(t *testing.T) {
	// An agent script: the continued run's second model call plays the
	// second step again.
	d := newAgentDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), fake.Step{Text: "slow but done", Delay: 150 * time.Millisecond})
	d.timeouts = agents.Timeouts{Run: 50 * time.Millisecond}
	res, _ := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{})
	if res.Status != agents.StatusTimedOut {
		t.Fatalf("run: %s", res.Status)
	}
	res, err := d.runtime(t).Continue(context.Background(), res.RunID, agents.ContinueOptions{Timeout: time.Minute})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("continue: %s %v", res.Status, err)
	}
	if res.Checkpoint != nil || len(res.Steps) != 2 {
		t.Fatalf("steps %d", len(res.Steps))
	}
	_, err = d.runtime(t).Continue(context.Background(), "run_nobody", agents.ContinueOptions{})
	if _, ok := errors.AsType[*agents.RunNotFoundError](err); !ok {
		t.Fatalf("continue of an unknown run: %v", err)
	}
	if _, err := d.runtime(t).Continue(context.Background(), res.RunID, agents.ContinueOptions{Steps: -1}); err == nil {
		t.Fatal("negative steps accepted")
	}
}

// TestConcurrentContinuesRunOnce continues one stopped run from two
// runtimes at once: exactly one drives it; the other is refused and runs
// nothing.
func TestConcurrentContinuesRunOnce(t *testing.T) {
	d := newShutdownDesk(t, calls(call("s", "send", `{"id":"A"}`)), answer("done"))
	d.block.Store(true)
	d.timeouts = agents.Timeouts{Step: 30 * time.Millisecond}
	res, _ := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{})
	if res.Status != agents.StatusTimedOut {
		t.Fatalf("run: %s", res.Status)
	}
	d.block.Store(false)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		r := d.runtime(t)
		wg.Go(func() { _, errs[i] = r.Continue(context.Background(), res.RunID, agents.ContinueOptions{}) })
	}
	wg.Wait()
	var won, lost int
	for _, err := range errs {
		_, conflict := errors.AsType[*agents.ConflictError](err)
		_, refused := errors.AsType[*agents.NotContinuableError](err)
		switch {
		case err == nil:
			won++
		case conflict || refused:
			lost++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("%d won, %d lost: %v", won, lost, errs)
	}
}

// TestTransferResetsTheContinuedAllowance checks that a fresh allowance is
// the agent's: after a transfer the target has its own MaxSteps.
func TestTransferResetsTheContinuedAllowance(t *testing.T) {
	fx := newFixture(t, fake.Config{Agents: map[string][]fake.Step{
		"triage":  {calls(call("l", "lookup", `{"id":"A"}`)), calls(call("t", "transfer_to_billing", `{}`))},
		"billing": {calls(call("l", "lookup", `{"id":"B"}`)), calls(call("l", "lookup", `{"id":"C"}`)), answer("billed")},
	}})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw,
		Agents: []agents.Agent{
			{Name: "triage", Model: "small", MaxSteps: 1, Tools: []string{"lookup"}, Handoffs: []string{"billing"}},
			{Name: "billing", Model: "small", MaxSteps: 2, Tools: []string{"lookup"}},
		},
		Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": echoTool},
	})
	res, _ := r.Run(context.Background(), "triage", "bill me", agents.RunOptions{})
	if res.Status != agents.StatusMaxSteps {
		t.Fatalf("run: %s", res.Status)
	}
	// Ten more steps for triage; billing still stops at its own two.
	res, err := r.Continue(context.Background(), res.RunID, agents.ContinueOptions{Steps: 10})
	var ms *agents.MaxStepsError
	if !errors.As(err, &ms) || ms.Agent != "billing" || ms.MaxSteps != 2 || cmp.Diff([]string{"triage", "billing"}, res.Path) != "" {
		t.Fatalf("continue: %s %v path %v", res.Status, err, res.Path)
	}
	res, err = r.Continue(context.Background(), res.RunID, agents.ContinueOptions{Steps: 1})
	if err != nil || res.Answer != "billed" {
		t.Fatalf("second continue: %s %v", res.Status, err)
	}
}
