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
