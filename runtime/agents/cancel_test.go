package agents_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

type outcome struct {
	res agents.RunResult
	err error
}

// TestCancelFromAnotherRuntime cancels, from a second runtime sharing the
// store (another replica), a run blocked in a write call: the call's
// context ends, the call is recorded interrupted, never done, the run ends
// cancelled with its partial result and who asked, and Cancel returns once
// it has. Continuing it asks a person about the write, as a crash would.
func TestCancelFromAnotherRuntime(t *testing.T) {
	d := newAgentDesk(t, calls(call("s", "send", `{"id":"A"}`)), answer("done"))
	events := make(chan agents.Event, 16)
	done := make(chan outcome, 1)
	d.block.Store(true)
	go func() {
		res, err := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{ThreadID: "th", OnEvent: func(ev agents.Event) {
			if ev.Kind == agents.EventToolCalls || ev.Kind == agents.EventEnd {
				events <- ev
			}
		}})
		done <- outcome{res, err}
	}()
	ev := <-events
	<-d.started
	other := d.runtime(t)
	rec, err := other.Cancel(context.Background(), ev.RunID, agents.CancelOptions{By: "ops@example.com"})
	if err != nil || rec.Status != agents.StatusCancelled {
		t.Fatalf("cancel: %s %v", rec.Status, err)
	}
	if c := rec.Checkpoint.Cancel; c == nil || c.By != "ops@example.com" || c.At.IsZero() {
		t.Fatalf("the record does not say who cancelled: %+v", rec.Checkpoint.Cancel)
	}
	o := <-done
	ce, ok := errors.AsType[*agents.CancelledError](o.err)
	if !ok || ce.By != "ops@example.com" || ce.RunID != ev.RunID || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("run error %v (%T)", o.err, o.err)
	}
	if o.res.Status != agents.StatusCancelled || len(o.res.Steps) != 1 || o.res.CostUSD <= 0 {
		t.Fatalf("result %s, %d steps, cost %v", o.res.Status, len(o.res.Steps), o.res.CostUSD)
	}
	c := o.res.Steps[0].ToolCalls[0]
	if !c.Interrupted || c.Done || d.sends.Load() != 0 {
		t.Fatalf("the write stopped in flight: %+v, sends %d", c, d.sends.Load())
	}
	if sc, err := d.store.Call(context.Background(), ev.RunID, "1.0"); err != nil || sc.Result != nil {
		t.Fatalf("the write in the store: %+v %v", sc, err)
	}
	if end := <-events; end.Kind != agents.EventEnd || end.Status != agents.StatusCancelled {
		t.Fatalf("last event %+v", end)
	}
	// Cancelling it again is a no-op; it has stopped.
	if again, err := other.Cancel(context.Background(), ev.RunID, agents.CancelOptions{}); err != nil || again.Version != rec.Version {
		t.Fatalf("second cancel: %v, version %d after %d", err, again.Version, rec.Version)
	}
	d.block.Store(false)
	res, err := other.Continue(context.Background(), ev.RunID, agents.ContinueOptions{})
	if err != nil || res.Status != agents.StatusPaused || res.Checkpoint.Pending.Reason != agents.PauseInterrupted {
		t.Fatalf("continue: %s %v", res.Status, err)
	}
	res, err = other.Resume(context.Background(), ev.RunID, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusCompleted || d.sends.Load() != 1 {
		t.Fatalf("resume: %s %v, sends %d", res.Status, err, d.sends.Load())
	}
}

// TestCancelDuringAModelCall cancels a run waiting on its model: the call
// is abandoned and the completed steps kept.
func TestCancelDuringAModelCall(t *testing.T) {
	d := newAgentDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), slowStep)
	r := d.runtime(t)
	done := make(chan outcome, 1)
	ids := make(chan string, 1)
	go func() {
		res, err := r.Run(context.Background(), "desk", "help", agents.RunOptions{OnEvent: func(ev agents.Event) {
			if ev.Kind == agents.EventModelCall && ev.Step == 2 {
				ids <- ev.RunID
			}
		}})
		done <- outcome{res, err}
	}()
	id := <-ids
	rec, err := r.Cancel(context.Background(), id, agents.CancelOptions{})
	o := <-done
	if err != nil || rec.Status != agents.StatusCancelled || o.res.Status != agents.StatusCancelled || len(o.res.Steps) != 1 || rec.Checkpoint.Pending != nil {
		t.Fatalf("cancel %s %v; run %s %d steps", rec.Status, err, o.res.Status, len(o.res.Steps))
	}
}

// TestCancelAPausedRun cancels a run that waits for approval: nobody
// drives it, so Cancel stops it itself. Continuing it brings the call
// back to the person.
func TestCancelAPausedRun(t *testing.T) {
	d := newDesk(t, calls(call("r", "refund", `{"id":"A"}`)), answer("ok"))
	r := newRuntime(t, d.config())
	res := mustRun(t, r, "desk", "refund A", agents.RunOptions{})
	rec, err := r.Cancel(context.Background(), res.RunID, agents.CancelOptions{By: "ops"})
	if err != nil || rec.Status != agents.StatusCancelled || rec.Checkpoint.Cancel.By != "ops" {
		t.Fatalf("cancel: %s %v", rec.Status, err)
	}
	if _, err := r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve}); err == nil {
		t.Fatal("a cancelled run was resumed")
	}
	res, err = r.Continue(context.Background(), res.RunID, agents.ContinueOptions{})
	if err != nil || res.Status != agents.StatusPaused || res.Checkpoint.Pending.Reason != agents.PauseApproval || len(d.refunds) != 0 {
		t.Fatalf("continue: %s %v", res.Status, err)
	}
}

// TestCancelRefusals cancels what cannot be: an unknown run, a completed
// one, and a running one nobody drives (its process died) within a
// deadline, whose request stays recorded: recovering it stops it at once,
// without a model call.
func TestCancelRefusals(t *testing.T) {
	d := newDesk(t, answer("hello"))
	r := newRuntime(t, d.config())
	if _, err := r.Cancel(context.Background(), "run_nobody", agents.CancelOptions{}); !errors.As(err, new(*agents.RunNotFoundError)) {
		t.Fatalf("unknown run: %v", err)
	}
	res := mustRun(t, r, "desk", "hi", agents.RunOptions{})
	_, err := r.Cancel(context.Background(), res.RunID, agents.CancelOptions{})
	if nc, ok := errors.AsType[*agents.NotCancellableError](err); !ok || nc.Status != agents.StatusCompleted {
		t.Fatalf("completed run: %v", err)
	}
	// A run left running by a process that died.
	cp := agents.Checkpoint{Version: agents.CheckpointVersion, RunID: "run_orphan", Agent: "desk", Path: []string{"desk"}, Alias: "small",
		Messages: []agents.SavedMessage{{Role: "user", Content: "hi"}}}
	if _, err := d.store.CreateRun(context.Background(), agents.RunRecord{RunID: "run_orphan", Agent: "desk", Status: agents.StatusRunning, Checkpoint: cp}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	rec, err := r.Cancel(ctx, "run_orphan", agents.CancelOptions{By: "ops"})
	if _, ok := errors.AsType[*agents.CancelPendingError](err); !ok || rec.Status != agents.StatusRunning || rec.Cancel == nil {
		t.Fatalf("cancel of an orphan: %s %v, pending %+v", rec.Status, err, rec.Cancel)
	}
	calls := d.fx.fake.Calls()
	res, err = r.Drive(context.Background(), "run_orphan", agents.DriveOptions{})
	if ce, ok := errors.AsType[*agents.CancelledError](err); !ok || ce.By != "ops" || res.Status != agents.StatusCancelled || d.fx.fake.Calls() != calls {
		t.Fatalf("recover: %s %v, %d model calls", res.Status, err, d.fx.fake.Calls()-calls)
	}
}

// TestCancelStopsADelegation cancels a run while its delegated agent waits
// on its model: the delegation is interrupted too.
func TestCancelStopsADelegation(t *testing.T) {
	fx := newFixture(t, fake.Config{Agents: map[string][]fake.Step{
		"lead":   {calls(call("d", "delegate_to_helper", `{"input":"q"}`)), answer("done")},
		"helper": {slowStep},
	}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{
		{Name: "lead", Model: "small", Delegates: []string{"helper"}},
		{Name: "helper", Model: "small"},
	}})
	ids := make(chan string, 1)
	done := make(chan outcome, 1)
	go func() {
		res, err := r.Run(context.Background(), "lead", "go", agents.RunOptions{OnEvent: func(ev agents.Event) {
			if ev.Kind == agents.EventModelCall && ev.Depth == 1 {
				ids <- ev.RunID
			}
		}})
		done <- outcome{res, err}
	}()
	if _, err := r.Cancel(context.Background(), <-ids, agents.CancelOptions{}); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.res.Status != agents.StatusCancelled || !o.res.Steps[0].ToolCalls[0].Interrupted {
		t.Fatalf("%s %+v", o.res.Status, o.res.Steps)
	}
}

// TestNamesTheRecordCannotKeep refuses, before anything changes, a name of
// who decides, continues or cancels that a run's record cannot keep as
// given: a NUL byte (PostgreSQL holds none) or bytes that are not UTF-8
// (a JSON checkpoint would replace them).
func TestNamesTheRecordCannotKeep(t *testing.T) {
	d := newDesk(t, calls(call("r", "refund", `{"id":"A"}`)), answer("ok"))
	r := newRuntime(t, d.config())
	res := mustRun(t, r, "desk", "refund A", agents.RunOptions{})
	before, _ := d.store.LoadRun(context.Background(), res.RunID)
	for _, by := range []string{"ops\x00", "ops\xff"} {
		_, err := r.Cancel(context.Background(), res.RunID, agents.CancelOptions{By: by})
		_, cerr := r.Continue(context.Background(), res.RunID, agents.ContinueOptions{By: by})
		_, rerr := r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve, By: by})
		for _, e := range []error{err, cerr, rerr} {
			if io, ok := errors.AsType[*agents.InvalidOptionError](e); !ok || io.Option != "by" {
				t.Errorf("by %q: %v", by, e)
			}
		}
	}
	if after, _ := d.store.LoadRun(context.Background(), res.RunID); after.Version != before.Version || after.Status != agents.StatusPaused || len(d.refunds) != 0 {
		t.Fatalf("a refused name changed the run: %s version %d → %d", after.Status, before.Version, after.Version)
	}
}
