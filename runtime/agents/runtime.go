package agents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/gateway"
)

// generator is the one gateway method the loop needs; tests of the loop's
// own overhead put a stub in its place.
type generator interface {
	Generate(ctx context.Context, alias string, req gateway.Request, opts ...gateway.CallOption) (gateway.Result, error)
}

// Runtime runs agents. It is built once from a Config, checks everything it
// can at construction (every tool implemented, every alias resolvable and
// capable, every schema compiled), and is safe for concurrent use.
type Runtime struct {
	gw          *gateway.Gateway
	gen         generator
	stream      streamer
	agents      map[string]*agentDef
	names       []string
	store       Store
	tracer      trace.Tracer
	logger      *slog.Logger
	maxParallel int
	maxDepth    int
	maxDeleg    int
}

type toolKind uint8

const (
	kindPlain toolKind = iota
	kindTransfer
	kindDelegate
	kindSearch
)

// tool is a tool as one agent offers it.
type tool struct {
	name     string
	kind     toolKind
	effects  Effects
	approval Approval
	timeout  time.Duration
	maxObs   int // the bound of its observations (boundObservation)
	schema   *jsonschema.Schema
	impl     Implementation
	target   *agentDef       // transfer and delegate
	searcher Searcher        // search
	source   string          // search: the retriever's name
	def      gateway.ToolDef // plain: what the model is offered
}

// agentDef is an agent with everything resolved and compiled.
type agentDef struct {
	spec         Agent
	maxSteps     int
	tools        map[string]*tool
	defs         []gateway.ToolDef
	output       *jsonschema.Schema
	format       *gateway.JSONSchema
	budget       string
	budgetScope  gateway.Scope
	userMem      MemoryStore
	userBudget   int
	globalMem    MemoryStore
	globalBudget int
	readOnly     bool // every tool reachable from it only reads
}

// RunOptions adjusts one run.
type RunOptions struct {
	// ThreadID names the conversation the run belongs to: the scope key of
	// thread budgets. Empty means the run is its own thread.
	ThreadID string
	// UserID names the user: the subject of user memory, which an agent
	// with user memory requires.
	UserID string
	// History is the thread so far (RunResult.Messages of the previous
	// run); the input is appended to it.
	History []gateway.Message
	// OnEvent, when set, is told what happens in the run as it happens,
	// the model's text piece by piece included (see Event): the run's
	// model calls stream. It is called from the run's goroutines, one call
	// at a time, and the run waits for it, so a slow hook slows the run. A
	// hook that panics stops the run with a *HookPanicError. Runs without
	// it make their model calls with Generate and pay nothing for events.
	OnEvent func(Event)
}

// RunResult is the outcome of Run, Resume or Recover.
type RunResult struct {
	// RunID identifies the run, for Resume and the store.
	RunID string
	// Agent is the agent the run ended on: the target of the last transfer,
	// or the entry agent.
	Agent string
	// Path lists the agents the conversation went through.
	Path []string
	// Answer is the final answer; for an agent with an output schema, a
	// JSON document that matches it.
	Answer string
	// Status is how the run ended; StatusRunning for a run interrupted by
	// a shutdown (the error wraps ErrInterrupted), which Recover continues.
	Status Status
	// Steps are the run's steps.
	Steps []StepRecord
	// Usage is the run's usage, delegated runs included.
	Usage gateway.Usage
	// CostUSD is the run's cost, delegated runs included.
	CostUSD float64
	// FellBack is true when a model call of the run, delegated runs
	// included, was answered by a fallback alias rather than the one asked
	// for; the steps say which (StepRecord.Alias and Requested). An
	// answer that came partly from a fallback is not the configured
	// model's alone, which a caller reporting on quality must know.
	FellBack bool
	// Checkpoint is set when the run paused: what Resume needs, also in
	// another process.
	Checkpoint *Checkpoint
	// Messages is the thread after the run, without system messages: the
	// History of the thread's next run.
	Messages []gateway.Message
}

// reachable returns the agents a run starting at d can reach through
// handoffs and delegations, d included, sorted.
func (r *Runtime) reachable(d *agentDef) []string {
	seen := map[string]bool{d.spec.Name: true}
	queue := []*agentDef{d}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, n := range slices.Concat(cur.spec.Handoffs, cur.spec.Delegates) {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, r.agents[n])
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// Agents returns the configured agents' names, sorted.
func (r *Runtime) Agents() []string { return slices.Clone(r.names) }

// Agent returns the named agent as it was configured (its description and
// output schema, for a service that describes its agents), and whether
// there is one. The caller must not modify its slices.
func (r *Runtime) Agent(name string) (Agent, bool) {
	d, ok := r.agents[name]
	if !ok {
		return Agent{}, false
	}
	return d.spec, true
}

// Tools returns the names of the tools the model is offered as the named
// agent, in the order it is offered them: its declared tools, then its
// handoffs, delegates and searches. It is nil for an unknown agent.
func (r *Runtime) Tools(agent string) []string {
	d, ok := r.agents[agent]
	if !ok {
		return nil
	}
	out := make([]string, len(d.defs))
	for i, def := range d.defs {
		out[i] = def.Name
	}
	return out
}

// Store returns the store holding the runtime's runs.
func (r *Runtime) Store() Store { return r.store }

func (r *Runtime) agent(name string) (*agentDef, error) {
	d, ok := r.agents[name]
	if !ok {
		return nil, &UnknownAgentError{Agent: name, Known: r.names}
	}
	return d, nil
}

// Run starts a run of the named agent on input and drives it until a final
// answer, a pause, maxSteps, a budget breach or a failure. The error is nil
// for completed and paused runs; otherwise the result still holds the steps
// taken and the error is typed (*MaxStepsError, *BudgetExceededError,
// *OutputValidationError, ...).
func (r *Runtime) Run(ctx context.Context, agent, input string, opts RunOptions) (RunResult, error) {
	st, err := r.start(ctx, agent, input, opts)
	if err != nil {
		res := RunResult{Agent: agent, Status: StatusFailed}
		if st != nil {
			res.RunID = st.id
		}
		return res, err
	}
	return r.drive(ctx, st)
}

// start is everything Run does before the first model call: the run's
// state and its record in the store.
func (r *Runtime) start(ctx context.Context, agent, input string, opts RunOptions) (*runState, error) {
	d, err := r.agent(agent)
	if err != nil {
		return nil, err
	}
	if d.userMem != nil && opts.UserID == "" {
		return nil, &UserIDRequiredError{Agent: agent}
	}
	st := r.newRun(d, opts)
	n := len(opts.History) + 1
	st.msgs = make([]gateway.Message, 0, n)
	st.saved = make([]SavedMessage, 0, n)
	for _, m := range opts.History {
		if m.Role == gateway.RoleSystem {
			continue // rebuilt from the agent at every call
		}
		st.appendMsg(m)
	}
	st.turn = len(st.msgs)
	st.appendMsg(gateway.Message{Role: gateway.RoleUser, Content: input})
	rec, err := r.store.CreateRun(ctx, RunRecord{RunID: st.id, Agent: agent, Status: StatusRunning, Checkpoint: st.checkpoint()})
	if err != nil {
		return st, fmt.Errorf("run %s: create run record: %w", st.id, err)
	}
	st.version = rec.Version
	return st, nil
}

// newRun allocates the state of a new top-level run.
func (r *Runtime) newRun(d *agentDef, opts RunOptions) *runState {
	id := newRunID()
	st := &runState{
		id: id, agent: d, alias: d.spec.Model,
		threadID: opts.ThreadID, userID: opts.UserID,
	}
	st.delegations = &st.ownDelegations
	if opts.OnEvent != nil {
		st.events = &emitter{fn: opts.OnEvent, runID: id}
	}
	st.pathBuf[0] = d.spec.Name
	st.path = st.pathBuf[:1]
	return st
}

// newRunID returns a random run id.
func newRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var out [36]byte
	copy(out[:], "run_")
	hex.Encode(out[4:], b[:])
	return string(out[:])
}

// DecisionAction is what a human decided about a paused call.
type DecisionAction string

// The decisions.
const (
	// Approve runs the call, with edited arguments when given.
	Approve DecisionAction = "approve"
	// Reject does not run the call; the model is told, with the feedback.
	Reject DecisionAction = "reject"
)

// Decision is a human's answer to a paused call.
type Decision struct {
	// Action approves or rejects the call.
	Action DecisionAction
	// Feedback is a note for the model; on rejection it tells the model
	// why.
	Feedback string
	// Arguments, when set on approval, replace the model's arguments. They
	// are checked against the tool's input schema before the run is
	// claimed: invalid ones are an *InvalidArgumentsError and the run
	// stays paused.
	Arguments json.RawMessage
}

func (d Decision) validate(runID string) error {
	switch d.Action {
	case Approve:
		if len(d.Arguments) > 0 && !json.Valid(d.Arguments) {
			return &InvalidArgumentsError{RunID: runID, Problem: "they are not valid JSON"}
		}
	case Reject:
		if len(d.Arguments) > 0 {
			return errors.New("decision: a rejection cannot edit arguments")
		}
	default:
		return fmt.Errorf("decision: action %q is not %q or %q", d.Action, Approve, Reject)
	}
	return nil
}

// Resume continues a paused run held in the store with a decision on its
// pending call. A run can pause again; Resume it again.
//
// Everything that can refuse the decision is checked before the run is
// claimed, and then nothing is written: the run stays paused and can be
// decided again. That is a checkpoint this runtime cannot continue (an
// *UnknownAgentError, an *UnknownToolError), and edited arguments that are
// not JSON or do not match the tool's schema (*InvalidArgumentsError). The
// result then says paused.
func (r *Runtime) Resume(ctx context.Context, runID string, d Decision) (RunResult, error) {
	if err := d.validate(runID); err != nil {
		return RunResult{RunID: runID, Status: StatusPaused}, err
	}
	rec, err := r.store.LoadRun(ctx, runID)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	if rec.Status != StatusPaused {
		return RunResult{RunID: runID, Status: rec.Status}, &NotPausedError{RunID: runID, Status: rec.Status, Want: StatusPaused}
	}
	return r.resume(ctx, rec, d)
}

// ResumeFrom continues a paused run from its checkpoint, for example one
// decoded with UnmarshalCheckpoint in a process whose store does not hold
// the run. When the store does hold it, the checkpoint must be the one
// stored. As with Resume, a checkpoint this runtime cannot continue or a
// decision it refuses is reported before anything is written: the store is
// left as it was.
func (r *Runtime) ResumeFrom(ctx context.Context, cp Checkpoint, d Decision) (RunResult, error) {
	if err := d.validate(cp.RunID); err != nil {
		return RunResult{RunID: cp.RunID, Status: StatusPaused}, err
	}
	if err := cp.check(); err != nil {
		return RunResult{RunID: cp.RunID, Status: StatusFailed}, err
	}
	if _, ok := cp.Pending.Call(); !ok {
		return RunResult{RunID: cp.RunID, Status: StatusFailed}, fmt.Errorf("run %s: checkpoint has no call waiting for a decision", cp.RunID)
	}
	if _, err := r.decide(cp, d); err != nil {
		return RunResult{RunID: cp.RunID, Status: StatusPaused}, err
	}
	rec, err := r.store.LoadRun(ctx, cp.RunID)
	var nf *RunNotFoundError
	switch {
	case errors.As(err, &nf):
		rec, err = r.store.CreateRun(ctx, RunRecord{RunID: cp.RunID, Agent: cp.Agent, Status: StatusPaused, Checkpoint: cp})
		if err != nil {
			return RunResult{RunID: cp.RunID, Status: StatusFailed}, fmt.Errorf("run %s: store checkpoint: %w", cp.RunID, err)
		}
	case err != nil:
		return RunResult{RunID: cp.RunID, Status: StatusFailed}, err
	case rec.Status != StatusPaused:
		return RunResult{RunID: cp.RunID, Status: rec.Status}, &NotPausedError{RunID: cp.RunID, Status: rec.Status, Want: StatusPaused}
	case !samePause(rec.Checkpoint, cp):
		return RunResult{RunID: cp.RunID, Status: rec.Status}, &StaleCheckpointError{RunID: cp.RunID}
	}
	return r.resume(ctx, rec, d)
}

// noCallError is a paused checkpoint without a call waiting for a
// decision: a store's corruption, not a decision to refuse.
type noCallError struct{ runID string }

func (e *noCallError) Error() string {
	return fmt.Sprintf("run %s: paused without a call waiting for a decision", e.runID)
}

// decide restores a paused run from cp and applies the decision to its
// pending call, writing nothing: it refuses a checkpoint this runtime
// cannot continue (restore) and edited arguments its tool's schema
// refuses, so that Resume and ResumeFrom can check before they claim.
func (r *Runtime) decide(cp Checkpoint, d Decision) (*runState, error) {
	st, err := r.restore(cp)
	if err != nil {
		return nil, err
	}
	p := st.pending
	c, ok := p.Call()
	if !ok {
		return nil, &noCallError{runID: cp.RunID}
	}
	c.Approval = &ApprovalRecord{Approved: d.Action == Approve, Feedback: d.Feedback}
	if d.Action == Approve && len(d.Arguments) > 0 {
		// restore made sure the agent has the tool.
		if err := validateJSON(st.agent.tools[c.Name].schema, d.Arguments); err != nil {
			return nil, &InvalidArgumentsError{RunID: cp.RunID, Tool: c.Name, Problem: schemaProblem(err)}
		}
		c.Approval.OriginalArguments = c.Arguments
		c.Arguments = string(d.Arguments)
	}
	p.Step.ToolCalls[p.Next] = c
	p.Reason = ""
	return st, nil
}

// samePause reports whether two checkpoints are the same pause of a run.
func samePause(a, b Checkpoint) bool {
	if len(a.Steps) != len(b.Steps) || a.Agent != b.Agent || a.Pending == nil || b.Pending == nil {
		return false
	}
	return a.Pending.Step.Number == b.Pending.Step.Number && a.Pending.Next == b.Pending.Next && a.Pending.Reason == b.Pending.Reason
}

// resume claims a paused run with a decision and drives it on.
func (r *Runtime) resume(ctx context.Context, rec RunRecord, d Decision) (RunResult, error) {
	st, err := r.decide(rec.Checkpoint, d)
	if err != nil {
		var nc *noCallError
		if errors.As(err, &nc) {
			return RunResult{RunID: rec.RunID, Status: StatusFailed}, err
		}
		return RunResult{RunID: rec.RunID, Status: StatusPaused}, err
	}
	rec.Status = StatusRunning
	rec.Checkpoint = st.checkpoint()
	rec, err = r.store.UpdateRun(ctx, rec)
	if err != nil {
		return RunResult{RunID: st.id, Status: StatusFailed}, fmt.Errorf("run %s: claim paused run: %w", st.id, err)
	}
	st.version = rec.Version
	return r.drive(ctx, st)
}

// Recover continues a run whose process died: its store record still says
// running: its process died, or shut down and interrupted it (ErrInterrupted).
// Call it only once the run's process is known to be gone (a
// still-running process loses its next write with a *ConflictError, but
// work it already did is not undone). Calls of the interrupted step that have
// a result are not run again; an unfinished read call is run again; an
// unfinished write call is never re-run silently: the run pauses with
// reason interrupted, and Resume decides. Two processes recovering one run
// at once may both re-run an interrupted read; the one whose result comes
// second stops with a *ConflictError and writes nothing more. Both may
// lose (each claim moves the record on); the run then stays running with
// its calls finished, and a later Recover completes it.
func (r *Runtime) Recover(ctx context.Context, runID string) (RunResult, error) {
	rec, err := r.store.LoadRun(ctx, runID)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	if rec.Status != StatusRunning {
		return RunResult{RunID: runID, Status: rec.Status}, &NotPausedError{RunID: runID, Status: rec.Status, Want: StatusRunning}
	}
	st, err := r.restore(rec.Checkpoint)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	// Claim the run: a concurrent Recover, or the process presumed dead,
	// loses its next write.
	rec, err = r.store.UpdateRun(ctx, rec)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, fmt.Errorf("run %s: claim interrupted run: %w", runID, err)
	}
	st.version = rec.Version
	if p := st.pending; p != nil {
		calls, err := r.store.Calls(ctx, runID)
		if err != nil {
			return RunResult{RunID: runID, Status: StatusFailed}, fmt.Errorf("run %s: read tool calls: %w", runID, err)
		}
		byKey := make(map[string]CallRecord, len(calls))
		for _, c := range calls {
			byKey[c.Key] = c
		}
		for i := range p.Step.ToolCalls {
			c := &p.Step.ToolCalls[i]
			if c.Done {
				continue
			}
			cr, recorded := byKey[callKey(p.Step.Number, i)]
			switch {
			case !recorded:
				// Never started: it runs normally.
			case cr.Result != nil:
				c.observe(cr.Result.Observation, cr.Result.ErrorKind)
			case !r.rerunnable(st.agent, c.Name):
				r.logger.WarnContext(ctx, "interrupted write call waits for a decision", "run", runID, "tool", c.Name, "call", c.ID)
				if p.Reason == "" {
					// An approval given before the crash was for the first
					// attempt; whether to try again is a new decision.
					p.Next, p.Reason = i, PauseInterrupted
					c.Approval = nil
				}
			default:
				r.logger.InfoContext(ctx, "re-running interrupted read call", "run", runID, "tool", c.Name, "call", c.ID)
			}
		}
	}
	return r.drive(ctx, st)
}

// rerunnable reports whether an interrupted call of the named tool may run
// again without asking: a read tool, or a delegation whose agents only read.
func (r *Runtime) rerunnable(d *agentDef, name string) bool {
	t, ok := d.tools[name]
	if !ok {
		return true // an unknown tool never ran anything
	}
	switch t.kind {
	case kindPlain:
		return t.effects == EffectsRead
	case kindDelegate:
		return t.target.readOnly
	default:
		return true // a transfer changes nothing outside the run
	}
}

// restore rebuilds a run's state from a checkpoint, checking that this
// runtime can continue it.
func (r *Runtime) restore(cp Checkpoint) (*runState, error) {
	if err := cp.check(); err != nil {
		return nil, err
	}
	d, err := r.agent(cp.Agent)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", cp.RunID, err)
	}
	for _, n := range cp.Path {
		if _, err := r.agent(n); err != nil {
			return nil, fmt.Errorf("run %s: path: %w", cp.RunID, err)
		}
	}
	if _, err := r.gw.Resolve(cp.Alias); err != nil {
		return nil, fmt.Errorf("run %s: %w", cp.RunID, err)
	}
	if c, ok := cp.Pending.Call(); ok && d.tools[c.Name] == nil {
		// Only a tool the agent offered can wait for a decision; a
		// runtime without it would answer "unknown tool" to a call a
		// person approved.
		return nil, &UnknownToolError{RunID: cp.RunID, Agent: cp.Agent, Tool: c.Name, Known: toolNames(d)}
	}
	st := &runState{
		id: cp.RunID, agent: d, alias: cp.Alias, degraded: cp.Degraded,
		threadID: cp.ThreadID, userID: cp.UserID, path: slices.Clone(cp.Path), turn: cp.Turn,
		steps: slices.Clip(cp.Steps), agentSteps: cp.AgentSteps, ownDelegations: cp.Delegations,
		repaired: cp.Repaired, usage: cp.Usage, cost: cp.CostUSD,
	}
	st.delegations = &st.ownDelegations
	st.msgs = make([]gateway.Message, 0, len(cp.Messages)+4)
	st.saved = make([]SavedMessage, 0, len(cp.Messages)+4)
	for _, m := range cp.Messages {
		st.appendMsg(loadMessage(m))
	}
	if cp.Pending != nil {
		p := *cp.Pending
		p.Step.ToolCalls = slices.Clone(p.Step.ToolCalls)
		st.pending = &p
	}
	return st, nil
}

func dedupe(s []string) []string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
