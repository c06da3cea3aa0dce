package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents/policy"
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

// checkpoint snapshots the state. Saved slices are capped, so later appends
// never write into what a store holds.
func (st *runState) checkpoint() Checkpoint {
	cp := Checkpoint{
		Version: CheckpointVersion, RunID: st.id, Agent: st.agent.spec.Name,
		Path: slices.Clip(st.path), Alias: st.alias, Degraded: st.degraded,
		ThreadID: st.threadID, UserID: st.userID, Key: st.caller.Key, Tenant: st.caller.Tenant,
		Messages: slices.Clip(st.saved), Turn: st.turn, Steps: slices.Clip(st.steps),
		AgentSteps: st.agentSteps, StepLimit: st.stepLimit, Delegations: *st.delegations, Repaired: st.repaired,
		Usage: st.usage, CostUSD: st.cost, Continuations: slices.Clip(st.continuations), Cancel: st.cancel,
		Grants: slices.Clip(st.grants), App: st.app, AppVersion: st.ver, InputChecked: st.inputChecked,
	}
	if st.client != nil {
		c := st.client.req
		cp.Client = &c
	}
	if st.glog != nil {
		st.glog.mu.Lock()
		cp.Verdicts = slices.Clone(st.glog.verdicts)
		st.glog.mu.Unlock()
	}
	st.clog.into(&cp)
	if st.pending != nil {
		p := *st.pending
		p.Step.ToolCalls = slices.Clone(p.Step.ToolCalls)
		cp.Pending = &p
	}
	return cp
}

// callKey is a call's key in the store: step number and position.
func callKey(step, i int) string {
	return strconv.Itoa(step) + "." + strconv.Itoa(i)
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

// failed is the outcome of a step that failed with err, or stopped when
// sctx ended with a stop cause.
func failed(sctx context.Context, err error) outcome {
	if stopped(sctx) {
		return outcome{sctx: sctx, err: err}
	}
	return outcome{status: StatusFailed, err: err}
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
	st.appendMsg(gateway.Message{Role: gateway.RoleAssistant, Content: res.Text, ToolCalls: res.ToolCalls})
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

// buildRequest builds the model call of the current step: the agent's
// instructions, stored memory as one extra system message, and the thread
// trimmed to its budget. It is written to req, for the caller's frame
// holds it (see drive). request calls it, and compacts the thread.
func (r *Runtime) buildRequest(ctx context.Context, st *runState, req *gateway.Request) error {
	d := st.agent
	if d.spec.Memory == nil {
		// No trimming and no injection: the request is the system message
		// and the thread, kept up to date by appendMsg rather than copied at
		// every step. The provider gets a clipped slice, so later appends
		// never reach what it holds.
		if st.reqAgent != d {
			// Room for the system message and a step's answer and
			// observation; appendMsg grows it when a step needs more.
			st.req = make([]gateway.Message, 0, len(st.msgs)+3)
			if d.spec.Instructions != "" {
				st.req = append(st.req, gateway.Message{Role: gateway.RoleSystem, Content: d.spec.Instructions})
			}
			st.req = append(st.req, st.msgs...)
			st.reqAgent = d
		}
		*req = gateway.Request{Messages: slices.Clip(st.req), Tools: d.defs, ResponseFormat: d.format, Temperature: d.spec.Temperature, Cache: promptCache(d, st)}
		st.applyClient(req)
		return nil
	}
	thread := trimThread(st.msgs, d.spec.Memory.ThreadTokenBudget, st.turn)
	msgs := make([]gateway.Message, 0, len(thread)+2)
	if d.spec.Instructions != "" {
		msgs = append(msgs, gateway.Message{Role: gateway.RoleSystem, Content: d.spec.Instructions})
	}
	st.reqMemory = false
	switch {
	case r.replay != nil && (d.userMem != nil || d.globalMem != nil):
		// The memory the recorded step was given, not the store's today.
		if m, ok := r.replay.memory(st); ok {
			msgs = append(msgs, m)
			st.reqMemory = true
		}
	case d.userMem != nil || d.globalMem != nil:
		var user, global []MemoryEntry
		var err error
		if d.userMem != nil {
			if st.userID == "" {
				return fmt.Errorf("run %s: %w", st.id, &UserIDRequiredError{Agent: d.spec.Name})
			}
			if user, err = d.userMem.Memories(ctx, MemoryUser, st.userID); err != nil {
				return fmt.Errorf("run %s: read user memory: %w", st.id, err)
			}
		}
		if d.globalMem != nil {
			// The run's tenant's: another tenant's global memory does not
			// exist for it.
			if global, err = d.globalMem.Memories(ctx, MemoryGlobal, st.caller.Tenant); err != nil {
				return fmt.Errorf("run %s: read global memory: %w", st.id, err)
			}
		}
		if m, ok := renderMemory(user, global, d.userBudget, d.globalBudget); ok {
			msgs = append(msgs, m)
			st.reqMemory = true
		}
	}
	msgs = append(msgs, thread...)
	*req = gateway.Request{Messages: msgs, Tools: d.defs, ResponseFormat: d.format, Temperature: d.spec.Temperature, Cache: promptCache(d, st)}
	st.applyClient(req)
	return nil
}

// callModel makes the step's model call. On a budget breach an agent that
// degrades steps exactly one rung down its ladder, once per agent in a run,
// and tries once more; it returns the rung it stepped down from. The
// answer is written to res, which the caller holds, rather than returned,
// so that it is not copied through the frames the run waits with (see
// drive).
func (r *Runtime) callModel(ctx context.Context, st *runState, req *gateway.Request, res *gateway.Result) (from string, err error) {
	ctx = gateway.WithCallInfo(ctx, gateway.CallInfo{Agent: st.agent.spec.Name, Step: st.agentSteps + 1, RunID: st.id})
	if err = r.generate(ctx, st, req, res, callOptions(ctx, st)); err == nil {
		return "", nil
	}
	from, ok := r.degrade(ctx, st, err)
	if !ok {
		return "", err
	}
	return from, r.generate(ctx, st, req, res, callOptions(ctx, st))
}

// callOptions are the options of a model call on st.alias: the budgets it
// is charged to and its fallbacks. They are built per call: the fallbacks
// leave out the alias called, which differs after a step down the ladder.
// It is not inlined, to keep its temporaries out of callModel's frame,
// which is on the stack while the run waits on the model (see drive).
//
//go:noinline
func callOptions(ctx context.Context, st *runState) []gateway.CallOption {
	d := st.agent
	fb := fallbacksFor(d.spec.Fallbacks, st.alias)
	if d.budget == "" && len(fb) == 0 {
		return nil
	}
	var opts []gateway.CallOption
	if d.budget != "" {
		opts = append(opts, gateway.WithBudget(d.budget, budgetKey(st)))
		// WithBudget replaces the budgets on the context; those belong to
		// whoever started the run (an eval, a service request) and cap the
		// agent's calls too, so they are named again beside its own.
		for _, ref := range gateway.BudgetsFromContext(ctx) {
			opts = append(opts, gateway.WithBudget(ref.Name, ref.Key))
		}
	}
	if len(fb) > 0 {
		opts = append(opts, gateway.WithFallbacks(fb...))
	}
	return opts
}

// degrade steps st one rung down its agent's ladder after a call failed
// with err, when the agent degrades on a budget breach, err is one, and
// the agent has not stepped down in this run yet. It returns the rung it
// stepped down from.
//
//go:noinline
func (r *Runtime) degrade(ctx context.Context, st *runState, err error) (string, bool) {
	d := st.agent
	if _, ok := errors.AsType[*gateway.BudgetExceededError](err); !ok || d.spec.OnBudgetExhausted != BudgetDegrade || st.degraded {
		return "", false
	}
	i := slices.Index(d.spec.Ladder, st.alias)
	if i < 0 || i == len(d.spec.Ladder)-1 {
		return "", false
	}
	from := st.alias
	st.alias, st.degraded = d.spec.Ladder[i+1], true
	r.logger.InfoContext(ctx, "degrading after budget breach", "run", st.id, "agent", d.spec.Name, "from", from, "to", st.alias)
	return from, true
}

// fallbacksFor returns the agent's fallbacks for a call on alias, without
// alias itself: an agent that degraded onto a rung that is also one of its
// fallbacks would otherwise try the failing alias twice.
func fallbacksFor(fallbacks []string, alias string) []string {
	if !slices.Contains(fallbacks, alias) {
		return fallbacks
	}
	return slices.DeleteFunc(slices.Clone(fallbacks), func(f string) bool { return f == alias })
}

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

// pause pauses the run at the pending step's call i, which waits for a
// person's decision.
//
//go:noinline
func (r *Runtime) pause(ctx context.Context, st *runState, span trace.Span, i int) (bool, *agentDef, error) {
	p := st.pending
	c := &p.Step.ToolCalls[i]
	if st.sub {
		return false, nil, &kind.DeferredError{Feature: "human decisions inside a delegated run"}
	}
	if p.Reason == "" {
		p.Reason = PauseApproval
	}
	p.Next = i
	if span.IsRecording() {
		span.AddEvent("aid.run.paused", trace.WithAttributes(attrToolName(c.Name), attrToolCallID(c.ID), attrPauseReason(string(p.Reason))))
	}
	r.logger.InfoContext(ctx, "run paused", "run", st.id, "agent", st.agent.spec.Name, "tool", c.Name, "reason", p.Reason)
	if st.events != nil {
		st.event(Event{Kind: EventPause, Step: p.Step.Number, Reason: p.Reason, Calls: p.Step.ToolCalls[i : i+1 : i+1]})
	}
	return true, nil, nil
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

// allowed reports whether the approval policy lets every one of the calls
// run whatever its arguments: tools it does not govern, and declared tools
// it always allows.
func (r *Runtime) allowed(d *agentDef, calls ...ToolCallRecord) bool {
	for _, c := range calls {
		if t := d.tools[c.Name]; t != nil && t.kind == kindPlain && !t.allowed {
			return false
		}
		if c.Policy != nil && c.Policy.Source == policy.SourceGuardrail {
			return false // a guardrail asks about it
		}
	}
	return true
}

// judge applies the approval policy to a call of a declared tool that has
// not been judged yet, records the decision on the call and in the span,
// and finds the grant (of the run, or of its thread in the store) that
// answers an ask. Calls the policy does not govern, calls a person decided
// before policies were recorded, and calls whose arguments the tool would
// refuse (runTool says why; nobody need be asked) are not judged.
func (r *Runtime) judge(ctx context.Context, st *runState, span trace.Span, c *ToolCallRecord) error {
	t := st.agent.tools[c.Name]
	if c.Policy != nil || c.Approval != nil || t == nil || t.kind != kindPlain || t.unruled {
		// A tool the policy has nothing to decide about is allowed by its
		// default, and its calls carry no record of it.
		return nil
	}
	args := callArguments(c)
	if !t.allowed && checkJSON(t.schema, t.shape, args) != nil {
		// A call a person might be asked about is judged only once its
		// arguments are known good; one the policy always allows is
		// judged whatever they are, and runTool refuses it.
		return nil
	}
	d := r.policy.Decide(policy.Input{Tool: c.Name, Arguments: json.RawMessage(args), Agent: st.agent.spec.Name, User: st.userID, Thread: st.threadID})
	rec := &PolicyRecord{Action: d.Action, Source: d.Source, Rule: d.Rule, Reason: d.Reason, At: time.Now().UTC()}
	if d.Action == policy.Ask {
		g, err := r.grantFor(ctx, st, c.Name)
		if err != nil {
			return err
		}
		rec.Grant = g
	}
	c.Policy = rec
	if span.IsRecording() {
		attrs := []attribute.KeyValue{attrToolName(c.Name), attrToolCallID(c.ID), AttrApprovalAction.String(string(d.Action)), AttrApprovalSource.String(string(d.Source))}
		if d.Rule > 0 {
			attrs = append(attrs, AttrApprovalRule.Int(d.Rule))
		}
		if d.Reason != "" {
			attrs = append(attrs, AttrApprovalReason.String(d.Reason))
		}
		if g := rec.Grant; g != nil {
			attrs = append(attrs, AttrApprovalGrant.String(string(g.Scope)), AttrApprovalBy.String(g.By))
		}
		span.AddEvent(EventApprovalDecision, trace.WithAttributes(attrs...))
	}
	return nil
}

// grantFor returns a grant of the tool: one given in the run, or one kept
// for the run's thread.
func (r *Runtime) grantFor(ctx context.Context, st *runState, tool string) (*Grant, error) {
	for _, g := range st.grants {
		if g.Tool == tool {
			return &g, nil
		}
	}
	if st.threadID == "" {
		return nil, nil
	}
	gs, err := r.store.Grants(ctx, st.threadID)
	if err != nil {
		return nil, fmt.Errorf("run %s: read the grants of thread %s: %w", st.id, st.threadID, err)
	}
	for _, g := range gs {
		if g.Tool == tool {
			return &g, nil
		}
	}
	return nil, nil
}

// denied reports whether the policy denied a call no person decided.
func denied(c *ToolCallRecord) bool {
	return c.Policy != nil && c.Policy.Action == policy.Deny && c.Approval == nil
}

// deny gives a denied call its observation: the rule and its reason. The
// call never runs, so it is not recorded in the store.
func (r *Runtime) deny(st *runState, step int, c *ToolCallRecord) {
	obs := "error: the approval policy denies this call"
	switch c.Policy.Source {
	case policy.SourceRule:
		obs += fmt.Sprintf(" (rule %d)", c.Policy.Rule)
	case policy.SourceTool:
		obs += " (the tool's approval)"
	case policy.SourceDefault:
		obs += " (the policy's default)"
	}
	if c.Policy.Reason != "" {
		obs += ": " + c.Policy.Reason
	}
	c.observe(obs, KindDenied)
	if st.events != nil {
		st.event(Event{Kind: EventToolResult, Step: step, Calls: []ToolCallRecord{*c}})
	}
}

// personDecided records a person's decision on a call in the span, as the
// call it decided runs or is rejected.
func personDecided(span trace.Span, c *ToolCallRecord) {
	if !span.IsRecording() {
		return
	}
	a := c.Approval
	action := "reject"
	if a.Approved {
		action = "approve"
	}
	attrs := []attribute.KeyValue{attrToolName(c.Name), attrToolCallID(c.ID), AttrApprovalAction.String(action), AttrApprovalSource.String("person")}
	if a.By != "" {
		attrs = append(attrs, AttrApprovalBy.String(a.By))
	}
	if a.Scope != "" {
		attrs = append(attrs, AttrApprovalGrant.String(string(a.Scope)))
	}
	span.AddEvent(EventApprovalDecision, trace.WithAttributes(attrs...))
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

// recordCall records call i of step before it runs. A call recorded
// earlier (recovery of an interrupted step) is not recorded again; one that
// has a result there already is done, and is not run again.
//
//go:noinline
func (r *Runtime) recordCall(ctx context.Context, st *runState, t *tool, step, i int, c *ToolCallRecord) (done bool, err error) {
	err = r.store.RecordCall(ctx, callRecord(st, t, step, i, c))
	if _, exists := errors.AsType[*CallExistsError](err); exists {
		key := callKey(step, i)
		prev, lerr := r.store.Call(ctx, st.id, key)
		if lerr != nil {
			return false, fmt.Errorf("run %s: read tool call %s: %w", st.id, key, lerr)
		}
		if prev.Result != nil {
			c.observe(prev.Result.Observation, prev.Result.ErrorKind)
			return true, nil
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("run %s: record tool call %s: %w", st.id, callKey(step, i), err)
	}
	return false, nil
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

// delegate runs target in an isolated [system, user] context and makes its
// answer the call's observation. The caller's agent and path do not change.
func (r *Runtime) delegate(ctx context.Context, st *runState, target *agentDef, args json.RawMessage, c *ToolCallRecord) error {
	name := target.spec.Name
	switch {
	case slices.Contains(st.path, name):
		c.observe("error: "+(&ReentryError{Target: name, Path: st.path}).Error(), KindReentry)
		return nil
	case st.depth+1 > r.maxDepth:
		c.observe(fmt.Sprintf("error: cannot delegate to %q: delegations may nest at most %d deep", name, r.maxDepth), KindDelegationLimit)
		return nil
	case *st.delegations >= r.maxDeleg:
		c.observe(fmt.Sprintf("error: cannot delegate to %q: the run has used its %d delegations", name, r.maxDeleg), KindDelegationLimit)
		return nil
	}
	var in struct {
		Input string `json:"input"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		c.observe(fmt.Sprintf("error: invalid arguments for %s: %v", c.Name, err), KindInvalidArguments)
		return nil
	}
	*st.delegations++
	sub := &runState{
		id: st.id, sub: true, depth: st.depth + 1, agent: target,
		path: append(slices.Clone(st.path), name), alias: target.spec.Model,
		threadID: st.threadID, userID: st.userID, delegations: st.delegations, events: st.events, glog: st.glog,
	}
	if r.replay != nil {
		sub.replaySteps = r.replay.delegated(st, c)
	}
	if st.events != nil {
		st.event(Event{Kind: EventDelegate, Step: len(st.steps) + 1, Target: name})
	}
	sub.appendMsg(gateway.Message{Role: gateway.RoleUser, Content: in.Input})
	var res RunResult
	err := r.drive(ctx, sub, &res)
	st.usage = st.usage.add(sub.usage)
	st.cost += sub.cost
	c.Delegate = &DelegateRecord{Agent: res.Agent, Status: res.Status, Steps: res.Steps, Usage: sub.usage, CostUSD: sub.cost}
	switch {
	case err == nil:
		c.observe(res.Answer, "")
		return nil
	case res.Status == StatusBudgetExceeded || ctx.Err() != nil:
		return err
	default:
		c.observe(fmt.Sprintf("error: agent %q could not complete the task: %v", name, err), KindDelegateFailed)
		return nil
	}
}

// callRecord is the record of call i of step as the store keeps it.
func callRecord(st *runState, t *tool, step, i int, c *ToolCallRecord) CallRecord {
	rec := CallRecord{RunID: st.id, Key: callKey(step, i), CallID: c.ID, Tool: c.Name, Effects: EffectsRead, Arguments: c.Arguments}
	if t != nil {
		rec.Effects = t.effects
	}
	return rec
}

// saveStep checkpoints the run with its new pending step. With a StepStore
// the calls that will run at once and may run again after a crash (all of
// a parallel step's, or a sequential step's first) are recorded in the
// same write, saving a round trip each: recovery treats such a call alike
// recorded or not, so recording it a moment early changes nothing.
func (r *Runtime) saveStep(ctx context.Context, st *runState) error {
	ss, ok := r.store.(StepStore)
	if !ok || st.sub {
		return r.save(ctx, st, StatusRunning)
	}
	p := st.pending
	calls := p.Step.ToolCalls
	n := 0
	// Only calls the approval policy lets through whatever their arguments
	// run at once: one it may deny never runs, one it may ask about waits.
	switch {
	case len(calls) > 1 && r.maxParallel > 1 && readOnly(st.agent, calls) && r.allowed(st.agent, calls...):
		n = len(calls)
	case len(calls) > 0 && r.rerunnable(st.agent, calls[0].Name) && r.allowed(st.agent, calls[0]):
		n = 1
	}
	if n == 0 {
		return r.save(ctx, st, StatusRunning)
	}
	return r.saveStepCalls(ctx, st, ss, n)
}

// saveStepCalls is saveStep with the step's first n calls recorded in the
// same write. It is not inlined, to keep its records out of the frame that
// a run's later model calls wait under when it does not record any.
//
//go:noinline
func (r *Runtime) saveStepCalls(ctx context.Context, st *runState, ss StepStore, n int) error {
	p := st.pending
	calls := p.Step.ToolCalls
	recs := make([]CallRecord, n)
	for i := range n {
		recs[i] = callRecord(st, st.agent.tools[calls[i].Name], p.Step.Number, i, &calls[i])
	}
	rec, err := ss.UpdateRunRecordCalls(context.WithoutCancel(ctx), RunRecord{RunID: st.id, Agent: st.agent.spec.Name, Status: StatusRunning, Version: st.version, Checkpoint: st.checkpoint()}, recs)
	if err != nil {
		return fmt.Errorf("run %s: save %s run: %w", st.id, StatusRunning, err)
	}
	st.version, st.prerecorded = rec.Version, n
	return nil
}

// save writes the run's record with status.
func (r *Runtime) save(ctx context.Context, st *runState, status Status) error {
	if st.sub {
		return nil
	}
	rec, err := r.store.UpdateRun(context.WithoutCancel(ctx), RunRecord{RunID: st.id, Agent: st.agent.spec.Name, Status: status, Version: st.version, Checkpoint: st.checkpoint()})
	if err != nil {
		return fmt.Errorf("run %s: save %s run: %w", st.id, status, err)
	}
	st.version = rec.Version
	return nil
}

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
