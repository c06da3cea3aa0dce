// Package pipeline runs named steps in order over a state value, each step in
// its own OpenTelemetry span under one span for the run. It is how a team
// composes retrieval, an agent run and its own code into one traced flow
// without writing the bookkeeping again: which step failed, with what, and
// what the state was before it.
//
// # Steps never mutate the state they are given
//
// A Step receives a state and returns a new one; the pipeline keeps the
// state each step returned as the last good state. The state type must
// implement Cloner: before every step the pipeline hands the step a Clone of
// the last good state, never the value it keeps. So a step that writes into a
// map or a slice inside the state, and then fails, leaves the last good state
// (PipelineError.State) exactly as the previous step returned it, and Run
// never changes the state its caller passed in. A state made only of values
// (strings, numbers, structs of them) clones with `return s`; a state that
// holds maps, slices or pointers must copy them in Clone, as deep as steps
// write. The guarantee covers the state value only: what a step does to
// things outside it (a store, a cache) is the step's business.
//
// # How a run ends
//
//   - Every step returned a nil error: Run returns the last step's state.
//   - A step returned ErrStop (or an error wrapping it): the run ends early
//     and successfully with the state that step returned; Result.StoppedBy
//     names the step.
//   - A step returned another error or panicked: Run returns a
//     *PipelineError naming the pipeline and the step, carrying the last good
//     state and the cause (errors.Is and errors.As reach it). A panic becomes
//     a *PanicError with the panic value and the stack.
//   - The context was cancelled: before each step Run checks the context;
//     when it is done, Run returns a *PipelineError naming the step that did
//     not start, whose cause is the context's error. A step that is running
//     sees the cancellation through its own context.
//
// # Why panics are recovered
//
// A pipeline runs team code inside a long-lived service, one run per request.
// A panic in one step of one run should fail that run like any other error,
// with its step, its stack and the last good state on hand and the spans
// ended as errors, rather than end the process and every other run with it.
// The pipeline's own state cannot be half-written by the panicking step,
// because the step held a clone.
//
// # Tracing
//
// A run opens a span named "pipeline <name>" and, under it, one span named
// "step <name>" per step that starts; the step's context carries its span,
// so the spans a step opens (a gateway call, an agent run) nest under it.
// Spans carry the aid.pipeline.* attributes defined in this package. The
// tracer is the one given with WithTracer, or else the tracer provider of the
// span already in the context, so a pipeline run inside a traced request
// joins that trace with no configuration; with neither, spans are no-ops.
//
// What this package is not: a scheduler. Steps run one after another in the
// caller's goroutine; there is no parallelism, retry or persistence. A step
// that needs them (an agent run that pauses for approval, a retried call)
// does them itself.
package pipeline
