package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// runState is a run in flight. A top-level run owns its state alone; the
// only concurrent access is the parallel execution of read calls, each of
// which writes its own ToolCallRecord.
type runState struct {
	id              string // the top-level run's id, shared by its delegated runs
	sub             bool   // a delegated run: not stored, cannot pause
	depth           int
	agent           *agentDef
	path            []string
	alias           string
	degraded        bool
	threadID        string
	userID          string
	caller          kind.Caller // whom the run is for (Checkpoint.Key, Tenant)
	msgs            []gateway.Message
	turn            int               // the index in msgs of the run's input (Checkpoint.Turn)
	saved           []SavedMessage    // msgs as checkpointed, kept in step
	req             []gateway.Message // reqAgent's system message and msgs, kept in step
	reqAgent        *agentDef
	steps           []StepRecord
	agentSteps      int
	stepLimit       int           // the current agent's bound when Continue raised it; 0 means its MaxSteps
	runTimeout      time.Duration // this drive's run timeout when Continue set one; 0 means the agent's
	continuations   []Continuation
	cancel          *CancelRequest
	grants          []Grant
	app, ver        string            // the application the run started in (Checkpoint.App, AppVersion)
	lastReq         []gateway.Message // the request of the last step, whole (RequestRecord.Keep)
	reqMemory       bool              // the request being built carries stored memory
	lastFingerprint string            // the fingerprint of the last step's request
	replaySteps     []StepRecord      // a delegated run's recorded steps, in a replay
	delegations     *int              // the top-level run's ownDelegations, shared with delegated runs
	ownDelegations  int
	pathBuf         [2]string // the path's first elements, without an allocation
	repaired        bool
	usage           UsageRecord
	cost            float64
	pending         *Pending
	prerecorded     int // the pending step's leading calls recorded with its checkpoint (saveStep)
	version         int64
	answer          string
	events          *emitter     // the run's hook, shared with delegated runs; nil without one
	glog            *guardLog    // the run's verdicts, shared with delegated runs; nil in a runtime without hooks
	inputChecked    bool         // the input hooks judged the input (Checkpoint.InputChecked)
	client          *clientState // what the client asked of the run (Checkpoint.Client); nil for most runs
	clog            *Compacted   // the run's compactions; nil for a run without any
	sizes           *runSizes    // where the run's sizes are remembered when it ends; nil for a resumed run
}

// maxSteps is the current agent's bound on its model calls in this run.
func (st *runState) maxSteps() int {
	return cmp.Or(st.stepLimit, st.agent.maxSteps)
}

func (st *runState) appendMsg(m gateway.Message) {
	st.msgs = append(st.msgs, m)
	if st.reqAgent != nil {
		st.req = append(st.req, m)
	}
	if !st.sub {
		st.saved = append(st.saved, saveMessage(m))
	}
}

func (c *ToolCallRecord) observe(obs string, kind ErrorKind) {
	c.Observation, c.ErrorKind, c.Done = obs, kind, true
}

// drive runs the loop from st until the run ends, pauses or stops. A
// top-level run is bounded by its agent's run timeout; each step by its
// agent's step timeout, from its model call to the end of its tool calls.
//
// A run's goroutine waits on its model call with drive, modelStep and
// callModel on its stack, so these keep small frames: whatever a step does
// before or after the call (its tool calls, its record, the run's end) is
// in functions of its own, on the stack only while they run, and the run's
// result is written to res, which the caller holds, rather than returned
// through each frame. A live run then fits in a goroutine's first 8 KiB of
// stack (BenchmarkLiveRunStack).
func (r *Runtime) drive(ctx context.Context, st *runState, res *RunResult) error {
	if fn, ok := ctx.Value(eventsKey{}).(func(Event)); ok && fn != nil && st.events == nil && !st.sub {
		st.events = &emitter{fn: fn, runID: st.id}
	}
	if !st.sub {
		var unwatch func()
		ctx, unwatch = r.watchCancel(ctx, st)
		defer unwatch()
		if c, _ := kind.CallerFrom(ctx); c != st.caller && st.caller != (kind.Caller{}) {
			// The run is charged and limited as its starter's, whoever
			// drives it now: a worker, an approver's resume, a recovery.
			ctx = kind.WithCaller(ctx, st.caller)
		}
		st.event(Event{Kind: EventDriven})
	}
	if d := cmp.Or(st.runTimeout, st.agent.timeouts.Run); d > 0 && !st.sub {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, &TimeoutError{Scope: TimeoutRun, Timeout: d})
		defer cancel()
	}
	if st.glog == nil && st.agent.guarded {
		st.glog = &guardLog{}
	}
	s := stepper{ctx: ctx, st: st}
	s.actx, s.span = r.startAgentSpan(ctx, st)
	defer s.clock.end()
	for {
		var o outcome
		if st.pending != nil {
			o = r.callsStep(&s)
		} else {
			o = r.modelStep(&s)
		}
		if o.status != "" || o.sctx != nil {
			return r.end(&s, o, res)
		}
	}
}

// stepper is what drive's steps share: the run's context and state, the
// current agent's span and context, and the step in flight.
type stepper struct {
	ctx   context.Context // the run's
	st    *runState
	actx  context.Context // the current agent's, under its span
	span  trace.Span
	clock stepClock
}

// outcome is how a step ends the run: stopped, when sctx (the step's
// context or the run's) ended with a stop cause, or else finished with
// status. The zero outcome lets the run go on.
type outcome struct {
	status Status
	err    error
	sctx   context.Context
}

// failed is the outcome of a step that failed with err (budget_exceeded
// for a budget breach, such as a compaction's summary refused), or stopped
// when sctx ended with a stop cause.
func failed(sctx context.Context, err error) outcome {
	if stopped(sctx) {
		return outcome{sctx: sctx, err: err}
	}
	return outcome{status: statusOf(err), err: err}
}

// end ends the run as o says, writing its result to res. It is not
// inlined, so that its frame, which holds a copy of the result, is on the
// stack only at the end (see drive).
//
//go:noinline
func (r *Runtime) end(s *stepper, o outcome, res *RunResult) (err error) {
	if o.sctx != nil {
		*res, err = r.stop(s.ctx, o.sctx, s.st, s.span, o.err)
	} else {
		*res, err = r.finish(s.ctx, s.st, s.span, o.status, o.err)
	}
	if !s.st.sub && res.Status != StatusPaused && r.replay == nil {
		for _, fn := range r.runEnded {
			fn(s.st.id)
		}
	}
	return err
}

// callsStep runs the pending step's calls, then hands over to the agent a
// call transferred to, if any.
func (r *Runtime) callsStep(s *stepper) outcome {
	st := s.st
	sctx := s.clock.context(s.actx, st)
	paused, target, err := r.runCalls(sctx, st, s.span)
	switch {
	case err != nil && stopped(sctx):
		return outcome{sctx: sctx, err: err}
	case err != nil:
		st.stopPending()
		return outcome{status: statusOf(err), err: err}
	case paused:
		return outcome{status: StatusPaused}
	}
	s.clock.end()
	if target != nil {
		r.transfer(s, target)
	}
	return outcome{}
}

// transfer hands the conversation over to target, under a span of its own.
// It is not inlined, to keep its span and event out of callsStep's frame,
// which the tool calls run under.
//
//go:noinline
func (r *Runtime) transfer(s *stepper, target *agentDef) {
	st := s.st
	if s.span.IsRecording() {
		s.span.SetAttributes(AttrTransferredTo.String(target.spec.Name))
	}
	s.span.End()
	if st.events != nil {
		st.event(Event{Kind: EventHandoff, Target: target.spec.Name})
	}
	st.agent = target
	st.path = append(st.path, target.spec.Name)
	st.alias, st.degraded, st.agentSteps, st.stepLimit, st.repaired = target.spec.Model, false, 0, 0, false
	s.actx, s.span = r.startAgentSpan(s.ctx, st)
}

// modelStep starts a step with its model call. It is on the stack while
// the run waits on the model, so everything but the call is elsewhere.
func (r *Runtime) modelStep(s *stepper) outcome {
	if s.st.agent.hooks != nil {
		return r.hookedModelStep(s)
	}
	if o, ok := r.beforeCall(s); !ok {
		return o
	}
	sctx := s.clock.start(s.actx, s.st)
	var req gateway.Request
	if err := r.request(sctx, s.st, &req); err != nil {
		return failed(sctx, err)
	}
	var res gateway.Result
	from, err := r.callModel(sctx, s.st, &req, &res)
	if err != nil {
		return r.callFailed(sctx, s.st, err, from)
	}
	return r.answered(s, &req, &res, from)
}

// beforeCall checks that the run may take another step: its context has
// not ended, its hook has not failed, and the agent has steps left. It is
// not inlined, to keep its errors out of modelStep's frame (see drive).
//
//go:noinline
func (r *Runtime) beforeCall(s *stepper) (outcome, bool) {
	st := s.st
	if err := s.ctx.Err(); err != nil {
		if stopped(s.ctx) {
			return outcome{sctx: s.ctx, err: err}, false
		}
		return outcome{status: StatusFailed, err: fmt.Errorf("run %s: %w", st.id, err)}, false
	}
	if st.events != nil {
		if err := st.events.err(); err != nil {
			return outcome{status: StatusFailed, err: fmt.Errorf("run %s: %w", st.id, err)}, false
		}
	}
	if limit := st.maxSteps(); st.agentSteps >= limit {
		return outcome{status: StatusMaxSteps, err: &MaxStepsError{RunID: st.id, Agent: st.agent.spec.Name, MaxSteps: limit}}, false
	}
	return outcome{}, true
}

// callFailed is the outcome of a model call that failed; from is the alias
// the agent degraded from, if it did. It is not inlined, to keep its
// errors out of modelStep's frame (see drive).
//
//go:noinline
func (r *Runtime) callFailed(sctx context.Context, st *runState, err error, from string) outcome {
	if stopped(sctx) {
		// The answer never came: the call is made again when the run is
		// recovered or continued, from the state saved now.
		return outcome{sctx: sctx, err: err}
	}
	var be *gateway.BudgetExceededError
	if errors.As(err, &be) {
		return outcome{status: StatusBudgetExceeded, err: &BudgetExceededError{RunID: st.id, Agent: st.agent.spec.Name, Alias: st.alias, DegradedFrom: from, Err: err}}
	}
	return outcome{status: StatusFailed, err: fmt.Errorf("run %s: agent %q: model call: %w", st.id, st.agent.spec.Name, err)}
}

// answered takes the model's answer to the step's request: a final answer
// ends the run (after a repair round when it does not validate), tool
// calls become the pending step, checkpointed before any of them runs. It
// is not inlined, so that its frame is on the stack only after the call
// (see drive).
//
//go:noinline
func (r *Runtime) answered(s *stepper, req *gateway.Request, res *gateway.Result, from string) outcome {
	st := s.st
	st.agentSteps++
	u := usageRecord(res.Usage)
	st.usage = st.usage.add(u)
	st.cost += res.CostUSD
	// st.alias is now the alias the call was made on, after any step
	// down the ladder.
	step := StepRecord{
		Number: len(st.steps) + 1, Agent: st.agent.spec.Name, Alias: res.Alias, Requested: st.alias,
		Model: res.Model, DegradedFrom: from, Text: res.Text, Usage: u, CostUSD: res.CostUSD,
		Request: st.recordRequest(req), Truncated: res.FinishReason == gateway.FinishLength,
	}
	st.appendMsg(gateway.Message{Role: gateway.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls, Reasoning: res.Reasoning})
	if len(res.ToolCalls) == 0 {
		s.clock.end()
		return r.final(s.actx, st, &step, res.Text)
	}
	return r.pend(s, &step, res.ToolCalls)
}

// final takes the model's final answer, text, to step: it ends the run,
// unless it does not validate and the agent may have it repaired. It is
// not inlined, and neither is pend, so that answered's frame holds neither
// one's locals.
//
//go:noinline
func (r *Runtime) final(ctx context.Context, st *runState, step *StepRecord, text string) outcome {
	st.steps = append(st.steps, *step)
	if out, _ := st.outputSchema(); out != nil {
		var fast *shape // the agent's own schema has its fast path; a client's has none
		if out == st.agent.output {
			fast = st.agent.outShape
		}
		if verr := checkJSON(out, fast, text); verr != nil {
			if !st.repaired && st.agentSteps < st.maxSteps() {
				st.repaired = true
				st.appendMsg(gateway.Message{Role: gateway.RoleUser, Content: repairPrompt(verr)})
				return outcome{}
			}
			return outcome{status: StatusFailed, err: &OutputValidationError{Agent: st.agent.spec.Name, Answer: text, Err: verr}}
		}
	}
	if h := st.agent.hooks; h != nil && len(h.output) > 0 {
		if o, stop := r.checkOutput(ctx, st, step, &text); stop {
			return o
		}
	}
	if out, _ := st.outputSchema(); st.events != nil && (out != nil || (st.agent.hooks != nil && st.agent.hooks.hold)) && text != "" {
		// Withheld while it could still be rejected (generate).
		st.event(Event{Kind: EventText, Step: step.Number, Text: text})
	}
	st.answer = text
	return outcome{status: StatusCompleted}
}

// pend makes step, whose answer asked for calls, the run's pending step and
// checkpoints it.
//
//go:noinline
func (r *Runtime) pend(s *stepper, step *StepRecord, calls []gateway.ToolCall) outcome {
	st := s.st
	step.ToolCalls = make([]ToolCallRecord, len(calls))
	for i, c := range calls {
		step.ToolCalls[i] = ToolCallRecord{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}
	}
	if h := st.agent.hooks; h != nil && len(h.args) > 0 {
		if o, stop := r.checkArguments(s.actx, st, step); stop {
			return o
		}
	}
	if st.clientCalls(step) {
		if st.events != nil {
			st.event(Event{Kind: EventToolCalls, Step: step.Number, Calls: step.ToolCalls})
		}
		s.clock.end()
		return outcome{status: StatusCompleted}
	}
	st.pending = &Pending{Step: *step}
	if st.events != nil {
		st.event(Event{Kind: EventToolCalls, Step: step.Number, Calls: step.ToolCalls})
	}
	// The step is checkpointed before any of its calls is recorded, so
	// that a crash from here on can be recovered.
	if err := r.saveStep(s.ctx, st); err != nil {
		return outcome{status: StatusFailed, err: err}
	}
	return outcome{}
}

// watchCancel returns a context that ends with a *CancelledError as soon as
// the store hands over a cancel request for the run, made in this process
// or another (Runtime.Cancel), and the function that ends the watch. A
// store that cannot watch is logged: the run then stops only when its own
// context ends.
//
// The store calls the watch back rather than the run waiting on it, so that
// a live run holds one goroutine, not two; a request pending already stops
// the run before its first call.
func (r *Runtime) watchCancel(ctx context.Context, st *runState) (context.Context, func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	// The store may hold an ended watch until a later one drops it: stop
	// keeps the run's id, not its state.
	id := st.id
	stop := func(req CancelRequest) {
		cancel(&CancelledError{RunID: id, By: req.By, At: req.At})
	}
	// The watch lives as long as the run's context: the run's end, or the
	// first request, which cancels it, ends the watch.
	if err := r.store.WatchCancel(cctx, st.id, stop); err != nil {
		r.logger.WarnContext(ctx, "cannot watch for cancellation: the run can only be stopped by its own process", "run", st.id, "err", err)
	}
	return cctx, func() { cancel(nil) }
}

// stepClock is the context of the step in flight, bounded by the agent's
// step timeout. A step starts with its model call, or with the calls of a
// pending step when a run is resumed, and ends when its calls are done.
type stepClock struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// start begins a new step on the parent context.
func (c *stepClock) start(parent context.Context, st *runState) context.Context {
	c.end()
	c.ctx, c.cancel = parent, func() {}
	if d := st.agent.timeouts.Step; d > 0 {
		c.ctx, c.cancel = context.WithTimeoutCause(parent, d, &TimeoutError{Scope: TimeoutStep, Step: len(st.steps) + 1, Timeout: d})
	}
	return c.ctx
}

// context returns the step in flight, starting one when there is none (a
// resumed run's pending step).
func (c *stepClock) context(parent context.Context, st *runState) context.Context {
	if c.ctx == nil {
		return c.start(parent, st)
	}
	return c.ctx
}

// end ends the step in flight, if any.
func (c *stepClock) end() {
	if c.cancel != nil {
		c.cancel()
	}
	c.ctx, c.cancel = nil, nil
}

// stopPending ends the pending step of a run that stopped during its tool
// calls (a budget breach, a cancellation, a store failure), so that the
// result's steps show the call that stopped it. Calls that never started
// are marked not run; they were never recorded, so no store holds another
// result for them.
func (st *runState) stopPending() {
	p := st.pending
	if p == nil {
		return
	}
	for i := range p.Step.ToolCalls {
		if c := &p.Step.ToolCalls[i]; !c.Done {
			c.observe("error: not run: the run stopped first", KindNotRun)
		}
	}
	st.steps = append(st.steps, p.Step)
	st.pending, st.prerecorded = nil, 0
}

// statusOf maps a fatal error of the tool phase to the run's status.
func statusOf(err error) Status {
	var be *BudgetExceededError
	if errors.As(err, &be) {
		return StatusBudgetExceeded
	}
	if _, ok := errors.AsType[*BlockedError](err); ok {
		return StatusBlocked
	}
	return StatusFailed
}

func repairPrompt(err error) string {
	return "Your answer does not match the required JSON schema: " + err.Error() + "\nAnswer again with only the corrected JSON document."
}
