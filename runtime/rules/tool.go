package rules

import "encoding/json"

// ToolInput checks the shape of a tool's input schema: function calling
// passes a tool's arguments as a JSON object, so the schema must say
// type: "object", or no call can fit it. The schema is JSON; whether it
// compiles is the caller's to check, with its own compiler. It is checked
// where a tool is declared (`aidgen vet`, agents.New) and where a tool
// kind learns a schema only when it runs (an MCP server's tools/list).
func ToolInput(schema []byte) []Problem {
	var top struct {
		Type any `json:"type"`
	}
	if json.Unmarshal(schema, &top) == nil && top.Type == "object" {
		return nil
	}
	var at []any
	if top.Type != nil {
		at = []any{"type"}
	}
	return []Problem{problem(`a tool's input schema must have type: "object" (function calling passes arguments as an object)`, at...)}
}

// ReachableTools returns the tools an agent can call, itself or through
// the agents it hands off or delegates to, at any depth, each with the
// first agent found to offer it (breadth first, in list order): the tools
// a run of the agent may call, which an eval of it must plan for. find
// returns an agent's lists by name (Tools, Handoffs, Delegates); an agent
// it does not know reaches nothing. vet (ir) and the eval's tool plan
// (runtime/app) both read it.
func ReachableTools(agent string, find func(name string) (Agent, bool)) map[string]string {
	via := map[string]string{}
	seen := map[string]bool{}
	queue := []string{agent}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		a, ok := find(name)
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
