package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
	// CallID is the model's id for the call.
	CallID string
}

type runInfoKey struct{}

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

// validateJSON checks a JSON text against a compiled schema.
func validateJSON(s *jsonschema.Schema, text []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return s.Validate(v)
}
