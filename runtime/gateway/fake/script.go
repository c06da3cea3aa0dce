package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// Script is a script file: a script per agent, for Config.Agents.
type Script struct {
	// Agents holds each agent's steps, by agent name.
	Agents map[string][]Step
}

// LoadScript reads a script file. The file is a JSON object:
//
//	{
//	  "agents": {
//	    "triage": [
//	      {"toolCalls": [{"name": "lookup_order", "arguments": {"order_id": "AB-123456"}}]},
//	      {"toolCalls": [{"name": "transfer_to_billing"}]}
//	    ],
//	    "billing": [
//	      {"answer": true, "output": {"answer": "Refunded.", "refunded": true}}
//	    ]
//	  }
//	}
//
// Each step is one model answer, played when the agent makes that step of
// its turn (see gateway.CallInfo): "toolCalls" (each with a "name", optional
// "arguments", a JSON object, and an optional "id"), optionally with "text";
// or a final answer: "text", or "output", any JSON value whose compact
// encoding is the text (for agents with an output schema). "answer": true
// makes the final answer the answer key's, when the fake has one (see
// Step.Answer). "comment" is ignored, at the top and in steps. Errors name
// the file, line and column.
func LoadScript(path string) (Script, error) { return ReadScript(kind.Files{}, path) }

// ReadScript is LoadScript for the script an application names, read
// through its files (on disk, or embedded in a generated service).
func ReadScript(files kind.Files, name string) (Script, error) {
	data, err := files.ReadFile(name)
	if err != nil {
		return Script{}, fmt.Errorf("fake: read script: %w", err)
	}
	return ParseScript(files.Name(name), data)
}

// ParseScript reads a script from data; name is the file name errors
// carry. The format is LoadScript's.
func ParseScript(name string, data []byte) (Script, error) {
	sp := &scriptParser{name: name, data: data}
	if err := syntaxCheck(name, data); err != nil {
		return Script{}, err
	}
	sp.dec = json.NewDecoder(bytes.NewReader(data))
	sc := Script{Agents: map[string][]Step{}}
	if !sp.delim('{', 0, "a script is a JSON object with an \"agents\" object") {
		return Script{}, sp.err()
	}
	seenAgents := false
	for sp.dec.More() {
		off := sp.dec.InputOffset()
		key := sp.key()
		switch key {
		case "agents":
			seenAgents = true
			sp.agents(sc.Agents)
		case "comment":
			var s string
			if err := sp.dec.Decode(&s); err != nil {
				sp.fail(off, "comment: %v", err)
			}
		default:
			sp.fail(off, "unknown field %q; a script has \"agents\" and an optional \"comment\"", key)
			sp.skip()
		}
	}
	if !seenAgents {
		sp.fail(0, "the script has no \"agents\" object")
	}
	if err := sp.err(); err != nil {
		return Script{}, err
	}
	return sc, nil
}

type scriptParser struct {
	name string
	data []byte
	dec  *json.Decoder
	errs []error
}

func (sp *scriptParser) err() error { return errors.Join(sp.errs...) }

func (sp *scriptParser) fail(off int64, format string, args ...any) {
	sp.errs = append(sp.errs, fmt.Errorf("%s: %s", position(sp.name, sp.data, off), fmt.Sprintf(format, args...)))
}

// delim reads the next token and reports whether it is d.
func (sp *scriptParser) delim(d json.Delim, off int64, what string) bool {
	tok, err := sp.dec.Token()
	if err != nil || tok != d {
		sp.fail(off, "%s", what)
		return false
	}
	return true
}

// key reads an object key; the syntax check guarantees there is one.
func (sp *scriptParser) key() string {
	tok, _ := sp.dec.Token()
	s, _ := tok.(string)
	return s
}

// skip reads and drops the next value.
func (sp *scriptParser) skip() {
	var raw json.RawMessage
	_ = sp.dec.Decode(&raw)
}

func (sp *scriptParser) agents(out map[string][]Step) {
	off := sp.dec.InputOffset()
	if !sp.peekDelim('{') {
		sp.fail(off, "\"agents\" must be an object of agent name → steps")
		sp.skip()
		return
	}
	_, _ = sp.dec.Token()
	for sp.dec.More() {
		nameOff := sp.dec.InputOffset()
		name := sp.key()
		if _, dup := out[name]; dup {
			sp.fail(nameOff, "agent %q appears twice", name)
		}
		listOff := sp.dec.InputOffset()
		if !sp.peekDelim('[') {
			sp.fail(listOff, "agent %q: the script must be an array of steps", name)
			sp.skip()
			continue
		}
		_, _ = sp.dec.Token()
		steps := []Step{}
		for sp.dec.More() {
			stepOff := sp.dec.InputOffset()
			var raw json.RawMessage
			_ = sp.dec.Decode(&raw) // the syntax check guarantees a value
			st, err := parseStep(name, len(steps)+1, raw)
			if err != nil {
				sp.fail(stepOff, "%v", err)
			}
			steps = append(steps, st)
		}
		_, _ = sp.dec.Token()
		if len(steps) == 0 {
			sp.fail(listOff, "agent %q has no steps", name)
		}
		out[name] = steps
	}
	_, _ = sp.dec.Token()
}

// peekDelim reports whether the next value starts with d.
func (sp *scriptParser) peekDelim(d json.Delim) bool {
	off := significant(sp.data, sp.dec.InputOffset())
	return off < int64(len(sp.data)) && sp.data[off] == byte(d)
}

type scriptStep struct {
	Comment   string          `json:"comment"`
	Text      *string         `json:"text"`
	Output    json.RawMessage `json:"output"`
	Answer    bool            `json:"answer"`
	ToolCalls []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"toolCalls"`
}

func parseStep(agent string, n int, raw json.RawMessage) (Step, error) {
	where := fmt.Sprintf("agent %q step %d", agent, n)
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return Step{}, fmt.Errorf("%s: a step must be an object with text, output, answer or toolCalls", where)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s scriptStep
	if err := dec.Decode(&s); err != nil {
		return Step{}, fmt.Errorf("%s: %w", where, err)
	}
	st := Step{Answer: s.Answer}
	if s.Text != nil {
		st.Text = *s.Text
	}
	switch {
	case s.Text == nil && s.Output == nil && !s.Answer && len(s.ToolCalls) == 0:
		return Step{}, fmt.Errorf("%s: a step needs text, output, answer or toolCalls", where)
	case s.Text != nil && s.Output != nil:
		return Step{}, fmt.Errorf("%s: give text or output, not both", where)
	case len(s.ToolCalls) > 0 && (s.Output != nil || s.Answer):
		return Step{}, fmt.Errorf("%s: output and answer are final answers; a step with toolCalls cannot have them", where)
	}
	if s.Output != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, s.Output); err != nil {
			return Step{}, fmt.Errorf("%s: output: %w", where, err)
		}
		st.Text = buf.String()
	}
	for i, c := range s.ToolCalls {
		if c.Name == "" {
			return Step{}, fmt.Errorf("%s: tool call %d has no name", where, i+1)
		}
		args := json.RawMessage("{}")
		if c.Arguments != nil {
			if t := bytes.TrimSpace(c.Arguments); len(t) == 0 || t[0] != '{' {
				return Step{}, fmt.Errorf("%s: tool call %d (%s): arguments must be a JSON object", where, i+1, c.Name)
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, c.Arguments); err != nil {
				return Step{}, fmt.Errorf("%s: tool call %d (%s): arguments: %w", where, i+1, c.Name, err)
			}
			args = buf.Bytes()
		}
		st.ToolCalls = append(st.ToolCalls, gateway.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
	}
	return st, nil
}

// syntaxCheck reports a JSON syntax error with its position.
func syntaxCheck(name string, data []byte) error {
	if json.Valid(data) {
		return nil
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := se.Offset
		if off > 0 {
			off-- // Offset is just after the offending byte
		}
		return fmt.Errorf("%s: %v", lineCol(name, data, off), err)
	}
	return fmt.Errorf("%s: invalid JSON: %v", name, err)
}

// significant returns the offset of the first byte at or after off that is
// not white space or a separator: where the next value or key starts.
func significant(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// position renders name:line:col of the value at or after off.
func position(name string, data []byte, off int64) string {
	return lineCol(name, data, significant(data, off))
}

// lineCol renders name:line:col of the byte at off.
func lineCol(name string, data []byte, off int64) string {
	line, col := 1, 1
	for _, b := range data[:min(off, int64(len(data)))] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return name + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col)
}
