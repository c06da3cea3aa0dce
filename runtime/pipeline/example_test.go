package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/pipeline"
)

// Answer is the state of a question-answering flow. Docs is a slice, so
// Clone copies it: a step that appends to or overwrites Docs works on its
// own copy.
type Answer struct {
	Question string
	Docs     []string
	Text     string
}

// Clone returns a copy of a that shares no slice with it.
func (a Answer) Clone() Answer {
	a.Docs = slices.Clone(a.Docs)
	return a
}

// A team composes retrieval, a model call and its own code into one traced
// flow. In a service, the steps would call a retriever and an agent runtime;
// their spans nest under the step spans.
func Example() {
	cache := map[string]string{"what is aid?": "a runtime for agents"}
	steps := []pipeline.Step[Answer]{
		{Name: "cache", Run: func(_ context.Context, a Answer) (Answer, error) {
			if text, ok := cache[a.Question]; ok {
				a.Text = text
				return a, pipeline.ErrStop // answered: skip the rest
			}
			return a, nil
		}},
		{Name: "retrieve", Run: func(_ context.Context, a Answer) (Answer, error) {
			a.Docs = append(a.Docs, "Paris is the capital of France.")
			return a, nil
		}},
		{Name: "answer", Run: func(_ context.Context, a Answer) (Answer, error) {
			if len(a.Docs) == 0 {
				return a, errors.New("no documents to answer from")
			}
			a.Text = fmt.Sprintf("answered from %d document(s)", len(a.Docs))
			return a, nil
		}},
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := pipeline.New("qa", steps, pipeline.WithTracer(tp.Tracer("example")))
	if err != nil {
		fmt.Println(err)
		return
	}

	res, err := p.Run(context.Background(), Answer{Question: "capital of France?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s (%d steps)\n", res.State.Text, res.Steps)

	res, _ = p.Run(context.Background(), Answer{Question: "what is aid?"})
	fmt.Printf("%s (stopped by %s)\n", res.State.Text, res.StoppedBy)

	for _, s := range rec.Ended() {
		fmt.Println(s.Name())
	}
	// Output:
	// answered from 1 document(s) (3 steps)
	// a runtime for agents (stopped by cache)
	// step cache
	// step retrieve
	// step answer
	// pipeline qa
	// step cache
	// pipeline qa
}

// A failed run names its step and keeps the state from before it.
func ExamplePipelineError() {
	errIndexDown := errors.New("index unavailable")
	p, err := pipeline.New("qa", []pipeline.Step[Answer]{
		{Name: "normalise", Run: func(_ context.Context, a Answer) (Answer, error) {
			a.Question = strings.ToLower(a.Question)
			return a, nil
		}},
		{Name: "retrieve", Run: func(_ context.Context, a Answer) (Answer, error) {
			return a, fmt.Errorf("searching the index: %w", errIndexDown)
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = p.Run(context.Background(), Answer{Question: "Capital of France?"})
	var perr *pipeline.PipelineError[Answer]
	if errors.As(err, &perr) {
		fmt.Println(err)
		fmt.Printf("failed at step %d; last good question: %q\n", perr.Index, perr.State.Question)
	}
	fmt.Println(errors.Is(err, errIndexDown))
	// Output:
	// pipeline "qa": step "retrieve": searching the index: index unavailable
	// failed at step 1; last good question: "capital of france?"
	// true
}
