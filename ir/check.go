package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"cuelang.org/go/cue"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/aidgen/aid/internal/fileglob"
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
	{"files", (*checker).files},
}

// checker runs the semantic passes over a decoded document, reporting at
// the positions the loader knows.
type checker struct {
	*loader
	doc *Document

	compiler   *jsonschema.Compiler
	schemaN    int
	schemaErrs map[string]string // schema text → problem ("" when valid)
	notObject  map[string]bool   // schema text → not an object's schema
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
		}
		if e.Judge != nil {
			c.alias(at("judge", "model"), e.Judge.Model, KindChat)
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
	}
	for _, b := range d.Budgets {
		if b.MaxUSD == 0 && b.MaxTotalTokens == 0 {
			c.errAt(pathOf("budgets", b.Name), "budget %q sets no limit; set maxUSD, maxTotalTokens or both", b.Name)
		}
	}
	for _, t := range d.Tools {
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
	}
	for _, e := range d.Evals {
		c.eval(e)
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
		if above != nil && below != nil && !cheaper(below.Cost, above.Cost) {
			c.errAt(at("ladder", i), "rung %q (%s) is not strictly cheaper than the rung above it, %q (%s); order the ladder from most to least expensive", r, price(below.Cost), a.Ladder[i-1], price(above.Cost))
		}
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

	// Capabilities: every model the agent may run on must support what
	// the agent asks of it.
	rungs := slices.Concat([]string{a.Model}, a.Ladder)
	needs := []string{}
	if len(a.Tools)+len(a.Handoffs)+len(a.Delegates)+len(a.Retrievers) > 0 {
		needs = append(needs, "tools")
	}
	if len(a.Output) > 0 {
		needs = append(needs, "json")
	}
	for i, r := range rungs {
		if j := slices.Index(rungs, r); j < i {
			continue
		}
		m := c.model(r)
		if m == nil {
			continue
		}
		for _, capability := range needs {
			if !m.Has(capability) {
				p := at("model")
				if i > 0 {
					p = at("ladder", i-1)
				}
				c.errAt(p, "alias %q (model %q) lacks capability %q, which the agent needs (%s); pick a model that has it or add it to the model's capabilities", r, m.ID, capability, why(capability))
			}
		}
	}

	if a.Memory != nil && a.Memory.Thread != nil {
		for i, r := range rungs {
			if m := c.model(r); m != nil && a.Memory.Thread.TokenBudget >= m.ContextWindow && slices.Index(rungs, r) == i {
				c.errAt(at("memory", "thread", "tokenBudget"), "thread tokenBudget %d does not fit the context window of %q (%d tokens); lower it", a.Memory.Thread.TokenBudget, m.ID, m.ContextWindow)
			}
		}
	}
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
	case t.Agent == "" && t.Model == "":
		c.errAt(at("target"), "target names nothing; set agent, or model with a prompt")
	case t.Agent != "" && t.Model != "":
		c.errAt(at("target", "model"), "target names both agent %q and model %q; keep one", t.Agent, t.Model)
	case t.Agent != "" && (t.Prompt != "" || t.System != ""):
		c.errAt(at("target"), "prompt and system apply to a model target; an agent target uses the agent's instructions")
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

// checkPrompt parses a prompt template and executes it against an empty
// case, so a misspelt field fails here rather than mid-eval. The fields are
// those of the case a prompt is rendered with: ID, Input, Tags, Metadata.
// Expected is deliberately absent: a prompt must not leak the answer.
func checkPrompt(prompt string) error {
	tmpl, err := template.New("prompt").Option("missingkey=error").Parse(prompt)
	if err != nil {
		return fmt.Errorf("invalid prompt template: %w", err)
	}
	if err := tmpl.Execute(&bytes.Buffer{}, PromptData{Metadata: map[string]any{}}); err != nil {
		return fmt.Errorf("invalid prompt template: %w", err)
	}
	return nil
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

// schema checks that raw is a JSON Schema the validator compiles; a tool's
// input must also describe an object, the only shape function calling
// accepts. One compiler serves the whole load, so the metaschema is loaded
// once, and identical schemas are compiled once.
func (c *checker) schema(p cue.Path, raw json.RawMessage, object bool) {
	msg, seen := c.schemaErrs[string(raw)]
	if !seen {
		msg = c.compileSchema(raw)
		if c.schemaErrs == nil {
			c.schemaErrs = map[string]string{}
		}
		c.schemaErrs[string(raw)] = msg
	}
	if msg != "" {
		c.errAt(p, "%s", msg)
		return
	}
	if object {
		notObject, seen := c.notObject[string(raw)]
		if !seen {
			var top struct {
				Type any `json:"type"`
			}
			notObject = json.Unmarshal(raw, &top) != nil || top.Type != "object"
			if c.notObject == nil {
				c.notObject = map[string]bool{}
			}
			c.notObject[string(raw)] = notObject
		}
		if notObject {
			c.errAt(p, "a tool's input schema must have type: \"object\" (function calling passes arguments as an object)")
		}
	}
}

func (c *checker) compileSchema(raw json.RawMessage) string {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Sprintf("not a JSON Schema: %v", err)
	}
	if c.compiler == nil {
		c.compiler = jsonschema.NewCompiler()
	}
	c.schemaN++
	url := fmt.Sprintf("mem://schema/%d.json", c.schemaN)
	if err := c.compiler.AddResource(url, doc); err != nil {
		return fmt.Sprintf("not a JSON Schema: %v", err)
	}
	if _, err := c.compiler.Compile(url); err != nil {
		return "invalid JSON Schema: " + schemaProblem(err)
	}
	return ""
}

// schemaProblem reduces a metaschema failure to its leaf causes, each at
// its place in the schema, instead of the validator's whole trace.
func schemaProblem(err error) string {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &sve) || !errors.As(sve.Err, &ve) {
		return strings.Join(strings.Fields(err.Error()), " ")
	}
	p := message.NewPrinter(language.English)
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		l := fmt.Sprintf("at /%s: %s", strings.Join(e.InstanceLocation, "/"), e.ErrorKind.LocalizedString(p))
		if !slices.Contains(leaves, l) {
			leaves = append(leaves, l)
		}
	}
	walk(ve)
	return strings.Join(leaves, "; ")
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

// --- files: every file the IR names exists, relative to the IR file.

func (c *checker) files() {
	d := c.doc
	for _, p := range d.Providers {
		if p.AnswerKey != nil {
			c.file(pathOf("providers", p.Name, "answerKey", "dataset"), p.AnswerKey.Dataset)
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
			got, err := fileglob.Expand(d.Dir, []string{pattern}, r.Source.Exclude)
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

func errorsIsNotExist(err error) bool { return os.IsNotExist(err) || err == fs.ErrNotExist }

func displayDir(dir string) string {
	if dir == "." || dir == "" {
		return "the current directory"
	}
	return dir
}
