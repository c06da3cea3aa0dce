package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// ToolMode is what a tool does when an eval's target calls it: an eval
// must never fire a production side effect it did not ask for.
type ToolMode string

// The modes of a tool in an eval.
const (
	// ToolLive calls the tool's own implementation, as a service would.
	// It is the default of a tool that only reads.
	ToolLive ToolMode = "live"
	// ToolStub answers the call without reaching the tool: from the case's
	// own answers for the tool (Case.Tools), else from the eval's stub
	// (rows matched by argument, or one result for every call; see
	// runtime/app's EvalTool). It is the default of a tool that writes,
	// which must have a stub.
	ToolStub ToolMode = "stub"
	// ToolReplay answers the call from a recorded run: the case's recorded
	// calls of the tool (Case.Tools), matched by argument. A call the
	// recorded run did not make fails, as an error observation, without
	// reaching the tool.
	ToolReplay ToolMode = "replay"
)

// Check reports a mode that is not one of the above.
func (m ToolMode) Check() error {
	switch m {
	case ToolLive, ToolStub, ToolReplay:
		return nil
	}
	return fmt.Errorf("tool mode must be %q, %q or %q, not %q", ToolLive, ToolStub, ToolReplay, string(m))
}

// ToolAnswer is one answer a case gives a call of a tool: the case's own
// stub, or, for a case sampled from a recorded run, a call the run made.
// In a dataset file it is an element of the case's "tools" array:
// {"tool": "...", "args": {...}, "result": <any JSON>} or
// {"tool": "...", "args": {...}, "error": "..."}; without "args" it
// answers any call of the tool.
type ToolAnswer struct {
	// Tool is the tool's name, as the model calls it.
	Tool string `json:"tool"`
	// Args are the arguments the answer is for, a JSON object; nil answers
	// any call of the tool.
	Args json.RawMessage `json:"args,omitempty"`
	// Result is the answer, any JSON value; a string is the observation as
	// is.
	Result json.RawMessage `json:"result,omitempty"`
	// Error, when set instead of Result, fails the call with this message.
	Error string `json:"error,omitempty"`
}

// Observation is the text the model reads for a ToolAnswer's result: a
// JSON string as is, anything else as its compact JSON.
func Observation(result json.RawMessage) string {
	var s string
	if len(result) > 0 && result[0] == '"' && json.Unmarshal(result, &s) == nil {
		return s
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, result); err != nil {
		return string(result)
	}
	return buf.String()
}

// ToolCall is one call of a declared tool during a sample, as reports list
// it: which tool, in which mode, with which arguments, and what it
// answered. Arguments, result and error are cut at ReportTextBytes.
type ToolCall struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	// Mode is how the call was answered.
	Mode ToolMode `json:"mode"`
	// Args are the call's arguments.
	Args string `json:"args"`
	// Result is the observation the tool gave; empty when it failed.
	Result string `json:"result,omitempty"`
	// Error is the tool's failure.
	Error string `json:"error,omitempty"`
}

// ReportTextBytes bounds each text a report carries of one sample (an
// answer, an expected value, a tool call's arguments or result): a longer
// one is cut at a UTF-8 boundary and says how long it was, so that a
// report of many cases and runs stays a size a browser and a CI log
// handle.
const ReportTextBytes = 2048

// Clip cuts s to at most n bytes at a UTF-8 boundary and, when it cut,
// appends a marker saying how many bytes s had.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("… [cut at %d of %d bytes]", cut, len(s))
}

// parseToolAnswers decodes a case's "tools" array.
func (p *parser) parseToolAnswers(c *Case, m member) {
	if m.val[0] != '[' {
		p.errorf(m.valOff, "tools must be an array of {\"tool\", \"args\", \"result\" or \"error\"}, got %s", kindOf(m.val))
		return
	}
	vals, offs := elements(m.val, m.valOff)
	for i, v := range vals {
		if v[0] != '{' {
			p.errorf(offs[i], "a tool answer must be an object {\"tool\", \"args\", \"result\" or \"error\"}, got %s", kindOf(v))
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		var a struct {
			Tool   string          `json:"tool"`
			Args   json.RawMessage `json:"args"`
			Result json.RawMessage `json:"result"`
			Error  *string         `json:"error"`
		}
		if err := dec.Decode(&a); err != nil {
			p.errorf(offs[i], "tool answer: %v", err)
			continue
		}
		switch {
		case a.Tool == "":
			p.errorf(offs[i], "a tool answer needs \"tool\", the tool's name")
		case a.Args != nil && a.Args[0] != '{':
			p.errorf(offs[i], "tool answer for %q: args must be an object, got %s", a.Tool, kindOf(a.Args))
		case (a.Result == nil) == (a.Error == nil):
			p.errorf(offs[i], "tool answer for %q needs exactly one of \"result\" and \"error\"", a.Tool)
		case a.Error != nil && *a.Error == "":
			p.errorf(offs[i], "tool answer for %q: error must not be empty", a.Tool)
		default:
			ta := ToolAnswer{Tool: a.Tool, Args: a.Args, Result: a.Result}
			if a.Error != nil {
				ta.Error = *a.Error
			}
			c.Tools = append(c.Tools, ta)
		}
	}
}
