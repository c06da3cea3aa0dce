package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/kind"
)

// Implementation is the code behind a tool. Call receives the arguments as
// the model wrote them, already validated against the tool's input schema,
// and returns the observation the model will read. An error becomes an
// error observation the model can act on, never a failed run.
//
// Implementations must be safe for concurrent use and must return when ctx
// ends (the tool's timeout or the run's cancellation): the runtime waits for
// them rather than abandon a goroutine.
type Implementation interface {
	// Call runs the tool on validated arguments and returns the
	// observation.
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// ToolKind is the typed configuration of a tool kind: how a declared tool
// is implemented without Go code (a URL to POST to, a fixture file, a
// server's tools). Each kind is a package under runtime/agents/tools whose
// configuration, plain data with the IR's JSON field names, implements it;
// an application description holds it beside the tool's declaration
// (app.Tool.Kind), and app.Assemble calls NewTools. The package
// runtime/agents/tools says how to add a kind.
type ToolKind interface {
	// ToolKind returns the kind's name, as the IR spells it (kind.ToolHTTP).
	ToolKind() string
	// NewTools builds the tools the declaration decl provides, with the
	// code behind each. Most kinds return decl itself, with its
	// implementation; a kind that imports a server's tools whole returns
	// each of them, with the definition (description, input schema,
	// effects) it learned from the server, and the agents that list
	// decl.Name are offered them all. ctx bounds what the kind does at
	// start-up (connecting, listing a server's tools); what it opens for the
	// application's lifetime goes into env.Scope, which closes it.
	NewTools(ctx context.Context, decl Tool, env kind.Env) ([]BuiltTool, error)
}

// BuiltTool is a tool a ToolKind built: its declaration and the code
// behind it.
type BuiltTool struct {
	// Tool is what the model sees and how the runtime treats calls.
	Tool Tool
	// Implementation runs the calls.
	Implementation Implementation
}

// ToolFunc adapts a function to Implementation.
type ToolFunc func(ctx context.Context, args json.RawMessage) (string, error)

// Call calls f.
func (f ToolFunc) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return f(ctx, args)
}

// Typed adapts a function with typed input and output to Implementation:
// the arguments are decoded into In (after schema validation), and Out is
// the observation, as is when it is a string and as JSON otherwise. It is
// what generated services and importing teams register.
func Typed[In, Out any](fn func(ctx context.Context, in In) (Out, error)) Implementation {
	return ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		var in In
		if len(bytes.TrimSpace(args)) > 0 {
			if err := json.Unmarshal(args, &in); err != nil {
				return "", fmt.Errorf("decode arguments: %w", err)
			}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		if s, ok := any(out).(string); ok {
			return s, nil
		}
		b, err := json.Marshal(out)
		if err != nil {
			return "", fmt.Errorf("encode result: %w", err)
		}
		return string(b), nil
	})
}

// RunInfo describes the run a tool call belongs to. Tools read it from their
// context with RunInfoFromContext, for example to write user memory.
type RunInfo struct {
	// RunID is the run.
	RunID string
	// Agent is the agent making the call.
	Agent string
	// ThreadID is the conversation thread, when the run has one.
	ThreadID string
	// UserID is the user, when the run has one.
	UserID string
	// Tenant is the tenant the run is for (kind.Caller.Tenant), empty for
	// none: the subject of the global memory a tool writes for it.
	Tenant string
	// CallID is the model's id for the call.
	CallID string
}

type runInfoKey struct{}

// ContextWithRunInfo returns ctx carrying ri, as the runtime gives a tool
// call's context: for code that calls an implementation outside a run,
// and its tests.
func ContextWithRunInfo(ctx context.Context, ri RunInfo) context.Context {
	return context.WithValue(ctx, runInfoKey{}, &ri)
}

// RunInfoFromContext returns the run a tool is called for.
func RunInfoFromContext(ctx context.Context) (RunInfo, bool) {
	ri, ok := ctx.Value(runInfoKey{}).(*RunInfo)
	if !ok {
		return RunInfo{}, false
	}
	return *ri, true
}

// emptyObjectSchema is the input schema of a tool that takes no arguments.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// schemaProblem describes a validation error for a person: each
// violation with where it is in the document ("at /amount_usd: got
// string, want number"), without the schema's internal address.
func schemaProblem(err error) string {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err.Error()
	}
	var out []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		msg := u.Error.String()
		if u.InstanceLocation != "" {
			msg = "at " + u.InstanceLocation + ": " + msg
		}
		out = append(out, msg)
	}
	if len(out) == 0 {
		return err.Error()
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), "; ")
}

// checkJSON checks a JSON text against a compiled schema, through the
// schema's shape when it has one and the text fits it.
func checkJSON(s *jsonschema.Schema, f *shape, text string) error {
	if f.accepts(text) {
		return nil
	}
	return validateJSON(s, []byte(text))
}

// validateJSON checks a JSON text against a compiled schema.
func validateJSON(s *jsonschema.Schema, text []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return s.Validate(v)
}
