package fake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/internal/jsonpos"
	"github.com/aidgen/aid/runtime/kind"
)

// Script is a script file: a script per agent, for Config.Agents, or
// several per agent, for Config.Conversations.
type Script struct {
	// Agents holds each agent's steps, by agent name.
	Agents map[string][]Step
	// Conversations holds the conversations of the agents that have
	// several, by agent name.
	Conversations map[string][]Conversation
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
// Step.Answer). "comment" is ignored, at the top, in conversations and in
// steps. Errors name the file, line and column.
//
// An agent that plays more than one conversation has, instead of its list
// of steps, a list of conversations, each a list of steps and when it
// plays:
//
//	"specialist": [
//	  {"when": {"input": "reset"}, "steps": [
//	    {"toolCalls": [{"name": "reset_user_password", "arguments": {"user": "ana"}}]},
//	    {"text": "I reset your password."}
//	  ]},
//	  {"when": {"case": "vpn-1"}, "steps": [{"text": "Reconnect the VPN."}]},
//	  {"steps": [{"text": "I do not know."}]}
//	]
//
// "when" has "input", a substring of the call's last user message (the
// run's input, or a delegated task), and/or "case", an eval case id (the
// sample the call is made for); both must match when both are given. The
// first conversation that matches plays; one without "when" is the
// default; a call that none matches fails (*NoConversationError). A
// resumed run's calls carry the same input, so the run stays in its
// conversation.
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
	if err := jsonpos.SyntaxError(name, data, 0, data); err != nil {
		return Script{}, err
	}
	sp.dec = json.NewDecoder(bytes.NewReader(data))
	sc := Script{Agents: map[string][]Step{}, Conversations: map[string][]Conversation{}}
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
			sp.agents(sc.Agents, sc.Conversations)
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
	sp.errs = append(sp.errs, fmt.Errorf("%s: %s", jsonpos.Position(sp.name, sp.data, off), fmt.Sprintf(format, args...)))
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

func (sp *scriptParser) agents(out map[string][]Step, conv map[string][]Conversation) {
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
		_, dup := out[name]
		if _, dupConv := conv[name]; dup || dupConv {
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
		var convs []Conversation
		for sp.dec.More() {
			off := jsonpos.Significant(sp.data, sp.dec.InputOffset())
			var raw json.RawMessage
			_ = sp.dec.Decode(&raw) // the syntax check guarantees a value
			if isConversation(raw) {
				if len(steps) > 0 {
					sp.fail(off, "agent %q: give a list of steps or a list of conversations ({\"when\", \"steps\"}), not both", name)
					continue
				}
				convs = append(convs, sp.conversation(name, len(convs)+1, off, raw))
				continue
			}
			if len(convs) > 0 {
				sp.fail(off, "agent %q: give a list of steps or a list of conversations ({\"when\", \"steps\"}), not both", name)
				continue
			}
			st, err := parseStep(fmt.Sprintf("agent %q step %d", name, len(steps)+1), raw)
			if err != nil {
				sp.fail(off, "%v", err)
			}
			steps = append(steps, st)
		}
		_, _ = sp.dec.Token()
		switch {
		case len(convs) > 0:
			conv[name] = convs
		case len(steps) == 0:
			sp.fail(listOff, "agent %q has no steps", name)
			out[name] = steps
		default:
			out[name] = steps
		}
	}
	_, _ = sp.dec.Token()
}

// isConversation reports whether an element of an agent's list is a
// conversation: an object with "steps" or "when", which no step has.
func isConversation(raw json.RawMessage) bool {
	var keys map[string]json.RawMessage
	if json.Unmarshal(raw, &keys) != nil {
		return false
	}
	_, steps := keys["steps"]
	_, when := keys["when"]
	return steps || when
}

// conversation parses the n-th conversation of agent, raw, which starts at
// off in the file, so that its errors carry their own line and column.
func (sp *scriptParser) conversation(agent string, n int, off int64, raw json.RawMessage) Conversation {
	where := fmt.Sprintf("agent %q conversation %d", agent, n)
	var c Conversation
	dec := json.NewDecoder(bytes.NewReader(raw))
	_, _ = dec.Token() // the object's '{'
	seenSteps := false
	for dec.More() {
		keyOff := off + dec.InputOffset()
		tok, _ := dec.Token()
		key, _ := tok.(string)
		valOff := off + dec.InputOffset()
		var val json.RawMessage
		_ = dec.Decode(&val)
		switch key {
		case "when":
			w, err := parseWhen(val)
			if err != nil {
				sp.fail(valOff, "%s: when: %v", where, err)
			}
			c.When = w
		case "steps":
			seenSteps = true
			c.Steps = sp.steps(where, valOff, val)
		case "comment":
			var s string
			if err := json.Unmarshal(val, &s); err != nil {
				sp.fail(valOff, "%s: comment must be a string", where)
			}
		default:
			sp.fail(keyOff, "%s: unknown field %q; a conversation has \"when\", \"steps\" and an optional \"comment\"", where, key)
		}
	}
	if !seenSteps {
		sp.fail(off, "%s has no \"steps\"", where)
	}
	return c
}

// steps parses a conversation's list of steps, raw, which starts at off.
func (sp *scriptParser) steps(where string, off int64, raw json.RawMessage) []Step {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' {
		sp.fail(off, "%s: steps must be an array of steps", where)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	_, _ = dec.Token()
	steps := []Step{}
	for dec.More() {
		stepOff := off + dec.InputOffset()
		var r json.RawMessage
		_ = dec.Decode(&r)
		st, err := parseStep(fmt.Sprintf("%s step %d", where, len(steps)+1), r)
		if err != nil {
			sp.fail(stepOff, "%v", err)
		}
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		sp.fail(off, "%s has no steps", where)
	}
	return steps
}

// parseWhen reads a conversation's condition: "input" and/or "case",
// non-empty strings.
func parseWhen(raw json.RawMessage) (*When, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, errors.New(`when must be an object with "input" (a substring of the input) or "case" (an eval case id)`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var w struct {
		Input *string `json:"input"`
		Case  *string `json:"case"`
	}
	if err := dec.Decode(&w); err != nil {
		return nil, err
	}
	out := &When{}
	if w.Input != nil {
		if *w.Input == "" {
			return nil, errors.New("input is empty, which every input contains")
		}
		out.Input = *w.Input
	}
	if w.Case != nil {
		if *w.Case == "" {
			return nil, errors.New("case is empty")
		}
		out.Case = *w.Case
	}
	if *out == (When{}) {
		return nil, errors.New(`when needs "input" or "case"; leave it out for the default conversation`)
	}
	return out, nil
}

// peekDelim reports whether the next value starts with d.
func (sp *scriptParser) peekDelim(d json.Delim) bool {
	off := jsonpos.Significant(sp.data, sp.dec.InputOffset())
	return off < int64(len(sp.data)) && sp.data[off] == byte(d)
}

type scriptStep struct {
	Comment string          `json:"comment"`
	Text    *string         `json:"text"`
	Output  json.RawMessage `json:"output"`
	Answer  bool            `json:"answer"`
	// Status makes the step fail as an HTTP error of that status would
	// (429 and 5xx retryable, as a real provider's are); with text, a
	// stream delivers the text and then breaks.
	Status int `json:"status"`
	// Delay is waited before the step answers (Go's duration syntax).
	Delay string `json:"delay"`
	// Drop breaks a stream after its text, as a dropped connection does;
	// a call that does not stream fails as one.
	Drop      bool `json:"drop"`
	ToolCalls []struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"toolCalls"`
}

// errDropped is the error of a step that drops the connection.
var errDropped = errors.New("connection dropped by the script")

// StatusError is the error a provider answering HTTP status code fails
// with: a *gateway.ProviderError, retryable for 429 and 5xx as the
// gateway's real adapters make it, so that a script exercises retries,
// cool-downs and fallbacks with no key.
func StatusError(code int) error {
	return &gateway.ProviderError{Provider: "fake", StatusCode: code, Retryable: code == 429 || code >= 500,
		Err: fmt.Errorf("scripted HTTP %d", code)}
}

// parseStep reads one step; where names it in errors.
func parseStep(where string, raw json.RawMessage) (Step, error) {
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
	if s.Delay != "" {
		d, err := time.ParseDuration(s.Delay)
		if err != nil || d < 0 {
			return Step{}, fmt.Errorf("%s: delay %q is not a duration such as \"250ms\" or \"2s\"", where, s.Delay)
		}
		st.Delay = d
	}
	switch {
	case s.Status != 0 && (s.Status < 400 || s.Status > 599):
		return Step{}, fmt.Errorf("%s: status %d is not an HTTP error status (400 to 599)", where, s.Status)
	case s.Status != 0 && s.Drop:
		return Step{}, fmt.Errorf("%s: give status or drop, not both", where)
	case s.Status != 0:
		st.Err = StatusError(s.Status)
	case s.Drop:
		st.Err = &gateway.ProviderError{Provider: "fake", Retryable: true, Err: errDropped}
	}
	switch {
	case st.Err != nil && (s.Output != nil || s.Answer || len(s.ToolCalls) > 0):
		return Step{}, fmt.Errorf("%s: a failing step (status or drop) may have text, and no output, answer or toolCalls", where)
	case st.Err != nil:
	case s.Text == nil && s.Output == nil && !s.Answer && len(s.ToolCalls) == 0:
		return Step{}, fmt.Errorf("%s: a step needs text, output, answer, toolCalls, status or drop", where)
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
