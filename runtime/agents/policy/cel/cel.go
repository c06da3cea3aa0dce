package cel

import (
	"fmt"
	"strings"
	"sync"

	celgo "cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/types"
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
	var opts []celgo.ProgramOption
	if !guard || iterates(ast) {
		opts = append(opts, celgo.CostLimit(costLimit))
	}
	prg, err := e.Program(ast, opts...)
	if err != nil {
		return nil, fmt.Errorf("condition %q: %w", expr, err)
	}
	return condition{prg}, nil
}

// iterates reports whether a condition has a comprehension (all, exists,
// exists_one, map, filter), the only construct whose work can multiply:
// without one, each of its operations reads the value at most once over
// (size, contains, matches, which is RE2), so its cost is bounded by its
// length times the value's, and a guardrail, which judges every input,
// spares itself the cost limit's tracking (most of what evaluating such a
// condition costs, BenchmarkCheck/cel). A condition with one is bounded by
// the cost limit, as an approval rule's is (an approval rule's
// condition is always bounded by it).
func iterates(a *celgo.Ast) bool {
	return len(ast.MatchDescendants(ast.NavigateAST(a.NativeRep()), ast.KindMatcher(ast.ComprehensionKind))) > 0
}

// condition is a compiled program. It is safe for concurrent use.
type condition struct{ prg celgo.Program }

// Holds implements policy.Condition.
func (c condition) Holds(v *policy.Vars) (bool, error) {
	out, _, err := c.prg.Eval(&activation{v: v})
	if err != nil {
		return false, err
	}
	hold, ok := out.Value().(bool)
	return ok && hold, nil
}

// activation resolves a condition's variables from its input without
// building a map for every evaluation. Strings are given as CEL values,
// which the interpreter takes as they are rather than converting them
// again; the text, which a condition often reads more than once, is
// converted at its first use.
type activation struct {
	v    *policy.Vars
	text types.String
	made bool
}

// ResolveName implements interpreter.Activation.
func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "tool":
		return types.String(a.v.Tool), true
	case "args":
		return a.v.Args, true
	case "agent":
		return types.String(a.v.Agent), true
	case "user":
		return types.String(a.v.User), true
	case "thread":
		return types.String(a.v.Thread), true
	case "text":
		if !a.made {
			a.text, a.made = types.String(a.v.Text), true
		}
		return a.text, true
	case "point":
		return types.String(a.v.Point), true
	}
	return nil, false
}

// Parent implements interpreter.Activation.
func (*activation) Parent() interpreter.Activation { return nil }
