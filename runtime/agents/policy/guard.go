package policy

import (
	"encoding/json"
	"fmt"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Condition is a compiled guardrail condition: a CEL expression of type
// bool over a value a run is about to use, compiled with the same checks,
// cost limit and messages as an approval rule's When. It is safe for
// concurrent use.
type Condition struct {
	src string
	prg cel.Program
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

// noArgs is args where there are no arguments; CEL never changes it.
var noArgs = map[string]any{}

// guardActivation resolves a condition's variables from its input
// without building a map for every evaluation.
type guardActivation struct {
	in   GuardInput
	args map[string]any
	text ref.Val // in.Text as a CEL value, made at its first use
}

// ResolveName implements interpreter.Activation. Strings are CEL values
// already, which the interpreter takes as they are rather than converting
// them again.
func (a *guardActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "text":
		// A condition often reads the text more than once.
		if a.text == nil {
			a.text = types.String(a.in.Text)
		}
		return a.text, true
	case "point":
		return types.String(a.in.Point), true
	case "tool":
		return types.String(a.in.Tool), true
	case "args":
		return a.args, true
	case "agent":
		return types.String(a.in.Agent), true
	case "user":
		return types.String(a.in.User), true
	case "thread":
		return types.String(a.in.Thread), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (a *guardActivation) Parent() interpreter.Activation { return nil }

// guardEnv is the CEL environment of every guardrail condition: the
// approval rules' variables, with text and point beside them.
var guardEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(append(callVariables(),
		cel.Variable("text", cel.StringType),
		cel.Variable("point", cel.StringType),
	)...)
})

// CompileGuard compiles a guardrail condition, which must be a bool; the
// error says where it does not compile, or what type it is instead.
func CompileGuard(expr string) (*Condition, error) {
	e, err := guardEnv()
	if err != nil {
		panic(fmt.Sprintf("policy: building the guardrail CEL environment: %v", err)) // a constant environment
	}
	ast, err := checkCondition(e, expr)
	if err != nil {
		return nil, err
	}
	var opts []cel.ProgramOption
	if iterates(ast) {
		opts = append(opts, cel.CostLimit(costLimit))
	}
	prg, err := e.Program(ast, opts...)
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", expr, err)
	}
	return &Condition{src: expr, prg: prg}, nil
}

// iterates reports whether a condition has a comprehension (all, exists,
// exists_one, map, filter), the only construct whose work can multiply:
// without one, each of its operations reads the value at most once over
// (size, contains, matches, which is RE2), so its cost is bounded by its
// length times the value's, and a guardrail, which judges every input,
// spares itself the cost limit's tracking (most of what evaluating such a
// condition costs, BenchmarkCheck/cel). A condition with one is bounded by
// the cost limit, as an approval rule's is.
func iterates(a *cel.Ast) bool {
	return len(ast.MatchDescendants(ast.NavigateAST(a.NativeRep()), ast.KindMatcher(ast.ComprehensionKind))) > 0
}

// Holds evaluates the condition for in. An error (arguments that are not
// a JSON object, a missing key without has(), the cost limit) means it
// could not be judged; a guardrail treats that as tripped.
func (c *Condition) Holds(in GuardInput) (bool, error) {
	act := &guardActivation{in: in, args: noArgs}
	if len(in.Arguments) > 0 {
		var args map[string]any
		if err := json.Unmarshal(in.Arguments, &args); err != nil || args == nil {
			return false, fmt.Errorf("condition %q: arguments are not a JSON object", c.src)
		}
		act.args = args
	}
	out, _, err := c.prg.Eval(act)
	if err != nil {
		return false, fmt.Errorf("condition %q could not be judged: %w", c.src, err)
	}
	hold, ok := out.Value().(bool)
	return ok && hold, nil
}
