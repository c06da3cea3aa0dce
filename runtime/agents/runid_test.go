package agents_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
)

// TestRunByIDForAJobWorker drives runs the way a job worker would: with
// an id made when the job was queued. The run takes that id; a worker
// stopped mid-run (shutdown) leaves it running, and the job tried again on
// another worker is refused a second start with *RunExistsError, before
// any model call, and recovers the run instead: the interrupted read runs
// again and the run completes. A run started by id is cancelled by id from
// another runtime, and its retried start is refused the same way.
func TestRunByIDForAJobWorker(t *testing.T) {
	d := newAgentDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), answer("done"))
	d.block.Store(true)
	id := agents.NewRunID()
	ctx, stop := context.WithCancelCause(context.Background())
	done := make(chan outcome, 1)
	go func() {
		res, err := d.runtime(t).Run(ctx, "desk", "help", agents.RunOptions{RunID: id})
		done <- outcome{res, err}
	}()
	<-d.started
	stop(agents.ErrInterrupted)
	o := <-done
	if o.res.RunID != id || o.res.Status != agents.StatusRunning || !errors.Is(o.err, agents.ErrInterrupted) {
		t.Fatalf("the stopped worker's run: %s %s %v", o.res.RunID, o.res.Status, o.err)
	}
	d.block.Store(false)
	retry := d.runtime(t)
	calls := d.fx.fake.Calls()
	before, _ := d.store.LoadRun(context.Background(), id)
	res, err := retry.Run(context.Background(), "desk", "help", agents.RunOptions{RunID: id})
	if _, ok := errors.AsType[*agents.RunExistsError](err); !ok || res.RunID != id || d.fx.fake.Calls() != calls {
		t.Fatalf("a second start: %s %v, %d model calls", res.Status, err, d.fx.fake.Calls()-calls)
	}
	if after, _ := d.store.LoadRun(context.Background(), id); after.Version != before.Version || after.Status != agents.StatusRunning {
		t.Fatalf("a refused start changed the record: version %d → %d, %s", before.Version, after.Version, after.Status)
	}
	res, err = retry.Drive(context.Background(), id, agents.DriveOptions{})
	if err != nil || res.RunID != id || res.Status != agents.StatusCompleted || res.Answer != "done" || d.lookups.Load() != 1 {
		t.Fatalf("recover: %s %s %v, %d lookups", res.RunID, res.Status, err, d.lookups.Load())
	}

	// Cancelled by id from elsewhere.
	d.block.Store(true)
	id2 := agents.NewRunID()
	go func() {
		res, err := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{RunID: id2})
		done <- outcome{res, err}
	}()
	<-d.started
	rec, err := retry.Cancel(context.Background(), id2, agents.CancelOptions{By: "queue"})
	if err != nil || rec.RunID != id2 || rec.Status != agents.StatusCancelled {
		t.Fatalf("cancel by id: %s %v", rec.Status, err)
	}
	if o := <-done; o.res.RunID != id2 || o.res.Status != agents.StatusCancelled {
		t.Fatalf("the cancelled run: %s %s %v", o.res.RunID, o.res.Status, o.err)
	}
	if _, err := retry.Run(context.Background(), "desk", "help", agents.RunOptions{RunID: id2}); !errors.As(err, new(*agents.RunExistsError)) {
		t.Fatalf("a retried start of a cancelled run: %v", err)
	}
}

// TestRunIDsNewRunIDCannotMake are refused before anything is stored: a
// caller-made id lands in URLs, file names and database keys.
func TestRunIDsNewRunIDCannotMake(t *testing.T) {
	d := newAgentDesk(t, answer("done"))
	r := d.runtime(t)
	good := agents.NewRunID()
	for _, id := range []string{"run_1", "../../etc/passwd", strings.ToUpper(good), good + "0", "job_" + good[4:], good[:35] + "g", good[:35] + "\x00"} {
		res, err := r.Run(context.Background(), "desk", "hi", agents.RunOptions{RunID: id})
		if ie, ok := errors.AsType[*agents.InvalidOptionError](err); !ok || ie.Option != "run_id" || res.Status != agents.StatusFailed || res.RunID != "" {
			t.Errorf("run id %q: %s %q %v", id, res.Status, res.RunID, err)
		}
	}
	if n := d.fx.fake.Calls(); n != 0 {
		t.Fatalf("%d model calls for refused ids", n)
	}
	if _, err := d.store.LoadRun(context.Background(), "run_1"); !errors.As(err, new(*agents.RunNotFoundError)) {
		t.Fatalf("a refused id was stored: %v", err)
	}
	res, err := r.Run(context.Background(), "desk", "hi", agents.RunOptions{RunID: good})
	if err != nil || res.RunID != good || res.Status != agents.StatusCompleted {
		t.Fatalf("a good id: %s %s %v", res.RunID, res.Status, err)
	}
}

// TestSubmitWithARunID queues a run with an id made beforehand, as a job
// queue would, and drives it from another runtime: it completes as the
// same run, keeping its thread, user and input, with no model call made
// before. Submit refuses what Run refuses before a run starts.
func TestSubmitWithARunID(t *testing.T) {
	d := newAgentDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), answer("done"))
	queue, worker := d.runtime(t), d.runtime(t)
	id := agents.NewRunID()
	rec, err := queue.Submit(context.Background(), d.store, "desk", "help", agents.RunOptions{RunID: id, ThreadID: "th", UserID: "u1"})
	if err != nil || rec.RunID != id || rec.Status != agents.StatusQueued || rec.Checkpoint.ThreadID != "th" || rec.Checkpoint.UserID != "u1" {
		t.Fatalf("submit: %+v %v", rec, err)
	}
	if d.fx.fake.Calls() != 0 {
		t.Fatalf("submit called the model: %d calls", d.fx.fake.Calls())
	}
	res, err := worker.Drive(context.Background(), id, agents.DriveOptions{})
	if err != nil || res.RunID != id || res.Status != agents.StatusCompleted || res.Answer != "done" || d.lookups.Load() != 1 {
		t.Fatalf("drive: %s %s %q %v, %d lookups", res.RunID, res.Status, res.Answer, err, d.lookups.Load())
	}
	if len(res.Messages) == 0 || res.Messages[0].Content != "help" {
		t.Fatalf("the run's thread: %+v", res.Messages)
	}
	if _, err := queue.Submit(context.Background(), d.store, "desk", "again", agents.RunOptions{RunID: id}); !errors.As(err, new(*agents.RunExistsError)) {
		t.Fatalf("a second submit with the same id: %v", err)
	}
	if _, err := queue.Submit(context.Background(), d.store, "nobody", "help", agents.RunOptions{}); err == nil {
		t.Fatal("submitted a run of an unknown agent")
	}
	if _, err := queue.Submit(context.Background(), d.store, "desk", "help", agents.RunOptions{RunID: "run_1"}); !errors.As(err, new(*agents.InvalidOptionError)) {
		t.Fatalf("a bad run id: %v", err)
	}
}
