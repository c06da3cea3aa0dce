package agents

import (
	"context"
	"fmt"
	"time"
)

// Submit records a new run of the named agent on input with status
// queued, writing it to store, and does not drive it: a worker does, in
// this process or another sharing the store (Drive). store is the
// runtime's own store or a view of it bound to a transaction (the job
// queue's), so that the run and the job that will drive it are written
// together or not at all. The record is the one Run would create, with
// status queued: everything Run would refuse before its first model call
// (an unknown agent, a missing user id, a bad RunOptions.RunID) is
// refused here, and the options' OnEvent is not kept, since nobody
// listens to a queued run. Cancel reaches the run by id from the moment
// it is stored, and a run cancelled before any worker drove it stops at
// once when one does.
func (r *Runtime) Submit(ctx context.Context, store Store, agent, input string, opts RunOptions) (RunRecord, error) {
	opts = withCaller(ctx, opts)
	opts.OnEvent = nil
	st, err := r.prepare(agent, input, opts)
	if err != nil {
		return RunRecord{}, err
	}
	rec, err := store.CreateRun(ctx, RunRecord{RunID: st.id, Agent: agent, Status: StatusQueued, Checkpoint: st.checkpoint()})
	if err != nil {
		return RunRecord{RunID: rec.RunID}, fmt.Errorf("run %s: create queued run record: %w", rec.RunID, err)
	}
	return rec, nil
}

// SubmitResume applies a decision to a paused run as Resume does, checking
// it as Resume does before anything is written, and writes the run to
// store with status queued for a worker to drive (Drive). A thread grant
// is kept in store too.
func (r *Runtime) SubmitResume(ctx context.Context, store Store, runID string, d Decision) (RunRecord, error) {
	if err := d.validate(runID); err != nil {
		return RunRecord{RunID: runID, Status: StatusPaused}, err
	}
	rec, err := store.LoadRun(ctx, runID)
	if err != nil {
		return RunRecord{RunID: runID}, err
	}
	if rec.Status != StatusPaused {
		return rec, &WrongStatusError{RunID: runID, Status: rec.Status, Want: StatusPaused}
	}
	_, rec, _, err = r.claimResume(ctx, store, rec, d, StatusQueued)
	return rec, err
}

// SubmitContinue records a continuation of a run that stopped early as
// Continue does and writes the run to store with status queued for a
// worker to drive (Drive); the worker's drive has opts.Timeout as its run
// timeout only when given it again (DriveOptions.Timeout).
func (r *Runtime) SubmitContinue(ctx context.Context, store Store, runID string, opts ContinueOptions) (RunRecord, error) {
	_, rec, err := r.claimContinue(ctx, store, runID, opts, StatusQueued)
	return rec, err
}

// DriveOptions adjusts Drive.
type DriveOptions struct {
	// Timeout is the drive's run timeout; zero means the agent's
	// (Timeouts.Run). A continuation submitted with a timeout passes it
	// here.
	Timeout time.Duration
}

// Drive drives a run nobody drives: a queued run (Submit, SubmitResume,
// SubmitContinue), or a running run whose process died or shut down and
// interrupted it (ErrInterrupted). It is what a job queue's worker calls,
// for the job's first attempt and for a job rescued from a worker that
// died alike, and what aidgen run --recover calls. Calls of the
// interrupted step that have a result are not run again; an unfinished
// read call is run again; an unfinished write call is never re-run
// silently: the run pauses with reason interrupted, and Resume decides.
// Call it only when the run's job is this worker's, or the run's process
// is known to be gone: a process still driving the run loses its next
// write with a *ConflictError, but work it already did is not undone. Two
// processes driving one run at once may both re-run an interrupted read;
// the one whose result comes second stops with a *ConflictError and
// writes nothing more. Both may lose (each claim moves the record on);
// the run then stays running with its calls finished, and a later Drive
// completes it. A run in any other status was driven to its end already
// (or cancelled, or is waiting for a decision): Drive returns its status
// and a *WrongStatusError, and runs nothing.
func (r *Runtime) Drive(ctx context.Context, runID string, opts DriveOptions) (RunResult, error) {
	if opts.Timeout < 0 {
		return RunResult{RunID: runID, Status: StatusFailed}, &InvalidOptionError{Option: "timeout", Problem: fmt.Sprintf("negative: %v", opts.Timeout)}
	}
	rec, err := r.store.LoadRun(ctx, runID)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	if rec.Status != StatusQueued && rec.Status != StatusRunning {
		return RunResult{RunID: runID, Status: rec.Status}, &WrongStatusError{RunID: runID, Status: rec.Status, Want: StatusQueued}
	}
	return r.take(ctx, rec, opts.Timeout)
}
