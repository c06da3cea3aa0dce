package fake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aidgen/aid/runtime/gateway"
)

// UnscriptedAgentError is returned for a call of an agent that Config.Agents
// does not script, when no other mode could answer it: a script that forgot
// an agent fails loudly instead of echoing.
type UnscriptedAgentError struct {
	// Agent is the agent that made the call.
	Agent string
	// Scripted lists the agents the scripts name, sorted.
	Scripted []string
}

// Error implements error.
func (e *UnscriptedAgentError) Error() string {
	return fmt.Sprintf("fake: no script for agent %q (scripted agents: %s)", e.Agent, strings.Join(e.Scripted, ", "))
}

// Conversation is one of the scripts an agent plays (Config.Conversations):
// its steps, and when it plays.
type Conversation struct {
	// When selects the calls the conversation answers; nil makes it the
	// default, for calls no other conversation matches.
	When *When
	// Steps are the conversation's steps, played as Config.Agents' are.
	Steps []Step
}

// When is a conversation's condition. Every field given must match.
type When struct {
	// Input matches a call whose last user message (the run's input, or a
	// delegated task) contains it.
	Input string
	// Case matches a call made for that eval case (gateway.WithSample).
	Case string
}

// matches reports whether a call for sample (or none) with input meets w.
func (w *When) matches(input string, sample gateway.SampleKey, hasSample bool) bool {
	if w.Case != "" && (!hasSample || sample.Case != w.Case) {
		return false
	}
	return w.Input == "" || strings.Contains(input, w.Input)
}

// NoConversationError reports a call of an agent none of whose
// conversations matches, and that has no default conversation.
type NoConversationError struct {
	// Agent is the agent that made the call.
	Agent string
	// Input is the call's last user message; Case its eval case, if any.
	Input, Case string
}

// Error implements error.
func (e *NoConversationError) Error() string {
	msg := fmt.Sprintf("fake: agent %q: no conversation matches input %q", e.Agent, truncate(e.Input, 80))
	if e.Case != "" {
		msg += fmt.Sprintf(" or case %q", e.Case)
	}
	return msg + ", and none is the default (a conversation without \"when\")"
}

// pickConversation returns the steps of the first conversation of agent
// that matches the call: a function of the call alone, so that concurrent
// runs do not disturb each other.
func pickConversation(ctx context.Context, agent string, convs []Conversation, req *gateway.Request) ([]Step, error) {
	input := lastUser(req)
	sample, hasSample := gateway.SampleFrom(ctx)
	for _, c := range convs {
		if c.When == nil || c.When.matches(input, sample, hasSample) {
			return c.Steps, nil
		}
	}
	return nil, &NoConversationError{Agent: agent, Input: input, Case: sample.Case}
}

// checkAgentScripts refuses agent scripts the fake could not play.
func checkAgentScripts(scripts map[string][]Step, convs map[string][]Conversation) error {
	var errs []error
	check := func(name, where string, steps []Step) {
		if len(steps) == 0 {
			errs = append(errs, fmt.Errorf("fake: agent %q%s has an empty script", name, where))
		}
		for i, st := range steps {
			if st.Answer && len(st.ToolCalls) > 0 {
				errs = append(errs, fmt.Errorf("fake: agent %q%s step %d: an answer step cannot also call tools", name, where, i+1))
			}
			for j, c := range st.ToolCalls {
				if c.Name == "" {
					errs = append(errs, fmt.Errorf("fake: agent %q%s step %d: tool call %d has no name", name, where, i+1, j+1))
				}
				if len(c.Arguments) > 0 && !json.Valid(c.Arguments) {
					errs = append(errs, fmt.Errorf("fake: agent %q%s step %d: tool call %d (%s): arguments are not valid JSON", name, where, i+1, j+1, c.Name))
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(scripts)) {
		if name == "" {
			errs = append(errs, errors.New("fake: an agent script has no agent name"))
		}
		if _, both := convs[name]; both {
			errs = append(errs, fmt.Errorf("fake: agent %q has a script and conversations; give one", name))
		}
		check(name, "", scripts[name])
	}
	for _, name := range slices.Sorted(maps.Keys(convs)) {
		if name == "" {
			errs = append(errs, errors.New("fake: an agent's conversations have no agent name"))
		}
		if len(convs[name]) == 0 {
			errs = append(errs, fmt.Errorf("fake: agent %q has no conversations", name))
		}
		for i, c := range convs[name] {
			if c.When != nil && *c.When == (When{}) {
				errs = append(errs, fmt.Errorf("fake: agent %q conversation %d: when matches nothing in particular; leave it out for the default", name, i+1))
			}
			check(name, fmt.Sprintf(" conversation %d", i+1), c.Steps)
		}
	}
	return errors.Join(errs...)
}

// agentStep picks the step of an agent script that answers the call: a
// function of the agent and the step number only, so concurrent runs do not
// disturb each other. Tool calls without an id get a deterministic one,
// unique within the agent's turn.
func (p *Provider) agentStep(ci gateway.CallInfo, script []Step) (Step, error) {
	if ci.Step < 1 {
		return Step{}, fmt.Errorf("fake: agent %q: call info has step %d; steps count from 1", ci.Agent, ci.Step)
	}
	i := ci.Step - 1
	if i >= len(script) {
		if !p.cfg.Loop {
			return Step{}, fmt.Errorf("%w: agent %q has %d steps and was called for step %d", ErrScriptExhausted, ci.Agent, len(script), ci.Step)
		}
		i %= len(script)
	}
	st := script[i]
	if len(st.ToolCalls) > 0 {
		calls := slices.Clone(st.ToolCalls)
		for j := range calls {
			if calls[j].ID == "" {
				calls[j].ID = "call_" + ci.Agent + "_" + strconv.Itoa(ci.Step) + "_" + strconv.Itoa(j+1)
			}
			if len(calls[j].Arguments) == 0 {
				calls[j].Arguments = json.RawMessage("{}")
			}
		}
		st.ToolCalls = calls
	}
	return st, nil
}

// answerStep resolves an Answer step: the answer key's answer when there is
// one and the call is an eval sample or a case's input, the step's own text
// otherwise.
func (p *Provider) answerStep(ctx context.Context, ci gateway.CallInfo, req gateway.Request, st Step) (Step, error) {
	if p.cfg.AnswerKey == nil {
		if st.Text == "" {
			where := "a scripted step"
			if ci.Agent != "" {
				where = fmt.Sprintf("agent %q step %d", ci.Agent, ci.Step)
			}
			return Step{}, fmt.Errorf("fake: %s answers from the answer key, but none is configured and the step has no text of its own", where)
		}
		return st, nil
	}
	text, err := p.answer(ctx, req)
	var uc *UnknownCaseError
	if errors.As(err, &uc) && uc.Case == "" && st.Text != "" {
		// Not an eval sample (no case on the context) and not a case's
		// input: a demo conversation with an app whose fake also holds an
		// answer key. The step's own text answers it; an eval sample
		// always carries its case, so it never lands here.
		return st, nil
	}
	if err != nil {
		return Step{}, err
	}
	st.Text = text
	return st, nil
}

// AnswerDocument is how answer-key mode answers a request that asks for
// JSON (gateway.Request.ResponseFormat): the answer text placed in a
// document valid for simple schemas, so that an agent with an output schema
// can be evaluated on the fake.
//
// For a schema of type string, the document is the answer as a JSON string.
// For an object schema, the answer goes into the first property listed in
// required whose type is string (failing that, the alphabetically first
// string property); every other required property gets a zero value: its
// const, else its first enum value, else by its (first) type "" for string,
// 0 for number and integer, false for boolean, [] for array, null for null,
// and for object the same rule applied to its required properties.
// Optional properties are left out. Keywords such as minimum, minLength or
// pattern are not honoured; a schema with nowhere to put the answer is an
// error.
func AnswerDocument(schema json.RawMessage, answer string) (string, error) {
	var s schemaNode
	if err := json.Unmarshal(schema, &s); err != nil {
		return "", fmt.Errorf("read response schema: %w", err)
	}
	var doc any
	switch {
	case s.is("string"):
		doc = answer
	case s.is("object") || len(s.Properties) > 0:
		key := ""
		for _, r := range s.Required {
			if p, ok := s.Properties[r]; ok && p.is("string") && len(p.Enum) == 0 && p.Const == nil {
				key = r
				break
			}
		}
		if key == "" {
			for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
				if p := s.Properties[name]; p.is("string") && len(p.Enum) == 0 && p.Const == nil {
					key = name
					break
				}
			}
		}
		if key == "" {
			return "", errors.New("the response schema has no string property to hold the answer")
		}
		obj := s.zero().(map[string]any)
		obj[key] = answer
		doc = obj
	default:
		return "", fmt.Errorf("the response schema has type %s; only string and object schemas can hold an answer", bytes.TrimSpace(s.Type))
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("encode answer document: %w", err)
	}
	return string(out), nil
}

// schemaNode is the part of a JSON Schema AnswerDocument reads.
type schemaNode struct {
	Type       json.RawMessage        `json:"type"`
	Properties map[string]*schemaNode `json:"properties"`
	Required   []string               `json:"required"`
	Enum       []json.RawMessage      `json:"enum"`
	Const      json.RawMessage        `json:"const"`
}

// types returns the schema's types: "type" as a string or a list.
func (s *schemaNode) types() []string {
	var one string
	if json.Unmarshal(s.Type, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(s.Type, &many) // anything else names no type
	return many
}

func (s *schemaNode) is(t string) bool {
	if s == nil {
		return false
	}
	return slices.Contains(s.types(), t)
}

// zero returns the simplest value the schema accepts, by the rule of
// AnswerDocument.
func (s *schemaNode) zero() any {
	if s == nil {
		return nil
	}
	if s.Const != nil {
		return s.Const
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	t := ""
	if ts := s.types(); len(ts) > 0 {
		t = ts[0]
	} else if len(s.Properties) > 0 {
		t = "object"
	}
	switch t {
	case "string":
		return ""
	case "number", "integer":
		return 0
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		obj := make(map[string]any, len(s.Required))
		for _, r := range s.Required {
			obj[r] = s.Properties[r].zero()
		}
		return obj
	}
	return nil
}
