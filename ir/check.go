package ir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/internal/fileglob"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/retrieval"
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

// fallbacks checks a list of fallback aliases: each resolves to a chat
// model, and none repeats or is the primary alias it stands in for, which
// the gateway would only try again after it failed.
func (c *checker) fallbacks(at []any, list []string, primary, primaryWords string) {
	for i, f := range list {
		p := pathOf(append(slices.Clip(at), i)...)
		switch {
		case f == primary:
			c.errAt(p, "fallback %q is %s, which the fallbacks stand in for when it fails; remove it or name another alias", f, primaryWords)
		case slices.Index(list, f) < i:
			c.errAt(p, "fallback %q is listed twice; remove this entry", f)
		default:
			c.alias(p, f, KindChat)
		}
	}
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

// list checks a list of references: each resolves, none repeats, and none
// names self (an agent handing off to or delegating to itself).
func (c *checker) list(at []any, refs []string, what string, known []string, self string) {
	for i, r := range refs {
		p := pathOf(append(slices.Clip(at), i)...)
		if self != "" && r == self {
			c.errAt(p, "agent %q cannot name itself: an agent on the path is never re-entered; remove %q", self, r)
			continue
		}
		if j := slices.Index(refs, r); j < i {
			c.errAt(p, "%s %q is listed twice; remove this entry", what, r)
			continue
		}
		c.ref(p, what, r, known)
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
	}
	for _, t := range d.Tools {
		if len(t.Name) > maxToolName {
			c.errAt(pathOf("tools", t.Name), "tool name %q has %d characters; the model API accepts function names of at most %d: shorten it", t.Name, len(t.Name), maxToolName)
		}
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
		// The runtime owns the ranking's rules; vet reports each at its
		// field.
		if err := Ranking(r.Retrieval).Check(); err != nil {
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				p := pathOf("retrievers", r.Name, "retrieval")
				var re *retrieval.RankingError
				if errors.As(e, &re) {
					p = pathOf("retrievers", r.Name, "retrieval", re.Field)
				}
				c.errAt(p, "%v", e)
			}
		}
	}
	c.storeWidths()
	for _, e := range d.Evals {
		c.eval(e)
	}
	c.approvals()
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
	tools := make([]policy.Tool, len(d.Tools))
	for i, t := range d.Tools {
		tools[i] = policy.Tool{Name: t.Name, Approval: t.Approval}
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

// maxToolName is the longest tool name the model API accepts: OpenAI's
// function names match ^[a-zA-Z0-9_-]{1,64}$, whose characters #Name
// already keeps to. The rule lives here, once, for declared tools and for
// the tools the runtime generates from agent and retriever names.
const maxToolName = 64

// The tools the agent runtime generates for an agent, named after what
// they reach: the contract with runtime/agents, stated in schema.cue.
const (
	transferPrefix = "transfer_to_" // one per handoff: transfer_to_<agent>
	delegatePrefix = "delegate_to_" // one per delegate: delegate_to_<agent>
	searchPrefix   = "search_"      // one per retriever: search_<retriever>
)

// generatedTools checks the tools the runtime generates for an agent: each
// name fits maxToolName, and no declared tool the agent lists takes one
// of them, which would leave the model two tools of one name.
func (c *checker) generatedTools(a *Agent) {
	generated := map[string]string{} // tool name → what the runtime generates it for
	gen := func(field string, refs []string, prefix, what, kind string, known func(string) bool) {
		for i, r := range refs {
			if slices.Index(refs, r) != i || r == a.Name || !known(r) {
				continue // reported by resolve
			}
			name := prefix + r
			generated[name] = fmt.Sprintf("%s %q", what, r)
			if len(name) > maxToolName {
				c.errAt(pathOf("agents", a.Name, field, i), "the runtime offers %s %q to the model as tool %q, %d characters, but the model API accepts function names of at most %d: shorten the %s's name to at most %d characters", what, r, name, len(name), maxToolName, kind, maxToolName-len(prefix))
			}
		}
	}
	isAgent := func(n string) bool { _, ok := c.doc.Agent(n); return ok }
	isRetriever := func(n string) bool { _, ok := find(c.doc.Retrievers, n); return ok }
	gen("handoffs", a.Handoffs, transferPrefix, "the handoff to agent", "agent", isAgent)
	gen("delegates", a.Delegates, delegatePrefix, "the delegate", "agent", isAgent)
	gen("retrievers", a.Retrievers, searchPrefix, "the search of retriever", "retriever", isRetriever)
	for i, t := range a.Tools {
		if what, ok := generated[t]; ok {
			if _, declared := find(c.doc.Tools, t); declared {
				c.errAt(pathOf("agents", a.Name, "tools", i), "tool %q has the name the runtime gives the tool for %s, so the model would see two tools of one name; rename the declared tool", t, what)
			}
		}
	}
}

func (c *checker) agent(a *Agent) {
	at := func(parts ...any) cue.Path { return pathOf(append([]any{"agents", a.Name}, parts...)...) }
	switch {
	case a.Instructions == "" && a.InstructionsFile == "":
		c.errAt(at(), "agent %q has no instructions; set instructions or instructionsFile", a.Name)
	case a.Instructions != "" && a.InstructionsFile != "":
		c.errAt(at("instructionsFile"), "set either instructions or instructionsFile, not both")
	}

	// The ladder: the model is on it, rungs resolve once, and each rung is
	// strictly cheaper than the one above, so stepping down saves money.
	if len(a.Ladder) > 0 && !slices.Contains(a.Ladder, a.Model) {
		c.errAt(at("ladder"), "the ladder must contain the agent's model %q; add it at its rung", a.Model)
	}
	for i, r := range a.Ladder {
		if j := slices.Index(a.Ladder, r); j < i {
			c.errAt(at("ladder", i), "alias %q is on the ladder twice; each rung is one alias", r)
			continue
		}
		if i == 0 {
			continue
		}
		above, below := c.model(a.Ladder[i-1]), c.model(r)
		if above == nil || below == nil || cheaper(below.Cost, above.Cost) {
			continue
		}
		// Say what can fix it: swapping works only when the rung above is
		// the cheaper one; equal or crossed prices need another model.
		var fix string
		switch {
		case cheaper(above.Cost, below.Cost):
			fix = fmt.Sprintf("order the ladder from most to least expensive: put %q above %q", r, a.Ladder[i-1])
		case below.Cost.InputPer1kUSD == above.Cost.InputPer1kUSD && below.Cost.OutputPer1kUSD == above.Cost.OutputPer1kUSD:
			fix = fmt.Sprintf("the two cost the same, so stepping down saves nothing in either order: remove one of them, or make this rung an alias of a model cheaper than %q", a.Ladder[i-1])
		default:
			fix = fmt.Sprintf("one is cheaper on input and the other on output, so neither order makes a step down cheaper: remove this rung, or make it an alias of a model cheaper than %q on both prices", a.Ladder[i-1])
		}
		c.errAt(at("ladder", i), "rung %q (%s) is not strictly cheaper than the rung above it, %q (%s); %s", r, price(below.Cost), a.Ladder[i-1], price(above.Cost), fix)
	}
	if a.OnBudgetExhausted == OnBudgetDegrade {
		if a.Budget == "" {
			c.errAt(at("onBudgetExhausted"), "onBudgetExhausted \"degrade\" reacts to a budget breach, but the agent has no budget; set budget or use \"fail\"")
		}
		if i := slices.Index(a.Ladder, a.Model); i >= 0 && i == len(a.Ladder)-1 {
			c.errAt(at("onBudgetExhausted"), "onBudgetExhausted \"degrade\" needs a strictly cheaper alias below %q on the ladder, but %q is its last rung", a.Model, a.Model)
		} else if len(a.Ladder) == 0 {
			c.errAt(at("onBudgetExhausted"), "onBudgetExhausted \"degrade\" needs a ladder with a strictly cheaper alias below %q; add ladder: [%q, \"<cheaper alias>\"]", a.Model, a.Model)
		}
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
	rungs := len(places) // the first rungs places are the model and its ladder
	for i, f := range a.Fallbacks {
		add(f, at("fallbacks", i))
	}
	needs := []string{}
	if len(a.Tools)+len(a.Handoffs)+len(a.Delegates)+len(a.Retrievers) > 0 {
		needs = append(needs, "tools")
	}
	if len(a.Output) > 0 {
		needs = append(needs, "json")
	}
	for _, pl := range places {
		m := c.model(pl.alias)
		if m == nil || m.Kind != KindChat {
			continue // reported by resolve
		}
		for _, capability := range needs {
			if !m.Has(capability) {
				c.errAt(pl.path, "alias %q (model %q) lacks capability %q, which the agent needs (%s); pick a model that has it or add it to the model's capabilities", pl.alias, m.ID, capability, why(capability))
			}
		}
	}

	// The thread's history and the longest answer must fit together in the
	// context window of every model the agent may run on. A rung that does
	// not is reported at the budget, which fixes them all; a fallback at
	// itself, since another fallback may fit.
	if a.Memory != nil && a.Memory.Thread != nil {
		tb := a.Memory.Thread.TokenBudget
		for i, pl := range places {
			m := c.model(pl.alias)
			if m == nil || m.Kind != KindChat || tb+m.MaxOutputTokens <= m.ContextWindow {
				continue
			}
			fix := fmt.Sprintf("lower tokenBudget to at most %d", m.ContextWindow-m.MaxOutputTokens)
			if m.ContextWindow <= m.MaxOutputTokens {
				fix = fmt.Sprintf("lower %q's maxOutputTokens, which fills its whole context window", m.ID)
			}
			if i >= rungs {
				c.errAt(pl.path, "fallback %q (model %q) cannot take the thread: tokenBudget %d plus the %d output tokens it may answer with is %d tokens, more than its context window of %d; pick a fallback with a larger window, or %s", pl.alias, m.ID, tb, m.MaxOutputTokens, tb+m.MaxOutputTokens, m.ContextWindow, fix)
				continue
			}
			c.errAt(at("memory", "thread", "tokenBudget"), "thread tokenBudget %d plus the %d output tokens %q may answer with is %d tokens, more than its context window of %d; %s", tb, m.MaxOutputTokens, m.ID, tb+m.MaxOutputTokens, m.ContextWindow, fix)
		}
	}
	c.generatedTools(a)
	if len(a.Output) > 0 {
		c.schema(at("output"), a.Output, false)
	}
}

func why(capability string) string {
	switch capability {
	case "tools":
		return "it has tools, handoffs, delegates or retrievers"
	case "json":
		return "it has an output schema"
	}
	return capability
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
		case ModelDerivedMetric(th.Metric):
			c.errAt(p, "metric %q is model-derived (an LLM judge) and may be reported but never gate; remove this threshold", th.Metric)
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

// cheaper reports whether a is strictly cheaper than b: no price higher and
// at least one lower.
func cheaper(a, b Cost) bool {
	return a.InputPer1kUSD <= b.InputPer1kUSD && a.OutputPer1kUSD <= b.OutputPer1kUSD &&
		(a.InputPer1kUSD < b.InputPer1kUSD || a.OutputPer1kUSD < b.OutputPer1kUSD)
}

func price(c Cost) string {
	return fmt.Sprintf("$%g in / $%g out per 1k", c.InputPer1kUSD, c.OutputPer1kUSD)
}

// --- deferred: kinds the schema accepts but that are not built.

// deferredDefs names the schema's #Deferred definitions, what a kind of
// each is called in messages, and the kinds that are built instead. The
// words are the runtime's: its constructors refuse the same kinds with a
// *gateway.DeferredError saying "<feature> is not built yet", and a test in
// the module root holds the two to one list and one wording.
var deferredDefs = []deferredDef{
	{"#DeferredProviderKind", "provider kind", `use kind "openai-compatible" if its endpoint speaks the OpenAI API`},
	{"#DeferredStoreKind", "store kind", `use "memory" or "pgvector"`},
	{"#DeferredSourceKind", "retriever source kind", `ingest files: kind "files" with files: ["<glob>"]`},
	{"#DeferredChunkingStrategy", "chunking strategy", `use "fixed"`},
	{"#DeferredRerankKind", "rerank kind", `use "lexical" or "none"`},
}

// deferredDef is one #Deferred definition: its name, what its kinds are
// called, and what to use instead.
type deferredDef struct{ name, what, use string }

// deferred reports, at its place, every kind the schema accepts only so
// that it can be named here: Principle 3, a feature that is not built
// fails with an error naming itself.
func (c *checker) deferred() {
	d := c.doc
	report := func(def string, p cue.Path, kind string) {
		dd := deferredDefs[slices.IndexFunc(deferredDefs, func(x deferredDef) bool { return x.name == def })]
		if slices.Contains(c.sc.deferred[dd.name], kind) {
			c.errAt(p, "%s %q is not built yet; %s", dd.what, kind, dd.use)
		}
	}
	for _, p := range d.Providers {
		report("#DeferredProviderKind", pathOf("providers", p.Name, "kind"), p.Kind)
	}
	for _, s := range d.Stores {
		report("#DeferredStoreKind", pathOf("stores", s.Name, "kind"), s.Kind)
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
		if p.AnswerKey != nil {
			c.file(pathOf("providers", p.Name, "answerKey", "dataset"), p.AnswerKey.Dataset)
		}
		if p.Script != "" {
			c.file(pathOf("providers", p.Name, "script"), p.Script)
		}
	}
	for _, t := range d.Tools {
		if t.Implementation != nil && t.Implementation.Kind == ToolFixture {
			c.file(pathOf("tools", t.Name, "implementation", "file"), t.Implementation.File)
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
		c.file(pathOf("evals", e.Name, "dataset"), e.Dataset)
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
