package guard

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// AgentView is an agent as the rules of a model guardrail judged by an
// agent see it: what it answers, what effects it can cause, which agents
// it reaches and which guardrails it runs. The agent runtime and aidgen
// vet both describe their agents so (CheckAgents), so that the two cannot
// disagree.
type AgentView struct {
	// Name is the agent's name.
	Name string
	// Output is its output schema; empty means free text.
	Output json.RawMessage
	// Writes are its tools with effects (anything but read), by name.
	Writes []string
	// Calls are the agents it hands off or delegates to.
	Calls []string
	// Guardrails are the guardrails it runs, the service's defaults
	// included.
	Guardrails []string
}

// CheckAgents checks every model guardrail of gs judged by an agent
// against the agents: the agent is one of them; it answers a verdict (its
// output schema is one, VerdictShape); it causes no effect, nor does any
// agent it reaches by handoffs and delegations (a classifier reads the
// value it judges, which may be written to make it act); and it is not
// guarded, itself or through an agent it reaches or another classifier it
// runs, by the guardrail it judges (its run would start another without
// end). Each problem is at the field "agent".
func CheckAgents(gs []Guardrail, agents []AgentView) map[string][]Problem {
	byName := make(map[string]*AgentView, len(agents))
	names := make([]string, len(agents))
	for i := range agents {
		byName[agents[i].Name], names[i] = &agents[i], agents[i].Name
	}
	judgeOf := map[string]string{} // guardrail → its judging agent
	for _, g := range gs {
		if g.Kind == KindModel && g.Agent != "" {
			judgeOf[g.Name] = g.Agent
		}
	}
	out := map[string][]Problem{}
	add := func(g string, format string, args ...any) {
		out[g] = append(out[g], Problem{Field: "agent", Index: -1, Message: fmt.Sprintf(format, args...)})
	}
	for _, g := range gs {
		if g.Kind != KindModel || g.Agent == "" {
			continue
		}
		a := byName[g.Agent]
		if a == nil {
			add(g.Name, "agent %q is not declared; the agents are %s", g.Agent, strings.Join(names, ", "))
			continue
		}
		if len(a.Output) == 0 {
			add(g.Name, `agent %q answers free text, and a classifier answers a verdict: give it output: {type: "object", properties: {tripped: {type: "boolean"}, reason: {type: "string"}}, required: ["tripped", "reason"]}`, a.Name)
		} else if msg := VerdictShape(a.Output); msg != "" {
			add(g.Name, "agent %q's output is the verdict: %s", a.Name, msg)
		}
		for _, n := range reach(byName, a.Name, false, judgeOf) {
			if w := byName[n].Writes; len(w) > 0 {
				via := ""
				if n != a.Name {
					via = fmt.Sprintf(", through agent %q", n)
				}
				add(g.Name, "agent %q can call tool %q%s, which has effects; a classifier reads the value it judges, which may be written to make it act, so it may cause none: give it read tools only", a.Name, w[0], via)
				break
			}
		}
		for _, n := range reach(byName, a.Name, true, judgeOf) {
			if slices.Contains(byName[n].Guardrails, g.Name) {
				if n == a.Name {
					add(g.Name, "agent %q runs guardrail %q, which it judges: each of its runs would start another; leave %q out of its guardrails (a service-wide guardrail runs on every agent: list it on the guarded agents instead)", a.Name, g.Name, g.Name)
				} else {
					add(g.Name, "agent %q reaches agent %q, which runs guardrail %q, which agent %q judges: each judgement would start another; break the cycle", a.Name, n, g.Name, a.Name)
				}
				break
			}
		}
	}
	return out
}

// reach returns the agents reachable from start, start first, in the
// order found: by handoffs and delegations, and with judges also by the
// agents judging the guardrails each runs.
func reach(agents map[string]*AgentView, start string, judges bool, judgeOf map[string]string) []string {
	seen := []string{start}
	for i := 0; i < len(seen); i++ {
		a := agents[seen[i]]
		next := slices.Clone(a.Calls)
		if judges {
			for _, g := range a.Guardrails {
				if j, ok := judgeOf[g]; ok {
					next = append(next, j)
				}
			}
		}
		for _, n := range next {
			if agents[n] != nil && !slices.Contains(seen, n) {
				seen = append(seen, n)
			}
		}
	}
	return seen
}
