package agents

import (
	"context"
	"fmt"
	"iter"
	"runtime/debug"
	"sync"

	"github.com/aidgen/aid/runtime/gateway"
)

// EventKind says what an Event reports.
type EventKind uint8

// The events of a run, in the order a step produces them.
const (
	// EventModelCall: a model call starts (Agent, Step, Alias). A step
	// that degrades after a budget breach reports a second call on the
	// lower rung.
	EventModelCall EventKind = iota + 1
	// EventText: the next piece of the model's text (Agent, Step, Text).
	// The pieces of one step concatenate to the step's text. A step that
	// ends in tool calls may have text too: it is part of that assistant
	// message, not of the final answer.
	EventText
	// EventToolCalls: the model asked for tool calls (Agent, Step,
	// Calls, their arguments set, their observations not yet).
	EventToolCalls
	// EventToolResult: one call has its observation (Agent, Step, Calls
	// holding that one call). Every call the model asked for gets one,
	// whatever runs it (Go code, an http, fixture or mcp tool, a search_
	// retriever, a transfer_ or delegate_ call), a denied or rejected call
	// included.
	EventToolResult
	// EventHandoff: the conversation was transferred (Agent, the agent
	// that gave it away, and Target).
	EventHandoff
	// EventDelegate: a delegated run starts (Agent delegates to Target);
	// its events follow with Depth one more, and its EventEnd closes it.
	EventDelegate
	// EventPause: the run paused (Agent, Step, Reason, Calls holding the
	// call that waits for a decision).
	EventPause
	// EventEnd: the run ended (Agent, Status, Text the answer when it
	// completed, Err when it failed). It is the last event of a run at
	// Depth 0.
	EventEnd
	// EventToolProgress: a running tool call reported how far it has got
	// (Agent, Step, Calls holding that call without its observation,
	// Progress), between its EventToolCalls and its EventToolResult. Only
	// implementations that call ReportProgress produce it (an MCP server's
	// progress notifications, for example).
	EventToolProgress
	// EventToolStart: one call starts running (Agent, Step, Calls holding
	// that one call, its arguments set), whatever runs it, as for
	// EventToolResult, which follows it. A call that never runs (denied,
	// rejected, or answered already before a recovery) has no start.
	EventToolStart
	// EventVerdict: a hook or guardrail judged a value and did something
	// (Agent, Step, Verdict): blocked, redacted, asked or logged. A
	// verdict of a post-hoc output guardrail follows the text it judged.
	EventVerdict
	// EventDriven: the run is stored and about to be driven, by Run,
	// Resume, Continue or Drive (Agent, the agent it is on): the
	// first event of each, before any model call, so that a stream can
	// name the run before it costs anything. A call refused before the
	// run starts or is claimed has none.
	EventDriven
	// EventCompaction: the thread was compacted before a model call
	// (Agent, Step the step whose request it made fit, Compaction).
	EventCompaction
)

// Event is one thing that happened in a run, given to RunOptions.OnEvent as
// it happens. Which fields are set depends on Kind.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// RunID is the top-level run's id, known from the first event on, so
	// that a stream can name the run before it ends.
	RunID string
	// Agent is the agent the event is about.
	Agent string
	// Depth is 0 for the run itself and n for a run delegated n deep. The
	// text of a delegated run is not the run's answer: it becomes an
	// observation of the delegating agent.
	Depth int
	// Step is the step's number in its run (StepRecord.Number).
	Step int
	// Alias is the alias called (EventModelCall).
	Alias string
	// Text is a piece of the answer (EventText) or the answer (EventEnd).
	Text string
	// Calls are the tool calls of EventToolCalls, EventToolResult and
	// EventPause; the hook must not keep or modify them.
	Calls []ToolCallRecord
	// Target is the agent taking over (EventHandoff) or delegated to
	// (EventDelegate).
	Target string
	// Reason is why the run paused (EventPause).
	Reason PauseReason
	// Status is how the run ended (EventEnd).
	Status Status
	// Err is why the run failed (EventEnd), nil otherwise.
	Err error
	// Progress is what a running tool call reported (EventToolProgress).
	Progress *ToolProgress
	// Verdict is the verdict of EventVerdict.
	Verdict *VerdictRecord
	// Compaction is the compaction of EventCompaction.
	Compaction *CompactionRecord
}

// ToolProgress is how far a running tool call has got, as its
// implementation reports it with ReportProgress.
type ToolProgress struct {
	// Progress is the work done so far; it increases with each report.
	Progress float64
	// Total is the work there is in all, when known; zero otherwise.
	Total float64
	// Message says what is being done, when the tool says it.
	Message string
}

type progressKey struct{}

// ReportProgress tells the run whose tool call ctx belongs to how far the
// call has got: the run's OnEvent hook receives an EventToolProgress. An
// Implementation calls it with the context its Call received, any number
// of times until Call returns; outside a call, or in a run without a hook,
// it does nothing.
func ReportProgress(ctx context.Context, p ToolProgress) {
	if report, ok := ctx.Value(progressKey{}).(func(ToolProgress)); ok {
		report(p)
	}
}

// withProgress returns ctx for running the call c of the given step of
// st, whose progress reports reach st's hook, when st has one.
func (st *runState) withProgress(ctx context.Context, step int, c *ToolCallRecord) context.Context {
	if st.events == nil {
		return ctx
	}
	call := ToolCallRecord{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	return context.WithValue(ctx, progressKey{}, func(p ToolProgress) {
		st.event(Event{Kind: EventToolProgress, Step: step, Calls: []ToolCallRecord{call}, Progress: &p})
	})
}

// eventsKey is the context key of ContextWithEvents.
type eventsKey struct{}

// ContextWithEvents returns a context under which a run that has no
// RunOptions.OnEvent reports its events to fn, as OnEvent would: a new run,
// and a run resumed, continued or recovered, which take no options. A
// service streaming any of them sets it on the request's context.
func ContextWithEvents(ctx context.Context, fn func(Event)) context.Context {
	return context.WithValue(ctx, eventsKey{}, fn)
}

// HookPanicError reports that RunOptions.OnEvent panicked. The run stops
// as failed: its model call is abandoned (and settled by the gateway), and
// no further event is delivered.
type HookPanicError struct {
	// Value is what the hook panicked with.
	Value any
	// Stack is the hook's stack at the panic.
	Stack string
}

func (e *HookPanicError) Error() string {
	return fmt.Sprintf("event hook panicked: %v", e.Value)
}

// emitter delivers a run's events to its hook one at a time: the parallel
// read calls of a step finish on their own goroutines, and a hook should
// not need a lock of its own. A panic in the hook is caught and kept; from
// then on events are dropped and the run stops at its next check.
type emitter struct {
	mu      sync.Mutex
	fn      func(Event)
	runID   string
	failed  *HookPanicError
	holding bool    // text is held while input guardrails judge beside the model call
	held    []Event // the text held
}

// hold holds text events back until release or drop.
func (e *emitter) hold() {
	e.mu.Lock()
	e.holding = true
	e.mu.Unlock()
}

// release delivers the text held and stops holding.
func (e *emitter) release() {
	e.mu.Lock()
	held := e.held
	e.holding, e.held = false, nil
	e.mu.Unlock()
	for _, ev := range held {
		if !e.emit(ev) {
			return
		}
	}
}

// drop forgets the text held and stops holding: it is never delivered.
func (e *emitter) drop() {
	e.mu.Lock()
	e.holding, e.held = false, nil
	e.mu.Unlock()
}

// emit delivers ev and reports whether the hook is still healthy.
func (e *emitter) emit(ev Event) (ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed != nil {
		return false
	}
	if e.holding && ev.Kind == EventText {
		e.held = append(e.held, ev)
		return true
	}
	defer func() {
		if p := recover(); p != nil {
			e.failed = &HookPanicError{Value: p, Stack: string(debug.Stack())}
			ok = false
		}
	}()
	ev.RunID = e.runID
	e.fn(ev)
	return true
}

// err returns the hook's panic, if it panicked.
func (e *emitter) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed == nil {
		return nil
	}
	return e.failed
}

// event sends ev about st's current agent and depth, when st has a hook.
func (st *runState) event(ev Event) {
	if st.events == nil {
		return
	}
	ev.Agent, ev.Depth = st.agent.spec.Name, st.depth
	st.events.emit(ev)
}

// streamer is the gateway's streaming call, which the loop uses instead of
// Generate when a run has an event hook.
type streamer interface {
	Stream(ctx context.Context, alias string, req gateway.Request, opts ...gateway.CallOption) iter.Seq2[gateway.Chunk, error]
}

// generate makes one model call of st's current step on st.alias. Without
// a hook it is Generate. With one it reports the call, then streams it and
// hands each piece of text to the hook as it arrives, returning the same
// Result Generate would; everything after the call is the same code for
// both. An alias that cannot stream is called with Generate and its text
// reported in one piece. The text of an agent with an output schema is
// withheld until the answer validates (the loop reports it then), so that
// a rejected answer never reaches the hook as text.
//
// The answer is written to res (see callModel).
func (r *Runtime) generate(ctx context.Context, st *runState, req *gateway.Request, res *gateway.Result, opts []gateway.CallOption) (err error) {
	if r.replay != nil || st.events != nil {
		return r.generateOther(ctx, st, req, res, opts)
	}
	*res, err = r.gen.Generate(ctx, st.alias, *req, opts...)
	return err
}

// generateOther is generate for a replay or a run with a hook. It is a
// function of its own, not inlined, so that its events stay out of the
// frame that every run keeps on its stack while it waits on the model.
//
//go:noinline
func (r *Runtime) generateOther(ctx context.Context, st *runState, req *gateway.Request, res *gateway.Result, opts []gateway.CallOption) (err error) {
	if r.replay != nil {
		*res, err = r.replay.model(ctx, st, *req)
	} else {
		*res, err = r.generateEvents(ctx, st, *req, opts)
	}
	return err
}

// generateEvents is generate for a run with a hook.
func (r *Runtime) generateEvents(ctx context.Context, st *runState, req gateway.Request, opts []gateway.CallOption) (gateway.Result, error) {
	ev := st.events
	step := len(st.steps) + 1
	st.event(Event{Kind: EventModelCall, Step: step, Alias: st.alias})
	if err := ev.err(); err != nil {
		return gateway.Result{}, err
	}
	out, _ := st.outputSchema()
	withhold := out != nil || (st.agent.hooks != nil && st.agent.hooks.hold)
	if r.stream == nil || r.gw.Require(st.alias, gateway.CapabilityStreaming) != nil {
		res, err := r.gen.Generate(ctx, st.alias, req, opts...)
		if err == nil && res.Text != "" && !withhold {
			st.event(Event{Kind: EventText, Step: step, Text: res.Text})
		}
		if herr := ev.err(); herr != nil {
			return gateway.Result{}, herr
		}
		return res, err
	}
	return r.streamCall(ctx, st, req, opts, step, withhold)
}

// streamCall is generate's streaming call. It is a function of its own
// because ranging over a sequence moves the results of the function doing
// it to the heap, which runs without a hook must not pay for.
func (r *Runtime) streamCall(ctx context.Context, st *runState, req gateway.Request, opts []gateway.CallOption, step int, withhold bool) (gateway.Result, error) {
	ev := st.events
	text := Event{Kind: EventText, Step: step}
	text.Agent, text.Depth = st.agent.spec.Name, st.depth
	for c, err := range r.stream.Stream(ctx, st.alias, req, opts...) {
		switch {
		case err != nil:
			return gateway.Result{}, err
		case c.Result != nil:
			return *c.Result, nil
		case c.Text != "" && !withhold:
			text.Text = c.Text
			if !ev.emit(text) {
				// Breaking out abandons the stream, which the gateway
				// settles before the loop ends.
				return gateway.Result{}, ev.err()
			}
		}
	}
	return gateway.Result{}, fmt.Errorf("run %s: model stream ended without a result", st.id)
}
