package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway"
)

// runCalls runs the pending step's calls that have no observation yet,
// each as the approval policy decides: a denied call is told why, an
// asked one pauses the run unless a grant or a person answered. It
// returns paused when a call waits for a decision, the target of a
// transfer, or a fatal error (cancellation, a store failure, a budget
// breach inside a delegated run).
//
// A run's goroutine runs a sequential step's calls with runCalls, execOne
// and runTool on its stack, so these keep small frames as drive's do:
// what a call needs before or after it runs, and the paths few calls
// take, are in functions of their own (BenchmarkToolCallStack).
func (r *Runtime) runCalls(ctx context.Context, st *runState, span trace.Span) (paused bool, target *agentDef, err error) {
	p := st.pending
	calls := p.Step.ToolCalls
	if p.Reason == "" && r.parallel(ctx, st, span, calls) {
		if err := r.runParallel(ctx, st, calls); err != nil {
			return false, nil, err
		}
	} else {
		for i := range calls {
			c := &calls[i]
			if c.Done {
				// A transfer that ran before a pause or a crash still hands
				// the conversation over: its observation is replayed, and
				// the switch of agent it made must be too.
				if t := st.agent.tools[c.Name]; target == nil && t != nil && t.kind == kindTransfer && c.ErrorKind == "" {
					target = t.target
				}
				continue
			}
			if target != nil {
				c.observe(fmt.Sprintf("error: not run: the conversation was transferred to agent %q first", target.spec.Name), KindNotRun)
				continue
			}
			if err := r.judge(ctx, st, span, c); err != nil {
				return false, nil, err
			}
			asked := c.Policy != nil && c.Policy.Action == policy.Ask && c.Policy.Grant == nil
			if (asked || (i == p.Next && p.Reason == PauseInterrupted)) && c.Approval == nil {
				return r.pause(ctx, st, span, i)
			}
			if c.Approval != nil {
				personDecided(span, c)
			} else if denied(c) {
				r.deny(st, p.Step.Number, c)
				continue
			}
			tgt, err := r.execOne(ctx, st, p.Step.Number, i, c)
			if err != nil {
				return false, nil, err
			}
			if tgt != nil {
				target = tgt
			}
		}
	}
	if err := r.stepDone(st); err != nil {
		return false, nil, err
	}
	return false, target, nil
}

// runParallel runs a step's read calls at once, up to maxParallel.
//
//go:noinline
func (r *Runtime) runParallel(ctx context.Context, st *runState, calls []ToolCallRecord) error {
	p := st.pending
	errs := make([]error, len(calls))
	sem := make(chan struct{}, r.maxParallel)
	var wg sync.WaitGroup
	for i := range calls {
		if calls[i].Done {
			continue
		}
		if denied(&calls[i]) {
			r.deny(st, p.Step.Number, &calls[i])
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, errs[i] = r.execOne(ctx, st, p.Step.Number, i, &calls[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stepDone ends the pending step, whose calls all have their observation:
// the observations join the thread and the step the run's steps.
//
//go:noinline
func (r *Runtime) stepDone(st *runState) error {
	p := st.pending
	if r.replay != nil {
		if err := r.replay.checkStep(st, &p.Step); err != nil {
			return err
		}
	}
	for i := range p.Step.ToolCalls {
		c := &p.Step.ToolCalls[i]
		st.appendMsg(gateway.Message{Role: gateway.RoleTool, Content: c.Observation, ToolCallID: c.ID, Name: c.Name, Failed: c.ErrorKind != ""})
	}
	st.steps = append(st.steps, p.Step)
	st.pending, st.prerecorded = nil, 0
	return nil
}

// parallel reports whether a step's calls may run concurrently: more than
// one, every one a known read-only tool (searches included) that the
// approval policy does not ask about.
func (r *Runtime) parallel(ctx context.Context, st *runState, span trace.Span, calls []ToolCallRecord) bool {
	if len(calls) < 2 || r.maxParallel < 2 || !readOnly(st.agent, calls) {
		return false
	}
	for i := range calls {
		c := &calls[i]
		if r.judge(ctx, st, span, c) != nil || (c.Policy != nil && c.Policy.Action == policy.Ask && c.Policy.Grant == nil && c.Approval == nil) {
			return false // the calls run one at a time, and the pause or the error happens there
		}
	}
	return true
}

// readOnly reports whether every call is of a known read-only tool
// (searches included) that can run beside others.
func readOnly(d *agentDef, calls []ToolCallRecord) bool {
	for _, c := range calls {
		t := d.tools[c.Name]
		if t == nil || (t.kind != kindPlain && t.kind != kindSearch && t.kind != kindSkill) || t.effects != EffectsRead {
			return false
		}
	}
	return true
}

// execOne records a call, runs it and records its result, exactly once. A
// call recorded earlier (recovery of an interrupted step) is not recorded
// again; one that already has a result is not run again.
//
// Its frame, runTool's and callTool's are on the stack while the call
// runs (see runCalls): what comes before and after is in functions of
// their own.
func (r *Runtime) execOne(ctx context.Context, st *runState, step, i int, c *ToolCallRecord) (*agentDef, error) {
	if stopped(ctx) {
		return nil, notStarted(ctx, st, c)
	}
	t := st.agent.tools[c.Name]
	tctx, span := r.startToolSpan(ctx, st, c)
	defer span.End()
	if !st.sub && i >= st.prerecorded {
		if done, err := r.recordCall(ctx, st, t, step, i, c); done || err != nil {
			return nil, err
		}
	}
	if st.events != nil && !(c.Approval != nil && !c.Approval.Approved) {
		st.toolStarted(step, c)
	}
	target, err := r.runTool(st.withProgress(tctx, step, c), st, t, step, i, c)
	return r.callDone(ctx, tctx, span, st, t, step, i, c, target, err)
}

// notStarted is the error of a call the run stopped before: not started,
// so not recorded, it runs normally when the run is recovered or
// continued.
//
//go:noinline
func notStarted(ctx context.Context, st *runState, c *ToolCallRecord) error {
	return fmt.Errorf("run %s: tool call %s not started: %w", st.id, c.ID, context.Cause(ctx))
}

// toolStarted tells the run's hook that call c of step starts.
//
//go:noinline
func (st *runState) toolStarted(step int, c *ToolCallRecord) {
	st.event(Event{Kind: EventToolStart, Step: step, Calls: []ToolCallRecord{*c}})
}

// callDone takes call i of step after it ran, with the target of a
// transfer it made and the error that stops the run, if any: the
// observation bounded, the result hooks, the call's result recorded,
// exactly once.
//
//go:noinline
func (r *Runtime) callDone(ctx, tctx context.Context, span trace.Span, st *runState, t *tool, step, i int, c *ToolCallRecord, target *agentDef, err error) (*agentDef, error) {
	key := callKey(step, i)
	if err != nil && !st.sub && stopped(ctx) {
		// A shutdown, a timeout or a cancellation is not the call's
		// result: the call stays recorded without one, interrupted, never
		// done, so that Drive or Continue re-runs it (a read) or asks a
		// person (a write, which may or may not have happened).
		c.Delegate, c.Interrupted = nil, true
		span.SetStatus(codes.Error, "interrupted: "+context.Cause(ctx).Error())
		if span.IsRecording() {
			span.SetAttributes(AttrToolErrorKind.String(string(KindInterrupted)))
		}
		return nil, err
	}
	if err != nil {
		// The run stops; the call still gets its one result.
		c.observe("error: the run stopped during this call: "+err.Error(), KindToolFailed)
	}
	limit := DefaultMaxObservationBytes // a tool the agent does not have
	if t != nil {
		limit = t.maxObs
	}
	c.Observation = boundObservation(c.Observation, limit)
	if h := st.agent.hooks; h != nil && len(h.result) > 0 && c.Done && c.ErrorKind == "" && err == nil {
		err = r.checkResult(tctx, st, step, c)
	}
	if c.ErrorKind != "" {
		endSpanToolError(span, c)
	}
	if st.events != nil {
		st.event(Event{Kind: EventToolResult, Step: step, Calls: []ToolCallRecord{*c}})
	}
	if !st.sub {
		if ferr := r.store.FinishCall(context.WithoutCancel(ctx), st.id, key, CallResult{Observation: c.Observation, ErrorKind: c.ErrorKind}); ferr != nil {
			if _, lost := errors.AsType[*CallFinishedError](ferr); lost {
				// Another process recovering the same run finished this
				// call first: that process owns the run now, and this one
				// stops without writing anything more.
				ferr = errors.Join(ferr, &ConflictError{RunID: st.id, Version: st.version})
			}
			return nil, errors.Join(err, fmt.Errorf("run %s: record result of tool call %s: %w", st.id, key, ferr))
		}
	}
	return target, err
}

// runTool runs one call and sets its observation. Everything the model did
// wrong, and every failure of the tool, becomes an error observation; only
// the run's own end (cancellation, a budget breach in a delegated run) is an
// error.
func (r *Runtime) runTool(ctx context.Context, st *runState, t *tool, step, i int, c *ToolCallRecord) (*agentDef, error) {
	if t == nil || t.kind != kindPlain || r.replay != nil || c.Approval != nil && !c.Approval.Approved {
		return r.runOther(ctx, st, t, step, i, c)
	}
	args, ok := validArguments(t, c)
	if !ok {
		return nil, nil
	}
	return nil, r.callTool(ctx, st, t, c, args)
}

// validArguments returns a call's arguments when they match its tool's
// input schema; otherwise the call's observation says why not.
func validArguments(t *tool, c *ToolCallRecord) (json.RawMessage, bool) {
	text := callArguments(c)
	if err := checkJSON(t.schema, t.shape, text); err != nil {
		invalidArguments(c, err)
		return nil, false
	}
	return json.RawMessage(text), true
}

//go:noinline
func invalidArguments(c *ToolCallRecord, err error) {
	c.observe(fmt.Sprintf("error: invalid arguments for %s: %v", c.Name, err), KindInvalidArguments)
}

// runOther is runTool for a call a person rejected, of a tool the agent
// lacks, of a handoff, a delegation or a search, or in a replay.
//
//go:noinline
func (r *Runtime) runOther(ctx context.Context, st *runState, t *tool, step, i int, c *ToolCallRecord) (*agentDef, error) {
	if c.Approval != nil && !c.Approval.Approved {
		obs := "error: a human rejected this call"
		if c.Approval.Feedback != "" {
			obs += ": " + c.Approval.Feedback
		}
		c.observe(obs, KindRejected)
		return nil, nil
	}
	if t == nil {
		c.observe(fmt.Sprintf("error: unknown tool %q; available tools: %s", c.Name, strings.Join(toolNames(st.agent), ", ")), KindUnknownTool)
		return nil, nil
	}
	args, ok := validArguments(t, c)
	if !ok {
		return nil, nil
	}
	switch t.kind {
	case kindTransfer:
		if slices.Contains(st.path, t.target.spec.Name) {
			c.observe("error: "+(&ReentryError{Target: t.target.spec.Name, Path: st.path}).Error(), KindReentry)
			return nil, nil
		}
		if h := st.agent.hooks; h != nil && len(h.handoff) > 0 {
			why, refused, err := r.checkHandoff(ctx, st, step, c, t.target.spec.Name)
			if err != nil {
				return nil, err
			}
			if refused {
				c.observe(fmt.Sprintf("error: the handoff to agent %q is refused: %s", t.target.spec.Name, why), KindDenied)
				return nil, nil
			}
		}
		c.observe(fmt.Sprintf("Transferred the conversation to agent %q.", t.target.spec.Name), "")
		return t.target, nil
	case kindDelegate:
		return nil, r.delegate(ctx, st, t.target, args, c)
	case kindSearch:
		if r.replay != nil {
			return nil, r.replay.tool(ctx, st, step, i, c)
		}
		return nil, r.search(ctx, st, t, args, c)
	case kindSkill:
		if r.replay != nil {
			return nil, r.replay.tool(ctx, st, step, i, c)
		}
		r.skillCall(st, t, args, c)
		return nil, nil
	}
	if r.replay != nil {
		return nil, r.replay.tool(ctx, st, step, i, c)
	}
	return nil, r.callTool(ctx, st, t, c, args)
}

// callTool calls a plain tool's implementation under its timeout and sets
// the call's observation; the error is the run's own end.
func (r *Runtime) callTool(ctx context.Context, st *runState, t *tool, c *ToolCallRecord, args json.RawMessage) error {
	tctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	tctx = context.WithValue(tctx, runInfoKey{}, &RunInfo{RunID: st.id, Agent: st.agent.spec.Name, ThreadID: st.threadID, UserID: st.userID, Tenant: st.caller.Tenant, CallID: c.ID})
	out, err := safeCall(tctx, t.impl, args)
	if err == nil {
		c.observe(out, "")
		return nil
	}
	return toolFailed(ctx, tctx, st, t, c, err)
}

// toolFailed sets the observation of a call whose implementation failed
// with err, unless the run itself ended, which is the error.
//
//go:noinline
func toolFailed(ctx, tctx context.Context, st *runState, t *tool, c *ToolCallRecord, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("run %s: tool %s: %w", st.id, c.Name, ctx.Err())
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		c.observe(fmt.Sprintf("error: tool %s timed out after %v", c.Name, t.timeout), KindTimeout)
	default:
		c.observe(fmt.Sprintf("error: tool %s failed: %v", c.Name, err), KindToolFailed)
	}
	return nil
}

// callArguments are a call's arguments as its tool reads them: an empty
// object for none.
func callArguments(c *ToolCallRecord) string {
	if len(strings.TrimSpace(c.Arguments)) == 0 {
		return "{}"
	}
	return c.Arguments
}

// safeCall runs an implementation, turning a panic into an error.
func safeCall(ctx context.Context, impl Implementation, args json.RawMessage) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	return impl.Call(ctx, args)
}

func toolNames(d *agentDef) []string {
	out := make([]string, len(d.defs))
	for i, def := range d.defs {
		out[i] = def.Name
	}
	return out
}
