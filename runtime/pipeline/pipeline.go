package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names the tracer a pipeline takes from the context's
// tracer provider when it was given none.
const instrumentationName = "github.com/aidgen/aid/runtime/pipeline"

// The attributes of pipeline spans.
const (
	// AttrPipelineName names the pipeline, on the run span and every step span.
	AttrPipelineName = attribute.Key("aid.pipeline.name")
	// AttrStepCount is the number of steps the pipeline has, on the run span.
	AttrStepCount = attribute.Key("aid.pipeline.steps")
	// AttrStatus says how the run ended: completed, stopped or failed.
	AttrStatus = attribute.Key("aid.pipeline.status")
	// AttrStoppedBy names the step that stopped the run early with ErrStop.
	AttrStoppedBy = attribute.Key("aid.pipeline.stopped_by")
	// AttrFailedStep names the step whose error ended the run, on the run
	// span, so a failed run can be found without opening its children.
	AttrFailedStep = attribute.Key("aid.pipeline.failed_step")
	// AttrStepName names the step, on its span.
	AttrStepName = attribute.Key("aid.pipeline.step.name")
	// AttrStepIndex is the step's position in the pipeline, from 0.
	AttrStepIndex = attribute.Key("aid.pipeline.step.index")
	// AttrStepStopped is true on the span of the step that returned ErrStop.
	AttrStepStopped = attribute.Key("aid.pipeline.step.stopped")
)

// The values of AttrStatus.
const (
	StatusCompleted = "completed"
	StatusStopped   = "stopped"
	StatusFailed    = "failed"
)

// ErrStop is returned by a step, alone or wrapped, to end the run early and
// successfully: Run returns the state that step returned, with
// Result.StoppedBy naming the step. It is how a step says "the answer is
// already here" (a cache hit, a retrieval that found nothing to do) without
// every later step having to check for it. Run never returns ErrStop itself.
var ErrStop = errors.New("pipeline stopped early")

// Cloner is the constraint on a pipeline's state: Clone returns a copy that
// shares nothing a step might write into. The pipeline gives each step a
// clone, which is what makes "steps cannot mutate the state" true rather than
// a convention; see the package documentation.
type Cloner[S any] interface {
	Clone() S
}

// Step is one named stage of a pipeline. Run receives its own copy of the
// state and returns the next state; a non-nil error other than ErrStop fails
// the run and the returned state is discarded.
type Step[S any] struct {
	// Name identifies the step in spans and errors; it must be non-empty and
	// unique within the pipeline, so that a failure names one step.
	Name string
	// Run does the step's work. Its context carries the step's span.
	Run func(ctx context.Context, state S) (S, error)
}

// Option configures a Pipeline.
type Option func(*options)

type options struct {
	tracer trace.Tracer
}

// WithTracer sets the tracer for the run and step spans. Without it a run
// uses the tracer provider of the span in its context, so that it joins the
// caller's trace.
func WithTracer(t trace.Tracer) Option {
	return func(o *options) { o.tracer = t }
}

// Pipeline is an immutable, named sequence of steps; one Pipeline may run any
// number of times, concurrently.
type Pipeline[S Cloner[S]] struct {
	name   string
	steps  []Step[S]
	tracer trace.Tracer
}

// New checks the steps and returns the pipeline: the name and every step
// name must be non-empty, step names unique, and every step must have a Run
// function. It copies the steps, so changing the slice later does not change
// the pipeline.
func New[S Cloner[S]](name string, steps []Step[S], opts ...Option) (*Pipeline[S], error) {
	if name == "" {
		return nil, errors.New("new pipeline: the pipeline has no name")
	}
	seen := make(map[string]int, len(steps))
	for i, st := range steps {
		if st.Name == "" {
			return nil, fmt.Errorf("new pipeline %q: step %d has no name", name, i)
		}
		if j, dup := seen[st.Name]; dup {
			return nil, fmt.Errorf("new pipeline %q: steps %d and %d are both named %q; step names must be unique", name, j, i, st.Name)
		}
		seen[st.Name] = i
		if st.Run == nil {
			return nil, fmt.Errorf("new pipeline %q: step %q has no Run function", name, st.Name)
		}
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return &Pipeline[S]{name: name, steps: append([]Step[S](nil), steps...), tracer: o.tracer}, nil
}

// Name returns the pipeline's name.
func (p *Pipeline[S]) Name() string { return p.name }

// Result is what a successful run returns.
type Result[S any] struct {
	// State is the state returned by the last step that ran.
	State S
	// Steps is the number of steps that ran, the stopping step included.
	Steps int
	// StoppedBy names the step that ended the run early with ErrStop; it is
	// empty when every step ran.
	StoppedBy string
}

// Run runs the steps in order on clones of state, as the package
// documentation describes. It returns a *PipelineError[S] when a step fails,
// panics or the context ends before a step; it never changes state.
func (p *Pipeline[S]) Run(ctx context.Context, state S) (Result[S], error) {
	tracer := p.tracer
	if tracer == nil {
		tracer = trace.SpanFromContext(ctx).TracerProvider().Tracer(instrumentationName)
	}
	runCtx, span := tracer.Start(ctx, "pipeline "+p.name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrPipelineName.String(p.name), AttrStepCount.Int(len(p.steps))))
	defer span.End()

	last := state
	for i, st := range p.steps {
		if err := ctx.Err(); err != nil {
			if cause := context.Cause(ctx); cause != nil && cause != err {
				err = fmt.Errorf("%w: %w", err, cause)
			}
			return Result[S]{}, p.fail(span, i, last, fmt.Errorf("not started: %w", err))
		}
		out, stopped, err := p.runStep(runCtx, tracer, i, last)
		if stopped {
			span.SetAttributes(AttrStatus.String(StatusStopped), AttrStoppedBy.String(st.Name))
			return Result[S]{State: out, Steps: i + 1, StoppedBy: st.Name}, nil
		}
		if err != nil {
			return Result[S]{}, p.fail(span, i, last, err)
		}
		last = out
	}
	span.SetAttributes(AttrStatus.String(StatusCompleted))
	return Result[S]{State: last, Steps: len(p.steps)}, nil
}

// fail records on the run span that step i ended the run and returns the
// PipelineError for it.
func (p *Pipeline[S]) fail(span trace.Span, i int, last S, err error) error {
	perr := &PipelineError[S]{Pipeline: p.name, Step: p.steps[i].Name, Index: i, State: last, Err: err}
	span.SetAttributes(AttrStatus.String(StatusFailed), AttrFailedStep.String(p.steps[i].Name))
	span.RecordError(perr)
	span.SetStatus(codes.Error, perr.Error())
	return perr
}

// runStep runs step i on a clone of in, in the step's span. stopped reports
// that the step returned ErrStop. A panic in the step, or in Clone, becomes a
// *PanicError and never a stop, even when the panic value is ErrStop: a stop
// is something a step returns on purpose.
func (p *Pipeline[S]) runStep(ctx context.Context, tracer trace.Tracer, i int, in S) (out S, stopped bool, err error) {
	st := p.steps[i]
	ctx, span := tracer.Start(ctx, "step "+st.Name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrPipelineName.String(p.name), AttrStepName.String(st.Name), AttrStepIndex.Int(i)))
	defer func() {
		if v := recover(); v != nil {
			var zero S
			pe := &PanicError{Value: v, Stack: debug.Stack()}
			out, stopped, err = zero, false, pe
			span.RecordError(pe, trace.WithAttributes(semconv.ExceptionStacktrace(string(pe.Stack))))
			span.SetStatus(codes.Error, pe.Error())
		}
		span.End()
	}()
	out, err = st.Run(ctx, in.Clone())
	switch {
	case err == nil:
	case errors.Is(err, ErrStop):
		stopped, err = true, nil
		span.SetAttributes(AttrStepStopped.Bool(true))
	default:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return out, stopped, err
}

// PipelineError reports the step that ended a run without success. State
// is the last good state: the one the previous step returned (or the run's
// input for the first step), untouched by the failing step, so a caller can
// inspect it, log it or start again from it.
type PipelineError[S any] struct {
	// Pipeline is the pipeline's name.
	Pipeline string
	// Step is the name of the step that failed or, after a cancellation, did
	// not start.
	Step string
	// Index is that step's position, from 0.
	Index int
	// State is the last good state.
	State S
	// Err is the cause: the step's error, a *PanicError, or the context's
	// error wrapped as "not started".
	Err error
}

func (e *PipelineError[S]) Error() string {
	return fmt.Sprintf("pipeline %q: step %q: %v", e.Pipeline, e.Step, e.Err)
}

// Unwrap returns the cause, so errors.Is and errors.As reach it.
func (e *PipelineError[S]) Unwrap() error { return e.Err }

// PanicError is the cause of a PipelineError when a step panicked.
type PanicError struct {
	// Value is what the step passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, from runtime/debug.Stack.
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("step panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error, so that a step that
// panics with an error can still be matched with errors.Is.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
