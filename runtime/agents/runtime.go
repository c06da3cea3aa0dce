package agents

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
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
	policy      *policy.Compiled
	app, ver    string
	runEnded    []func(runID string)
	replay      *replayer // set by Replay: recorded answers and observations in place of the gateway and the tools
}

type toolKind uint8

const (
	kindPlain toolKind = iota
	kindTransfer
	kindDelegate
	kindSearch
	kindSkill
)

// tool is a tool as one agent offers it.
type tool struct {
	name     string
	kind     toolKind
	effects  Effects
	timeout  time.Duration
	maxObs   int  // the bound of its observations (boundObservation)
	allowed  bool // the approval policy allows every call of it, whatever the arguments
	schema   *jsonschema.Schema
	shape    *shape // schema's fast path, if it has one
	unruled  bool   // the approval policy has nothing to decide about it (policy.Compiled.Unruled)
	impl     Implementation
	target   *agentDef         // transfer and delegate
	searcher Searcher          // search
	source   string            // search: the retriever's name
	skills   map[string]*Skill // load_skill and read_skill_file: the agent's skills
	def      gateway.ToolDef   // plain: what the model is offered
	learned  *LearnedDefinition
}

// agentDef is an agent with everything resolved and compiled.
type agentDef struct {
	spec         Agent
	maxSteps     int
	tools        map[string]*tool
	defs         []gateway.ToolDef
	output       *jsonschema.Schema
	outShape     *shape // output's fast path, if it has one
	format       *gateway.JSONSchema
	budget       string
	budgetScope  gateway.Scope
	userMem      MemoryStore
	userBudget   int
	globalMem    MemoryStore
	globalBudget int
	readOnly     bool // every tool reachable from it only reads
	timeouts     Timeouts
	fingerprint  string        // what its requests ask besides messages (RequestRecord.Fingerprint)
	toolNames    []string      // its tools' names, in the order offered
	learned      []LearnedTool // its tools' learned definitions (RequestRecord.Learned)
	compact      *compactor    // nil for an agent without a compaction policy
	hooks        *hookSet      // nil for an agent without hooks, which pays nothing for them
	guarded      bool          // an agent reachable from it has hooks: its runs keep a guardLog
	sizes        runSizes      // how long its runs were: the size a new run's slices start at
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
	// RunID, when set, is the new run's id, made beforehand with NewRunID,
	// so that a caller that starts runs for others (a job worker) knows
	// the id before the run starts: it can be cancelled by id (Cancel)
	// from the moment its record exists, and a start that is tried again
	// finds it. A run with this id already in the store is refused with a
	// *RunExistsError before any model call; the caller then takes the
	// run over instead (Drive for a run left running by a process that
	// died, Continue for one that stopped early, Resume for a paused one).
	// An id that NewRunID cannot have made is refused with an
	// *InvalidOptionError. Empty means a fresh id.
	RunID string
	// Caller is whom the run is for: the API key that starts it and its
	// tenant, recorded in the checkpoint (Key, Tenant) and put on the
	// context of every drive of the run, so that a resume or a worker
	// charges the starter's budgets and limits. The zero value means the
	// caller on Run's or Submit's context (kind.CallerFrom), if any.
	Caller kind.Caller
	// Client is what the client asks of the run beyond the agent's
	// configuration (the Responses API's function tools, tool choice,
	// output bound and format); nil asks nothing. Refused with an
	// *InvalidOptionError when it does not fit the agent.
	Client *ClientRequest
}

// RunResult is the outcome of Run, Resume, Continue or Drive.
type RunResult struct {
	// RunID identifies the run, for Resume and the store.
	RunID string
	// Agent is the agent the run ended on: the target of the last transfer,
	// or the entry agent.
	Agent string
	// Path lists the agents the conversation went through. It is empty
	// only when the call was refused before the run was started or
	// restored (a run that does not exist, is not in a state for the
	// call, lost a resume to another, or could not be stored): the result
	// then holds the run id and a status, and the error says why.
	Path []string
	// Answer is the final answer; for an agent with an output schema, a
	// JSON document that matches it.
	Answer string
	// LastText is the text of the last model call of the run's own agents
	// that wrote any (delegated runs' text is theirs): the answer of a
	// completed run, and what the model last said in a run that stopped
	// early, which is part of its partial result.
	LastText string
	// Status is how the run ended; StatusRunning for a run interrupted by
	// a shutdown (the error wraps ErrInterrupted), which Drive continues.
	Status Status
	// Steps are the run's steps. A run that stopped during a step's tool
	// calls (timed_out, cancelled) lists that step too, its calls as they
	// stood: done, interrupted (started and stopped before a result:
	// ToolCallRecord.Interrupted), or not started.
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
	// Checkpoint is set when the run paused (what Resume needs, also in
	// another process) or stopped early (max_steps, timed_out, cancelled:
	// what Continue starts from).
	Checkpoint *Checkpoint
	// Messages is the thread after the run, without system messages: the
	// History of the thread's next run.
	Messages []gateway.Message
	// Compactions are the run's compactions of its thread, in order
	// (Compaction): each a step of its own, whose cost Usage and CostUSD
	// include.
	Compactions []CompactionRecord
	// Verdicts are the verdicts of the run's hooks and guardrails that did
	// something (blocked, redacted, asked, logged), in order, made by this
	// call (Run, Resume, Continue, Drive); the checkpoint holds the
	// run's all.
	Verdicts []VerdictRecord
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
func (r *Runtime) Run(ctx context.Context, agent, input string, opts RunOptions) (res RunResult, err error) {
	st, err := r.start(ctx, agent, input, opts)
	if err != nil {
		res = RunResult{Agent: agent, Status: StatusFailed}
		if st != nil {
			res.RunID = st.id
		}
		return res, err
	}
	err = r.drive(ctx, st, &res)
	return res, err
}

// start is everything Run does before the first model call: the run's
// state and its record in the store.
func (r *Runtime) start(ctx context.Context, agent, input string, opts RunOptions) (*runState, error) {
	st, err := r.prepare(agent, input, withCaller(ctx, opts))
	if err != nil {
		return nil, err
	}
	rec, err := r.store.CreateRun(ctx, RunRecord{RunID: st.id, Agent: agent, Status: StatusRunning, Checkpoint: st.checkpoint()})
	if err != nil {
		return st, fmt.Errorf("run %s: create run record: %w", st.id, err)
	}
	st.version = rec.Version
	return st, nil
}

// prepare is the state of a new run, before its record is stored.
func (r *Runtime) prepare(agent, input string, opts RunOptions) (*runState, error) {
	d, err := r.agent(agent)
	if err != nil {
		return nil, err
	}
	if d.userMem != nil && opts.UserID == "" {
		return nil, &UserIDRequiredError{Agent: agent}
	}
	if opts.RunID != "" && !validRunID(opts.RunID) {
		return nil, &InvalidOptionError{Option: "run_id", Problem: fmt.Sprintf("%.80q is not a run id: want run_ and 32 lower-case hex digits, as NewRunID makes", opts.RunID)}
	}
	client, err := r.newClientState(d, opts.Client)
	if err != nil {
		return nil, err
	}
	st := r.newRun(d, opts)
	st.client = client
	st.app, st.ver = r.app, r.ver
	n := len(opts.History) + 1 + int(d.sizes.msgs.Load())
	st.msgs = make([]gateway.Message, 0, n)
	st.saved = make([]SavedMessage, 0, n)
	if k := d.sizes.steps.Load(); k > 0 {
		st.steps = make([]StepRecord, 0, k)
	}
	st.sizes = &d.sizes
	for _, m := range opts.History {
		if m.Role == gateway.RoleSystem {
			continue // rebuilt from the agent at every call
		}
		st.appendMsg(m)
	}
	st.turn = len(st.msgs)
	if input == "" {
		// A run with no input carries the results of a client's calls:
		// the tool messages that end the history are its turn.
		for st.turn > 0 && st.msgs[st.turn-1].Role == gateway.RoleTool {
			st.turn--
		}
		if st.turn == len(st.msgs) {
			return nil, &InvalidOptionError{Option: "input", Problem: "a run needs an input, unless its history ends with tool messages (the results of client calls)"}
		}
		return st, nil
	}
	st.appendMsg(gateway.Message{Role: gateway.RoleUser, Content: input})
	return st, nil
}

// newRun allocates the state of a new top-level run.
func (r *Runtime) newRun(d *agentDef, opts RunOptions) *runState {
	id := opts.RunID
	if id == "" {
		id = NewRunID()
	}
	st := &runState{
		id: id, agent: d, alias: d.spec.Model,
		threadID: opts.ThreadID, userID: opts.UserID, caller: opts.Caller,
	}
	st.delegations = &st.ownDelegations
	if opts.OnEvent != nil {
		st.events = &emitter{fn: opts.OnEvent, runID: id}
	}
	st.pathBuf[0] = d.spec.Name
	st.path = st.pathBuf[:1]
	return st
}

// withCaller returns opts with the caller on ctx when it names none.
func withCaller(ctx context.Context, opts RunOptions) RunOptions {
	if c, ok := kind.CallerFrom(ctx); ok && opts.Caller == (kind.Caller{}) {
		opts.Caller = c
	}
	return opts
}

// NewRunID returns a fresh random run id: run_ and 32 lower-case hex
// digits. A caller that must know a run's id before it starts (a job
// queue) makes one and passes it as RunOptions.RunID.
func NewRunID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var out [36]byte
	copy(out[:], "run_")
	hex.Encode(out[4:], b[:])
	return string(out[:])
}

// validRunID reports whether id has the form NewRunID gives, which is safe
// in a URL path, a file name and a database key.
func validRunID(id string) bool {
	const prefix = "run_"
	if len(id) != len(prefix)+32 || !strings.HasPrefix(id, prefix) {
		return false
	}
	for _, c := range []byte(id[len(prefix):]) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
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
	// Scope is how far an approval reaches: GrantCall (or empty) this
	// call only; GrantRun every later call of the tool in the run that the
	// policy would ask about; GrantThread the same in the run's thread,
	// this run and the thread's later runs. The grant is kept with the run
	// (Checkpoint.Grants), and a thread grant in the store too. A
	// rejection applies to the call only.
	Scope GrantScope
	// By names who decided, for the run's record; empty when unknown. A
	// service sets it to the name of the key that sent the decision.
	By string
	// ClaimedBy is who the sender says decided (a name in a request's
	// body), recorded beside By as a claim, never as the decider.
	ClaimedBy string
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
		if d.Scope != "" && d.Scope != GrantCall {
			return &InvalidOptionError{Option: "scope", Problem: fmt.Sprintf("a rejection applies to the call only, not the %s", d.Scope)}
		}
	default:
		return fmt.Errorf("decision: action %q is not %q or %q", d.Action, Approve, Reject)
	}
	switch d.Scope {
	case "", GrantCall, GrantRun, GrantThread:
	default:
		return &InvalidOptionError{Option: "scope", Problem: fmt.Sprintf("%q is not %q, %q or %q", d.Scope, GrantCall, GrantRun, GrantThread)}
	}
	return errors.Join(CheckBy(d.By), CheckBy(d.ClaimedBy))
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
		return RunResult{RunID: runID, Status: rec.Status}, &WrongStatusError{RunID: runID, Status: rec.Status, Want: StatusPaused}
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
		return RunResult{RunID: cp.RunID, Status: rec.Status}, &WrongStatusError{RunID: cp.RunID, Status: rec.Status, Want: StatusPaused}
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
	now := time.Now().UTC()
	c.Approval = &ApprovalRecord{Approved: d.Action == Approve, Feedback: d.Feedback, By: d.By, ClaimedBy: d.ClaimedBy, At: now, Scope: cmp.Or(d.Scope, GrantCall)}
	if d.Action == Approve && len(d.Arguments) > 0 {
		// restore made sure the agent has the tool.
		if err := validateJSON(st.agent.tools[c.Name].schema, d.Arguments); err != nil {
			return nil, &InvalidArgumentsError{RunID: cp.RunID, Tool: c.Name, Problem: schemaProblem(err)}
		}
		c.Approval.OriginalArguments = c.Arguments
		c.Arguments = string(d.Arguments)
	}
	if d.Action == Approve && (d.Scope == GrantRun || d.Scope == GrantThread) {
		g := Grant{Tool: c.Name, Scope: d.Scope, By: d.By, At: now, RunID: st.id}
		if d.Scope == GrantThread {
			// A run without a thread is its own thread: the grant then
			// reaches as far as the run.
			g.ThreadID = st.threadID
		}
		st.grants = append(st.grants, g)
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
func (r *Runtime) resume(ctx context.Context, rec RunRecord, d Decision) (res RunResult, err error) {
	st, _, res, err := r.claimResume(ctx, r.store, rec, d, StatusRunning)
	if err != nil {
		return res, err
	}
	err = r.drive(ctx, st, &res)
	return res, err
}

// claimResume applies a decision to a paused run and writes it to store
// with status (running to drive it here, queued for a worker), keeping a
// thread grant once the claim has won. On failure the result says how the
// run stands.
func (r *Runtime) claimResume(ctx context.Context, store Store, rec RunRecord, d Decision, status Status) (*runState, RunRecord, RunResult, error) {
	st, err := r.decide(rec.Checkpoint, d)
	if err != nil {
		var nc *noCallError
		if errors.As(err, &nc) {
			return nil, rec, RunResult{RunID: rec.RunID, Status: StatusFailed}, err
		}
		return nil, rec, RunResult{RunID: rec.RunID, Status: StatusPaused}, err
	}
	rec.Status = status
	rec.Checkpoint = st.checkpoint()
	rec, err = store.UpdateRun(ctx, rec)
	if err != nil {
		return nil, rec, RunResult{RunID: st.id, Status: StatusFailed}, fmt.Errorf("run %s: claim paused run: %w", st.id, err)
	}
	st.version = rec.Version
	if n := len(st.grants); d.Action == Approve && d.Scope == GrantThread && n > 0 && st.grants[n-1].ThreadID != "" {
		// Kept for the thread's later runs once this resume has won. A
		// failure only means they ask again; this run has it in its
		// checkpoint.
		g := st.grants[n-1]
		if err := store.AddGrant(ctx, g); err != nil {
			r.logger.WarnContext(ctx, "keeping a thread grant failed: the thread's later runs will ask again", "run", st.id, "tool", g.Tool, "thread", g.ThreadID, "err", err)
		}
	}
	return st, rec, RunResult{}, nil
}

// take claims a run that nobody drives (a running run whose process is
// gone, or a queued one), brings its pending step up to date with the
// store and drives it, with timeout as the drive's run timeout (zero: the
// agent's).
func (r *Runtime) take(ctx context.Context, rec RunRecord, timeout time.Duration) (res RunResult, err error) {
	runID := rec.RunID
	st, err := r.restore(rec.Checkpoint)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	st.runTimeout = timeout
	// A queued run's pending decision (SubmitResume) was made after any
	// interruption of its call, and is for the attempt about to start.
	decided := rec.Status == StatusQueued
	// Claim the run: a concurrent Drive, or the process presumed dead,
	// loses its next write.
	rec.Status = StatusRunning
	rec, err = r.store.UpdateRun(ctx, rec)
	if err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, fmt.Errorf("run %s: claim interrupted run: %w", runID, err)
	}
	st.version = rec.Version
	if err := r.reconcile(ctx, st, decided); err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	err = r.drive(ctx, st, &res)
	return res, err
}

// reconcile brings the pending step of a run taken over after a crash, a
// shutdown, a timeout or a cancellation up to date with the store: a call
// with a result there is not run again; an interrupted read runs again; an
// interrupted write is never re-run silently: the run pauses with reason
// interrupted for a decision, unless decided says the pending call's
// decision was made after the interruption (a queued resume), which then
// stands.
func (r *Runtime) reconcile(ctx context.Context, st *runState, decided bool) error {
	p := st.pending
	if p == nil {
		return nil
	}
	calls, err := r.store.Calls(ctx, st.id)
	if err != nil {
		return fmt.Errorf("run %s: read tool calls: %w", st.id, err)
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
		c.Interrupted = false
		cr, recorded := byKey[callKey(p.Step.Number, i)]
		switch {
		case !recorded:
			// Never started: it runs normally.
		case cr.Result != nil:
			c.observe(cr.Result.Observation, cr.Result.ErrorKind)
		case decided && i == p.Next && p.Reason == "" && c.Approval != nil:
			// A person decided about this attempt after the last one was
			// interrupted: the decision runs it, or tells the model no.
		case !r.rerunnable(st.agent, c.Name):
			r.logger.WarnContext(ctx, "interrupted write call waits for a decision", "run", st.id, "tool", c.Name, "call", c.ID)
			if p.Reason == "" {
				// An approval given before the crash was for the first
				// attempt; whether to try again is a new decision.
				p.Next, p.Reason = i, PauseInterrupted
				c.Approval = nil
			}
		default:
			r.logger.InfoContext(ctx, "re-running interrupted read call", "run", st.id, "tool", c.Name, "call", c.ID)
		}
	}
	return nil
}

// CancelOptions adjusts a Cancel.
type CancelOptions struct {
	// By names who cancels the run, for its record.
	By string
}

// cancelPoll bounds the wait between two looks at a run that was asked to
// stop; the first looks are sooner, each wait a little longer than the
// last, so that a run that stops at once is seen at once and one that
// takes long costs few reads.
const cancelPoll = 25 * time.Millisecond

// Cancel stops a run by id, wherever it is driven: a running run, driven by
// this process or any other sharing the store, is asked to stop through
// the store (Store.RequestCancel); the process driving it cancels the
// run's context, so that the model call or tool call in flight ends, and
// saves it cancelled with its partial result (a call stopped in flight is
// recorded interrupted, never done). A paused run, which nobody drives, is
// cancelled here. Cancel waits until the run has stopped and returns its
// record, status cancelled, with the checkpoint's partial result and who
// asked (Checkpoint.Cancel); cancelling a cancelled run returns it as is.
// When ctx ends first, the request stays recorded and the error is a
// *CancelPendingError: the driving process stops the run when it sees the
// request, and a run whose process is gone stops at once when it is
// recovered (Drive). A run that ended or stopped otherwise is refused
// with a *NotCancellableError. A cancelled run can be continued
// (Continue).
func (r *Runtime) Cancel(ctx context.Context, runID string, opts CancelOptions) (RunRecord, error) {
	if err := CheckBy(opts.By); err != nil {
		return RunRecord{RunID: runID}, err
	}
	req := CancelRequest{By: opts.By, At: time.Now().UTC()}
	wait := 2 * time.Millisecond
	requested := false
	for {
		status, err := StatusRunning, error(nil)
		if !requested {
			// ctx bounds the wait, not the request: a request is recorded
			// (within the store's own bound) even when the caller cannot
			// wait for it, which is when it matters most.
			if status, err = r.store.RequestCancel(context.WithoutCancel(ctx), runID, req); err != nil {
				return RunRecord{RunID: runID}, fmt.Errorf("run %s: request cancellation: %w", runID, err)
			}
			requested = status == StatusRunning
		}
		rec, err := r.store.LoadRun(context.WithoutCancel(ctx), runID)
		if err != nil {
			return RunRecord{RunID: runID}, fmt.Errorf("run %s: read run: %w", runID, err)
		}
		switch rec.Status {
		case StatusCancelled:
			return rec, nil
		case StatusPaused, StatusQueued:
			// Nobody drives a paused or queued run: cancel it here,
			// unless a resume or a worker claims it first (then look
			// again).
			rec.Status = StatusCancelled
			rec.Checkpoint.Cancel = &req
			upd, err := r.store.UpdateRun(context.WithoutCancel(ctx), rec)
			if _, lost := errors.AsType[*ConflictError](err); lost {
				requested = false
				continue
			}
			if err != nil {
				return rec, fmt.Errorf("run %s: cancel paused run: %w", runID, err)
			}
			r.logger.InfoContext(ctx, "run cancelled before it was driven", "run", runID, "status", rec.Status, "by", req.By)
			return upd, nil
		case StatusRunning:
			if !requested {
				continue // it started running again: ask again
			}
		default:
			return rec, &NotCancellableError{RunID: runID, Status: rec.Status}
		}
		select {
		case <-ctx.Done():
			return rec, &CancelPendingError{RunID: runID, Err: context.Cause(ctx)}
		case <-time.After(wait):
		}
		wait = min(wait+2*time.Millisecond, cancelPoll)
	}
}

// Continuable reports whether a run with this status stopped early and
// can be continued (Runtime.Continue): max_steps, timed_out or cancelled.
func Continuable(s Status) bool {
	return s == StatusMaxSteps || s == StatusTimedOut || s == StatusCancelled
}

// ContinueOptions adjusts a continuation.
type ContinueOptions struct {
	// Steps is the fresh allowance of model calls of the agent the run is
	// on, counted from its calls so far; zero means its MaxSteps.
	Steps int
	// Timeout is the run timeout of the continued drive; zero means the
	// agent's (Timeouts.Run), which starts afresh either way.
	Timeout time.Duration
	// By names who continues the run, for its record.
	By string
}

// Continue continues a run that stopped early (max_steps, timed_out or
// cancelled) with a fresh allowance of steps and time. It is the same run:
// same id, agent, path, thread, user and budget scope keys, its messages
// and steps kept, and its checkpoint lists the continuation
// (Checkpoint.Continuations). A step that stopped during its tool calls is
// completed first: calls with a result are not run again, an interrupted
// read runs again, an interrupted write pauses for a decision (reason
// interrupted), and a call that waited for approval still waits. Another
// status is refused with a *NotContinuableError; two processes continuing
// one run at once are told apart by the record's version (*ConflictError
// for the loser, which runs nothing).
func (r *Runtime) Continue(ctx context.Context, runID string, opts ContinueOptions) (res RunResult, err error) {
	st, _, err := r.claimContinue(ctx, r.store, runID, opts, StatusRunning)
	if err != nil {
		return RunResult{RunID: runID, Status: st.failedStatus()}, err
	}
	if err := r.reconcile(ctx, st.st, false); err != nil {
		return RunResult{RunID: runID, Status: StatusFailed}, err
	}
	err = r.drive(ctx, st.st, &res)
	return res, err
}

// claimed is a run claimed by claimContinue, or, when the claim failed,
// the status the run was found in (StatusFailed when it could not be
// read).
type claimed struct {
	st     *runState
	status Status
}

func (c claimed) failedStatus() Status { return cmp.Or(c.status, StatusFailed) }

// claimContinue records a continuation of a run that stopped early and
// writes it to store with status (running to drive it here, queued for a
// worker).
func (r *Runtime) claimContinue(ctx context.Context, store Store, runID string, opts ContinueOptions, status Status) (claimed, RunRecord, error) {
	switch {
	case opts.Steps < 0:
		return claimed{}, RunRecord{}, &InvalidOptionError{Option: "steps", Problem: fmt.Sprintf("negative: %d", opts.Steps)}
	case opts.Timeout < 0:
		return claimed{}, RunRecord{}, &InvalidOptionError{Option: "timeout", Problem: fmt.Sprintf("negative: %v", opts.Timeout)}
	}
	if err := CheckBy(opts.By); err != nil {
		return claimed{}, RunRecord{}, err
	}
	rec, err := store.LoadRun(ctx, runID)
	if err != nil {
		return claimed{}, rec, err
	}
	if !Continuable(rec.Status) {
		return claimed{status: rec.Status}, rec, &NotContinuableError{RunID: runID, Status: rec.Status}
	}
	st, err := r.restore(rec.Checkpoint)
	if err != nil {
		return claimed{}, rec, err
	}
	from, steps := rec.Status, cmp.Or(opts.Steps, st.agent.maxSteps)
	st.stepLimit = st.agentSteps + steps
	st.runTimeout = opts.Timeout
	cont := Continuation{At: time.Now().UTC(), By: opts.By, From: from, AfterStep: len(st.steps), Steps: steps, Timeout: opts.Timeout}
	if p := st.pending; p != nil {
		cont.PendingStep = p.Step.Number
		for i, c := range p.Step.ToolCalls {
			if c.Interrupted {
				cont.Interrupted = append(cont.Interrupted, i)
			}
		}
	}
	st.continuations = append(st.continuations, cont)
	rec.Status = status
	rec.Checkpoint = st.checkpoint()
	rec, err = store.UpdateRun(ctx, rec)
	if err != nil {
		return claimed{}, rec, fmt.Errorf("run %s: claim stopped run: %w", runID, err)
	}
	st.version = rec.Version
	r.logger.InfoContext(ctx, "run continued", "run", runID, "agent", st.agent.spec.Name, "from", from, "steps", steps, "status", status)
	return claimed{st: st}, rec, nil
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
		threadID: cp.ThreadID, userID: cp.UserID, caller: kind.Caller{Key: cp.Key, Tenant: cp.Tenant},
		path: slices.Clone(cp.Path), turn: cp.Turn,
		steps: slices.Clip(cp.Steps), agentSteps: cp.AgentSteps, ownDelegations: cp.Delegations,
		repaired: cp.Repaired, usage: cp.Usage, cost: cp.CostUSD,
		stepLimit: cp.StepLimit, continuations: slices.Clip(cp.Continuations), cancel: cp.Cancel,
		grants: slices.Clip(cp.Grants), app: cp.App, ver: cp.AppVersion, inputChecked: cp.InputChecked,
	}
	if d.guarded || len(cp.Verdicts) > 0 {
		st.glog = &guardLog{verdicts: slices.Clip(cp.Verdicts), from: len(cp.Verdicts)}
	}
	if cp.Client != nil {
		// The entry agent judged it when the run started; the run may be
		// on another agent now, whose own tools it was checked against.
		entry, err := r.agent(cp.Path[0])
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", cp.RunID, err)
		}
		if st.client, err = r.newClientState(entry, cp.Client); err != nil {
			return nil, fmt.Errorf("run %s: client request: %w", cp.RunID, err)
		}
	}
	st.delegations = &st.ownDelegations
	st.clog = restoreCompactions(&cp)
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
