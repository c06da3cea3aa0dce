package gateway_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func recorder(t *testing.T) (*tracetest.SpanRecorder, func(*gateway.Config)) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return sr, func(c *gateway.Config) { c.Tracer = tp.Tracer("aid/gateway") }
}

func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

func exceptions(s sdktrace.ReadOnlySpan) int {
	n := 0
	for _, e := range s.Events() {
		if e.Name == "exception" {
			n++
		}
	}
	return n
}

func TestTracingPerAttempt(t *testing.T) {
	sr, withTracer := recorder(t)
	usage := &gateway.Usage{InputTokens: 12, OutputTokens: 3, TotalTokens: 15}
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"fake-large-2024-08-06": {{Err: serverError(500)}, {Err: serverError(500)}},
		"fake-small-2024-07-18": {{Text: "ok", Usage: usage}},
	}}, withTracer)
	req := user("hi")
	res, err := g.Generate(t.Context(), "large", req, gateway.WithFallbacks("small"), gateway.WithBudget("nightly", "run-3"))
	if err != nil {
		t.Fatal(err)
	}
	spans := sr.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want one per attempt (3)", len(spans))
	}
	base := func(model, alias string, attempt int, fellBack bool) map[string]any {
		return map[string]any{
			"gen_ai.operation.name":     "chat",
			"gen_ai.provider.name":      "fake",
			"gen_ai.request.model":      model,
			"gen_ai.request.max_tokens": map[string]int64{"large": 100, "small": 50}[alias],
			"aid.alias":                 alias,
			"aid.attempt":               int64(attempt),
			"aid.fell_back":             fellBack,
			"aid.budget.name":           []string{"nightly"},
			"aid.budget.scope":          []string{"run"},
			"aid.budget.key":            []string{"run-3"},
		}
	}
	for i, s := range spans[:2] {
		want := base("fake-large-2024-08-06", "large", i, false)
		want["error.type"] = "500"
		if diff := gocmp.Diff(want, attrs(s)); diff != "" {
			t.Errorf("failed attempt %d attributes (-want +got):\n%s", i, diff)
		}
		if s.Name() != "chat fake-large-2024-08-06" || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
		}
		if s.Status().Code != codes.Error || exceptions(s) != 1 {
			t.Errorf("failed attempt %d: status %v with %d exception events, want Error with exactly 1", i, s.Status(), exceptions(s))
		}
	}
	ok := spans[2]
	want := base("fake-small-2024-07-18", "small", 2, true)
	want["gen_ai.response.model"] = "fake-small-2024-07-18"
	want["gen_ai.usage.input_tokens"] = int64(12)
	want["gen_ai.usage.output_tokens"] = int64(3)
	want["gen_ai.response.finish_reasons"] = []string{"stop"}
	want["aid.cost_usd"] = res.CostUSD
	if diff := gocmp.Diff(want, attrs(ok)); diff != "" {
		t.Errorf("answering attempt attributes (-want +got):\n%s", diff)
	}
	if ok.Status().Code == codes.Error || exceptions(ok) != 0 {
		t.Errorf("answering attempt has status %v and %d exceptions", ok.Status(), exceptions(ok))
	}
}

func TestTracingEmbeddingsAndStreams(t *testing.T) {
	sr, withTracer := recorder(t)
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "a b c"}}}, withTracer)
	if _, err := g.Embed(t.Context(), "embed", []string{"x"}); err != nil {
		t.Fatal(err)
	}
	for range g.Stream(t.Context(), "small", user("hi")) {
		break
	}
	spans := sr.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended, want 2 (an abandoned stream still ends its span)", len(spans))
	}
	if got := spans[0].Name(); got != "embeddings fake-embed-3" {
		t.Errorf("embedding span %q", got)
	}
	if got := attrs(spans[0])["gen_ai.operation.name"]; got != "embeddings" {
		t.Errorf("embedding operation %v", got)
	}
	if got := spans[1].Name(); got != "chat fake-small-2024-07-18" {
		t.Errorf("stream span %q", got)
	}
	for _, kv := range spans[1].Attributes() {
		if kv.Key == attribute.Key("gen_ai.usage.output_tokens") && kv.Value.AsInt64() != 1 {
			t.Errorf("abandoned stream reports %d output tokens, want the 1 received", kv.Value.AsInt64())
		}
	}
}

// TestTracingAllocations guards the cost of a sampled span: what an attempt
// allocates for its span beyond what it allocates with tracing off. The
// span itself, its context, the attribute list handed to it once, the
// SDK's copy of that list and the call's own budget key are all it may
// take; per-call maps, string building and attributes set piecemeal are
// not. BenchmarkGenerateFakeSDKTracer measures the time.
func TestTracingAllocations(t *testing.T) {
	allocs := func(tracer trace.Tracer) float64 {
		g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Loop: true, Script: []fake.Step{{Text: "Paris"}}}, func(c *gateway.Config) { c.Tracer = tracer })
		budget := gateway.WithBudget("org", "")
		req := user("What is the capital of France?")
		return testing.AllocsPerRun(200, func() {
			if _, err := g.Generate(context.Background(), "small", req, budget); err != nil {
				t.Fatal(err)
			}
		})
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	off, on := allocs(noop.NewTracerProvider().Tracer("")), allocs(tp.Tracer("aid/gateway"))
	if extra := on - off; extra > 5 {
		t.Errorf("a sampled span costs %v allocations (%v with tracing, %v without), want at most 5", extra, on, off)
	}
}

// TestTracingConcurrentSpansKeepTheirOwnAttributes runs traced calls in
// parallel, each with its own budget key, and checks that every span
// reports its own call's key: the attribute lists the gateway recycles must
// never leak one call's values into another's span.
func TestTracingConcurrentSpansKeepTheirOwnAttributes(t *testing.T) {
	sr, withTracer := recorder(t)
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Loop: true, Script: []fake.Step{{Text: "ok"}}}, withTracer)
	const workers, calls = 8, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range calls {
				key := "run-" + strconv.Itoa(w)
				if _, err := g.Generate(t.Context(), "small", user("hi"), gateway.WithBudget("nightly", key)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	spans := sr.Ended()
	if len(spans) != workers*calls {
		t.Fatalf("%d spans, want %d", len(spans), workers*calls)
	}
	perKey := map[string]int{}
	for _, s := range spans {
		a := attrs(s)
		keys, _ := a["aid.budget.key"].([]string)
		if len(keys) != 1 || a["aid.alias"] != "small" || a["gen_ai.response.finish_reasons"] == nil {
			t.Fatalf("span attributes %v", a)
		}
		perKey[keys[0]]++
	}
	for w := range workers {
		if n := perKey["run-"+strconv.Itoa(w)]; n != calls {
			t.Errorf("key run-%d on %d spans, want %d", w, n, calls)
		}
	}
}
