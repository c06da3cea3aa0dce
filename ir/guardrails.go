package ir

import (
	"slices"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
)

// Guard is the guardrail as package guard, which checks and runs it,
// declares it.
func (g *Guardrail) Guard() guard.Guardrail {
	out := guard.Guardrail{
		Name: g.Name, Kind: guard.Kind(g.Kind), Action: guard.Action(g.Action), Message: g.Message,
		Patterns: g.Patterns, Words: g.Words, Builtins: g.Builtins, When: g.When, Schema: g.Schema,
		Func: g.Func, Tools: g.Tools, Stream: guard.Stream(g.Stream), Replacement: g.Replacement, Beside: g.Beside,
		Model: g.Model, Agent: g.Agent, Prompt: g.Prompt, Verdict: g.Verdict, OnError: guard.OnError(g.OnError), Timeout: time.Duration(g.Timeout),
	}
	for _, p := range g.Points {
		out.Points = append(out.Points, guard.Point(p))
	}
	return out
}

// guardrails checks the declared guardrails with the runtime's own rules
// (guard.Check, guard.CheckAgents), each problem at its field; the names
// agents and the service list; and that every guardrail is run by some
// agent.
func (c *checker) guardrails() {
	d := c.doc
	known := make([]string, len(d.Guardrails))
	for i, g := range d.Guardrails {
		known[i] = g.Name
	}
	used := map[string]bool{}
	c.list([]any{"service", "guardrails"}, d.Service.Guardrails, "guardrail", known, "")
	for _, n := range d.Service.Guardrails {
		used[n] = true
	}
	for _, a := range d.Agents {
		c.list([]any{"agents", a.Name, "guardrails"}, a.Guardrails, "guardrail", known, "")
		for _, n := range a.Guardrails {
			used[n] = true
		}
	}
	judges := guard.CheckAgents(c.guards(), c.agentViews())
	for _, g := range d.Guardrails {
		for _, p := range guard.Check(g.Guard(), nil, cel.Language{}) {
			if p.Field == "schema" && len(g.Schema) > 0 {
				continue // c.schema says where in the schema, below
			}
			at := []any{"guardrails", g.Name, p.Field}
			if p.Index >= 0 {
				at = append(at, p.Index)
			}
			c.errAt(pathOf(at...), "guardrail %q: %s", g.Name, p.Message)
		}
		if len(g.Schema) > 0 && g.Kind == string(guard.KindSchema) {
			c.schema(pathOf("guardrails", g.Name, "schema"), g.Schema, false)
		}
		if g.Kind == string(guard.KindModel) && g.Model != "" {
			c.guardrailModel(g)
		}
		for _, p := range judges[g.Name] {
			c.errAt(pathOf("guardrails", g.Name, p.Field), "guardrail %q: %s", g.Name, p.Message)
		}
		if !used[g.Name] {
			var agents []string
			for _, a := range d.Agents {
				agents = append(agents, a.Name)
			}
			c.errAt(pathOf("guardrails", g.Name), "guardrail %q is run by no agent: list it in the guardrails of an agent (%s) or in service.guardrails, or remove it", g.Name, strings.Join(agents, ", "))
		}
	}
}

// guardrailModel checks a model guardrail's alias: it names a chat model
// that answers JSON, which the verdict is.
func (c *checker) guardrailModel(g *Guardrail) {
	p := pathOf("guardrails", g.Name, "model")
	c.alias(p, g.Model, KindChat)
	if m := c.model(g.Model); m != nil && m.Kind == KindChat && !m.Has("json") {
		c.errAt(p, "guardrail %q: alias %q (model %q) lacks capability \"json\", which a model guardrail needs for its verdict; pick a model that has it or add it to the model's capabilities", g.Name, g.Model, m.ID)
	}
}

// guards are the declared guardrails as package guard declares them.
func (c *checker) guards() []guard.Guardrail {
	out := make([]guard.Guardrail, len(c.doc.Guardrails))
	for i, g := range c.doc.Guardrails {
		out[i] = g.Guard()
	}
	return out
}

// agentViews describes the agents for the rules of guardrails judged by
// agents, as agents.New does: a tool with effects is one that does not
// only read.
func (c *checker) agentViews() []guard.AgentView {
	d := c.doc
	writes := map[string]bool{}
	for _, t := range d.Tools {
		writes[t.Name] = t.Effects != "" && t.Effects != "read"
	}
	out := make([]guard.AgentView, len(d.Agents))
	for i, a := range d.Agents {
		v := guard.AgentView{Name: a.Name, Output: a.Output, Calls: slices.Concat(a.Handoffs, a.Delegates), Guardrails: slices.Concat(d.Service.Guardrails, a.Guardrails)}
		for _, t := range a.Tools {
			if writes[t] {
				v.Writes = append(v.Writes, t)
			}
		}
		out[i] = v
	}
	return out
}
