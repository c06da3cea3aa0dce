package agents_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
)

// TestSubmitThenDrive queues a run, a resume and a continuation, each
// driven by a runtime other than the one that queued it, as a job queue's
// worker in another replica would: the queued record is what the worker
// needs, and the run is the same run throughout.
func TestSubmitThenDrive(t *testing.T) {
	ctx := context.Background()
	d := newDesk(t,
		calls(call("l", "lookup", `{"id":"A"}`)),
		calls(call("r", "refund", `{"id":"A"}`)),
		answer("refunded A"),
	)
	front, worker := newRuntime(t, d.config()), newRuntime(t, d.config())

	rec, err := front.Submit(ctx, d.store, "desk", "refund A", agents.RunOptions{ThreadID: "th"})
	if err != nil || rec.Status != agents.StatusQueued || rec.Version != 1 || rec.Checkpoint.ThreadID != "th" {
		t.Fatalf("submit: %+v %v", rec, err)
	}
	if d.lookups.Load() != 0 || d.fx.fake.Calls() != 0 {
		t.Fatal("submit drove the run")
	}
	res, err := worker.Drive(ctx, rec.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusPaused || res.RunID != rec.RunID || d.lookups.Load() != 1 {
		t.Fatalf("drive: %s %v", res.Status, err)
	}
	// Driving it again does nothing: the job that drove it is done.
	if _, err := worker.Drive(ctx, rec.RunID, agents.DriveOptions{}); !errors.As(err, new(*agents.WrongStatusError)) {
		t.Fatalf("second drive of a paused run: %v", err)
	}

	// A resume is checked where it is asked for, then queued.
	if _, err := front.SubmitResume(ctx, d.store, rec.RunID, agents.Decision{Action: agents.Approve, Arguments: []byte(`{"id":7}`)}); !errors.As(err, new(*agents.InvalidArgumentsError)) {
		t.Fatalf("resume with arguments the schema refuses: %v", err)
	}
	queued, err := front.SubmitResume(ctx, d.store, rec.RunID, agents.Decision{Action: agents.Approve, By: "alice"})
	if err != nil || queued.Status != agents.StatusQueued {
		t.Fatalf("submit resume: %+v %v", queued.Status, err)
	}
	if len(d.refunds) != 0 {
		t.Fatal("the queued resume ran the refund")
	}
	res, err = worker.Drive(ctx, rec.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "refunded A" || len(d.refunds) != 1 {
		t.Fatalf("drive the resume: %s %q %v, %d refunds", res.Status, res.Answer, err, len(d.refunds))
	}
}

// TestQueuedContinuationAndCancel continues a run through the queue and
// cancels a queued run, which nobody drives yet: Cancel stops it at once,
// and the worker that picks its job up afterwards runs nothing.
func TestQueuedContinuationAndCancel(t *testing.T) {
	ctx := context.Background()
	d := newDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), calls(call("l2", "lookup", `{"id":"B"}`)), answer("both"))
	cfg := d.config()
	cfg.Agents[0].MaxSteps = 1
	r := newRuntime(t, cfg)
	res, err := r.Run(ctx, "desk", "look", agents.RunOptions{})
	if res.Status != agents.StatusMaxSteps {
		t.Fatalf("run: %s %v", res.Status, err)
	}
	rec, err := r.SubmitContinue(ctx, d.store, res.RunID, agents.ContinueOptions{Steps: 2, By: "ops"})
	if err != nil || rec.Status != agents.StatusQueued || len(rec.Checkpoint.Continuations) != 1 {
		t.Fatalf("submit continue: %+v %v", rec.Status, err)
	}
	if _, err := r.SubmitContinue(ctx, d.store, res.RunID, agents.ContinueOptions{}); !errors.As(err, new(*agents.NotContinuableError)) {
		t.Fatalf("a second continuation of a queued run: %v", err)
	}
	res, err = r.Drive(ctx, res.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "both" || d.lookups.Load() != 2 {
		t.Fatalf("drive the continuation: %s %v", res.Status, err)
	}

	queued, err := r.Submit(ctx, d.store, "desk", "look again", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := r.Cancel(ctx, queued.RunID, agents.CancelOptions{By: "ops"})
	if err != nil || cancelled.Status != agents.StatusCancelled || cancelled.Checkpoint.Cancel.By != "ops" {
		t.Fatalf("cancel a queued run: %s %v", cancelled.Status, err)
	}
	calls := d.fx.fake.Calls()
	if res, err := r.Drive(ctx, queued.RunID, agents.DriveOptions{}); !errors.As(err, new(*agents.WrongStatusError)) || res.Status != agents.StatusCancelled {
		t.Fatalf("drive a cancelled run: %s %v", res.Status, err)
	}
	if d.fx.fake.Calls() != calls {
		t.Fatal("a cancelled run called the model")
	}
	// Refusals happen before anything is written.
	if _, err := r.Submit(ctx, d.store, "nobody", "x", agents.RunOptions{}); !errors.As(err, new(*agents.UnknownAgentError)) {
		t.Fatalf("submit to an unknown agent: %v", err)
	}
}

// TestQueuedApprovalOfAnInterruptedWrite drives, through the queue, a run
// whose write was interrupted by a dying worker: the worker that takes
// the job over pauses it for a decision (the write is not re-run
// silently), and the approval, queued, runs the write at the next drive
// rather than pausing again. A worker that dies during that approved
// attempt leaves a new interruption, which asks again.
func TestQueuedApprovalOfAnInterruptedWrite(t *testing.T) {
	ctx := context.Background()
	d := newAgentDesk(t, calls(call("s", "send", `{"id":"A"}`)), answer("sent"))
	r := d.runtime(t)
	rec, err := r.Submit(ctx, d.store, "desk", "send A", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The first worker dies in the write.
	d.block.Store(true)
	wctx, kill := context.WithCancelCause(ctx)
	go func() {
		<-d.started
		kill(agents.ErrInterrupted)
	}()
	if res, _ := r.Drive(wctx, rec.RunID, agents.DriveOptions{}); res.Status != agents.StatusRunning {
		t.Fatalf("interrupted drive: %s", res.Status)
	}
	d.block.Store(false)
	res, err := r.Drive(ctx, rec.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusPaused || res.Checkpoint.Pending.Reason != agents.PauseInterrupted || d.sends.Load() != 0 {
		t.Fatalf("rescued drive: %s %v, %d sends", res.Status, err, d.sends.Load())
	}
	if _, err := r.SubmitResume(ctx, d.store, rec.RunID, agents.Decision{Action: agents.Approve, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Drive(ctx, rec.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusCompleted || d.sends.Load() != 1 {
		t.Fatalf("drive of the queued approval: %s %v, %d sends", res.Status, err, d.sends.Load())
	}
}
