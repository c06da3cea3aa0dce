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
