package ir

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/fileglob"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/rules"
)

// passes are the semantic checks that run after the file matched the
// schema, in order. Each only records errors; all of them run, so that a
// user sees every problem at once.
var passes = []struct {
	name string
	run  func(*checker)
}{
	{"skills", (*checker).skills},
	{"resolve", (*checker).resolve},
	{"check", (*checker).check},
	{"deferred", (*checker).deferred},
	{"files", (*checker).files},
}

// checker runs the semantic passes over a decoded document, reporting at
// the positions the loader knows.
type checker struct {
	*loader
	doc *Document

	compiler     *jsonschema.Compiler
	schemaN      int
	schemaIssues map[string][]schemaIssue // schema text → its problems (none when valid)
}

// --- resolve: every reference names something that exists, of the right kind.

func (c *checker) resolve() {
	d := c.doc
	providers := names(d.Providers)
	modelIDs := names(d.Models)
	for _, m := range d.Models {
		if !slices.Contains(providers, m.Provider) {
			c.errAt(pathOf("models", m.ID, "provider"), "%s", unknownRef("provider", m.Provider, providers))
		}
		c.deployments(m, providers)
		c.modelAPI(m)
	}
	for _, a := range d.Aliases {
		if !slices.Contains(modelIDs, a.Model) {
			c.errAt(pathOf("aliases", a.Name), "%s", unknownRef("model", a.Model, modelIDs))
		}
	}
	budgets := names(d.Budgets)
	tools := names(d.Tools)
	agents := names(d.Agents)
	stores := names(d.Stores)
	retrievers := names(d.Retrievers)
	for _, a := range d.Agents {
		at := func(parts ...any) []any { return append([]any{"agents", a.Name}, parts...) }
		c.alias(pathOf(at("model")...), a.Model, KindChat)
		for i, r := range a.Ladder {
			c.alias(pathOf(at("ladder", i)...), r, KindChat)
		}
		c.fallbacks(at("fallbacks"), a.Fallbacks, a.Model, "the agent's model")
		c.list(at("tools"), a.Tools, "tool", tools, "")
		c.list(at("handoffs"), a.Handoffs, "agent", agents, a.Name)
		c.list(at("delegates"), a.Delegates, "agent", agents, a.Name)
		c.list(at("retrievers"), a.Retrievers, "retriever", retrievers, "")
		if a.Budget != "" {
			c.ref(pathOf(at("budget")...), "budget", a.Budget, budgets)
		}
		if m := a.Memory; m != nil {
			if m.User != nil {
				c.ref(pathOf(at("memory", "user", "store")...), "store", m.User.Store, stores)
			}
			if m.Global != nil {
				c.ref(pathOf(at("memory", "global", "store")...), "store", m.Global.Store, stores)
			}
		}
	}
	for _, r := range d.Retrievers {
		c.alias(pathOf("retrievers", r.Name, "embedModel"), r.EmbedModel, KindEmbedding)
		c.ref(pathOf("retrievers", r.Name, "store"), "store", r.Store, stores)
	}
	for _, e := range d.Evals {
		at := func(parts ...any) cue.Path { return pathOf(append([]any{"evals", e.Name}, parts...)...) }
		if e.Target.Agent != "" {
			c.ref(at("target", "agent"), "agent", e.Target.Agent, agents)
		}
		if e.Target.Model != "" {
			c.alias(at("target", "model"), e.Target.Model, KindChat)
			c.fallbacks([]any{"evals", e.Name, "target", "fallbacks"}, e.Target.Fallbacks, e.Target.Model, "the target's model")
		}
		if e.Target.Retriever != "" {
			c.ref(at("target", "retriever"), "retriever", e.Target.Retriever, retrievers)
		}
		if r := e.FromRuns; r != nil && r.Agent != "" {
			c.ref(at("fromRuns", "agent"), "agent", r.Agent, agents)
		}
		if e.Judge != nil {
			c.alias(at("judge", "model"), e.Judge.Model, KindChat)
			c.fallbacks([]any{"evals", e.Name, "judge", "fallbacks"}, e.Judge.Fallbacks, e.Judge.Model, "the judge's model")
		}
		if e.Budget != "" {
			c.ref(at("budget"), "budget", e.Budget, budgets)
		}
	}
	if d.Service.Entry != "" {
		c.ref(pathOf("service", "entry"), "agent", d.Service.Entry, agents)
	}
	if x := d.Service.Expose; x != nil {
		c.expose(x, agents, budgets)
	}
	for _, p := range d.Providers {
		c.kindRefs(kind.Providers, p.Kind, p.Config, "providers", p.Name)
	}
	for _, t := range d.Tools {
		if i := t.Implementation; i != nil {
			c.kindRefs(kind.Tools, i.Kind, i.Config, "tools", t.Name, "implementation")
		}
	}
	for _, s := range d.Stores {
		c.kindRefs(kind.Stores, s.Kind, s.Config, "stores", s.Name)
	}
	for _, r := range d.Resources {
		c.kindRefs(kind.Resources, r.Kind, r.Config, r.Kind, r.Name)
	}
}

// kindRefs checks that every field of the block cfg of an element of the
// named kind that refers to another section (kind.Info.Refs) names an
// entry of it, and that exactly one field of each of the kind's
// kind.Info.OneOf groups is set, the element being at the path at.
func (c *checker) kindRefs(p kind.Point, name string, cfg Config, at ...any) {
	info, _ := c.kinds.lookup(p, name)
	// The kind owns the rule of its fields of which exactly one is set;
	// vet reports each problem at its field, unless the schema refused a
	// field of the block, which the rule would read as missing.
	var problems []kind.Problem
	if !c.cueErrWithin(pathOf(at...)) {
		problems = info.CheckOneOf(cfg)
	}
	for _, pr := range problems {
		where := slices.Clip(at)
		if pr.Field != "" {
			where = append(where, fieldPath(pr.Field)...)
		}
		c.errAt(pathOf(where...), "%s", pr.Msg)
	}
	for _, r := range info.Refs {
		if v, ok := cfg.String(r.Field); ok {
			c.ref(pathOf(append(slices.Clip(at), fieldPath(r.Field)...)...), r.What, v, c.sectionKeys(r.Section))
		}
	}
}

// fieldPath splits a dot-separated JSON path into path parts.
func fieldPath(field string) []any {
	var parts []any
	for _, part := range strings.Split(field, ".") {
		parts = append(parts, part)
	}
	return parts
}

// sectionKeys returns the keys of a top-level section, sorted.
func (c *checker) sectionKeys(section string) []string {
	d := c.doc
	switch section {
	case "providers":
		return names(d.Providers)
	case "models":
		return names(d.Models)
	case "aliases":
		return names(d.Aliases)
	case "budgets":
		return names(d.Budgets)
	case "tools":
		return names(d.Tools)
	case "agents":
		return names(d.Agents)
	case "stores":
		return names(d.Stores)
	case "retrievers":
		return names(d.Retrievers)
	case "evals":
		return names(d.Evals)
	}
	var out []string
	for _, r := range d.Resources {
		if r.Kind == section {
			out = append(out, r.Name)
		}
	}
	return out
}

// expose checks the aliases a service serves directly: each is a chat
// alias, listed once, whose name no agent has (a request's model would not
// say which it means); the budget exists; fallbacks are given for exposed
// aliases only, and are themselves sound fallbacks.
func (c *checker) expose(x *Expose, agents, budgets []string) {
	for i, a := range x.Aliases {
		p := pathOf("service", "expose", "aliases", i)
		switch {
		case slices.Index(x.Aliases, a) < i:
			c.errAt(p, "alias %q is listed twice; remove this entry", a)
		case slices.Contains(agents, a):
			c.errAt(p, "alias %q has the name of agent %q, so a request's model could not say which it means; expose another alias or rename the agent", a, a)
		default:
			c.alias(p, a, KindChat)
		}
	}
	if x.Budget != "" {
		c.ref(pathOf("service", "expose", "budget"), "budget", x.Budget, budgets)
	}
	exposed := slices.Sorted(slices.Values(x.Aliases))
	exposed = slices.Compact(exposed)
	for _, a := range slices.Sorted(maps.Keys(x.Fallbacks)) {
		if !slices.Contains(exposed, a) {
			c.errAt(pathOf("service", "expose", "fallbacks", a), "%s", unknownRef("exposed alias", a, exposed))
			continue
		}
		c.fallbacks([]any{"service", "expose", "fallbacks", a}, x.Fallbacks[a], a, "the exposed alias")
	}
}

// alias checks that an alias resolves to a model of the wanted kind.
func (c *checker) alias(p cue.Path, alias, kind string) {
	a, ok := find(c.doc.Aliases, alias)
	if !ok {
		c.errAt(p, "%s", unknownRef("alias", alias, names(c.doc.Aliases)))
		return
	}
	m, ok := c.doc.Model(a.Model)
	if !ok {
		return // reported at the alias
	}
	if m.Kind != kind {
		c.errAt(p, "alias %q names %s model %q, but %s %s model is needed here", alias, m.Kind, m.ID, article(kind), kind)
	}
}

// fallbacks checks a list of fallback aliases (at is its path): the
// runtime's rules (none repeats or is the primary alias it stands in for),
// then each of the others resolves to a chat model.
func (c *checker) fallbacks(at []any, list []string, primary, primaryWords string) {
	field := at[len(at)-1].(string)
	bad := c.report(at[:len(at)-1], rules.Fallbacks(field, list, primary, primaryWords))
	for i, f := range list {
		if !bad[i] {
			c.alias(pathOf(append(slices.Clip(at), i)...), f, KindChat)
		}
	}
}

// report records, each at its place, the problems a rule of runtime/rules
// found in the element at at, and returns the indices of list entries it
// reported, which the caller need not check further.
func (c *checker) report(at []any, probs []rules.Problem) map[int]bool {
	bad := map[int]bool{}
	for _, p := range probs {
		var parts []any
		for _, part := range p.Path {
			switch part := part.(type) {
			case string:
				parts = append(parts, fieldPath(part)...)
			case int:
				parts = append(parts, part)
				bad[part] = true
			}
		}
		c.errAt(pathOf(append(slices.Clip(at), parts...)...), "%s", p.Msg)
	}
	return bad
}

func article(word string) string {
	if strings.ContainsRune("aeiou", rune(word[0])) {
		return "an"
	}
	return "a"
}

func (c *checker) ref(p cue.Path, what, name string, known []string) bool {
	if slices.Contains(known, name) {
		return true
	}
	c.errAt(p, "%s", unknownRef(what, name, known))
	return false
}

// list checks a list of references (at is its path): the runtime's rules
// (none repeats, none names self, the agent the list belongs to), then
// each of the others resolves.
func (c *checker) list(at []any, refs []string, what string, known []string, self string) {
	field := at[len(at)-1].(string)
	bad := c.report(at[:len(at)-1], rules.List(field, refs, what, self))
	for i, r := range refs {
		if !bad[i] {
			c.ref(pathOf(append(slices.Clip(at), i)...), what, r, known)
		}
	}
}

// --- check: rules between values that CUE cannot express.

func (c *checker) check() {
	d := c.doc
	for _, m := range d.Models {
		if m.Kind == KindEmbedding && m.Dimensions == 0 {
			c.errAt(pathOf("models", m.ID), "embedding model %q needs dimensions: the width of its vectors, which stores are created with", m.ID)
		}
		// A cached-input price is a discount: the budget holds the prompt
		// at the input price before the call, and a dearer cached price
		// would let the settled cost exceed that hold.
		if p := m.Cost.CachedInputPer1kUSD; p != nil && *p > m.Cost.InputPer1kUSD {
			c.errAt(pathOf("models", m.ID, "cost", "cachedInputPer1kUSD"), "cachedInputPer1kUSD %g is above inputPer1kUSD %g; cached input tokens are billed at a discount, and a budget reserves the prompt at the input price: lower it to at most %g, or remove it to bill cached tokens at the input price", *p, m.Cost.InputPer1kUSD, m.Cost.InputPer1kUSD)
		}
	}
	for _, b := range d.Budgets {
		// A limit the user wrote but the schema refused (maxUSD: 0) is set,
		// wrongly: the schema's error says so, at the value.
		written := func(f string) bool { return c.user.LookupPath(pathOf("budgets", b.Name, f)).Exists() }
		if b.MaxUSD == 0 && b.MaxTotalTokens == 0 && !written("maxUSD") && !written("maxTotalTokens") {
			c.errAt(pathOf("budgets", b.Name), "budget %q sets no limit; set maxUSD, maxTotalTokens or both", b.Name)
		}
		if _, err := kind.ParseWindow(b.Window, b.TimeZone); err != nil {
			field := "window"
			if b.Window == "" || strings.Contains(err.Error(), "time zone") {
				field = "timeZone"
			}
			c.errAt(pathOf("budgets", b.Name, field), "budget %q: %v", b.Name, err)
		}
		if b.AppliesTo == "all" && (b.Scope == "run" || b.Scope == "thread") {
			c.errAt(pathOf("budgets", b.Name, "appliesTo"), "budget %q applies to all calls, so it cannot be %s-scoped: a call need not belong to a %s; use scope \"key\", \"tenant\" or \"global\"", b.Name, b.Scope, b.Scope)
		}
	}
	for _, r := range d.RateLimits {
		at := pathOf("rateLimits", r.Name)
		if r.RequestsPerMinute == 0 && r.TokensPerMinute == 0 && !c.user.LookupPath(pathOf("rateLimits", r.Name, "requestsPerMinute")).Exists() && !c.user.LookupPath(pathOf("rateLimits", r.Name, "tokensPerMinute")).Exists() {
			c.errAt(at, "rate limit %q sets no limit; set requestsPerMinute, tokensPerMinute or both", r.Name)
		}
		if r.Model == "" {
			continue
		}
		if r.Scope != "model" {
			c.errAt(pathOf("rateLimits", r.Name, "model"), "rate limit %q is %s-scoped and names model %q; only a model-scoped limit names a model: set scope: \"model\" or remove model", r.Name, r.Scope, r.Model)
		} else if _, ok := d.Model(r.Model); !ok {
			c.errAt(pathOf("rateLimits", r.Name, "model"), "rate limit %q names model %q, which is not in models", r.Name, r.Model)
		}
	}
	for _, t := range d.Tools {
		c.report([]any{"tools", t.Name}, rules.ToolName(t.Name))
		c.schema(pathOf("tools", t.Name, "input"), t.Input, true)
	}
	for _, a := range d.Agents {
		c.agent(a)
	}
	for _, r := range d.Retrievers {
		for i, f := range r.Source.Files {
			if err := fileglob.Validate(f); err != nil {
				c.errAt(pathOf("retrievers", r.Name, "source", "files", i), "%v", err)
			}
		}
		for i, f := range r.Source.Exclude {
			if err := fileglob.Validate(f); err != nil {
				c.errAt(pathOf("retrievers", r.Name, "source", "exclude", i), "%v", err)
			}
		}
		// runtime/rules owns the ranking's rules, which the retriever
		// applies too; vet reports each at its field.
		c.report([]any{"retrievers", r.Name, "retrieval"}, rules.CheckRanking(r.Retrieval.rules()))
	}
	c.storeWidths()
	for _, e := range d.Evals {
		c.eval(e)
	}
	c.approvals()
	c.guardrails()
	c.keys()
}

// keys checks what the schema cannot say of the API keys: exactly one of
// secretEnv and secretSHA256, a role listed twice, and an admin key with a
// tenant, which would read as confined to
// it while an admin sees every tenant.
func (c *checker) keys() {
	for _, k := range c.doc.Keys {
		for i, r := range k.Roles {
			if slices.Index(k.Roles, r) < i {
				c.errAt(pathOf("keys", k.Name, "roles", i), "key %q lists role %q twice", k.Name, r)
			}
		}
		// A value the schema refused decodes as empty, and was written.
		written := func(f string) bool { return c.user.LookupPath(pathOf("keys", k.Name, f)).Exists() }
		if (k.SecretEnv != "" || written("secretEnv")) == (k.SecretSHA256 != "" || written("secretSHA256")) {
			c.errAt(pathOf("keys", k.Name), "key %q needs exactly one of secretEnv (the variable holding its secret) and secretSHA256 (the secret's SHA-256 in hex)", k.Name)
		}
		if k.Tenant != "" && slices.Contains(k.Roles, "admin") {
			c.errAt(pathOf("keys", k.Name, "tenant"), "key %q is an admin, which sees every tenant: remove its tenant, or give it the roles it needs within %q instead of admin", k.Name, k.Tenant)
		}
	}
}

// approvals checks the approval policy with the runtime's own rule
// (policy.Check) and reports each problem at the rule's field, or at the
// tool's approval.
func (c *checker) approvals() {
	d := c.doc
	var p policy.Policy
	if a := d.Approvals; a != nil {
		p.Default = policy.Action(a.Default)
		for _, r := range a.Rules {
			p.Rules = append(p.Rules, policy.Rule{Tool: r.Tool, When: r.When, Action: policy.Action(r.Action), Reason: r.Reason})
		}
	}
	var tools []policy.Tool
	for _, t := range d.Tools {
		tools = append(tools, governed(t)...)
	}
	for _, pr := range policy.Check(p, tools, cel.Language{}) {
		switch {
		case pr.Rule >= 0:
			c.errAt(pathOf("approvals", "rules", pr.Rule, pr.Field), "approval rule %d: %s", pr.Rule+1, pr.Message)
		case pr.Tool != "":
			c.errAt(pathOf("tools", pr.Tool, "approval"), "%s", pr.Message)
		default:
			c.errAt(pathOf("approvals", pr.Field), "%s", pr.Message)
		}
	}
}

// governed returns the tools the policy governs for the declaration t:
// itself, or the tools its kind imports (kind.Info.Tools), named when the
// file names them and otherwise stood for by the declaration, unlisted.
func governed(t *Tool) []policy.Tool {
	one := []policy.Tool{{Name: t.Name, Approval: t.Approval}}
	if t.Implementation == nil {
		return one
	}
	info, ok := kind.Lookup(kind.Tools, t.Implementation.Kind)
	if !ok {
		return one
	}
	names, imports := info.Tools(t.Implementation.Config)
	if !imports {
		return one
	}
	if len(names) == 0 {
		return []policy.Tool{{Name: t.Name, Approval: t.Approval, From: t.Name, Unlisted: true}}
	}
	out := make([]policy.Tool, len(names))
	for i, n := range names {
		out[i] = policy.Tool{Name: n, Approval: t.Approval, From: t.Name}
	}
	return out
}

// storeWidths checks that the retrievers writing into one store embed with
// one width: a store's vectors all have the width it was created with, so
// a second width would fail at the first insert, or worse, be compared
// with vectors of another model.
func (c *checker) storeWidths() {
	var writes []rules.StoreWrite
	var at []*Retriever
	for _, r := range c.doc.Retrievers {
		m := c.model(r.EmbedModel)
		if m == nil || m.Kind != KindEmbedding || m.Dimensions == 0 {
			continue // reported at the alias or the model
		}
		writes = append(writes, rules.StoreWrite{Retriever: r.Name, Store: r.Store, Model: m.ID, Width: m.Dimensions})
		at = append(at, r)
	}
	_, refused := rules.StoreWidths(writes)
	for i, r := range at {
		if msg, ok := refused[i]; ok {
			c.errAt(pathOf("retrievers", r.Name, "embedModel"), "%s", msg)
		}
	}
}

// agentRules is what runtime/rules reads of an agent, and what it needs to
// know of the document: the chat model behind each alias, and which names
// are declared.
func (c *checker) agentRules(a *Agent) (rules.Agent, rules.Known) {
	ra := rules.Agent{
		Name: a.Name, Model: a.Model, Ladder: a.Ladder, Fallbacks: a.Fallbacks,
		Degrade: a.OnBudgetExhausted == OnBudgetDegrade, Budget: a.Budget,
		Tools: a.Tools, Handoffs: a.Handoffs, Delegates: a.Delegates, Retrievers: a.Retrievers,
		Skills: a.Skills, Output: len(a.Output) > 0,
	}
	if a.Memory != nil && a.Memory.Thread != nil {
		ra.ThreadTokenBudget = a.Memory.Thread.TokenBudget
	}
	if cp := a.Compaction; cp != nil {
		ra.Compaction = &rules.Compaction{Trigger: cp.Trigger, KeepTurns: cp.KeepTurns, Model: cp.Model, SummaryTokens: cp.SummaryTokens}
	}
	d := c.doc
	known := rules.Known{
		Model: func(alias string) (rules.Model, bool) {
			m := c.model(alias)
			if m == nil || m.Kind != KindChat {
				return rules.Model{}, false // reported by resolve
			}
			return rules.Model{ID: m.ID, Price: rules.Price{Input: m.Cost.InputPer1kUSD, Output: m.Cost.OutputPer1kUSD}, ContextWindow: m.ContextWindow, MaxOutputTokens: m.MaxOutputTokens}, true
		},
		Tool:      func(n string) bool { _, ok := d.Tool(n); return ok },
		Agent:     func(n string) bool { _, ok := d.Agent(n); return ok },
		Retriever: func(n string) bool { _, ok := d.Retriever(n); return ok },
	}
	return ra, known
}

func (c *checker) agent(a *Agent) {
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"agents", a.Name}, parts...)...) }
	switch {
	case a.Instructions == "" && a.InstructionsFile == "":
		c.errAt(at(), "agent %q has no instructions; set instructions or instructionsFile", a.Name)
	case a.Instructions != "" && a.InstructionsFile != "":
		c.errAt(at("instructionsFile"), "set either instructions or instructionsFile, not both")
	}

	// The runtime's rules between the agent's values: the ladder, degrade,
	// the thread's fit in every window, the tools it generates. (Repeats,
	// self-references and fallbacks are checked by resolve, with the
	// references.)
	ra, known := c.agentRules(a)
	c.report([]any{"agents", a.Name}, slices.Concat(rules.Ladder(ra, known), rules.Degrade(ra), rules.ThreadBudget(ra, known), rules.CompactionPolicy(ra, known), rules.GeneratedTools(ra, known)))
	if cp := a.Compaction; cp != nil {
		c.alias(at("compaction", "model"), cp.Model, KindChat)
	}

	// Capabilities: every model the agent may run on, its fallbacks
	// included, must support what the agent asks of it. Each alias is
	// judged once, at its first place.
	type place struct {
		alias string
		path  cue.Path
	}
	var places []place
	seen := map[string]bool{}
	add := func(alias string, p cue.Path) {
		if !seen[alias] {
			seen[alias] = true
			places = append(places, place{alias, p})
		}
	}
	add(a.Model, at("model"))
	for i, r := range a.Ladder {
		add(r, at("ladder", i))
	}
	for i, f := range a.Fallbacks {
		add(f, at("fallbacks", i))
	}
	needs := rules.Needs(ra)
	for _, pl := range places {
		m := c.model(pl.alias)
		if m == nil || m.Kind != KindChat {
			continue // reported by resolve
		}
		for _, capability := range needs {
			if !m.Has(capability) {
				c.errAt(pl.path, "alias %q (model %q) lacks capability %q, which the agent needs (%s); pick a model that has it or add it to the model's capabilities", pl.alias, m.ID, capability, rules.Why(capability))
			}
		}
	}

	// A temperature that a model's provider cannot send would be dropped
	// on every call that model answers.
	if a.Temperature != nil {
		for _, pl := range places {
			m := c.model(pl.alias)
			if m == nil {
				continue
			}
			p, ok := c.doc.Provider(m.Provider)
			if !ok {
				continue
			}
			if info, ok := kind.Lookup(kind.Providers, p.Kind); ok && info.NoSampling {
				c.errAt(at("temperature"), "alias %q (model %q) is served by provider %q of kind %q, whose API takes no sampling parameters: the temperature would not be sent; remove it, or run the agent on models of another provider", pl.alias, m.ID, p.Name, p.Kind)
			}
		}
	}

	if len(a.Output) > 0 {
		c.schema(at("output"), a.Output, false)
	}
}

func (c *checker) model(alias string) *Model {
	m, _ := c.doc.Resolve(alias)
	return m
}

// --- deferred: kinds the schema accepts but that are not built.

// deferredDefs names the schema's #Deferred definitions, what a kind of
// each is called in messages, and what to use instead. The words are the
// runtime's: lowering and its constructors refuse the same kinds with a
// *kind.DeferredError saying "<feature> is not built yet", and a test in
// the module root holds the lists and the wording to one. The deferred
// kinds of an extension point (point) are runtime/kind's list; the others
// (retriever sources, chunking, reranking) are read from the schema.
var deferredDefs = []deferredDef{
	{"#DeferredProviderKind", "provider kind", `use kind "openai-compatible" if its endpoint speaks the OpenAI API`, kind.Providers},
	{"#DeferredStoreKind", "store kind", "use " + quotedOr(kind.Names(kind.Stores)), kind.Stores},
	{"#DeferredSourceKind", "retriever source kind", `ingest files: kind "files" with files: ["<glob>"]`, ""},
	{"#DeferredChunkingStrategy", "chunking strategy", `use "fixed"`, ""},
	{"#DeferredRerankKind", "rerank kind", `use "lexical" or "none"`, ""},
}

// deferredDef is one #Deferred definition: its name, what its kinds are
// called, what to use instead, and the extension point whose kinds it
// lists, if any.
type deferredDef struct {
	name, what, use string
	point           kind.Point
}

// quotedOr writes names as "a", "b" or "c".
func quotedOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// deferred reports, at its place, every kind the schema accepts only so
// that it can be named here: Principle 3, a feature that is not built
// fails with an error naming itself.
func (c *checker) deferred() {
	d := c.doc
	report := func(def string, p cue.Path, name string) {
		dd := deferredDefs[slices.IndexFunc(deferredDefs, func(x deferredDef) bool { return x.name == def })]
		deferred := slices.Contains(c.sc.deferred[dd.name], name)
		if dd.point != "" {
			deferred = kind.IsDeferred(dd.point, name)
		}
		if deferred {
			c.errAt(p, "%s %q is not built yet; %s", dd.what, name, dd.use)
		}
	}
	for _, p := range d.Providers {
		report("#DeferredProviderKind", pathOf("providers", p.Name, "kind"), p.Kind)
	}
	for _, s := range d.Stores {
		report("#DeferredStoreKind", pathOf("stores", s.Name, "kind"), s.Kind)
	}
	// A tool kind that is deferred (none is, today) is reported the same
	// way, from runtime/kind's list, whatever definition the schema
	// accepts it through.
	for _, t := range d.Tools {
		if i := t.Implementation; i != nil && kind.IsDeferred(kind.Tools, i.Kind) {
			c.errAt(pathOf("tools", t.Name, "implementation", "kind"), "%s kind %q is not built yet; use %s", kind.Tools, i.Kind, quotedOr(kind.Names(kind.Tools)))
		}
	}
	for _, r := range d.Retrievers {
		report("#DeferredSourceKind", pathOf("retrievers", r.Name, "source", "kind"), r.Source.Kind)
		report("#DeferredChunkingStrategy", pathOf("retrievers", r.Name, "chunking", "strategy"), r.Chunking.Strategy)
		report("#DeferredRerankKind", pathOf("retrievers", r.Name, "rerank"), r.Rerank)
	}
}

// --- files: every file the IR names exists, relative to the IR file.

func (c *checker) files() {
	d := c.doc
	for _, p := range d.Providers {
		c.kindFiles(kind.Providers, p.Kind, p.Config, "providers", p.Name)
	}
	for _, s := range d.Stores {
		c.kindFiles(kind.Stores, s.Kind, s.Config, "stores", s.Name)
	}
	for _, r := range d.Resources {
		c.kindFiles(kind.Resources, r.Kind, r.Config, r.Kind, r.Name)
	}
	for _, t := range d.Tools {
		if i := t.Implementation; i != nil {
			c.kindFiles(kind.Tools, i.Kind, i.Config, "tools", t.Name, "implementation")
		}
	}
	for _, a := range d.Agents {
		if a.InstructionsFile == "" {
			continue
		}
		p := pathOf("agents", a.Name, "instructionsFile")
		if full, ok := c.file(p, a.InstructionsFile); ok {
			b, err := os.ReadFile(full)
			switch {
			case err != nil:
				c.errAt(p, "reading instructions: %v", err)
			case len(bytes.TrimSpace(b)) == 0:
				c.errAt(p, "instructions file %q is empty", a.InstructionsFile)
			default:
				a.Instructions = string(b)
			}
		}
	}
	for _, r := range d.Retrievers {
		for i, pattern := range r.Source.Files {
			if fileglob.Validate(pattern) != nil {
				continue // reported by check
			}
			// An invalid exclude is reported by check, at itself; the others
			// still apply, so that this pattern is judged on what it adds.
			exclude := slices.DeleteFunc(slices.Clone(r.Source.Exclude), func(e string) bool { return fileglob.Validate(e) != nil })
			got, err := fileglob.Expand(d.Dir, []string{pattern}, exclude)
			switch {
			case err != nil:
				c.errAt(pathOf("retrievers", r.Name, "source", "files", i), "expanding %q: %v", pattern, err)
			case len(got) == 0:
				c.errAt(pathOf("retrievers", r.Name, "source", "files", i), "pattern %q matches no file under %s", pattern, displayDir(d.Dir))
			}
		}
	}
	for _, e := range d.Evals {
		// A "runs" source has no dataset file: its cases are sampled when
		// the eval runs; nor do cases sampled with aidgen eval --from-runs.
		if e.Dataset != "" && !c.casesFromRuns {
			c.file(pathOf("evals", e.Name, "dataset"), e.Dataset)
		}
		if r := e.FromRuns; r != nil && r.File != "" {
			c.file(pathOf("evals", e.Name, "fromRuns", "file"), r.File)
		}
		if j := e.Judge; j != nil && j.Calibration != nil {
			c.file(pathOf("evals", e.Name, "judge", "calibration", "labels"), j.Calibration.Labels)
		}
		for _, name := range slices.Sorted(maps.Keys(e.Tools)) {
			if f := e.Tools[name].Fixture; f != "" {
				c.file(pathOf("evals", e.Name, "tools", name, "fixture"), f)
			}
		}
		if e.Baseline != "" {
			p := pathOf("evals", e.Name, "baseline")
			if c.relative(p, e.Baseline) {
				dir := filepath.Dir(filepath.Join(d.Dir, filepath.FromSlash(e.Baseline)))
				if st, err := os.Stat(dir); err != nil || !st.IsDir() {
					c.errAt(p, "the baseline's directory %s does not exist; create it", displayDir(dir))
				}
			}
		}
	}
}

// kindFiles checks the files the block cfg of an element of the named kind
// names (kind.Info.Files), the element being at the path at.
func (c *checker) kindFiles(p kind.Point, name string, cfg Config, at ...any) {
	info, _ := c.kinds.lookup(p, name)
	for _, f := range info.Files {
		if v, ok := cfg.String(f); ok {
			c.file(pathOf(append(slices.Clip(at), fieldPath(f)...)...), v)
		}
	}
}

// file checks that name, relative to the IR file, is an existing regular
// file, and returns its path.
func (c *checker) file(p cue.Path, name string) (string, bool) {
	if !c.relative(p, name) {
		return "", false
	}
	full := filepath.Join(c.doc.Dir, filepath.FromSlash(name))
	st, err := os.Stat(full)
	switch {
	case err != nil && errors.Is(err, fs.ErrNotExist):
		c.errAt(p, "file %q does not exist (paths are relative to %s)", name, displayDir(c.doc.Dir))
		return "", false
	case err != nil:
		c.errAt(p, "file %q: %v", name, err)
		return "", false
	case !st.Mode().IsRegular():
		c.errAt(p, "%q is not a regular file", name)
		return "", false
	}
	return full, true
}

func (c *checker) relative(p cue.Path, name string) bool {
	if filepath.IsAbs(name) || strings.HasPrefix(name, "/") {
		c.errAt(p, "path %q is absolute; write it relative to the IR file so the app is portable", name)
		return false
	}
	return true
}

func displayDir(dir string) string {
	if dir == "." || dir == "" {
		return "the current directory"
	}
	return dir
}

// modelAPI checks that a model calling the Responses API is served only by
// openai-compatible providers, the one kind that speaks it.
func (c *checker) modelAPI(m *Model) {
	if m.API != "responses" {
		return
	}
	routes := m.Routes()
	if routes == nil {
		routes = []Deployment{{Provider: m.Provider}}
	}
	for _, r := range routes {
		p, ok := c.doc.Provider(r.Provider)
		if ok && p.Kind != kind.ProviderOpenAICompatible {
			c.errAt(pathOf("models", m.ID, "api"), "model %q has api \"responses\", but provider %q is of kind %q, which does not speak the Responses API; only an openai-compatible provider does: serve the model from one, or remove api", m.ID, p.Name, p.Kind)
		}
	}
}

// deployments checks a model's deployments: each names a declared
// provider, their names (the provider's by default) are distinct, and a
// cool-down is longer than zero.
func (c *checker) deployments(m *Model, providers []string) {
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"models", m.ID}, parts...)...) }
	for i, d := range m.Deployments {
		if !slices.Contains(providers, d.Provider) {
			c.errAt(at("deployments", i, "provider"), "%s", unknownRef("provider", d.Provider, providers))
		}
	}
	routes := m.Routes()
	deps := make([]rules.Deployment, len(routes))
	for i, d := range routes {
		deps[i] = rules.Deployment{Name: d.Name, Provider: d.Provider}
	}
	for _, p := range rules.Deployments(deps) {
		c.errAt(at("deployments"), "%s", p.Msg)
	}
	if m.CoolDown != nil && *m.CoolDown <= 0 {
		c.errAt(at("coolDown"), "coolDown must be longer than zero")
	}
}
