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
// together or not at all. It is Prepare's record with status queued:
// everything Run would refuse before its first model call (an unknown
// agent, a missing user id, a bad RunOptions.RunID) is refused here, and
// the options' OnEvent is not kept, since nobody listens to a queued run.
func (r *Runtime) Submit(ctx context.Context, store Store, agent, input string, opts RunOptions) (RunRecord, error) {
	rec, err := r.Prepare(agent, input, withCaller(ctx, opts))
	if err != nil {
		return RunRecord{}, err
	}
	rec.Status = StatusQueued
	rec, err = store.CreateRun(ctx, rec)
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
		return rec, &NotPausedError{RunID: runID, Status: rec.Status, Want: StatusPaused}
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
// SubmitContinue), or a running run whose process died, which it
// recovers as Recover does (calls with a result are not run again, an
// interrupted read runs again, an interrupted write pauses for a
// decision). It is what a job queue's worker calls, for the job's first
// attempt and for a job rescued from a worker that died alike. Call it
// only when the run's job is this worker's: a process still driving the
// run loses its next write with a *ConflictError, but work it already did
// is not undone. A run in any other status was driven to its end already
// (or cancelled, or is waiting for a decision): Drive returns its status
// and a *NotPausedError, and runs nothing.
func (r *Runtime) Drive(ctx context.Context, runID string, opts DriveOptions) (RunResult, error) {
	if opts.Timeout < 0 {
		return RunResult{RunID: runID, Status: StatusFailed}, &InvalidOptionError{Option: "timeout", Problem: fmt.Sprintf("negative: %v", opts.Timeout)}
	}
	rec, err := r.store.LoadRun(ctx, runID)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	if rec.Status != StatusQueued && rec.Status != StatusRunning {
		return RunResult{RunID: runID, Status: rec.Status}, &NotPausedError{RunID: runID, Status: rec.Status, Want: StatusQueued}
	}
	return r.take(ctx, rec, opts.Timeout)
}
