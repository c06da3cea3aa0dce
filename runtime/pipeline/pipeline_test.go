package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/pipeline"
)

// state holds a slice and a map, the two things a careless step could write
// through into a state it does not own.
type state struct {
	Log  []string
	Tags map[string]string
}

func (s state) Clone() state {
	return state{Log: slices.Clone(s.Log), Tags: maps.Clone(s.Tags)}
}

// record is a well-behaved step: it writes into its own copy and returns it.
func record(name string) pipeline.Step[state] {
	return pipeline.Step[state]{Name: name, Run: func(_ context.Context, s state) (state, error) {
		s.Log = append(s.Log, name)
		if s.Tags == nil {
			s.Tags = map[string]string{}
		}
		s.Tags[name] = "done"
		return s, nil
	}}
}

// vandal writes into the state it was given, in place, through the map and
// the slice's backing array, then returns err: the state it saw must not be
// the pipeline's last good state.
func vandal(name string, err error) pipeline.Step[state] {
	return pipeline.Step[state]{Name: name, Run: func(_ context.Context, s state) (state, error) {
		for k := range s.Tags {
			s.Tags[k] = "vandalised"
		}
		s.Tags["vandal"] = "was here"
		for i := range s.Log {
			s.Log[i] = "vandalised"
		}
		return s, err
	}}
}

func stopper(name string, err error) pipeline.Step[state] {
	return pipeline.Step[state]{Name: name, Run: func(_ context.Context, s state) (state, error) {
		s.Log = append(s.Log, name+" stopped")
		return s, err
	}}
}

func panicker(name string, v any) pipeline.Step[state] {
	return pipeline.Step[state]{Name: name, Run: func(_ context.Context, s state) (state, error) {
		panic(v)
	}}
}

// spanWant is what a test expects of one ended span.
type spanWant struct {
	name   string
	parent string // name of the parent span; "" for the root
	status codes.Code
	attrs  map[attribute.Key]attribute.Value
	// event is the name of an event the span must have ("" for none).
	event string
}

func TestRun(t *testing.T) {
	errBoom := errors.New("boom")
	str := attribute.StringValue
	idx := func(i int) attribute.Value { return attribute.IntValue(i) }
	tests := []struct {
		name  string
		steps []pipeline.Step[state]
		// cancelIn names the step after whose work the run's context is
		// cancelled, with io.ErrClosedPipe as the cause.
		cancelIn string

		want      pipeline.Result[state]
		wantErrIs []error // each must match errors.Is; nil means success
		wantStep  string
		wantIndex int
		wantLast  state // PipelineError.State
		wantCause string
		spans     []spanWant
	}{{
		name:  "every step runs",
		steps: []pipeline.Step[state]{record("a"), record("b")},
		want:  pipeline.Result[state]{State: state{Log: []string{"in", "a", "b"}, Tags: map[string]string{"seed": "x", "a": "done", "b": "done"}}, Steps: 2},
		spans: []spanWant{
			{name: "step a", parent: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrPipelineName: str("p"), pipeline.AttrStepName: str("a"), pipeline.AttrStepIndex: idx(0)}},
			{name: "step b", parent: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrStepName: str("b"), pipeline.AttrStepIndex: idx(1)}},
			{name: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrPipelineName: str("p"), pipeline.AttrStepCount: idx(2), pipeline.AttrStatus: str(pipeline.StatusCompleted)}},
		},
	}, {
		name:      "a failing step keeps the last good state although it wrote into its copy",
		steps:     []pipeline.Step[state]{record("a"), vandal("b", fmt.Errorf("calling the index: %w", errBoom)), record("c")},
		wantErrIs: []error{errBoom},
		wantStep:  "b", wantIndex: 1,
		wantLast:  state{Log: []string{"in", "a"}, Tags: map[string]string{"seed": "x", "a": "done"}},
		wantCause: `pipeline "p": step "b": calling the index: boom`,
		spans: []spanWant{
			{name: "step a", parent: "pipeline p"},
			{name: "step b", parent: "pipeline p", status: codes.Error, event: "exception"},
			{name: "pipeline p", status: codes.Error, event: "exception", attrs: map[attribute.Key]attribute.Value{pipeline.AttrStatus: str(pipeline.StatusFailed), pipeline.AttrFailedStep: str("b")}},
		},
	}, {
		name:      "the first step fails: the last good state is the input",
		steps:     []pipeline.Step[state]{vandal("a", errBoom)},
		wantErrIs: []error{errBoom},
		wantStep:  "a", wantIndex: 0,
		wantLast:  state{Log: []string{"in"}, Tags: map[string]string{"seed": "x"}},
		wantCause: `pipeline "p": step "a": boom`,
		spans: []spanWant{
			{name: "step a", parent: "pipeline p", status: codes.Error},
			{name: "pipeline p", status: codes.Error},
		},
	}, {
		name:  "ErrStop ends the run early with the stopping step's state",
		steps: []pipeline.Step[state]{record("a"), stopper("b", pipeline.ErrStop), record("c")},
		want:  pipeline.Result[state]{State: state{Log: []string{"in", "a", "b stopped"}, Tags: map[string]string{"seed": "x", "a": "done"}}, Steps: 2, StoppedBy: "b"},
		spans: []spanWant{
			{name: "step a", parent: "pipeline p"},
			{name: "step b", parent: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrStepStopped: attribute.BoolValue(true)}},
			{name: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrStatus: str(pipeline.StatusStopped), pipeline.AttrStoppedBy: str("b")}},
		},
	}, {
		name:  "a wrapped ErrStop stops too",
		steps: []pipeline.Step[state]{stopper("a", fmt.Errorf("cache hit: %w", pipeline.ErrStop)), record("b")},
		want:  pipeline.Result[state]{State: state{Log: []string{"in", "a stopped"}, Tags: map[string]string{"seed": "x"}}, Steps: 1, StoppedBy: "a"},
		spans: []spanWant{
			{name: "step a", parent: "pipeline p"},
			{name: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrStoppedBy: str("a")}},
		},
	}, {
		name:     "a panic fails the run with a PanicError",
		steps:    []pipeline.Step[state]{record("a"), panicker("b", "index out of range"), record("c")},
		wantStep: "b", wantIndex: 1,
		wantLast:  state{Log: []string{"in", "a"}, Tags: map[string]string{"seed": "x", "a": "done"}},
		wantCause: `pipeline "p": step "b": step panicked: index out of range`,
		spans: []spanWant{
			{name: "step a", parent: "pipeline p"},
			{name: "step b", parent: "pipeline p", status: codes.Error, event: "exception"},
			{name: "pipeline p", status: codes.Error, attrs: map[attribute.Key]attribute.Value{pipeline.AttrFailedStep: str("b")}},
		},
	}, {
		name:      "a panic with ErrStop is a failure, not a stop",
		steps:     []pipeline.Step[state]{panicker("a", pipeline.ErrStop)},
		wantErrIs: []error{pipeline.ErrStop},
		wantStep:  "a", wantIndex: 0,
		wantLast:  state{Log: []string{"in"}, Tags: map[string]string{"seed": "x"}},
		wantCause: `pipeline "p": step "a": step panicked: pipeline stopped early`,
		spans: []spanWant{
			{name: "step a", parent: "pipeline p", status: codes.Error},
			{name: "pipeline p", status: codes.Error},
		},
	}, {
		name:      "a cancelled context stops the run before the next step",
		steps:     []pipeline.Step[state]{record("a"), record("b"), record("c")},
		cancelIn:  "a",
		wantErrIs: []error{context.Canceled, io.ErrClosedPipe},
		wantStep:  "b", wantIndex: 1,
		wantLast:  state{Log: []string{"in", "a"}, Tags: map[string]string{"seed": "x", "a": "done"}},
		wantCause: `pipeline "p": step "b": not started: context canceled: io: read/write on closed pipe`,
		spans: []spanWant{
			{name: "step a", parent: "pipeline p"},
			{name: "pipeline p", status: codes.Error, attrs: map[attribute.Key]attribute.Value{pipeline.AttrFailedStep: str("b")}},
		},
	}, {
		name:  "no steps returns the input",
		steps: nil,
		want:  pipeline.Result[state]{State: state{Log: []string{"in"}, Tags: map[string]string{"seed": "x"}}},
		spans: []spanWant{{name: "pipeline p", attrs: map[attribute.Key]attribute.Value{pipeline.AttrStepCount: idx(0), pipeline.AttrStatus: str(pipeline.StatusCompleted)}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			steps := slices.Clone(tt.steps)
			for i, st := range steps {
				if st.Name == tt.cancelIn {
					run := st.Run
					steps[i].Run = func(ctx context.Context, s state) (state, error) {
						out, err := run(ctx, s)
						cancel(io.ErrClosedPipe)
						return out, err
					}
				}
			}
			p, err := pipeline.New("p", steps, pipeline.WithTracer(tp.Tracer("test")))
			if err != nil {
				t.Fatal(err)
			}
			in := state{Log: []string{"in"}, Tags: map[string]string{"seed": "x"}}
			got, err := p.Run(ctx, in)

			if diff := cmp.Diff(state{Log: []string{"in"}, Tags: map[string]string{"seed": "x"}}, in); diff != "" {
				t.Errorf("Run changed its input (-want +got):\n%s", diff)
			}
			if tt.wantStep == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			} else {
				var perr *pipeline.PipelineError[state]
				if !errors.As(err, &perr) {
					t.Fatalf("Run error = %v (%T), want a *PipelineError[state]", err, err)
				}
				if perr.Pipeline != "p" || perr.Step != tt.wantStep || perr.Index != tt.wantIndex {
					t.Errorf("error names pipeline %q step %q index %d, want p %q %d", perr.Pipeline, perr.Step, perr.Index, tt.wantStep, tt.wantIndex)
				}
				if diff := cmp.Diff(tt.wantLast, perr.State); diff != "" {
					t.Errorf("last good state (-want +got):\n%s", diff)
				}
				if err.Error() != tt.wantCause {
					t.Errorf("error text = %q, want %q", err.Error(), tt.wantCause)
				}
				for _, target := range tt.wantErrIs {
					if !errors.Is(err, target) {
						t.Errorf("errors.Is(err, %v) = false for %v", target, err)
					}
				}
				if errors.Is(err, pipeline.ErrStop) != slices.Contains(tt.wantErrIs, pipeline.ErrStop) {
					t.Errorf("errors.Is(err, ErrStop) = %v for %v", !slices.Contains(tt.wantErrIs, pipeline.ErrStop), err)
				}
				if diff := cmp.Diff(pipeline.Result[state]{}, got); diff != "" {
					t.Errorf("a failed run returned a result (-want +got):\n%s", diff)
				}
			}
			checkSpans(t, rec.Ended(), tt.spans)
		})
	}
}

// checkSpans compares the ended spans with want, in order.
func checkSpans(t *testing.T, got []sdktrace.ReadOnlySpan, want []spanWant) {
	t.Helper()
	names := make([]string, len(got))
	byID := map[string]string{}
	for i, s := range got {
		names[i] = s.Name()
		byID[s.SpanContext().SpanID().String()] = s.Name()
	}
	wantNames := make([]string, len(want))
	for i, w := range want {
		wantNames[i] = w.name
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Fatalf("ended spans (-want +got):\n%s", diff)
	}
	for i, w := range want {
		s := got[i]
		parent := ""
		if s.Parent().IsValid() {
			parent = byID[s.Parent().SpanID().String()]
			if s.Parent().TraceID() != s.SpanContext().TraceID() {
				t.Errorf("span %q is in another trace than its parent", w.name)
			}
		}
		if parent != w.parent {
			t.Errorf("span %q has parent %q, want %q", w.name, parent, w.parent)
		}
		if s.Status().Code != w.status {
			t.Errorf("span %q status = %v (%q), want %v", w.name, s.Status().Code, s.Status().Description, w.status)
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		for k, v := range w.attrs {
			if got, ok := attrs[k]; !ok || got != v {
				t.Errorf("span %q attribute %s = %v (present %v), want %v", w.name, k, got, ok, v)
			}
		}
		if w.event != "" && !slices.ContainsFunc(s.Events(), func(e sdktrace.Event) bool { return e.Name == w.event }) {
			t.Errorf("span %q has no %q event", w.name, w.event)
		}
	}
}

func TestPanicErrorCarriesTheStack(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := pipeline.New("p", []pipeline.Step[state]{panicker("deep", io.ErrUnexpectedEOF)}, pipeline.WithTracer(tp.Tracer("test")))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), state{})
	var pe *pipeline.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run error = %v, want a *PanicError inside", err)
	}
	if pe.Value != io.ErrUnexpectedEOF || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("panic value = %v, want io.ErrUnexpectedEOF reachable with errors.Is", pe.Value)
	}
	// The stack is the panicking goroutine's, so it names the step's function.
	if !strings.Contains(string(pe.Stack), "\npanic(") || !strings.Contains(string(pe.Stack), "runtime/pipeline/pipeline_test.go:") {
		t.Errorf("stack does not show the panicking step:\n%s", pe.Stack)
	}
	step := rec.Ended()[0]
	var traced string
	for _, e := range step.Events() {
		for _, kv := range e.Attributes {
			if kv.Key == "exception.stacktrace" {
				traced = kv.Value.AsString()
			}
		}
	}
	if !strings.Contains(traced, "\npanic(") || !strings.Contains(traced, "runtime/pipeline/pipeline_test.go:") {
		t.Errorf("the step span's exception event has no stack naming the step: %q", traced)
	}
}

// A state whose Clone panics (a nil pointer) fails the run instead of
// crashing the caller.
type ptrState struct{ N int }

func (s *ptrState) Clone() *ptrState { c := *s; return &c }

func TestCloneThatPanicsFailsTheRun(t *testing.T) {
	p, err := pipeline.New("p", []pipeline.Step[*ptrState]{{Name: "a", Run: func(_ context.Context, s *ptrState) (*ptrState, error) { return s, nil }}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Run(context.Background(), nil)
	var pe *pipeline.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run(nil state) error = %v, want a *PanicError", err)
	}
}

// Without WithTracer a run joins the trace of the span in its context.
func TestRunJoinsTheCallersTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, parent := tp.Tracer("caller").Start(context.Background(), "request")
	inner := pipeline.Step[state]{Name: "traced", Run: func(ctx context.Context, s state) (state, error) {
		// A step's own spans nest under the step span.
		_, sp := tp.Tracer("step").Start(ctx, "gateway call")
		sp.End()
		return s, nil
	}}
	p, err := pipeline.New("p", []pipeline.Step[state]{inner})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Run(ctx, state{}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	checkSpans(t, rec.Ended(), []spanWant{
		{name: "gateway call", parent: "step traced"},
		{name: "step traced", parent: "pipeline p"},
		{name: "pipeline p", parent: "request"},
		{name: "request"},
	})
}

// With no tracer and no span in the context the spans are no-ops, and the
// run still works.
func TestRunWithoutTracing(t *testing.T) {
	p, err := pipeline.New("p", []pipeline.Step[state]{record("a")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(context.Background(), state{})
	if err != nil || !slices.Equal(got.State.Log, []string{"a"}) {
		t.Fatalf("Run = %+v, %v", got, err)
	}
}

func TestNewRejects(t *testing.T) {
	ok := record("a").Run
	tests := []struct {
		name    string
		pname   string
		steps   []pipeline.Step[state]
		wantErr string
	}{
		{"no pipeline name", "", []pipeline.Step[state]{record("a")}, `new pipeline: the pipeline has no name`},
		{"a step without a name", "p", []pipeline.Step[state]{record("a"), {Run: ok}}, `new pipeline "p": step 1 has no name`},
		{"two steps with one name", "p", []pipeline.Step[state]{record("a"), record("b"), record("a")}, `new pipeline "p": steps 0 and 2 are both named "a"; step names must be unique`},
		{"a step without Run", "p", []pipeline.Step[state]{{Name: "a"}}, `new pipeline "p": step "a" has no Run function`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := pipeline.New(tt.pname, tt.steps)
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("New error = %v, want %q", err, tt.wantErr)
			}
			if p != nil {
				t.Errorf("New returned a pipeline with its error")
			}
		})
	}
}

// New copies the steps: changing the caller's slice afterwards changes
// nothing.
func TestNewCopiesSteps(t *testing.T) {
	steps := []pipeline.Step[state]{record("a")}
	p, err := pipeline.New("p", steps)
	if err != nil {
		t.Fatal(err)
	}
	steps[0] = vandal("a", errors.New("replaced"))
	if _, err := p.Run(context.Background(), state{}); err != nil {
		t.Fatalf("Run used the caller's changed slice: %v", err)
	}
}

// One pipeline serves concurrent runs; -race checks they share nothing.
func TestConcurrentRuns(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := pipeline.New("p", []pipeline.Step[state]{record("a"), record("b")}, pipeline.WithTracer(tp.Tracer("test")))
	if err != nil {
		t.Fatal(err)
	}
	shared := state{Log: []string{"in"}, Tags: map[string]string{"seed": "x"}}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			got, err := p.Run(context.Background(), shared)
			if err == nil && !slices.Equal(got.State.Log, []string{"in", "a", "b"}) {
				err = fmt.Errorf("log = %v", got.State.Log)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := len(rec.Ended()); n != 8*3 {
		t.Errorf("%d spans ended, want %d", n, 8*3)
	}
}
