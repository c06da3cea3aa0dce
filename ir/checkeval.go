package ir

// The checks of the evals section: each eval's target, dataset, metrics,
// thresholds and tool modes, against the rest of the document. They live
// apart from check.go's references because an eval draws on every other
// section (agents, tools, retrievers, models) in its own terms.

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"

	"github.com/aidgen/aid/runtime/rules"
)

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
// offer it (rules.ReachableTools).
func (d *Document) reachableTools(agent string) map[string]string {
	return rules.ReachableTools(agent, func(name string) (rules.Agent, bool) {
		a, ok := d.Agent(name)
		if !ok {
			return rules.Agent{}, false
		}
		return rules.Agent{Tools: a.Tools, Handoffs: a.Handoffs, Delegates: a.Delegates}, true
	})
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
