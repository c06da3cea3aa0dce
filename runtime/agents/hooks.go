package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/gateway"
)

// HookPoint is where in a run a Hook is called.
type HookPoint string

// The hook points. The first four are a declared guardrail's points
// (package guard spells them the same way).
const (
	// PointInput is the user's message of a new run, before the first
	// model call reads it (HookCall.Text).
	PointInput HookPoint = HookPoint(guard.Input)
	// PointToolArguments is a call's arguments, before the call runs or is
	// checkpointed (HookCall.Tool, CallID, Arguments).
	PointToolArguments HookPoint = HookPoint(guard.ToolArguments)
	// PointToolResult is a call's observation, before the model reads it
	// or the store records it (HookCall.Tool, CallID, Text). Only
	// observations of calls that succeeded are checked.
	PointToolResult HookPoint = HookPoint(guard.ToolResult)
	// PointOutput is the final answer, before the caller reads it
	// (HookCall.Text).
	PointOutput HookPoint = HookPoint(guard.Output)
	// PointModelCall is every model call, before it is made
	// (HookCall.Request, which the hook may change in place).
	PointModelCall HookPoint = "modelCall"
	// PointHandoff is a transfer, before the conversation changes hands
	// (HookCall.Target); a block refuses the handoff and the model reads
	// why.
	PointHandoff HookPoint = "handoff"
)

// HookAction is what a Verdict makes the run do.
type HookAction string

// The verdict actions; the zero Verdict lets the run go on.
const (
	// HookPass lets the value through and records nothing.
	HookPass HookAction = ""
	// HookBlock ends the run with status blocked and the verdict's
	// message (a *BlockedError); at PointHandoff it refuses the handoff.
	HookBlock HookAction = HookAction(guard.Block)
	// HookRedact replaces the value with Verdict.Value before anyone reads
	// it: the model, the record, the caller.
	HookRedact HookAction = HookAction(guard.Redact)
	// HookAsk pauses the run before the call, as an approval rule's ask
	// does; only at PointToolArguments.
	HookAsk HookAction = HookAction(guard.Ask)
	// HookLog records the verdict and lets the value through.
	HookLog HookAction = HookAction(guard.Log)
)

// HookCall is what a hook is called with. Which fields are set depends on
// Point.
type HookCall struct {
	// Point says where the run is.
	Point HookPoint
	// RunID, Agent, UserID and ThreadID are the run's.
	RunID, Agent, UserID, ThreadID string
	// Step is the step's number in its run.
	Step int
	// Text is the value at PointInput, PointToolResult and PointOutput,
	// and the arguments' text at PointToolArguments.
	Text string
	// Tool and CallID name the call at the tool points.
	Tool, CallID string
	// Arguments are the call's arguments at PointToolArguments.
	Arguments json.RawMessage
	// Request is the request at PointModelCall; the hook may change it.
	Request *gateway.Request
	// Target is the agent taking over at PointHandoff.
	Target string
}

// Verdict is a hook's judgement of a HookCall.
type Verdict struct {
	// Action is what the run does; HookPass lets it go on.
	Action HookAction
	// Value replaces the checked value for HookRedact: the text, or the
	// arguments' JSON at PointToolArguments.
	Value string
	// Message is what the caller reads of a block, and the reason a
	// person reads with an ask.
	Message string
	// Matched says what tripped it, for the record.
	Matched []string
	// CostUSD is what judging cost, added to the run's cost.
	CostUSD float64
	// Usage is the tokens judging read and wrote, added to the run's
	// (a model guardrail's call, its agent's run).
	Usage gateway.Usage
	// Judge identifies what judged, when a replay cannot judge again (a
	// model guardrail's alias and a digest of its prompt): the record
	// keeps it, and a replay whose guardrail judges otherwise diverges.
	Judge string
}

// Hook is a function the runtime calls at one or more points of a run to
// observe, change or stop it. Declared guardrails are hooks (Config.Guardrails);
// Go code adds its own (Config.Hooks, Config.AgentHooks). An agent without hooks
// pays nothing for them.
type Hook struct {
	// Name identifies the hook in verdicts, events and spans.
	Name string
	// Points are where it is called.
	Points []HookPoint
	// Tools limits the tool points to these tools (names or path.Match
	// globs); empty means every tool.
	Tools []string
	// Beside lets an input hook run beside the run's first model call
	// rather than before it: the call is cancelled if the hook blocks, and
	// no text of the answer is streamed and no tool runs until it passed.
	// Its Verdict cannot redact (the model read the input already).
	Beside bool
	// PostHoc lets an output hook judge an answer that was streamed as it
	// came: the verdict follows the text as an event. Otherwise, a run
	// with an output hook streams its answer only once every such hook
	// passed it.
	PostHoc bool
	// Func judges the call. An error fails the run: a check that could not
	// be made never lets a value through.
	Func func(ctx context.Context, c *HookCall) (Verdict, error)

	// judge is what judges a model guardrail (guard.Checker.Judge): its
	// calls are charged to the run's budgets, and a replay gives it the
	// recorded finding (replayed) instead of calling it.
	judge    string
	replayed func(hc *HookCall, f guard.Finding) Verdict
}

// VerdictRecord is a verdict that did something (every action but
// HookPass), or a pass that cost something or says why it passed (a model
// guardrail's call; one that gave no verdict and is declared to pass), as
// the run's checkpoint, its record and its events keep it.
type VerdictRecord struct {
	// Guardrail is the hook's name.
	Guardrail string `json:"guardrail"`
	// Point is where it judged.
	Point HookPoint `json:"point"`
	// Action is what it decided.
	Action HookAction `json:"action"`
	// Agent is the agent of the run, Depth its delegation depth, Step the
	// step (0 for the input, before the first step).
	Agent string `json:"agent"`
	Depth int    `json:"depth,omitempty"`
	Step  int    `json:"step,omitempty"`
	// Call and Tool name the call at the tool points.
	Call string `json:"call,omitempty"`
	Tool string `json:"tool,omitempty"`
	// Matched says what tripped it.
	Matched []string `json:"matched,omitempty"`
	// Message is the block's or the ask's message.
	Message string `json:"message,omitempty"`
	// CostUSD is what judging cost.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Usage is the tokens judging read and wrote, also counted in the
	// run's usage; nil when it used none.
	Usage *UsageRecord `json:"usage,omitempty"`
	// Judge is Verdict.Judge: what judged, for a model guardrail.
	Judge string `json:"judge,omitempty"`
}

// BlockedError reports a run a hook or guardrail blocked: status blocked.
// Message is what the caller reads.
type BlockedError struct {
	// RunID is the run.
	RunID string
	// Guardrail names the hook that blocked it, Point where.
	Guardrail string
	Point     HookPoint
	// Message is the declared message.
	Message string
}

// Error implements error.
func (e *BlockedError) Error() string {
	return fmt.Sprintf("run %s: blocked by guardrail %q at %s: %s", e.RunID, e.Guardrail, e.Point, e.Message)
}

// hookSet is an agent's hooks, by point; nil for an agent without any.
type hookSet struct {
	input, beside, model, args, result, output, handoff []*Hook
	hold                                                bool // an output hook holds the streamed answer back
}

// bindHooks gives the agent its hooks: the runtime's, the guardrails it and
// the runtime's defaults name, then its own.
func (d *agentDef) bindHooks(global, own []Hook, defaults []string, guards map[string]*Hook) []error {
	var errs []error
	hooks := make([]*Hook, 0, len(global)+len(defaults)+len(d.spec.Guardrails)+len(own))
	for i := range global {
		hooks = append(hooks, &global[i])
	}
	seen := map[string]bool{}
	for _, n := range slices.Concat(defaults, d.spec.Guardrails) {
		if seen[n] {
			continue
		}
		seen[n] = true
		h, ok := guards[n]
		if !ok {
			errs = append(errs, fmt.Errorf("agent %q: guardrail %q is not in Config.Guardrails", d.spec.Name, n))
			continue
		}
		hooks = append(hooks, h)
	}
	for i := range own {
		hooks = append(hooks, &own[i])
	}
	if len(hooks) == 0 {
		return errs
	}
	hs := &hookSet{}
	for _, h := range hooks {
		if h.Func == nil {
			errs = append(errs, fmt.Errorf("agent %q: hook %q has no Func", d.spec.Name, h.Name))
			continue
		}
		for _, p := range h.Points {
			switch p {
			case PointInput:
				if h.Beside {
					hs.beside = append(hs.beside, h)
				} else {
					hs.input = append(hs.input, h)
				}
			case PointModelCall:
				hs.model = append(hs.model, h)
			case PointToolArguments:
				hs.args = append(hs.args, h)
			case PointToolResult:
				hs.result = append(hs.result, h)
			case PointOutput:
				hs.output = append(hs.output, h)
				hs.hold = hs.hold || !h.PostHoc
			case PointHandoff:
				hs.handoff = append(hs.handoff, h)
			default:
				errs = append(errs, fmt.Errorf("agent %q: hook %q: unknown point %q", d.spec.Name, h.Name, p))
			}
		}
	}
	d.hooks = hs
	return errs
}

// compileGuardrails compiles the declared guardrails into hooks, by name.
// The agents must be declared (declareAgents): a model guardrail may name
// one as its judge.
func (r *Runtime) compileGuardrails(cfg Config) (map[string]*Hook, []error) {
	var errs []error
	out := make(map[string]*Hook, len(cfg.Guardrails))
	deps := guard.Deps{Funcs: cfg.GuardrailFuncs, Classify: r.classify, AgentDigest: r.agentDigest, Conditions: cfg.Conditions}
	judges := guard.CheckAgents(cfg.Guardrails, agentViews(cfg))
	for _, g := range cfg.Guardrails {
		if _, dup := out[g.Name]; dup || g.Name == "" {
			errs = append(errs, fmt.Errorf("guardrail %q is declared twice or has no name", g.Name))
			continue
		}
		if ps := judges[g.Name]; len(ps) > 0 {
			errs = append(errs, &guard.Error{Guardrail: g.Name, Problems: ps})
			continue
		}
		if g.Kind == guard.KindModel && g.Model != "" {
			if err := cfg.Gateway.Require(g.Model, gateway.CapabilityJSON); err != nil {
				errs = append(errs, fmt.Errorf("guardrail %q: model: %w", g.Name, err))
				continue
			}
		}
		c, err := guard.Compile(g, deps)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[g.Name] = guardrailHook(c)
	}
	return out, errs
}

// guardrailHook is the hook a compiled guardrail runs as.
func guardrailHook(c *guard.Checker) *Hook {
	g := c.Guardrail()
	h := &Hook{Name: g.Name, Tools: g.Tools, Beside: g.Beside, PostHoc: g.Stream == guard.PostHoc}
	for _, p := range g.Points {
		h.Points = append(h.Points, HookPoint(p))
	}
	verdict := func(hc *HookCall, f guard.Finding) Verdict {
		if !f.Tripped {
			return Verdict{CostUSD: f.CostUSD, Matched: f.Matched, Judge: c.Judge()}
		}
		out := Verdict{Action: HookAction(g.Action), Message: g.Message, Matched: f.Matched, CostUSD: f.CostUSD, Judge: c.Judge()}
		if g.Action == guard.Redact {
			out.Value = c.Redact(hc.Text, f)
		}
		return out
	}
	h.Func = func(ctx context.Context, hc *HookCall) (Verdict, error) {
		v := guard.Value{Point: string(hc.Point), Text: hc.Text, Tool: hc.Tool, Agent: hc.Agent, User: hc.UserID, Thread: hc.ThreadID}
		if hc.Point == PointToolArguments {
			v.Arguments = hc.Arguments
		}
		f, err := c.Check(ctx, v)
		if err != nil {
			return Verdict{CostUSD: f.CostUSD}, err
		}
		return verdict(hc, f), nil
	}
	if g.Kind == guard.KindModel {
		h.judge, h.replayed = c.Judge(), verdict
	}
	return h
}

// applies reports whether h checks a call of tool.
func (h *Hook) applies(tool string) bool {
	if len(h.Tools) == 0 {
		return true
	}
	for _, t := range h.Tools {
		if ok, _ := path.Match(t, tool); ok {
			return true
		}
	}
	return false
}

// guardLog is the verdicts of a run that may reach an agent with hooks,
// shared with its delegated runs; the parallel calls of a step add to it
// at once.
type guardLog struct {
	mu       sync.Mutex
	verdicts []VerdictRecord
	from     int // the verdicts of earlier drives (a resumed run's checkpoint's)
}

// judge calls hooks in order on hc and applies their verdicts to it: a
// redaction changes hc.Text (and hc.Arguments at PointToolArguments) for
// the hooks after it. It records each verdict that did something and
// returns the first that blocks or asks, if any. span, when recording,
// gets an event per verdict.
func (r *Runtime) judgeHooks(ctx context.Context, st *runState, hooks []*Hook, hc *HookCall) (*VerdictRecord, error) {
	hc.RunID, hc.Agent, hc.UserID, hc.ThreadID = st.id, st.agent.spec.Name, st.userID, st.threadID
	for _, h := range hooks {
		if hc.Tool != "" && !h.applies(hc.Tool) {
			continue
		}
		var v Verdict
		var err error
		usage := UsageRecord{}
		switch {
		case h.judge != "" && r.replay != nil:
			// A replay calls no model: the recorded verdict stands in.
			v, usage, err = r.replay.judged(st, h, hc)
		case h.judge != "":
			jctx, j := judgeContext(ctx, st, h)
			v, err = safeHook(jctx, h, hc)
			usage = j.usage
		default:
			v, err = safeHook(ctx, h, hc)
		}
		usage = usage.add(usageRecord(v.Usage))
		st.addCost(v.CostUSD)
		st.addUsage(usage)
		if err != nil {
			return nil, fmt.Errorf("run %s: guardrail %q at %s: %w", st.id, h.Name, hc.Point, err)
		}
		if v.Action == HookPass && v.CostUSD == 0 && len(v.Matched) == 0 && usage == (UsageRecord{}) {
			continue
		}
		rec := VerdictRecord{Guardrail: h.Name, Point: hc.Point, Action: v.Action, Agent: st.agent.spec.Name, Depth: st.depth, Step: hc.Step, Call: hc.CallID, Tool: hc.Tool, Matched: v.Matched, Message: v.Message, CostUSD: v.CostUSD, Judge: v.Judge}
		if usage != (UsageRecord{}) {
			u := usage // usage itself stays on the stack
			rec.Usage = &u
		}
		switch v.Action {
		case HookRedact:
			if hc.Point == PointToolArguments {
				if !json.Valid([]byte(v.Value)) {
					// What is left is not arguments a tool can read: the
					// call must not run with what matched.
					rec.Action, rec.Message = HookBlock, cmpStr(v.Message, "the redacted arguments are not valid JSON")
					if err := r.verdict(ctx, st, rec); err != nil {
						return nil, err
					}
					return &rec, nil
				}
				hc.Arguments = json.RawMessage(v.Value)
			}
			hc.Text = v.Value
		case HookAsk:
			if hc.Point != PointToolArguments {
				return nil, fmt.Errorf("run %s: hook %q asks at %s; ask pauses a tool call, so only at %s", st.id, h.Name, hc.Point, PointToolArguments)
			}
		}
		if err := r.verdict(ctx, st, rec); err != nil {
			return nil, err
		}
		if v.Action == HookBlock || v.Action == HookAsk {
			return &rec, nil
		}
	}
	return nil, nil
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// safeHook calls h, turning a panic into an error.
func safeHook(ctx context.Context, h *Hook, hc *HookCall) (v Verdict, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return h.Func(ctx, hc)
}

// addCost adds a hook's cost to the run's.
func (st *runState) addCost(usd float64) {
	if usd == 0 {
		return
	}
	st.glog.mu.Lock()
	st.cost += usd
	st.glog.mu.Unlock()
}

// verdict records v: in the run's verdicts, as an event, in the span of
// ctx, in the replay's comparison.
func (r *Runtime) verdict(ctx context.Context, st *runState, v VerdictRecord) error {
	st.glog.mu.Lock()
	n := len(st.glog.verdicts)
	st.glog.verdicts = append(st.glog.verdicts, v)
	st.glog.mu.Unlock()
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		attrs := []attribute.KeyValue{AttrGuardrail.String(v.Guardrail), AttrGuardrailPoint.String(string(v.Point)), AttrGuardrailAction.String(string(v.Action))}
		if len(v.Matched) > 0 {
			attrs = append(attrs, AttrGuardrailMatched.StringSlice(v.Matched))
		}
		if v.CostUSD > 0 {
			attrs = append(attrs, AttrGuardrailCost.Float64(v.CostUSD))
		}
		span.AddEvent(EventGuardrailVerdict, trace.WithAttributes(attrs...))
	}
	if st.events != nil {
		st.event(Event{Kind: EventVerdict, Step: v.Step, Verdict: &v})
	}
	if r.replay != nil {
		return r.replay.verdict(n, v)
	}
	return nil
}

// blocked is the outcome of a run a verdict blocked.
func blocked(st *runState, v *VerdictRecord) outcome {
	return outcome{status: StatusBlocked, err: &BlockedError{RunID: st.id, Guardrail: v.Guardrail, Point: v.Point, Message: v.Message}}
}

// checkInput runs the agent's input hooks that run before the model call
// on the run's input, redacting it in place.
//
//go:noinline
func (r *Runtime) checkInput(ctx context.Context, st *runState, hooks []*Hook) (outcome, bool) {
	m := &st.msgs[st.turn]
	hc := HookCall{Point: PointInput, Text: m.Content}
	v, err := r.judgeHooks(ctx, st, hooks, &hc)
	if err != nil {
		return outcome{status: StatusFailed, err: err}, true
	}
	if hc.Text != m.Content {
		m.Content = hc.Text
		if !st.sub {
			st.saved[st.turn].Content = hc.Text
		}
		st.reqAgent = nil // the request is rebuilt from the thread
	}
	if v != nil {
		return blocked(st, v), true
	}
	return outcome{}, false
}

// inputRace is the input hooks that run beside the first model call.
type inputRace struct {
	done    chan struct{}
	cancel  context.CancelCauseFunc
	tripped *VerdictRecord
	err     error
}

// startInputRace starts the agent's beside hooks on the run's input and
// returns the context the model call is made under: it is cancelled when a
// hook blocks. Until finishInputRace, the run's streamed text is held.
//
//go:noinline
func (r *Runtime) startInputRace(ctx context.Context, st *runState) (context.Context, *inputRace) {
	mctx, cancel := context.WithCancelCause(ctx)
	race := &inputRace{done: make(chan struct{}), cancel: cancel}
	if st.events != nil {
		st.events.hold()
	}
	text := st.msgs[st.turn].Content
	go func() {
		defer close(race.done)
		hc := HookCall{Point: PointInput, Text: text}
		race.tripped, race.err = r.judgeHooks(ctx, st, st.agent.hooks.beside, &hc)
		if race.tripped != nil || race.err != nil {
			cancel(errGuardrailTripped)
		}
	}()
	return mctx, race
}

var errGuardrailTripped = errors.New("agents: an input guardrail tripped beside the model call")

// finishInputRace waits for the beside hooks. A block ends the run: the
// model's answer, if it came, is charged to the run and dropped with
// whatever text it streamed; a call it cancelled is settled by the
// gateway's ledger. A pass releases the held text.
//
//go:noinline
func (r *Runtime) finishInputRace(st *runState, race *inputRace, res *gateway.Result, callErr error) (outcome, bool) {
	<-race.done
	race.cancel(nil)
	if race.tripped == nil && race.err == nil {
		if st.events != nil {
			st.events.release()
		}
		return outcome{}, false
	}
	if st.events != nil {
		st.events.drop()
	}
	if callErr == nil {
		st.usage = st.usage.add(usageRecord(res.Usage))
		st.cost += res.CostUSD
	}
	if race.err != nil {
		return outcome{status: StatusFailed, err: race.err}, true
	}
	return blocked(st, race.tripped), true
}

// checkModelCall runs the model-call hooks on the step's request.
//
//go:noinline
func (r *Runtime) checkModelCall(ctx context.Context, st *runState, req *gateway.Request) (outcome, bool) {
	hc := HookCall{Point: PointModelCall, Step: len(st.steps) + 1, Request: req}
	v, err := r.judgeHooks(ctx, st, st.agent.hooks.model, &hc)
	switch {
	case err != nil:
		return outcome{status: StatusFailed, err: err}, true
	case v != nil:
		return blocked(st, v), true
	}
	return outcome{}, false
}

// checkArguments runs the argument hooks on the calls of a step about to
// become pending, before it is checkpointed: a redaction replaces the
// arguments in the call and in the assistant message that asked for it,
// an ask marks the call for a person, a block ends the run with none of
// the calls run.
//
//go:noinline
func (r *Runtime) checkArguments(ctx context.Context, st *runState, step *StepRecord) (outcome, bool) {
	for i := range step.ToolCalls {
		c := &step.ToolCalls[i]
		hc := HookCall{Point: PointToolArguments, Step: step.Number, Tool: c.Name, CallID: c.ID, Text: c.Arguments, Arguments: json.RawMessage(c.Arguments)}
		v, err := r.judgeHooks(ctx, st, st.agent.hooks.args, &hc)
		if err != nil {
			return outcome{status: StatusFailed, err: err}, true
		}
		if hc.Text != c.Arguments {
			c.Arguments = hc.Text
			st.redactCall(i, hc.Text)
		}
		switch {
		case v == nil:
		case v.Action == HookBlock:
			for j := range step.ToolCalls {
				step.ToolCalls[j].observe("error: not run: guardrail "+v.Guardrail+" blocked the run", KindNotRun)
			}
			st.steps = append(st.steps, *step)
			return blocked(st, v), true
		case v.Action == HookAsk:
			c.Policy = &PolicyRecord{Action: "ask", Source: "guardrail", Reason: cmpStr(v.Message, "guardrail "+v.Guardrail+" asks")}
		}
	}
	return outcome{}, false
}

// redactCall replaces the arguments of call i in the last message, the
// assistant's, in the thread and the checkpoint.
func (st *runState) redactCall(i int, args string) {
	m := &st.msgs[len(st.msgs)-1]
	calls := slices.Clone(m.ToolCalls)
	calls[i].Arguments = json.RawMessage(args)
	m.ToolCalls = calls
	if st.reqAgent != nil {
		st.req[len(st.req)-1] = *m
	}
	if !st.sub {
		st.saved[len(st.saved)-1] = saveMessage(*m)
	}
}

// checkResult runs the result hooks on a call's observation, before the
// model reads it or the store records it. A block stops the run; the call
// keeps an observation that says it was withheld.
//
//go:noinline
func (r *Runtime) checkResult(ctx context.Context, st *runState, step int, c *ToolCallRecord) error {
	hc := HookCall{Point: PointToolResult, Step: step, Tool: c.Name, CallID: c.ID, Text: c.Observation}
	v, err := r.judgeHooks(ctx, st, st.agent.hooks.result, &hc)
	if err != nil {
		return err
	}
	c.Observation = hc.Text
	if v != nil {
		c.Observation = "error: withheld by guardrail " + v.Guardrail
		o := blocked(st, v)
		return o.err
	}
	return nil
}

// checkOutput runs the output hooks on the final answer; a redaction
// replaces it in the step and the thread.
//
//go:noinline
func (r *Runtime) checkOutput(ctx context.Context, st *runState, step *StepRecord, text *string) (outcome, bool) {
	hc := HookCall{Point: PointOutput, Step: step.Number, Text: *text}
	v, err := r.judgeHooks(ctx, st, st.agent.hooks.output, &hc)
	if err != nil {
		return outcome{status: StatusFailed, err: err}, true
	}
	if hc.Text != *text {
		*text, step.Text = hc.Text, hc.Text
		st.steps[len(st.steps)-1].Text = hc.Text
		m := &st.msgs[len(st.msgs)-1]
		m.Content = hc.Text
		if st.reqAgent != nil {
			st.req[len(st.req)-1] = *m
		}
		if !st.sub {
			st.saved[len(st.saved)-1] = saveMessage(*m)
		}
	}
	if v != nil {
		return blocked(st, v), true
	}
	return outcome{}, false
}

// checkHandoff runs the handoff hooks on a transfer; it returns why the
// handoff is refused, if a hook blocks it.
//
//go:noinline
func (r *Runtime) checkHandoff(ctx context.Context, st *runState, step int, c *ToolCallRecord, target string) (string, bool, error) {
	hc := HookCall{Point: PointHandoff, Step: step, Tool: c.Name, CallID: c.ID, Target: target}
	v, err := r.judgeHooks(ctx, st, st.agent.hooks.handoff, &hc)
	if err != nil || v == nil {
		return "", false, err
	}
	return cmpStr(v.Message, "guardrail "+v.Guardrail+" refuses it"), true, nil
}

// hookedModelStep is modelStep for an agent with hooks: the input hooks on
// the run's first step (before the call, or beside it), and the model-call
// hooks on every request. It is a function of its own so that runs of
// agents without hooks keep modelStep's small frame (see drive).
//
//go:noinline
func (r *Runtime) hookedModelStep(s *stepper) outcome {
	st, h := s.st, s.st.agent.hooks
	if o, ok := r.beforeCall(s); !ok {
		return o
	}
	sctx := s.clock.start(s.actx, st)
	first := !st.inputChecked && len(st.steps) == 0 && !st.sub
	if first {
		st.inputChecked = true
		if len(h.input) > 0 {
			if o, stop := r.checkInput(sctx, st, h.input); stop {
				return o
			}
		}
	}
	var req gateway.Request
	if err := r.request(sctx, st, &req); err != nil {
		return failed(sctx, err)
	}
	if len(h.model) > 0 {
		if o, stop := r.checkModelCall(sctx, st, &req); stop {
			return o
		}
	}
	mctx := sctx
	var race *inputRace
	if first && len(h.beside) > 0 {
		mctx, race = r.startInputRace(sctx, st)
	}
	var res gateway.Result
	from, err := r.callModel(mctx, st, &req, &res)
	if race != nil {
		if o, stop := r.finishInputRace(st, race, &res, err); stop {
			return o
		}
	}
	if err != nil {
		return r.callFailed(sctx, st, err, from)
	}
	return r.answered(s, &req, &res, from)
}
