package ir

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"time"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/internal/fileglob"
	"github.com/aidgen/aid/runtime/agents/policy"
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
	for _, pr := range policy.Check(p, tools) {
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
	first := map[string]*Retriever{} // store → the first retriever (by name) writing into it
	for _, r := range c.doc.Retrievers {
		m := c.model(r.EmbedModel)
		if m == nil || m.Kind != KindEmbedding || m.Dimensions == 0 {
			continue // reported at the alias or the model
		}
		f, ok := first[r.Store]
		if !ok {
			first[r.Store] = r
			continue
		}
		if fm := c.model(f.EmbedModel); fm.Dimensions != m.Dimensions {
			c.errAt(pathOf("retrievers", r.Name, "embedModel"), "retriever %q writes %d-wide vectors (model %q) into store %q, where retriever %q writes %d-wide ones (model %q); a store holds one width: embed with a model of width %d, or give this retriever its own store", r.Name, m.Dimensions, m.ID, r.Store, f.Name, fm.Dimensions, fm.ID, fm.Dimensions)
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
		Output: len(a.Output) > 0,
	}
	if a.Memory != nil && a.Memory.Thread != nil {
		ra.ThreadTokenBudget = a.Memory.Thread.TokenBudget
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
	c.report([]any{"agents", a.Name}, slices.Concat(rules.Ladder(ra, known), rules.Degrade(ra), rules.ThreadBudget(ra, known), rules.GeneratedTools(ra, known)))

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

func (c *checker) eval(e *Eval) {
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"evals", e.Name}, parts...)...) }
	t := e.Target
	switch {
	case t.Agent == "" && t.Model == "" && t.Retriever == "":
		c.errAt(at("target"), "target names nothing; set agent, model with a prompt, or retriever")
	case t.Agent != "" && t.Model != "":
		c.errAt(at("target", "model"), "target names both agent %q and model %q; keep one", t.Agent, t.Model)
	case t.Retriever != "" && (t.Agent != "" || t.Model != ""):
		c.errAt(at("target", "retriever"), "target names retriever %q and %s too; keep one", t.Retriever, oneTarget(t))
	case t.Retriever != "" && (t.Prompt != "" || t.System != "" || len(t.Fallbacks) > 0):
		c.errAt(at("target"), "prompt, system and fallbacks apply to a model target; a retriever target searches each case's input as it is")
	case t.Retriever == "" && t.K != 0:
		c.errAt(at("target", "k"), "k applies to a retriever target; remove it")
	case t.Agent != "" && (t.Prompt != "" || t.System != ""):
		c.errAt(at("target"), "prompt and system apply to a model target; an agent target uses the agent's instructions")
	case t.Agent != "" && len(t.Fallbacks) > 0:
		c.errAt(at("target", "fallbacks"), "fallbacks apply to a model target; an agent target falls back as the agent does: set fallbacks on agent %q", t.Agent)
	case t.Model != "" && t.Prompt == "":
		c.errAt(at("target"), "a model target needs a prompt, such as \"{{.Input}}\"")
	}
	if t.Prompt != "" {
		if err := checkPrompt(t.Prompt); err != nil {
			c.errAt(at("target", "prompt"), "%v", err)
		}
	}

	for i, m := range e.Metrics {
		if j := slices.Index(e.Metrics, m); j < i {
			c.errAt(at("metrics", i), "metric %q is listed twice", m)
		}
	}
	c.rankedMetrics(e)
	c.evalTools(e)
	c.fromRuns(e)
	if slices.Contains(e.Metrics, MetricLLMJudge) && e.Judge == nil {
		c.errAt(at("metrics", slices.Index(e.Metrics, MetricLLMJudge)), "metric \"llm_judge\" needs a judge: set judge: {model: \"<alias>\", rubric: \"...\"}")
	}
	if e.Judge != nil && !slices.Contains(e.Metrics, MetricLLMJudge) {
		c.errAt(at("judge"), "judge is set but metrics do not include \"llm_judge\"; add it or remove judge")
	}
	if slices.Contains(e.Metrics, MetricJSONSchemaValid) && len(e.Schema) == 0 {
		if a, ok := c.doc.Agent(t.Agent); ok && len(a.Output) > 0 {
			e.Schema = a.Output
		} else {
			c.errAt(at("metrics", slices.Index(e.Metrics, MetricJSONSchemaValid)), "metric \"json_schema_valid\" needs a schema: set schema, or target an agent with an output schema")
		}
	} else if len(e.Schema) > 0 {
		c.schema(at("schema"), e.Schema, false)
	}

	var gated []string
	for i, th := range e.Thresholds {
		c.heldThreshold(at("thresholds", i), th)
		p := at("thresholds", i, "metric")
		switch {
		case ModelDerivedMetric(th.Metric) && (e.Judge == nil || e.Judge.Calibration == nil):
			c.errAt(p, "metric %q is model-derived (an LLM judge) and gates only when calibrated against human labels: declare judge: calibration: {labels: \"<labels>.jsonl\"} in eval %q, or remove this threshold", th.Metric, e.Name)
		case !slices.Contains(e.Metrics, th.Metric):
			c.errAt(p, "threshold on metric %q, which the eval does not measure; add it to metrics (%s)", th.Metric, strings.Join(e.Metrics, ", "))
		case slices.Contains(gated, th.Metric):
			c.errAt(p, "metric %q is gated twice; merge the thresholds", th.Metric)
		}
		gated = append(gated, th.Metric)
	}
	if len(e.Thresholds) > 0 && e.Baseline == "" {
		c.errAt(at("thresholds"), "thresholds compare against a baseline, but baseline is not set; set baseline: \"<file>.json\" and create it with aidgen eval --update-baseline")
	}
}

// fromRuns checks a "runs" source: one place the runs come from, times
// that parse, patterns that compile.
func (c *checker) fromRuns(e *Eval) {
	r := e.FromRuns
	if r == nil {
		return
	}
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"evals", e.Name, "fromRuns"}, parts...)...) }
	if r.File == "" && r.DSNEnv == "" {
		c.errAt(at(), "fromRuns names no runs: set file: \"<runs>.jsonl\" (aidgen run --record logs) or dsnEnv: \"<VAR>\" (the PostgreSQL run store's DSN)")
	}
	var since, until time.Time
	for _, f := range []struct {
		name, v string
		dst     *time.Time
	}{{"since", r.Since, &since}, {"until", r.Until, &until}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, f.v)
		if err != nil {
			c.errAt(at(f.name), "%s %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", f.name, f.v)
			continue
		}
		*f.dst = t
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		c.errAt(at("until"), "until %s is not after since %s: no run could be kept", r.Until, r.Since)
	}
	for i, p := range r.Redact {
		if _, err := regexp.Compile(p); err != nil {
			c.errAt(at("redact", i), "redact pattern %q: %v", p, err)
		}
	}
}

// evalTools checks what an eval says its tools do: each names a declared
// tool its target agent can call, and every tool that writes which the
// target can call (itself, or through the agents it hands off or delegates
// to) has a declared mode, so that an eval never changes the world unless
// it says so. An mcp tool that leaves its effects to the server is checked
// when the eval runs, once the server has said.
func (c *checker) evalTools(e *Eval) {
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"evals", e.Name}, parts...)...) }
	if e.Target.Agent == "" {
		if len(e.Tools) > 0 {
			c.errAt(at("tools"), "tools apply to an agent target, whose runs call them; remove tools")
		}
		return
	}
	if _, ok := c.doc.Agent(e.Target.Agent); !ok {
		return // reported with the target
	}
	via := c.doc.reachableTools(e.Target.Agent)
	for _, name := range slices.Sorted(maps.Keys(e.Tools)) {
		if _, ok := c.doc.Tool(name); !ok {
			c.errAt(at("tools", name), "tool %q is not declared; declared tools: %s", name, strings.Join(names(c.doc.Tools), ", "))
			continue
		}
		if _, ok := via[name]; !ok {
			c.errAt(at("tools", name), "target agent %q cannot call tool %q, itself or through its handoffs and delegates; remove it", e.Target.Agent, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(via)) {
		t, ok := c.doc.Tool(name)
		if !ok || t.Effects != "write" {
			continue
		}
		if _, ok := e.Tools[name]; ok {
			continue
		}
		through := ""
		if via[name] != e.Target.Agent {
			through = fmt.Sprintf(" (through agent %q)", via[name])
		}
		c.errAt(at("target", "agent"), "target agent %q can call tool %q%s, which writes (effects: \"write\"); an eval stubs a tool that writes and needs its answers: declare tools: %s: {mode: \"stub\", fixture: \"<rows>.json\"} in eval %q (or result: <JSON>, or mode: \"stub\" with each case's answers in the dataset's \"tools\"), or mode: \"live\" to let the eval call it", e.Target.Agent, name, through, name, e.Name)
	}
}

// reachableTools returns the tools agent can call, itself or through the
// agents it hands off or delegates to, each with the first agent found to
// offer it.
func (d *Document) reachableTools(agent string) map[string]string {
	via := map[string]string{}
	seen := map[string]bool{}
	queue := []string{agent}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		a, ok := d.Agent(name)
		if seen[name] || !ok {
			continue
		}
		seen[name] = true
		for _, t := range a.Tools {
			if _, ok := via[t]; !ok {
				via[t] = name
			}
		}
		queue = append(queue, a.Handoffs...)
		queue = append(queue, a.Delegates...)
	}
	return via
}

// rankedMetrics checks that ranked-set metrics and retriever targets go
// together: a ranked metric scores a ranking, which only a retriever target
// answers with, and a retriever's ranking is no answer text for the other
// metrics. A cutoff beyond what the target retrieves would read ranks that
// are never there, so recall@10 over 4 hits is refused rather than
// reported as a recall it is not.
func (c *checker) rankedMetrics(e *Eval) {
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"evals", e.Name}, parts...)...) }
	t := e.Target
	retrieved := t.K
	if r, ok := c.doc.Retriever(t.Retriever); ok && retrieved == 0 {
		retrieved = r.TopK
	}
	for i, m := range e.Metrics {
		_, k, ranked := RankedMetric(m)
		switch {
		case ranked && t.Retriever == "":
			c.errAt(at("metrics", i), "metric %q scores a retriever's ranking; target a retriever (target: retriever: \"<name>\") or use an answer metric", m)
		case !ranked && t.Retriever != "":
			c.errAt(at("metrics", i), "metric %q scores answer text, but a retriever target answers with a ranking; use recall@K, mrr@K or ndcg@K", m)
		case ranked && retrieved > 0 && k > retrieved:
			c.errAt(at("metrics", i), "metric %q reads %d ranks, but the target retrieves %d; lower the cutoff or set target k to at least %d", m, k, retrieved, k)
		}
	}
}

// oneTarget names the agent or model of a target, for an error.
func oneTarget(t Target) string {
	if t.Agent != "" {
		return fmt.Sprintf("agent %q", t.Agent)
	}
	return fmt.Sprintf("model %q", t.Model)
}

// heldThreshold validates a threshold as the eval runtime will hold it, in
// 64-bit floats, against #Threshold. The schema compares exact decimals,
// and a decimal inside an exclusive bound can round onto the bound
// (maxRegression: 0.99999999999999999999 is 1 as a float64, which the
// runtime refuses). Checking the held values against the schema keeps the
// bounds in one place.
func (c *checker) heldThreshold(p cue.Path, th Threshold) {
	held := c.ctx.Encode(th)
	err := c.loader.schema.LookupPath(cue.MakePath(cue.Def("#Threshold"))).Unify(held).Validate(cue.Concrete(true))
	for _, e := range cueerrors.Errors(err) {
		path := e.Path()
		if len(path) == 0 {
			continue
		}
		field := path[len(path)-1]
		fp := cue.MakePath(append(slices.Clone(p.Selectors()), cue.Str(field))...)
		want := "within the schema's bounds"
		if format, args := e.Msg(); format == cueOutOfBound && len(args) == 2 {
			if w := boundWords(fmt.Sprint(args[1])); w != "" {
				want = "a number " + w
			}
		}
		c.errAt(fp, "invalid value %v: a 64-bit float holds it as %v, and the eval runtime wants %s; write a value further inside the bound", c.user.LookupPath(fp), held.LookupPath(cue.MakePath(cue.Str(field))), want)
	}
}

// checkPrompt parses a prompt template and checks its structure against
// PromptData, so a misspelt field fails here rather than mid-eval. It does
// not execute the template: the keys of .Metadata belong to each case, and
// there is no case at vet time. Expected is deliberately absent from
// PromptData: a prompt must not leak the answer.
func checkPrompt(prompt string) error {
	tmpl, err := template.New("prompt").Parse(prompt)
	if err != nil {
		return fmt.Errorf("invalid prompt template: %w", err)
	}
	root := reflect.TypeFor[PromptData]()
	for _, t := range tmpl.Templates() {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		// A {{define}}d template is rendered with whatever dot its caller
		// passes, so only $ is known inside it.
		var dot reflect.Type
		if t.Name() == tmpl.Name() {
			dot = root
		}
		pc := promptChecker{tree: t.Tree, root: root}
		if err := pc.walk(t.Tree.Root, dot); err != nil {
			return fmt.Errorf("invalid prompt template: %w", err)
		}
	}
	return nil
}

// promptChecker walks a template's parse tree, tracking the type of dot
// (nil where it cannot be known, such as inside a value of .Metadata).
type promptChecker struct {
	tree *parse.Tree
	root reflect.Type
}

func (pc promptChecker) walk(n parse.Node, dot reflect.Type) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := pc.walk(c, dot); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		_, err := pc.pipe(n.Pipe, dot)
		return err
	case *parse.TemplateNode:
		_, err := pc.pipe(n.Pipe, dot)
		return err
	case *parse.IfNode:
		return pc.branch(&n.BranchNode, dot, func(reflect.Type) reflect.Type { return dot })
	case *parse.WithNode:
		return pc.branch(&n.BranchNode, dot, func(t reflect.Type) reflect.Type { return t })
	case *parse.RangeNode:
		return pc.branch(&n.BranchNode, dot, func(t reflect.Type) reflect.Type {
			if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
				return t.Elem()
			}
			return nil
		})
	}
	return nil
}

// branch checks an if, with or range: its pipeline, its body with the dot
// inner derives from the pipeline's type, and its else with the outer dot.
func (pc promptChecker) branch(b *parse.BranchNode, dot reflect.Type, inner func(reflect.Type) reflect.Type) error {
	t, err := pc.pipe(b.Pipe, dot)
	if err != nil {
		return err
	}
	if err := pc.walk(b.List, inner(t)); err != nil {
		return err
	}
	return pc.walk(b.ElseList, dot)
}

// pipe checks every field reference of a pipeline and returns the type of
// its value when that is a plain reference, nil otherwise.
func (pc promptChecker) pipe(p *parse.PipeNode, dot reflect.Type) (reflect.Type, error) {
	if p == nil {
		return nil, nil
	}
	var last reflect.Type
	for _, cmd := range p.Cmds {
		last = nil
		for _, arg := range cmd.Args {
			t, err := pc.arg(arg, dot)
			if err != nil {
				return nil, err
			}
			if len(cmd.Args) == 1 {
				last = t
			}
		}
	}
	if len(p.Cmds) != 1 {
		return nil, nil
	}
	return last, nil
}

func (pc promptChecker) arg(n parse.Node, dot reflect.Type) (reflect.Type, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.FieldNode:
		return pc.fields(n, dot, ".", n.Ident)
	case *parse.VariableNode:
		if n.Ident[0] != "$" {
			return nil, nil // a variable's type is not tracked
		}
		return pc.fields(n, pc.root, "$", n.Ident[1:])
	case *parse.ChainNode:
		t, err := pc.arg(n.Node, dot)
		if err != nil {
			return nil, err
		}
		return pc.fields(n, t, "("+n.Node.String()+")", n.Field)
	case *parse.PipeNode:
		return pc.pipe(n, dot)
	}
	return nil, nil
}

// fields follows a chain of field names from a value of type t (written
// as from), refusing a name the type cannot have.
func (pc promptChecker) fields(n parse.Node, t reflect.Type, from string, names []string) (reflect.Type, error) {
	for _, name := range names {
		if t == nil {
			return nil, nil
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := t.FieldByName(name)
			if !ok || !f.IsExported() {
				loc, _ := pc.tree.ErrorContext(n)
				whose := describeDot(from)
				if t == pc.root {
					whose = "the case"
				}
				msg := fmt.Sprintf("%s: %s has no field .%s", loc, whose, name)
				if s := suggest(name, fieldNames(t)); s != "" {
					msg += fmt.Sprintf(" (did you mean .%s?)", s)
				}
				if t == pc.root {
					msg += "; a prompt sees ." + strings.Join(fieldNames(t), ", .") + ", never the expected answer"
				}
				return nil, errors.New(msg)
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem() // any key may be in a case
			if t.Kind() == reflect.Interface {
				return nil, nil
			}
		case reflect.Interface:
			return nil, nil
		default:
			loc, _ := pc.tree.ErrorContext(n)
			return nil, fmt.Errorf("%s: %s is %s, which has no field .%s", loc, describeDot(from), kindWords(t), name)
		}
		if from == "." || from == "$" {
			from += name
		} else {
			from += "." + name
		}
	}
	return t, nil
}

// describeDot names the value a field was looked up on.
func describeDot(from string) string {
	if from == "." {
		return "dot"
	}
	return from
}

func fieldNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		out = append(out, t.Field(i).Name)
	}
	return out
}

func kindWords(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	return "a " + t.String()
}

// PromptData is what a model target's prompt template is rendered with.
type PromptData struct {
	// ID is the case id.
	ID string
	// Input is the case input.
	Input string
	// Tags are the case tags.
	Tags []string
	// Metadata is the case metadata.
	Metadata map[string]any
}

func (c *checker) model(alias string) *Model {
	m, _ := c.doc.Resolve(alias)
	return m
}

// --- deferred: kinds the schema accepts but that are not built.

// deferredDefs names the schema's #Deferred definitions, what a kind of
// each is called in messages, and what to use instead. The words are the
// runtime's: lowering and its constructors refuse the same kinds with a
// *gateway.DeferredError saying "<feature> is not built yet", and a test in
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
	var seen []string
	for _, d := range m.Routes() {
		name := cmp.Or(d.Name, d.Provider)
		if slices.Contains(seen, name) {
			c.errAt(at("deployments"), "deployment %q is declared twice", name)
		}
		seen = append(seen, name)
	}
	if m.CoolDown != nil && *m.CoolDown <= 0 {
		c.errAt(at("coolDown"), "coolDown must be longer than zero")
	}
}
