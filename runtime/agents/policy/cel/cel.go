package cel

import (
	"fmt"
	"strings"
	"sync"

	celgo "cel.dev/cel-go/cel"
	"cel.dev/cel-go/interpreter"

	"github.com/aidgen/aid/runtime/agents/policy"
)

// Language is CEL as the language of conditions. It is plain data, so a
// generated service's description holds it as a literal.
type Language struct{}

// costLimit bounds the evaluation of one condition (cel.CostLimit): a
// condition may iterate over arguments a model wrote.
const costLimit = 100_000

// callVariables are the variables a condition sees of a call, and the
// option that compares its numbers; guardrail conditions see them too.
func callVariables() []celgo.EnvOption {
	return []celgo.EnvOption{
		celgo.Variable("tool", celgo.StringType),
		celgo.Variable("args", celgo.MapType(celgo.StringType, celgo.DynType)),
		celgo.Variable("agent", celgo.StringType),
		celgo.Variable("user", celgo.StringType),
		celgo.Variable("thread", celgo.StringType),
		celgo.CrossTypeNumericComparisons(true),
	}
}

// callEnv is the environment of every approval rule's condition, built
// once.
var callEnv = sync.OnceValues(func() (*celgo.Env, error) {
	return celgo.NewEnv(callVariables()...)
})

// guardEnv is the environment of every guardrail condition: the approval
// rules' variables, with text and point beside them.
var guardEnv = sync.OnceValues(func() (*celgo.Env, error) {
	return celgo.NewEnv(append(callVariables(),
		celgo.Variable("text", celgo.StringType),
		celgo.Variable("point", celgo.StringType),
	)...)
})

// Compile implements policy.Language: expr must compile to a bool; the
// error says where it does not compile, or what type it is instead.
func (Language) Compile(expr string, guard bool) (policy.Condition, error) {
	envOf := callEnv
	if guard {
		envOf = guardEnv
	}
	e, err := envOf()
	if err != nil {
		panic(fmt.Sprintf("cel: building the environment of conditions: %v", err)) // a constant environment
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		var msgs []string
		for _, ce := range iss.Errors() {
			at := fmt.Sprintf("column %d", ce.Location.Column()+1)
			if l := ce.Location.Line(); l > 1 {
				at = fmt.Sprintf("line %d, %s", l, at)
			}
			msgs = append(msgs, at+": "+ce.Message)
		}
		return nil, fmt.Errorf("condition %q does not compile: %s", expr, strings.Join(msgs, "; "))
	}
	if t := ast.OutputType(); !t.IsExactType(celgo.BoolType) {
		return nil, fmt.Errorf("condition %q is a %s, not a bool; compare it (for example %s == true) so that it is true or false", expr, t, expr)
	}
	prg, err := e.Program(ast, celgo.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", expr, err)
	}
	return condition{prg}, nil
}

// condition is a compiled program. It is safe for concurrent use.
type condition struct{ prg celgo.Program }

// Holds implements policy.Condition.
func (c condition) Holds(v *policy.Vars) (bool, error) {
	out, _, err := c.prg.Eval(activation{v})
	if err != nil {
		return false, err
	}
	hold, ok := out.Value().(bool)
	return ok && hold, nil
}

// activation resolves a condition's variables from its input without
// building a map for every evaluation.
type activation struct{ v *policy.Vars }

// ResolveName implements interpreter.Activation.
func (a activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return a.v.Tool, true
	case "args":
		return a.v.Args, true
	case "agent":
		return a.v.Agent, true
	case "user":
		return a.v.User, true
	case "thread":
		return a.v.Thread, true
	case "text":
		return a.v.Text, true
	case "point":
		return a.v.Point, true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (activation) Parent() interpreter.Activation { return nil }
