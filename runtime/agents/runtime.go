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
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/internal/jsonschemas"
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

// New checks cfg and builds a Runtime.
func New(cfg Config) (*Runtime, error) {
	if cfg.Gateway == nil {
		return nil, errors.New("agents: Config.Gateway is nil")
	}
	r := &Runtime{
		gw:          cfg.Gateway,
		gen:         cfg.Gateway,
		stream:      cfg.Gateway,
		agents:      make(map[string]*agentDef, len(cfg.Agents)),
		store:       cfg.Store,
		tracer:      cfg.Tracer,
		logger:      cfg.Logger,
		maxParallel: cmp.Or(cfg.MaxParallelTools, DefaultMaxParallelTools),
		maxDepth:    cmp.Or(cfg.MaxDelegationDepth, DefaultMaxDelegationDepth),
		maxDeleg:    cmp.Or(cfg.MaxDelegations, DefaultMaxDelegations),
	}
	if r.store == nil {
		r.store = NewInMemoryStore()
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxParallelTools < 0 || cfg.MaxDelegationDepth < 0 || cfg.MaxDelegations < 0 {
		return nil, errors.New("agents: MaxParallelTools, MaxDelegationDepth and MaxDelegations must not be negative")
	}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// Tools.
	declared := make(map[string]*tool, len(cfg.Tools))
	for _, t := range cfg.Tools {
		if err := t.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := declared[t.Name]; dup {
			fail("tool %q is declared twice", t.Name)
			continue
		}
		in := t.Input
		if len(in) == 0 {
			in = emptyObjectSchema
		}
		s, err := jsonschemas.Compile("urn:aid:tool:"+t.Name, in)
		if err != nil {
			fail("tool %q: input: %w", t.Name, err)
			continue
		}
		declared[t.Name] = &tool{
			name: t.Name, kind: kindPlain, schema: s, impl: cfg.Implementations[t.Name],
			def:     gateway.ToolDef{Name: t.Name, Description: t.Description, Parameters: in},
			effects: cmp.Or(t.Effects, EffectsRead), approval: cmp.Or(t.Approval, ApprovalNever),
			timeout: cmp.Or(t.Timeout, DefaultToolTimeout),
			maxObs:  cmp.Or(t.MaxObservationBytes, DefaultMaxObservationBytes),
		}
	}
	for name := range cfg.Implementations {
		if _, ok := declared[name]; !ok && !slices.ContainsFunc(cfg.Tools, func(t Tool) bool { return t.Name == name }) {
			fail("implementation %q matches no declared tool", name)
		}
	}
	scopes := make(map[string]gateway.Scope, len(cfg.Budgets))
	for _, b := range cfg.Budgets {
		switch b.Scope {
		case gateway.ScopeRun, gateway.ScopeThread, gateway.ScopeGlobal:
			scopes[b.Name] = b.Scope
		default:
			fail("budget %q has scope %q, not run, thread or global", b.Name, b.Scope)
		}
	}

	// Agents, first pass: names.
	for _, a := range cfg.Agents {
		switch {
		case a.Name == "":
			fail("an agent has no name")
			continue
		case r.agents[a.Name] != nil:
			fail("agent %q is declared twice", a.Name)
			continue
		}
		r.agents[a.Name] = &agentDef{spec: a}
		r.names = append(r.names, a.Name)
	}
	slices.Sort(r.names)

	// Every search_ tool takes the same arguments.
	searchToolSchema, err := jsonschemas.Compile("urn:aid:tool:search", searchSchema)
	if err != nil {
		panic(err) // the built-in schemas are constants
	}

	// Second pass: everything else.
	missing := map[string][]string{}
	for _, name := range r.names {
		d := r.agents[name]
		a := d.spec
		d.maxSteps = cmp.Or(a.MaxSteps, DefaultMaxSteps)
		if a.MaxSteps < 0 {
			fail("agent %q: negative maxSteps %d", name, a.MaxSteps)
		}
		if a.Model == "" {
			fail("agent %q has no model", name)
		}
		aliases := append([]string{a.Model}, a.Ladder...)
		aliases = append(aliases, a.Fallbacks...)
		if len(a.Ladder) > 0 && !slices.Contains(a.Ladder, a.Model) {
			fail("agent %q: ladder %v does not contain its model %q", name, a.Ladder, a.Model)
		}
		switch a.OnBudgetExhausted {
		case "", BudgetFail:
		case BudgetDegrade:
			if i := slices.Index(a.Ladder, a.Model); i < 0 || i == len(a.Ladder)-1 {
				fail("agent %q degrades on budget breach but its ladder has no rung below %q", name, a.Model)
			}
		default:
			fail("agent %q: onBudgetExhausted %q is not %q or %q", name, a.OnBudgetExhausted, BudgetFail, BudgetDegrade)
		}
		if a.Budget != "" {
			sc, ok := scopes[a.Budget]
			if !ok {
				fail("agent %q: budget %q is not in Config.Budgets", name, a.Budget)
			}
			d.budget, d.budgetScope = a.Budget, sc
		}
		d.tools = make(map[string]*tool, len(a.Tools)+len(a.Handoffs)+len(a.Delegates)+len(a.Retrievers))
		for _, tn := range a.Tools {
			t, ok := declared[tn]
			if !ok {
				fail("agent %q: tool %q is not declared", name, tn)
				continue
			}
			if t.impl == nil {
				missing[tn] = append(missing[tn], name)
			}
			d.tools[tn] = t
			d.defs = append(d.defs, t.def)
		}
		for _, list := range []struct {
			names  []string
			kind   toolKind
			prefix string
		}{{a.Handoffs, kindTransfer, TransferPrefix}, {a.Delegates, kindDelegate, DelegatePrefix}} {
			for _, target := range list.names {
				td, ok := r.agents[target]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("agent %q: %w", name, &UnknownAgentError{Agent: target, Known: r.names}))
					continue
				case target == name:
					fail("agent %q names itself as a handoff or delegate", name)
					continue
				}
				tn := list.prefix + target
				t := &tool{name: tn, kind: list.kind, target: td, effects: EffectsWrite, approval: ApprovalNever, maxObs: DefaultMaxObservationBytes}
				def := gateway.ToolDef{Name: tn}
				if list.kind == kindTransfer {
					def.Description = fmt.Sprintf("Hand the conversation over to agent %q for good; you will not get it back. %s", target, td.spec.Description)
					def.Parameters = emptyObjectSchema
				} else {
					def.Description = fmt.Sprintf("Ask agent %q to do a task in a fresh context and get its answer back. %s", target, td.spec.Description)
					def.Parameters = delegateSchema
				}
				s, err := jsonschemas.Compile("urn:aid:tool:"+tn, def.Parameters)
				if err != nil {
					panic(err) // the built-in schemas are constants
				}
				t.schema = s
				d.tools[tn] = t
				d.defs = append(d.defs, def)
			}
		}
		for _, rn := range a.Retrievers {
			s, ok := cfg.Retrievers[rn]
			switch {
			case rn == "":
				fail("agent %q names a retriever without a name", name)
				continue
			case !ok || s == nil:
				fail("agent %q: retriever %q is not in Config.Retrievers", name, rn)
				continue
			case d.tools[SearchPrefix+rn] != nil:
				fail("agent %q names retriever %q twice", name, rn)
				continue
			}
			tn := SearchPrefix + rn
			d.tools[tn] = &tool{
				name: tn, kind: kindSearch, effects: EffectsRead, approval: ApprovalNever,
				timeout: DefaultToolTimeout, maxObs: DefaultMaxObservationBytes, schema: searchToolSchema, searcher: s, source: rn,
			}
			d.defs = append(d.defs, gateway.ToolDef{Name: tn, Description: searchDescription(rn, s), Parameters: searchSchema})
		}
		if m := a.Memory; m != nil {
			if m.ThreadTokenBudget < 0 {
				fail("agent %q: negative thread token budget", name)
			}
			for _, sm := range []struct {
				scope  string
				spec   *StoredMemory
				store  *MemoryStore
				budget *int
			}{{"user", m.User, &d.userMem, &d.userBudget}, {"global", m.Global, &d.globalMem, &d.globalBudget}} {
				if sm.spec == nil {
					continue
				}
				st, ok := cfg.MemoryStores[sm.spec.Store]
				if !ok || st == nil {
					fail("agent %q: %s memory store %q is not in Config.MemoryStores", name, sm.scope, sm.spec.Store)
					continue
				}
				*sm.store, *sm.budget = st, cmp.Or(sm.spec.TokenBudget, DefaultMemoryTokenBudget)
			}
		}
		if len(a.Output) > 0 {
			s, err := jsonschemas.Compile("urn:aid:output:"+name, a.Output)
			if err != nil {
				fail("agent %q: output: %w", name, err)
			} else {
				d.output = s
				d.format = &gateway.JSONSchema{Name: name + "_output", Schema: a.Output}
			}
		}
		for _, alias := range dedupe(aliases) {
			if _, err := r.gw.Resolve(alias); err != nil {
				fail("agent %q: %w", name, err)
				continue
			}
			var caps []gateway.Capability
			if len(d.defs) > 0 {
				caps = append(caps, gateway.CapabilityTools)
			}
			if d.output != nil {
				caps = append(caps, gateway.CapabilityJSON)
			}
			if err := r.gw.Require(alias, caps...); err != nil {
				fail("agent %q: %w", name, err)
			}
		}
	}
	for _, tn := range slices.Sorted(maps.Keys(missing)) {
		errs = append(errs, &MissingToolImplementationError{Tool: tn, Agents: missing[tn]})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Delegated runs cannot pause: their context is not part of the
	// checkpoint yet. Refuse that now rather than mid-run.
	for _, name := range r.names {
		d := r.agents[name]
		for _, target := range d.spec.Delegates {
			reach := r.reachable(r.agents[target])
			for _, n := range reach {
				for _, t := range r.agents[n].tools {
					if t.kind == kindPlain && t.approval == ApprovalAlways {
						errs = append(errs, fmt.Errorf("agent %q delegates to %q, which reaches agent %q with approval tool %q: %w", name, target, n, t.name, &gateway.DeferredError{Feature: "human approval inside a delegated run"}))
					}
				}
			}
		}
		d.readOnly = true
		for _, n := range r.reachable(d) {
			for _, t := range r.agents[n].tools {
				if t.kind == kindPlain && t.effects != EffectsRead {
					d.readOnly = false
				}
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return r, nil
}

// delegateSchema is the arguments of every delegate_to_ tool.
var delegateSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The task for the agent, with everything it needs: it sees nothing else of this conversation."}},"required":["input"]}`)

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
