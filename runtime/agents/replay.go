package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// DivergenceKind says what a replay found different from its recording.
type DivergenceKind string

// The kinds of divergence.
const (
	// DivergeRequest is a model request that differs from the recorded
	// one: its messages (a changed prompt, memory, an observation), or the
	// tools, response format or temperature it asks with.
	DivergeRequest DivergenceKind = "request"
	// DivergeModelCall is a model call the recording does not have (the
	// replay goes on where the run ended or stopped), or one on another
	// alias.
	DivergeModelCall DivergenceKind = "model_call"
	// DivergeToolCall is a tool call run with other arguments, run where
	// the recording did not run it, or with another outcome.
	DivergeToolCall DivergenceKind = "tool_call"
	// DivergeDecision is an approval decision that differs: the policy
	// decides otherwise, or asks a person where the recording did not.
	DivergeDecision DivergenceKind = "decision"
	// DivergePath is a step taken by another agent: a handoff that went
	// elsewhere.
	DivergePath DivergenceKind = "path"
	// DivergeEnd is a run that ends otherwise: another status or answer.
	DivergeEnd DivergenceKind = "end"
	// DivergeGuardrail is a guardrail or hook verdict that differs: one
	// the recording does not have, one with another action or match, or
	// one the recording has that the replay does not make.
	DivergeGuardrail DivergenceKind = "guardrail"
	// DivergeCompaction is a compaction of the thread that differs: made
	// before another step, in another tier or over other messages, one
	// the recording does not have, or one it has that the replay does not
	// make.
	DivergeCompaction DivergenceKind = "compaction"
)

// Divergence is the first place a replay differs from its recording.
type Divergence struct {
	// Kind says what differs.
	Kind DivergenceKind `json:"kind"`
	// Step is the step's number in its run (in a delegated run, that
	// run's), Depth how deep the run is delegated (0 for the run itself).
	Step  int `json:"step"`
	Depth int `json:"depth"`
	// Agent is the agent taking the step.
	Agent string `json:"agent"`
	// Call is the tool call's id, for a tool call or a decision.
	Call string `json:"call,omitempty"`
	// Message says what differs.
	Message string `json:"message"`
	// Diff is a unified diff from the recording to the replay, when there
	// is text to compare.
	Diff string `json:"diff,omitempty"`
	// Prefix, for a request divergence, names the part of the request's
	// cached prefix that moved (PrefixTools, PrefixSystem or
	// PrefixHistory): from this step on a provider's prompt cache misses
	// what the recording's hit. Empty when the change is outside the
	// prefix (temperature, response format).
	Prefix string `json:"prefix,omitempty"`
}

// DivergenceError is the error a replayed run stops with at its first
// divergence.
type DivergenceError struct {
	// Divergence is where and how.
	Divergence Divergence
}

// Error implements error.
func (e *DivergenceError) Error() string {
	d := e.Divergence
	return fmt.Sprintf("replay diverged at step %d (agent %s, depth %d): %s", d.Step, d.Agent, d.Depth, d.Message)
}

// ReplayReport is the outcome of Replay.
type ReplayReport struct {
	// RunID is the recorded run's id.
	RunID string `json:"run_id"`
	// Status is the recorded status; ReplayStatus the replay's, where it
	// stopped.
	Status       Status `json:"status"`
	ReplayStatus Status `json:"replay_status"`
	// Steps, Calls and Decisions count the model calls, tool calls and
	// people's decisions replayed as recorded.
	Steps     int `json:"steps"`
	Calls     int `json:"calls"`
	Decisions int `json:"decisions"`
	// DecidedBy names who made each decision replayed, in order, as the
	// recording has it (ApprovalRecord.By: the key that decided, on a
	// service), "" where it names nobody.
	DecidedBy []string `json:"decided_by,omitempty"`
	// Divergence is the first divergence; nil when the replay went as the
	// recording.
	Divergence *Divergence `json:"divergence,omitempty"`
}

// Replay runs a recorded run again, offline, on the agents, tools and
// policy of cfg, and reports the first place it differs from the
// recording (a different request to the model, a tool called with other
// arguments or another outcome, another decision, another path, another
// end), with a diff. The recorded model answers stand in for the gateway,
// and the recorded observations for the tools and searches, whose
// implementations cfg need not give: a replay calls no provider, tool or
// store outside the process and spends nothing. It is deterministic: the
// same recording on the same configuration replays the same way.
//
// The recording's people's decisions are applied where the run paused,
// its continuations where it stopped, and its stops (a timeout, a
// cancellation) where they happened; the replay keeps no time, so cfg's
// timeouts do not apply. Memory injected into a recorded request is given
// again as recorded. cfg.Gateway is needed for its catalog (the aliases,
// their pinned models and capabilities) only; Store, Tracer,
// Implementations, Retrievers and MemoryStores are replaced.
//
// The error is for a replay that could not be made (a configuration New
// refuses, a recording of an agent cfg lacks); a divergence is not an
// error.
func Replay(ctx context.Context, cfg Config, rec *Recording) (*ReplayReport, error) {
	cfg = replayConfig(cfg)
	r, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if _, err := r.agent(rec.Run.Agent); err != nil {
		return nil, fmt.Errorf("replay of run %s: %w", rec.Run.RunID, err)
	}
	full, err := requests(rec.Steps)
	if err != nil {
		return nil, &RecordingError{Problem: err.Error()}
	}
	rp := &replayer{rec: rec, full: full, used: make([]bool, len(rec.Run.Verdicts))}
	for i, v := range rec.Run.Verdicts {
		// The recorded input is the redacted one, which the guardrail
		// that redacted it no longer matches.
		rp.used[i] = v.Point == PointInput && v.Action == HookRedact
	}
	r.replay = rp
	rep := &ReplayReport{RunID: rec.Run.RunID, Status: rec.Run.Status}
	history := make([]gateway.Message, len(rec.Run.History))
	for i, m := range rec.Run.History {
		history[i] = loadMessage(m)
	}
	drive := func(f func(ctx context.Context) (RunResult, error)) (RunResult, error) {
		dctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		rp.setCancel(cancel)
		return f(dctx)
	}
	res, runErr := drive(func(ctx context.Context) (RunResult, error) {
		return r.Run(ctx, rec.Run.Agent, rec.Run.Input, RunOptions{ThreadID: rec.Run.ThreadID, UserID: rec.Run.UserID, History: history})
	})
	for {
		rep.ReplayStatus = res.Status
		if d := rp.divergence(); d != nil {
			rep.Divergence = d
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		done := len(res.Steps)
		if cp := res.Checkpoint; cp != nil {
			done = len(cp.Steps)
		}
		if cont, ok := rp.continuation(done, res); ok {
			if res.Status == StatusPaused {
				// The paused run was cancelled before it was continued.
				if _, err := r.Cancel(ctx, res.RunID, CancelOptions{}); err != nil {
					return nil, fmt.Errorf("replay: cancel run %s: %w", res.RunID, err)
				}
			}
			res, runErr = drive(func(ctx context.Context) (RunResult, error) {
				return r.Continue(ctx, res.RunID, ContinueOptions{Steps: cont.Steps})
			})
			continue
		}
		if res.Status == StatusPaused {
			d, ok, div := rp.decision(res)
			if div != nil {
				rep.Divergence = div
				break
			}
			if !ok {
				break // the recording ends waiting here too
			}
			rp.decided()
			rep.DecidedBy = append(rep.DecidedBy, d.By)
			res, runErr = drive(func(ctx context.Context) (RunResult, error) { return r.Resume(ctx, res.RunID, d) })
			continue
		}
		rep.Divergence = rp.end(res, runErr)
		if rep.Divergence == nil {
			rep.Divergence = rp.missedVerdict(-1)
		}
		if rep.Divergence == nil {
			rep.Divergence = rp.missedCompaction(res)
		}
		break
	}
	rep.Steps, rep.Calls, rep.Decisions = rp.counts()
	return rep, nil
}

// replayConfig is cfg for a replay: implementations, searchers and memory
// stores that are never called (the replay answers in their place), an
// in-memory store, no tracer and no time limits.
func replayConfig(cfg Config) Config {
	impls := make(map[string]Implementation, len(cfg.Tools))
	for _, t := range cfg.Tools {
		impls[t.Name] = ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return "", errors.New("replay: a tool was called") // the replay's hook answers first
		})
	}
	searchers := map[string]Searcher{}
	stores := map[string]MemoryStore{}
	for _, a := range cfg.Agents {
		for _, rn := range a.Retrievers {
			searchers[rn] = replaySearcher{}
		}
		if m := a.Memory; m != nil {
			for _, sm := range []*StoredMemory{m.User, m.Global} {
				if sm != nil {
					stores[sm.Store] = NewInMemoryMemory()
				}
			}
		}
	}
	cfg.Implementations, cfg.Retrievers, cfg.MemoryStores = impls, searchers, stores
	cfg.Store, cfg.Tracer, cfg.Logger = NewInMemoryStore(), nil, nil
	cfg.Timeouts = Timeouts{}
	cfg.Agents = slices.Clone(cfg.Agents)
	for i := range cfg.Agents {
		cfg.Agents[i].Timeouts = Timeouts{}
	}
	return cfg
}

// replaySearcher is a retriever a replay never searches.
type replaySearcher struct{}

func (replaySearcher) Search(context.Context, string, int) ([]retrieval.Hit, error) {
	return nil, errors.New("replay: a retriever was searched")
}

// replayer answers a replayed run's model calls and tool calls from the
// recording and finds where the run departs from it.
type replayer struct {
	rec  *Recording
	full []RequestRecord // the recorded requests of the run's own steps, whole

	mu        sync.Mutex
	cancel    context.CancelCauseFunc // of the drive in progress
	next      int                     // the next recorded continuation to replay
	div       *Divergence
	used      []bool // the recorded verdicts the replay made again
	models    int
	calls     int
	decisions int
}

func (rp *replayer) setCancel(c context.CancelCauseFunc) {
	rp.mu.Lock()
	rp.cancel = c
	rp.mu.Unlock()
}

// diverge keeps d if it is the first divergence (the earliest call of a
// step, when parallel calls diverge together) and returns it as an error.
func (rp *replayer) diverge(d Divergence) error {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.div == nil || (d.Depth == rp.div.Depth && d.Step == rp.div.Step && d.Call != "" && d.Call < rp.div.Call) {
		rp.div = &d
	}
	return &DivergenceError{Divergence: *rp.div}
}

func (rp *replayer) divergence() *Divergence {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.div
}

func (rp *replayer) counts() (int, int, int) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.models, rp.calls, rp.decisions
}

func (rp *replayer) decided() {
	rp.mu.Lock()
	rp.decisions++
	rp.mu.Unlock()
}

// steps returns the recorded steps of st's run and their whole requests.
func (rp *replayer) steps(st *runState) ([]StepRecord, []RequestRecord) {
	if !st.sub {
		return rp.rec.Steps, rp.full
	}
	full, err := requests(st.replaySteps)
	if err != nil {
		full = make([]RequestRecord, len(st.replaySteps))
	}
	return st.replaySteps, full
}

// stop ends the drive in progress as the recording's run stopped there,
// with its status, and waits for the context to end.
func (rp *replayer) stop(ctx context.Context, status Status) error {
	var cause error = &TimeoutError{Scope: TimeoutDeadline}
	if status == StatusCancelled {
		cause = &CancelledError{}
	}
	rp.mu.Lock()
	cancel := rp.cancel
	rp.mu.Unlock()
	cancel(cause)
	<-ctx.Done()
	return ctx.Err()
}

// stoppedBefore reports whether the recording's run stopped (timed out,
// cancelled) before the model call of the step after done, with the status
// it stopped with: at a continuation still to replay, or at its end.
func (rp *replayer) stoppedBefore(done int) (Status, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if conts := rp.rec.Run.Continuations; rp.next < len(conts) {
		c := conts[rp.next]
		if c.AfterStep == done && c.PendingStep == 0 {
			return c.From, true
		}
		return "", false
	}
	if s := rp.rec.Run.Status; (s == StatusTimedOut || s == StatusCancelled) && !rp.rec.Pending && done == len(rp.rec.Steps) {
		return s, true
	}
	return "", false
}

// stoppedAt reports whether the recording's run stopped during call i of
// step, which it left interrupted.
func (rp *replayer) stoppedAt(step, i int) (Status, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if conts := rp.rec.Run.Continuations; rp.next < len(conts) {
		c := conts[rp.next]
		if c.PendingStep == step && slices.Contains(c.Interrupted, i) {
			return c.From, true
		}
		return "", false
	}
	s := rp.rec.Run.Status
	if (s == StatusTimedOut || s == StatusCancelled) && rp.rec.Pending && step == len(rp.rec.Steps) {
		if calls := rp.rec.Steps[step-1].ToolCalls; i < len(calls) && calls[i].Interrupted {
			return s, true
		}
	}
	return "", false
}

// continuation returns the recorded continuation that takes up the
// replayed run where it stands: stopped with the continuation's status
// after its number of steps (or paused there, for a paused run that was
// cancelled), and marks it replayed.
func (rp *replayer) continuation(done int, res RunResult) (Continuation, bool) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	conts := rp.rec.Run.Continuations
	if rp.next >= len(conts) {
		return Continuation{}, false
	}
	c := conts[rp.next]
	switch {
	case c.AfterStep != done:
		return Continuation{}, false
	case res.Status == c.From && Continuable(res.Status):
	case res.Status == StatusPaused && c.From == StatusCancelled && len(c.Interrupted) == 0 && res.Checkpoint != nil && res.Checkpoint.Pending != nil && c.PendingStep == res.Checkpoint.Pending.Step.Number:
	default:
		return Continuation{}, false
	}
	rp.next++
	return c, true
}

// model answers a model call with the recorded step it replays, after
// checking that it is the same call: the same agent, alias and request.
func (rp *replayer) model(ctx context.Context, st *runState, req gateway.Request) (gateway.Result, error) {
	if !st.sub {
		if d := rp.missedVerdict(len(st.steps) + 1); d != nil {
			return gateway.Result{}, rp.diverge(*d)
		}
	}
	steps, full := rp.steps(st)
	n := len(st.steps) // the recorded step this call replays is steps[n]
	div := Divergence{Kind: DivergeModelCall, Step: n + 1, Depth: st.depth, Agent: st.agent.spec.Name}
	if !st.sub {
		if status, ok := rp.stoppedBefore(n); ok {
			if status == StatusMaxSteps {
				div.Message = fmt.Sprintf("the recorded run stopped after step %d with max_steps; the replay goes on", n)
				return gateway.Result{}, rp.diverge(div)
			}
			return gateway.Result{}, rp.stop(ctx, status)
		}
	}
	if n >= len(steps) {
		if !st.sub && rp.rec.Run.Status == StatusBudgetExceeded && !rp.rec.Pending && n == len(steps) {
			return gateway.Result{}, &gateway.BudgetExceededError{Budget: "replayed", Dimension: gateway.DimensionUSD}
		}
		div.Message = fmt.Sprintf("the replay asks the model for step %d; the recorded run had %d (it ended %s)", n+1, len(steps), rp.rec.Run.Status)
		return gateway.Result{}, rp.diverge(div)
	}
	want := steps[n]
	if want.Agent != st.agent.spec.Name {
		div.Kind, div.Message = DivergePath, fmt.Sprintf("step %d is agent %s's; in the recording it is %s's (path %s)", n+1, st.agent.spec.Name, want.Agent, strings.Join(st.path, " > "))
		return gateway.Result{}, rp.diverge(div)
	}
	if want.DegradedFrom == st.alias && !st.degraded {
		// The recorded call was refused on this rung and the agent stepped
		// down: refuse it again, so that the replay steps down too.
		return gateway.Result{}, &gateway.BudgetExceededError{Budget: "replayed", Dimension: gateway.DimensionUSD}
	}
	if want.Requested != st.alias {
		div.Message = fmt.Sprintf("the replay calls alias %q; the recording called %q", st.alias, want.Requested)
		return gateway.Result{}, rp.diverge(div)
	}
	if r := full[n]; want.Request != nil {
		// Observations are compared with the calls' (checkStep), not here.
		got := make([]SavedMessage, len(req.Messages))
		for i, m := range req.Messages {
			got[i] = withoutObservation(saveMessage(m))
		}
		if w := r.Messages; !slices.EqualFunc(w, got, equalSaved) {
			div.Kind, div.Prefix = DivergeRequest, movedPart(w, got)
			if !slices.Equal(toolNames(st.agent), r.Tools) {
				div.Prefix = PrefixTools // cached before the messages
			}
			div.Message = fmt.Sprintf("the model request of step %d differs from the recorded one (%s)", n+1, firstDifference(w, got)) + prefixNote(n+1, div.Prefix)
			div.Diff = unifiedDiff(renderMessages(w), renderMessages(got))
			return gateway.Result{}, rp.diverge(div)
		}
		if names := toolNames(st.agent); !slices.Equal(names, r.Tools) || st.agent.fingerprint != r.Fingerprint {
			div.Kind = DivergeRequest
			if msg, diff := learnedChange(st.agent.learned, r.Learned); msg != "" {
				// The replay offers the definitions the recording holds
				// first; the run's source gave others later.
				div.Message, div.Diff = fmt.Sprintf("the recorded request of step %d offers %s", n+1, msg)+prefixNote(n+1, PrefixTools), diff
				div.Prefix = PrefixTools
			} else if slices.Equal(names, r.Tools) {
				div.Message = fmt.Sprintf("the request of step %d offers the same tools, with other definitions, response format or temperature", n+1)
			} else {
				div.Message = fmt.Sprintf("the request of step %d offers other tools", n+1) + prefixNote(n+1, PrefixTools)
				div.Prefix = PrefixTools
				div.Diff = unifiedDiff(strings.Join(r.Tools, "\n")+"\n", strings.Join(names, "\n")+"\n")
			}
			return gateway.Result{}, rp.diverge(div)
		}
	}
	rp.mu.Lock()
	rp.models++
	rp.mu.Unlock()
	calls := make([]gateway.ToolCall, len(want.ToolCalls))
	for i, c := range want.ToolCalls {
		calls[i] = gateway.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(modelArguments(c))}
	}
	u := want.Usage.Usage()
	return gateway.Result{Text: want.Text, ToolCalls: calls, Usage: u, CostUSD: want.CostUSD, Alias: want.Alias, Model: want.Model}, nil
}

// learnedChange says which tools a source (an MCP server) defined
// otherwise in the recorded request than in the replay, which offers the
// definitions recorded first, with a diff: a server whose tools changed
// during the recorded run (listed again by a continuation in another
// process). It returns "" when no learned definition differs.
func learnedChange(replayed, recorded []LearnedTool) (string, string) {
	var tools []string
	var src string
	var rec, rep strings.Builder // the recorded step's, the replay's
	for _, r := range recorded {
		i := slices.IndexFunc(replayed, func(l LearnedTool) bool { return l.Tool == r.Tool })
		if i < 0 {
			continue
		}
		if l := replayed[i]; l.Source != r.Source || !bytes.Equal(l.Definition, r.Definition) {
			if src == "" {
				src = r.Source
			}
			tools = append(tools, r.Tool)
			fmt.Fprintf(&rec, "%s %s\n", r.Tool, indent(string(r.Definition)))
			fmt.Fprintf(&rep, "%s %s\n", l.Tool, indent(string(l.Definition)))
		}
	}
	if len(tools) == 0 {
		return "", ""
	}
	return fmt.Sprintf("other definitions of %s from %s than an earlier step of the recording: the server's tools changed during the recorded run", strings.Join(tools, ", "), src), unifiedDiff(rec.String(), rep.String())
}

// memory returns the memory message the recorded step about to be
// replayed carried.
func (rp *replayer) memory(st *runState) (gateway.Message, bool) {
	steps, full := rp.steps(st)
	n := len(st.steps)
	if n >= len(steps) || steps[n].Request == nil || !steps[n].Request.Memory {
		return gateway.Message{}, false
	}
	msgs := full[n].Messages
	last := -1
	for i, m := range msgs {
		if m.Role != gateway.RoleSystem {
			break
		}
		last = i
	}
	if last < 0 {
		return gateway.Message{}, false
	}
	return loadMessage(msgs[last]), true
}

// recorded returns the recorded call i of step of st's run.
func (rp *replayer) recorded(st *runState, step, i int) (ToolCallRecord, bool) {
	steps, _ := rp.steps(st)
	if step < 1 || step > len(steps) || i >= len(steps[step-1].ToolCalls) {
		return ToolCallRecord{}, false
	}
	return steps[step-1].ToolCalls[i], true
}

// tool answers call i of step with its recorded observation, after
// checking that the recording ran the same call: the same tool and
// arguments, run, and decided alike.
func (rp *replayer) tool(ctx context.Context, st *runState, step, i int, c *ToolCallRecord) error {
	div := Divergence{Kind: DivergeToolCall, Step: step, Depth: st.depth, Agent: st.agent.spec.Name, Call: c.ID}
	if !st.sub {
		if status, ok := rp.stoppedAt(step, i); ok {
			return rp.stop(ctx, status)
		}
	}
	want, ok := rp.recorded(st, step, i)
	switch {
	case !ok:
		div.Message = fmt.Sprintf("the replay runs %s as call %d of step %d, which the recording does not have", c.Name, i+1, step)
		return rp.diverge(div)
	case want.Name != c.Name || want.Arguments != c.Arguments:
		div.Message = fmt.Sprintf("the replay calls %s with other arguments than the recording's %s", c.Name, want.Name)
		div.Diff = unifiedDiff(want.Name+" "+indent(want.Arguments)+"\n", c.Name+" "+indent(c.Arguments)+"\n")
		return rp.diverge(div)
	case want.Approval != nil && c.Approval == nil:
		div.Kind, div.Message = DivergeDecision, fmt.Sprintf("the recording asked a person about %s; the replay runs it without asking (%s)", c.Name, decisionWords(c.Policy))
		return rp.diverge(div)
	case !want.Done || !executed(want.ErrorKind):
		div.Message = fmt.Sprintf("the replay runs %s; the recording did not run it (%s)", c.Name, outcomeWords(want))
		return rp.diverge(div)
	}
	rp.mu.Lock()
	rp.calls++
	rp.mu.Unlock()
	c.observe(want.Observation, want.ErrorKind)
	return nil
}

// executed reports whether a call with this outcome ran its tool.
func executed(k ErrorKind) bool {
	switch k {
	case "", KindTimeout, KindToolFailed, KindBudgetExceeded, KindDelegateFailed:
		return true
	}
	return false
}

// delegated returns the recorded steps of the run delegated by call c of
// st's pending step.
func (rp *replayer) delegated(st *runState, c *ToolCallRecord) []StepRecord {
	p := st.pending
	if p == nil {
		return nil
	}
	for i := range p.Step.ToolCalls {
		if &p.Step.ToolCalls[i] == c {
			if want, ok := rp.recorded(st, p.Step.Number, i); ok && want.Delegate != nil {
				return want.Delegate.Steps
			}
		}
	}
	return nil
}

// checkStep compares the outcome of each call of a step, once they all
// have one, with the recording's: what the model reads next must be what
// it read.
func (rp *replayer) checkStep(st *runState, step *StepRecord) error {
	for i := range step.ToolCalls {
		c := &step.ToolCalls[i]
		div := Divergence{Kind: DivergeToolCall, Step: step.Number, Depth: st.depth, Agent: st.agent.spec.Name, Call: c.ID}
		want, ok := rp.recorded(st, step.Number, i)
		if !ok {
			div.Message = fmt.Sprintf("call %d of step %d (%s) is not in the recording", i+1, step.Number, c.Name)
			return rp.diverge(div)
		}
		if w, g := want.Policy, c.Policy; w != nil && g != nil && (w.Action != g.Action || w.Source != g.Source || w.Rule != g.Rule) {
			div.Kind = DivergeDecision
			div.Message = fmt.Sprintf("the approval policy decides %s's call otherwise: recorded %s, replayed %s", c.Name, decisionWords(w), decisionWords(g))
			return rp.diverge(div)
		}
		if want.ErrorKind != c.ErrorKind || want.Observation != c.Observation {
			div.Message = fmt.Sprintf("call %s (%s) has another outcome: recorded %s, replayed %s", c.ID, c.Name, outcomeWords(want), outcomeWords(*c))
			div.Diff = unifiedDiff(want.Observation+"\n", c.Observation+"\n")
			return rp.diverge(div)
		}
	}
	return nil
}

// decision returns the recorded person's decision on the call the
// replayed run waits for; ok false when the recording waits there too,
// and a divergence when it did not ask.
func (rp *replayer) decision(res RunResult) (Decision, bool, *Divergence) {
	cp := res.Checkpoint
	c, ok := cp.Pending.Call()
	if !ok {
		return Decision{}, false, &Divergence{Kind: DivergeEnd, Agent: res.Agent, Message: "the replayed run paused without a call waiting"}
	}
	step := cp.Pending.Step.Number
	div := Divergence{Kind: DivergeDecision, Step: step, Agent: res.Agent, Call: c.ID}
	want, found := rp.recordedTop(step, cp.Pending.Next)
	switch {
	case !found:
		div.Message = fmt.Sprintf("the replay asks a person about %s, a call the recording does not have", c.Name)
	case want.Approval == nil && rp.rec.Run.Status == StatusPaused && rp.rec.Pending && step == len(rp.rec.Steps) && !want.Done:
		return Decision{}, false, nil
	case want.Approval == nil:
		div.Message = fmt.Sprintf("the replay asks a person about %s (%s); the recording ran it without asking (%s)", c.Name, decisionWords(c.Policy), decisionWords(want.Policy))
	default:
		a := want.Approval
		d := Decision{Action: Reject, Feedback: a.Feedback, By: a.By, ClaimedBy: a.ClaimedBy}
		if a.Approved {
			d.Action, d.Scope = Approve, a.Scope
			if a.OriginalArguments != "" {
				d.Arguments = json.RawMessage(want.Arguments)
			}
		}
		return d, true, nil
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.div == nil {
		rp.div = &div
	}
	return Decision{}, false, rp.div
}

func (rp *replayer) recordedTop(step, i int) (ToolCallRecord, bool) {
	if step < 1 || step > len(rp.rec.Steps) || i >= len(rp.rec.Steps[step-1].ToolCalls) {
		return ToolCallRecord{}, false
	}
	return rp.rec.Steps[step-1].ToolCalls[i], true
}

// end compares how the replayed run ended with how the recorded one did.
func (rp *replayer) end(res RunResult, err error) *Divergence {
	if d := rp.divergence(); d != nil {
		return d
	}
	want := rp.rec.Run
	div := &Divergence{Kind: DivergeEnd, Step: len(res.Steps), Agent: res.Agent}
	switch {
	case res.Status != want.Status:
		div.Message = fmt.Sprintf("the replayed run ends %s; the recorded run ended %s", res.Status, want.Status)
		if err != nil {
			div.Message += ": " + err.Error()
		}
	case !slices.Equal(res.Path, want.Path):
		div.Kind, div.Message = DivergePath, fmt.Sprintf("the replayed run went through %s; the recorded one through %s", strings.Join(res.Path, " > "), strings.Join(want.Path, " > "))
	case res.Status == StatusCompleted && res.Answer != want.Answer:
		div.Message = "the replayed run answers otherwise"
		div.Diff = unifiedDiff(want.Answer+"\n", res.Answer+"\n")
	default:
		return nil
	}
	return div
}

func equalSaved(a, b SavedMessage) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name && slices.Equal(a.ToolCalls, b.ToolCalls)
}

// firstDifference says where two requests part.
func firstDifference(want, got []SavedMessage) string {
	for i := range min(len(want), len(got)) {
		if !equalSaved(want[i], got[i]) {
			return fmt.Sprintf("message %d, %s, differs", i+1, got[i].Role)
		}
	}
	if len(got) > len(want) {
		return fmt.Sprintf("the replay sends %d messages more", len(got)-len(want))
	}
	return fmt.Sprintf("the replay sends %d messages fewer", len(want)-len(got))
}

// renderMessages writes a request for a diff: one block per message, its
// content's lines indented under it.
func renderMessages(msgs []SavedMessage) string {
	var b strings.Builder
	for i, m := range msgs {
		fmt.Fprintf(&b, "[%d] %s", i+1, m.Role)
		if m.Name != "" {
			fmt.Fprintf(&b, " %s", m.Name)
		}
		if m.ToolCallID != "" {
			fmt.Fprintf(&b, " (call %s)", m.ToolCallID)
		}
		b.WriteString("\n")
		for _, l := range strings.Split(m.Content, "\n") {
			if m.Content != "" {
				b.WriteString("    " + l + "\n")
			}
		}
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, "    -> %s %s (call %s)\n", c.Name, c.Arguments, c.ID)
		}
	}
	return b.String()
}

func unifiedDiff(want, got string) string {
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(want), B: difflib.SplitLines(got), FromFile: "recorded", ToFile: "replayed", Context: 3,
	})
	if err != nil {
		return ""
	}
	return d
}

func indent(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}

func decisionWords(p *PolicyRecord) string {
	if p == nil {
		return "not judged"
	}
	var w string
	switch p.Source {
	case "rule":
		w = fmt.Sprintf("%s by rule %d", p.Action, p.Rule)
	case "tool":
		w = fmt.Sprintf("%s by the tool's approval", p.Action)
	case "guardrail":
		w = fmt.Sprintf("%s by a guardrail: %s", p.Action, p.Reason)
	default:
		w = fmt.Sprintf("%s by default", p.Action)
	}
	if p.Grant != nil {
		w += fmt.Sprintf(", granted for the %s", p.Grant.Scope)
	}
	return w
}

func outcomeWords(c ToolCallRecord) string {
	switch {
	case c.Interrupted:
		return "interrupted"
	case !c.Done:
		return "not run"
	case c.ErrorKind == "":
		return "an observation"
	}
	return string(c.ErrorKind)
}

// verdict compares a verdict the replay made with the recording's: the
// same guardrail at the same point of the same step and call must have
// decided the same, on the same match. Parallel calls record theirs in any
// order, so a verdict is found by where it was made, not by its index.
func (rp *replayer) verdict(_ int, v VerdictRecord) error {
	rp.mu.Lock()
	found := -1
	for i, w := range rp.rec.Run.Verdicts {
		if !rp.used[i] && w.Depth == v.Depth && w.Step == v.Step && w.Call == v.Call && w.Point == v.Point && w.Guardrail == v.Guardrail {
			found = i
			break
		}
	}
	if found >= 0 {
		rp.used[found] = true
	}
	rp.mu.Unlock()
	div := Divergence{Kind: DivergeGuardrail, Step: v.Step, Depth: v.Depth, Agent: v.Agent, Call: v.Call}
	switch {
	case found < 0:
		div.Message = fmt.Sprintf("guardrail %s decides %s at %s (%s); the recording has no verdict of it there", v.Guardrail, v.Action, v.Point, strings.Join(v.Matched, "; "))
	case rp.rec.Run.Verdicts[found].Action != v.Action || !slices.Equal(rp.rec.Run.Verdicts[found].Matched, v.Matched):
		w := rp.rec.Run.Verdicts[found]
		div.Message = fmt.Sprintf("guardrail %s decides %s at %s (%s); in the recording it decided %s (%s)", v.Guardrail, v.Action, v.Point, strings.Join(v.Matched, "; "), w.Action, strings.Join(w.Matched, "; "))
	default:
		return nil
	}
	return rp.diverge(div)
}

// judged is a model guardrail's verdict in a replay, which calls no
// model: the recording's finding at the same place (the same guardrail, at
// the same point of the same step and call), judged by the guardrail as
// declared now, so that a changed action diverges where verdict compares
// it. A recording without a verdict there passed (a call that cost
// nothing and found nothing is not recorded). A guardrail whose classifier
// changed (another alias, prompt or verdict schema) cannot reuse the
// recorded verdict: the replay diverges there.
func (rp *replayer) judged(st *runState, h *Hook, hc *HookCall) (Verdict, UsageRecord, error) {
	rp.mu.Lock()
	var w *VerdictRecord
	for i := range rp.rec.Run.Verdicts {
		v := &rp.rec.Run.Verdicts[i]
		if !rp.used[i] && v.Depth == st.depth && v.Step == hc.Step && v.Call == hc.CallID && v.Point == hc.Point && v.Guardrail == h.Name {
			w = v
			break
		}
	}
	rp.mu.Unlock()
	if w == nil {
		return Verdict{}, UsageRecord{}, nil
	}
	if w.Judge != h.judge {
		return Verdict{}, UsageRecord{}, rp.diverge(Divergence{Kind: DivergeGuardrail, Step: hc.Step, Depth: st.depth, Agent: st.agent.spec.Name, Call: hc.CallID,
			Message: fmt.Sprintf("guardrail %s at %s is judged by %s; in the recording by %s, whose verdict a replay cannot reuse (its model, prompt or verdict schema changed, or its agent's declaration)", h.Name, hc.Point, h.judge, cmpStr(w.Judge, "another kind"))})
	}
	var u UsageRecord
	if w.Usage != nil {
		u = *w.Usage
	}
	return h.replayed(hc, guard.Finding{Tripped: w.Action != HookPass, Matched: slices.Clone(w.Matched), CostUSD: w.CostUSD}), u, nil
}

// missedVerdict is the first recorded verdict of the run itself, made
// before its step numbered before, that the replay did not make; before
// -1 means any, delegated runs' included, at the end.
func (rp *replayer) missedVerdict(before int) *Divergence {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	for i, w := range rp.rec.Run.Verdicts {
		if rp.used[i] || (before >= 0 && (w.Depth > 0 || w.Step >= before)) {
			continue
		}
		return &Divergence{Kind: DivergeGuardrail, Step: w.Step, Depth: w.Depth, Agent: w.Agent, Call: w.Call,
			Message: fmt.Sprintf("in the recording guardrail %s decided %s at %s (%s); the replay lets it pass", w.Guardrail, w.Action, w.Point, strings.Join(w.Matched, "; "))}
	}
	return nil
}
