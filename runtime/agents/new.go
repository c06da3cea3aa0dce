package agents

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/internal/jsonschemas"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/rules"
)

// New checks cfg and builds a Runtime. It reports every problem it finds,
// joined: each check below is one rule or one piece of wiring, and the
// rules an application's agents obey whatever wrote them are
// runtime/rules', which `aidgen vet` applies too, so that vet and the
// runtime cannot disagree.
func New(cfg Config) (*Runtime, error) {
	r, err := newRuntime(cfg)
	if err != nil {
		return nil, err
	}
	declared, errs := declareTools(cfg)
	errs = append(errs, r.compilePolicy(cfg, declared)...)
	scopes, serrs := budgetScopes(cfg.Budgets)
	errs = append(errs, serrs...)
	// Every search_ tool takes the same arguments.
	searchToolSchema, err := jsonschemas.Compile("urn:aid:tool:search", searchSchema)
	if err != nil {
		panic(err) // the built-in schemas are constants
	}
	errs = append(errs, r.declareAgents(cfg.Agents)...)
	skills, kerrs := declareSkills(cfg.Skills)
	errs = append(errs, kerrs...)
	guards, gerrs := r.compileGuardrails(cfg)
	errs = append(errs, gerrs...)
	missing := map[string][]string{} // tool without an implementation → the agents offering it
	for _, name := range r.names {
		d := r.agents[name]
		errs = append(errs, r.agentRules(d, cfg, declared)...)
		errs = append(errs, d.bindTimeouts(cfg.Timeouts)...)
		errs = append(errs, d.bindBudget(scopes)...)
		errs = append(errs, d.bindTools(declared, missing)...)
		errs = append(errs, r.bindAgentTools(d)...)
		errs = append(errs, d.bindSearch(cfg.Retrievers, searchToolSchema)...)
		errs = append(errs, d.bindSkills(skills)...)
		errs = append(errs, d.bindMemory(cfg.MemoryStores)...)
		errs = append(errs, d.compileOutput()...)
		errs = append(errs, r.checkAliases(d)...)
		errs = append(errs, d.bindHooks(cfg.Hooks, cfg.AgentHooks[name], cfg.DefaultGuardrails, guards)...)
		d.fingerprint, d.toolNames, d.learned = fingerprint(d), toolNames(d), learnedTools(d)
	}
	for _, n := range slices.Sorted(maps.Keys(cfg.AgentHooks)) {
		if r.agents[n] == nil {
			errs = append(errs, fmt.Errorf("Config.AgentHooks names agent %q, which is not in Config.Agents", n))
		}
	}
	for _, tn := range slices.Sorted(maps.Keys(missing)) {
		errs = append(errs, &MissingToolImplementationError{Tool: tn, Agents: missing[tn]})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if errs := append(r.checkDelegatedApproval(), r.checkJudgeApproval(cfg.Guardrails)...); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.markReadOnly()
	return r, nil
}

// newRuntime is a Runtime with cfg's settings and their defaults.
func newRuntime(cfg Config) (*Runtime, error) {
	if cfg.Gateway == nil {
		return nil, errors.New("agents: Config.Gateway is nil")
	}
	if cfg.MaxParallelTools < 0 || cfg.MaxDelegationDepth < 0 || cfg.MaxDelegations < 0 {
		return nil, errors.New("agents: MaxParallelTools, MaxDelegationDepth and MaxDelegations must not be negative")
	}
	r := &Runtime{
		gw:          cfg.Gateway,
		gen:         cfg.Gateway,
		stream:      cfg.Gateway,
		agents:      make(map[string]*agentDef, len(cfg.Agents)),
		store:       cmp.Or[Store](cfg.Store, NewInMemoryStore()),
		tracer:      cfg.Tracer,
		logger:      cfg.Logger,
		maxParallel: cmp.Or(cfg.MaxParallelTools, DefaultMaxParallelTools),
		maxDepth:    cmp.Or(cfg.MaxDelegationDepth, DefaultMaxDelegationDepth),
		maxDeleg:    cmp.Or(cfg.MaxDelegations, DefaultMaxDelegations),
		app:         cfg.App,
		ver:         cfg.AppVersion,
		runEnded:    cfg.RunEnded,
	}
	if r.logger == nil {
		r.logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Timeouts.validate(); err != nil {
		return nil, fmt.Errorf("agents: Config.Timeouts: %w", err)
	}
	return r, nil
}

// declareTools checks every declared tool and compiles its input schema:
// the tools agents may list, by name, each with its implementation (nil
// when none is registered, which bindTools reports for the agents that
// offer it). An implementation registered for no declared tool is an
// error too.
func declareTools(cfg Config) (map[string]*tool, []error) {
	var errs []error
	declared := make(map[string]*tool, len(cfg.Tools))
	for _, t := range cfg.Tools {
		if err := t.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := declared[t.Name]; dup {
			errs = append(errs, fmt.Errorf("tool %q is declared twice", t.Name))
			continue
		}
		in := t.Input
		if len(in) == 0 {
			in = emptyObjectSchema
		}
		s, err := jsonschemas.Compile("urn:aid:tool:"+t.Name, in)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: input: %w", t.Name, err))
			continue
		}
		if ps := rules.ToolInput(in); len(ps) > 0 {
			errs = append(errs, fmt.Errorf("tool %q: input: %s", t.Name, ps[0].Msg))
			continue
		}
		declared[t.Name] = &tool{
			name: t.Name, kind: kindPlain, schema: s, shape: newShape(s), impl: cfg.Implementations[t.Name],
			def:     gateway.ToolDef{Name: t.Name, Description: t.Description, Parameters: in},
			effects: cmp.Or(t.Effects, EffectsRead),
			timeout: cmp.Or(t.Timeout, DefaultToolTimeout),
			maxObs:  cmp.Or(t.MaxObservationBytes, DefaultMaxObservationBytes),
			learned: t.Learned,
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Implementations)) {
		if !slices.ContainsFunc(cfg.Tools, func(t Tool) bool { return t.Name == name }) {
			errs = append(errs, fmt.Errorf("implementation %q matches no declared tool", name))
		}
	}
	return declared, errs
}

// compilePolicy compiles the approval policy over the declared tools and
// marks the tools it allows whatever their arguments.
func (r *Runtime) compilePolicy(cfg Config, declared map[string]*tool) []error {
	governed := make([]policy.Tool, 0, len(cfg.Tools))
	for _, t := range cfg.Tools {
		governed = append(governed, policy.Tool{Name: t.Name, Approval: string(t.Approval), From: t.From})
	}
	compiled, err := policy.Compile(cfg.Approvals, governed, cfg.Conditions)
	if err != nil {
		return []error{err}
	}
	r.policy = compiled
	for _, t := range declared {
		t.allowed = compiled.AlwaysAllows(t.name)
		t.unruled = compiled.Unruled(t.name)
	}
	return nil
}

// bindTimeouts checks the agent's timeouts and fills them in from the
// runtime's.
func (d *agentDef) bindTimeouts(def Timeouts) []error {
	if err := d.spec.Timeouts.validate(); err != nil {
		return []error{fmt.Errorf("agent %q: %w", d.spec.Name, err)}
	}
	d.timeouts = d.spec.Timeouts.or(def)
	return nil
}

// budgetScopes returns the scope of every budget, refusing a scope that is
// not run, thread, key, tenant or global. The gateway finds the key of a
// key or tenant budget on the context (kind.Caller), as it does for every
// call.
func budgetScopes(budgets []gateway.Budget) (map[string]gateway.Scope, []error) {
	var errs []error
	scopes := make(map[string]gateway.Scope, len(budgets))
	for _, b := range budgets {
		switch b.Scope {
		case gateway.ScopeRun, gateway.ScopeThread, gateway.ScopeGlobal, gateway.ScopeKey, gateway.ScopeTenant:
			scopes[b.Name] = b.Scope
		default:
			errs = append(errs, fmt.Errorf("budget %q has scope %q, not run, thread, key, tenant or global", b.Name, b.Scope))
		}
	}
	return scopes, errs
}

// declareAgents names every agent, once, so that handoffs and delegates
// can refer to any of them, and checks what each says of itself alone.
func (r *Runtime) declareAgents(list []Agent) []error {
	var errs []error
	for _, a := range list {
		switch {
		case a.Name == "":
			errs = append(errs, errors.New("an agent has no name"))
			continue
		case r.agents[a.Name] != nil:
			errs = append(errs, fmt.Errorf("agent %q is declared twice", a.Name))
			continue
		}
		d := &agentDef{spec: a, maxSteps: cmp.Or(a.MaxSteps, DefaultMaxSteps)}
		r.agents[a.Name] = d
		r.names = append(r.names, a.Name)
		if a.MaxSteps < 0 {
			errs = append(errs, fmt.Errorf("agent %q: negative maxSteps %d", a.Name, a.MaxSteps))
		}
		if a.Model == "" {
			errs = append(errs, fmt.Errorf("agent %q has no model", a.Name))
		}
		switch a.OnBudgetExhausted {
		case "", BudgetFail, BudgetDegrade:
		default:
			errs = append(errs, fmt.Errorf("agent %q: onBudgetExhausted %q is not %q or %q", a.Name, a.OnBudgetExhausted, BudgetFail, BudgetDegrade))
		}
		if err := validCache(a.PromptCache); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
		}
		if m := a.Memory; m != nil && m.ThreadTokenBudget < 0 {
			errs = append(errs, fmt.Errorf("agent %q: negative thread token budget", a.Name))
		}
	}
	slices.Sort(r.names)
	return errs
}

// agentRules applies runtime/rules to an agent: the rules between its
// values and the models its aliases resolve to (ladder, degrade, lists,
// fallbacks, the thread's fit, the tools it generates).
func (r *Runtime) agentRules(d *agentDef, cfg Config, declared map[string]*tool) []error {
	a := d.spec
	ra := rules.Agent{
		Name: a.Name, Model: a.Model, Ladder: a.Ladder, Fallbacks: a.Fallbacks,
		Degrade: a.OnBudgetExhausted == BudgetDegrade, Budget: a.Budget,
		Tools: a.Tools, Handoffs: a.Handoffs, Delegates: a.Delegates, Retrievers: a.Retrievers,
		Skills: a.Skills, Output: len(a.Output) > 0,
	}
	if a.Memory != nil {
		ra.ThreadTokenBudget = a.Memory.ThreadTokenBudget
	}
	ra.Compaction = compactionRules(a.Compaction)
	known := rules.Known{
		Model: func(alias string) (rules.Model, bool) {
			pm, err := r.gw.Resolve(alias)
			if err != nil || pm.Spec.Kind == gateway.KindEmbedding {
				return rules.Model{}, false // checkAliases reports it
			}
			c := pm.Spec.Cost
			return rules.Model{ID: pm.Spec.ID, Price: rules.Price{Input: c.InputPer1kUSD, Output: c.OutputPer1kUSD}, ContextWindow: pm.Spec.ContextWindow, MaxOutputTokens: pm.Spec.MaxOutputTokens}, true
		},
		Tool:      func(n string) bool { return declared[n] != nil },
		Agent:     func(n string) bool { return r.agents[n] != nil },
		Retriever: func(n string) bool { return cfg.Retrievers[n] != nil },
	}
	var errs []error
	for _, p := range rules.CheckAgent(ra, known) {
		if f := p.Field(); f != "" {
			errs = append(errs, fmt.Errorf("agent %q: %s: %s", a.Name, f, p.Msg))
		} else {
			errs = append(errs, fmt.Errorf("agent %q: %s", a.Name, p.Msg))
		}
	}
	if len(errs) == 0 {
		errs = r.bindCompaction(d, ra, known)
	}
	return errs
}

// bindBudget binds the agent to its budget's scope.
func (d *agentDef) bindBudget(scopes map[string]gateway.Scope) []error {
	if d.spec.Budget == "" {
		return nil
	}
	sc, ok := scopes[d.spec.Budget]
	d.budget, d.budgetScope = d.spec.Budget, sc
	if !ok {
		return []error{fmt.Errorf("agent %q: budget %q is not in Config.Budgets", d.spec.Name, d.spec.Budget)}
	}
	return nil
}

// bindTools offers the agent the declared tools it lists, and records in
// missing the ones no implementation is registered for.
func (d *agentDef) bindTools(declared map[string]*tool, missing map[string][]string) []error {
	a := d.spec
	var errs []error
	d.tools = make(map[string]*tool, len(a.Tools)+len(a.Handoffs)+len(a.Delegates)+len(a.Retrievers))
	for _, tn := range a.Tools {
		t, ok := declared[tn]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("agent %q: tool %q is not declared", a.Name, tn))
			continue
		case d.tools[tn] != nil:
			continue // listed twice: agentRules reports it
		case t.impl == nil:
			missing[tn] = append(missing[tn], a.Name)
		}
		d.tools[tn] = t
		d.defs = append(d.defs, t.def)
	}
	return errs
}

// delegateSchema is the arguments of every delegate_to_ tool.
var delegateSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The task for the agent, with everything it needs: it sees nothing else of this conversation."}},"required":["input"]}`)

// bindAgentTools offers the agent a transfer_to_ tool per handoff and a
// delegate_to_ tool per delegate.
func (r *Runtime) bindAgentTools(d *agentDef) []error {
	a := d.spec
	var errs []error
	for _, list := range []struct {
		names  []string
		kind   toolKind
		prefix string
	}{{a.Handoffs, kindTransfer, TransferPrefix}, {a.Delegates, kindDelegate, DelegatePrefix}} {
		for _, target := range list.names {
			td, ok := r.agents[target]
			tn := list.prefix + target
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, &UnknownAgentError{Agent: target, Known: r.names}))
				continue
			case target == a.Name || d.tools[tn] != nil:
				continue // itself, or listed twice: agentRules reports it
			}
			t := &tool{name: tn, kind: list.kind, target: td, effects: EffectsWrite, maxObs: DefaultMaxObservationBytes}
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
			t.schema, t.shape = s, newShape(s)
			d.tools[tn] = t
			d.defs = append(d.defs, def)
		}
	}
	return errs
}

// bindSearch offers the agent a search_ tool per retriever, each taking
// the arguments schema describes.
func (d *agentDef) bindSearch(searchers map[string]Searcher, schema *jsonschema.Schema) []error {
	a := d.spec
	var errs []error
	for _, rn := range a.Retrievers {
		s, ok := searchers[rn]
		tn := SearchPrefix + rn
		switch {
		case rn == "":
			errs = append(errs, fmt.Errorf("agent %q names a retriever without a name", a.Name))
			continue
		case !ok || s == nil:
			errs = append(errs, fmt.Errorf("agent %q: retriever %q is not in Config.Retrievers", a.Name, rn))
			continue
		case d.tools[tn] != nil:
			continue // listed twice: agentRules reports it
		}
		d.tools[tn] = &tool{
			name: tn, kind: kindSearch, effects: EffectsRead,
			timeout: DefaultToolTimeout, maxObs: DefaultMaxObservationBytes, schema: schema, shape: newShape(schema), searcher: s, source: rn,
		}
		d.defs = append(d.defs, gateway.ToolDef{Name: tn, Description: searchDescription(rn, s), Parameters: searchSchema})
	}
	return errs
}

// bindMemory binds the agent's user and global memory to their stores.
func (d *agentDef) bindMemory(stores map[string]MemoryStore) []error {
	m := d.spec.Memory
	if m == nil {
		return nil
	}
	var errs []error
	for _, sm := range []struct {
		scope  string
		spec   *StoredMemory
		store  *MemoryStore
		budget *int
	}{{"user", m.User, &d.userMem, &d.userBudget}, {"global", m.Global, &d.globalMem, &d.globalBudget}} {
		if sm.spec == nil {
			continue
		}
		st, ok := stores[sm.spec.Store]
		if !ok || st == nil {
			errs = append(errs, fmt.Errorf("agent %q: %s memory store %q is not in Config.MemoryStores", d.spec.Name, sm.scope, sm.spec.Store))
			continue
		}
		*sm.store, *sm.budget = st, cmp.Or(sm.spec.TokenBudget, DefaultMemoryTokenBudget)
	}
	return errs
}

// compileOutput compiles the agent's output schema.
func (d *agentDef) compileOutput() []error {
	out := d.spec.Output
	if len(out) == 0 {
		return nil
	}
	s, err := jsonschemas.Compile("urn:aid:output:"+d.spec.Name, out)
	if err != nil {
		return []error{fmt.Errorf("agent %q: output: %w", d.spec.Name, err)}
	}
	d.output, d.outShape = s, newShape(s)
	d.format = &gateway.JSONSchema{Name: d.spec.Name + "_output", Schema: out}
	return nil
}

// checkAliases checks that every alias the agent may run on (its model,
// its ladder, its fallbacks) resolves and can serve what the agent needs
// (rules.Needs), model and provider adapter alike.
func (r *Runtime) checkAliases(d *agentDef) []error {
	a := d.spec
	var caps []gateway.Capability
	if len(d.defs) > 0 {
		caps = append(caps, gateway.CapabilityTools)
	}
	if d.output != nil {
		caps = append(caps, gateway.CapabilityJSON)
	}
	var errs []error
	for _, alias := range dedupe(slices.Concat([]string{a.Model}, a.Ladder, a.Fallbacks)) {
		if _, err := r.gw.Resolve(alias); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
			continue
		}
		if err := r.gw.Require(alias, caps...); err != nil {
			errs = append(errs, fmt.Errorf("agent %q: %w", a.Name, err))
		}
	}
	return errs
}

// checkDelegatedApproval refuses a delegation that reaches a tool needing
// approval: a delegated run cannot pause, its context is not part of the
// checkpoint yet. Refused now rather than mid-run.
func (r *Runtime) checkDelegatedApproval() []error {
	var errs []error
	for _, name := range r.names {
		for _, target := range r.agents[name].spec.Delegates {
			for _, n := range r.reachable(r.agents[target]) {
				for _, t := range r.agents[n].tools {
					if t.kind == kindPlain && r.policy.MayAsk(t.name) {
						errs = append(errs, fmt.Errorf("agent %q delegates to %q, which reaches agent %q with approval tool %q: %w", name, target, n, t.name, &kind.DeferredError{Feature: "human approval inside a delegated run"}))
					}
				}
			}
		}
	}
	return errs
}

// markReadOnly records, for every agent, whether every tool reachable from
// it only reads, and whether an agent reachable from it has hooks.
func (r *Runtime) markReadOnly() {
	for _, name := range r.names {
		d := r.agents[name]
		d.readOnly = true
		for _, n := range r.reachable(d) {
			d.guarded = d.guarded || r.agents[n].hooks != nil
			for _, t := range r.agents[n].tools {
				if t.kind == kindPlain && t.effects != EffectsRead {
					d.readOnly = false
				}
			}
		}
	}
}
