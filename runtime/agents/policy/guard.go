package policy

import (
	"encoding/json"
	"fmt"
)

// GuardCondition is a compiled guardrail condition: an expression of type
// bool over a value a run is about to use, compiled by the same Language,
// with the same checks and messages, as an approval rule's When. It is
// safe for concurrent use.
type GuardCondition struct {
	src  string
	cond Condition
}

// GuardInput is a value as a guardrail condition sees it.
type GuardInput struct {
	// Point is where the value is checked: input, toolArguments,
	// toolResult or output.
	Point string
	// Text is the value as text: the message, the observation, the answer,
	// or the arguments' JSON.
	Text string
	// Arguments is a call's JSON arguments at toolArguments; nil
	// elsewhere, where args is an empty map.
	Arguments json.RawMessage
	// Tool is the called tool at toolArguments and toolResult.
	Tool string
	// Agent is the agent of the run.
	Agent string
	// User and Thread are the run's user and thread ids.
	User, Thread string
}

// noArgs is args where there are no arguments; a condition never changes
// it.
var noArgs = map[string]any{}

// CompileGuard compiles a guardrail condition with lang, which must be a
// bool; the error says where it does not compile, or what type it is
// instead, or that there is no language (a *NoLanguageError).
func CompileGuard(lang Language, expr string) (*GuardCondition, error) {
	cond, err := compileCondition(lang, expr, true)
	if err != nil {
		return nil, err
	}
	return &GuardCondition{src: expr, cond: cond}, nil
}

// Holds evaluates the condition for in. An error (arguments that are not
// a JSON object, a missing key without has(), the cost limit) means it
// could not be judged; a guardrail treats that as tripped.
func (c *GuardCondition) Holds(in GuardInput) (bool, error) {
	v := Vars{Tool: in.Tool, Args: noArgs, Agent: in.Agent, User: in.User, Thread: in.Thread, Text: in.Text, Point: in.Point}
	if len(in.Arguments) > 0 {
		var args map[string]any
		if err := json.Unmarshal(in.Arguments, &args); err != nil || args == nil {
			return false, fmt.Errorf("condition %q: arguments are not a JSON object", c.src)
		}
		v.Args = args
	}
	hold, err := c.cond.Holds(&v)
	if err != nil {
		return false, fmt.Errorf("condition %q could not be judged: %w", c.src, err)
	}
	return hold, nil
}
