package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/gateway"
)

// LastText returns the text of the last of steps that has any: the answer
// of a completed run, what the model last said in one that stopped early.
func LastText(steps []StepRecord) string {
	for _, s := range slices.Backward(steps) {
		if s.Text != "" {
			return s.Text
		}
	}
	return ""
}

// endScopes closes the budget accounts of a run that ended: its own under
// run-scoped budgets, and its thread's when it was its own thread (see
// budgetKey). Nothing is charged to them again, and an in-memory ledger
// would otherwise keep them for ever.
func (r *Runtime) endScopes(ctx context.Context, st *runState) {
	ctx = context.WithoutCancel(ctx)
	err := r.gw.EndScope(ctx, gateway.ScopeRun, st.id)
	if st.threadID == "" {
		err = errors.Join(err, r.gw.EndScope(ctx, gateway.ScopeThread, st.id))
	}
	if err != nil {
		r.logger.WarnContext(ctx, "closing the run's budget accounts failed", "run", st.id, "err", err)
	}
}

// fellBack reports whether any step, or any step of a delegated run, was
// answered by another alias than the one asked for.
func fellBack(steps []StepRecord) bool {
	for _, s := range steps {
		if s.Alias != s.Requested {
			return true
		}
		for _, c := range s.ToolCalls {
			if c.Delegate != nil && fellBack(c.Delegate.Steps) {
				return true
			}
		}
	}
	return false
}

// stopped reports whether ctx ended with a cause that stops the run rather
// than fail it: a shutdown (ErrInterrupted), a timeout (*TimeoutError) or a
// cancellation (*CancelledError). The run keeps its checkpoint, pending
// step included, and a call in flight is recorded without a result.
func stopped(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	cause := context.Cause(ctx)
	_, timeout := errors.AsType[*TimeoutError](cause)
	_, cancelled := errors.AsType[*CancelledError](cause)
	return timeout || cancelled || errors.Is(cause, ErrInterrupted)
}

// stop ends a run whose context (sctx, the step's, or ctx itself) ended
// with a stop cause: a shutdown leaves it running for Drive; a timeout or
// a cancellation ends it timed_out or cancelled, with its pending step kept
// for Continue. cause is the error the stop surfaced as.
func (r *Runtime) stop(ctx, sctx context.Context, st *runState, span trace.Span, cause error) (RunResult, error) {
	why := context.Cause(sctx)
	if errors.Is(why, ErrInterrupted) {
		return r.interrupt(sctx, st, span, cause)
	}
	status, err := StatusCancelled, error(nil)
	if te, ok := errors.AsType[*TimeoutError](why); ok {
		e := *te
		e.RunID, e.Agent = st.id, st.agent.spec.Name
		status, err = StatusTimedOut, &e
	} else if ce, ok := errors.AsType[*CancelledError](why); ok {
		e := *ce
		e.RunID = st.id
		err = &e
		st.cancel = &CancelRequest{By: e.By, At: e.At}
	}
	if _, lost := errors.AsType[*ConflictError](cause); lost {
		err = errors.Join(err, cause)
	}
	if span.IsRecording() {
		span.AddEvent("aid.run.stopped", trace.WithAttributes(AttrRunStatus.String(string(status)), AttrStopReason.String(err.Error())))
	}
	r.logger.InfoContext(context.WithoutCancel(ctx), "run stopped", "run", st.id, "agent", st.agent.spec.Name, "status", status, "reason", err)
	return r.finish(ctx, st, span, status, err)
}

// interrupt ends a run stopped by a shutdown. The record stays running,
// with a checkpoint of everything completed: the finished calls of a
// pending step are Done in it (and have their result in the store), an
// interrupted call is recorded without a result, and a call not started is
// not recorded; Drive continues from there. The result says running and
// the error wraps ErrInterrupted.
func (r *Runtime) interrupt(ctx context.Context, st *runState, span trace.Span, cause error) (RunResult, error) {
	err := fmt.Errorf("run %s: %w; it stays running in the store and can be recovered (Runtime.Drive)", st.id, context.Cause(ctx))
	var conflict *ConflictError
	if errors.As(cause, &conflict) {
		err = errors.Join(err, cause)
	}
	r.logger.InfoContext(context.WithoutCancel(ctx), "run interrupted by shutdown", "run", st.id, "agent", st.agent.spec.Name, "cause", cause)
	return r.finish(ctx, st, span, StatusRunning, err)
}

// finish ends the agent span, saves the final record and builds the result.
func (r *Runtime) finish(ctx context.Context, st *runState, span trace.Span, status Status, err error) (RunResult, error) {
	res := RunResult{
		RunID: st.id, Agent: st.agent.spec.Name, Path: slices.Clone(st.path), Answer: st.answer,
		Status: status, Steps: slices.Clip(st.steps), Usage: st.usage.Usage(), CostUSD: st.cost,
		Messages: slices.Clip(st.msgs), Compactions: st.clog.list(),
	}
	if st.glog != nil && !st.sub {
		st.glog.mu.Lock()
		res.Verdicts = slices.Clone(st.glog.verdicts[st.glog.from:])
		st.glog.mu.Unlock()
	}
	if st.sizes != nil && !st.sub {
		st.sizes.observe(len(st.msgs)-st.turn-1, len(st.steps))
	}
	res.FellBack = fellBack(st.steps) || (st.pending != nil && fellBack([]StepRecord{st.pending.Step}))
	switch status {
	case StatusTimedOut, StatusCancelled:
		// The partial result shows the step that stopped, as it stood.
		if p := st.pending; p != nil {
			res.Steps = append(slices.Clone(res.Steps), p.Step)
			res.Steps[len(res.Steps)-1].ToolCalls = slices.Clone(p.Step.ToolCalls)
		}
		fallthrough
	case StatusPaused, StatusMaxSteps:
		cp := st.checkpoint()
		res.Checkpoint = &cp
	}
	res.LastText = LastText(res.Steps)
	if status == StatusBlocked {
		// What a guardrail blocked is the record's, never the caller's.
		res.LastText = ""
	}
	var conflict *ConflictError
	if !errors.As(err, &conflict) {
		// A run that lost its record to another writer leaves it alone.
		if serr := r.save(ctx, st, status); serr != nil {
			r.logger.ErrorContext(ctx, "saving the run's end failed", "run", st.id, "status", status, "err", serr)
			err = errors.Join(err, serr)
			if status == StatusPaused || status == StatusCompleted {
				res.Status = StatusFailed
			}
		}
	}
	if !st.sub && ended(res.Status) && !Continuable(res.Status) {
		// A run that stopped early keeps its accounts: a continuation is
		// the same run, charged to the same run-scoped budget.
		r.endScopes(ctx, st)
	}
	endAgentSpan(span, res.Status, err)
	if st.events != nil {
		ev := Event{Kind: EventEnd, Status: res.Status, Err: err}
		if res.Status == StatusCompleted {
			ev.Text = res.Answer
		}
		st.event(ev)
	}
	return res, err
}
