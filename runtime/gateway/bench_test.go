package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
	"github.com/aidgen/aid/runtime/kind"
)

var benchReq = gateway.Request{Messages: []gateway.Message{
	{Role: gateway.RoleSystem, Content: "Answer with the city only."},
	{Role: gateway.RoleUser, Content: "What is the capital of France?"},
}}

// BenchmarkGenerateFake measures the gateway's own cost per call: alias
// resolution, capability check, budget reservation and settlement in the
// memory ledger, pricing, a no-op span, and a fake provider that answers at
// once.
func BenchmarkGenerateFake(b *testing.B) {
	benchGenerateFake(b, noop.NewTracerProvider().Tracer("bench"))
}

// BenchmarkGenerateFakeSDKTracer is BenchmarkGenerateFake with real tracing:
// the OpenTelemetry SDK sampling every span, with no exporter, so that what
// it measures is the gateway's cost of building and ending a recorded span.
func BenchmarkGenerateFakeSDKTracer(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	benchGenerateFake(b, tp.Tracer("bench"))
}

// BenchmarkSDKSpanFloor is the OpenTelemetry SDK's own share of
// BenchmarkGenerateFakeSDKTracer, with no gateway around it: a span started
// with the same name and kind on the same kind of provider, given in one
// SetAttributes call the very attributes the gateway set on the benchmark's
// call (captured from a recorded span), and ended. BenchmarkGenerateFake
// plus this is the least the traced call can cost; what the traced call costs
// beyond that sum is the gateway's own tracing work.
func BenchmarkSDKSpanFloor(b *testing.B) {
	sr := tracetest.NewSpanRecorder()
	rec := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	b.Cleanup(func() { _ = rec.Shutdown(context.Background()) })
	g := benchGateway(b, rec.Tracer("bench"))
	if _, err := g.Generate(context.Background(), "small", benchReq, gateway.WithBudget("bench", "run-1")); err != nil {
		b.Fatal(err)
	}
	ended := sr.Ended()
	if len(ended) != 1 {
		b.Fatalf("%d spans, want 1", len(ended))
	}
	name, kind, attrs := ended[0].Name(), ended[0].SpanKind(), ended[0].Attributes()

	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("bench")
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, span := tracer.Start(ctx, name, opts...)
		span.SetAttributes(attrs...)
		span.End()
	}
	b.ReportMetric(float64(len(attrs)), "attrs/span")
}

func benchGateway(b *testing.B, tracer trace.Tracer) *gateway.Gateway {
	p, err := fake.New(fake.Config{Loop: true, Script: []fake.Step{{Text: "Paris"}}})
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Models:    catalog(),
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets:   []gateway.Budget{{Name: "bench", MaxUSD: 1e9, Scope: gateway.ScopeRun}},
		Tracer:    tracer,
	})
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func benchGenerateFake(b *testing.B, tracer trace.Tracer) {
	g := benchGateway(b, tracer)
	ctx := context.Background()
	budget := gateway.WithBudget("bench", "run-1")
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.Generate(ctx, "small", benchReq, budget)
		if err != nil || res.Text != "Paris" {
			b.Fatal(res, err)
		}
	}
}

const benchCompletion = `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini-2024-07-18",
"choices":[{"index":0,"message":{"role":"assistant","content":"Paris","refusal":null},"finish_reason":"stop","logprobs":null}],
"usage":{"prompt_tokens":24,"completion_tokens":1,"total_tokens":25}}`

// benchTargets are the two places the HTTP benchmarks send to: a local
// httptest server (the whole loopback round trip, as a user sees it) and an
// in-memory transport answering the same bytes, which removes the network's
// noise so that the gateway's added cost stands out.
func benchTargets(b *testing.B) map[string]struct {
	url    string
	client *http.Client
} {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, benchCompletion)
	}))
	b.Cleanup(srv.Close)
	return map[string]struct {
		url    string
		client *http.Client
	}{
		"server":    {srv.URL + "/v1", srv.Client()},
		"transport": {"http://bench.invalid/v1", &http.Client{Transport: cannedTransport{}}},
	}
}

// cannedTransport answers every request with benchCompletion, in memory.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/json"}},
		Body:    io.NopCloser(strings.NewReader(benchCompletion)),
		Request: r, ContentLength: int64(len(benchCompletion)),
	}, nil
}

// BenchmarkGenerateHTTP is a whole call through the gateway and the
// openai-compatible adapter to a local server; compare it with
// BenchmarkRawOpenAIGo, the same call made with openai-go directly, to get
// the gateway's added cost.
func BenchmarkGenerateHTTP(b *testing.B) {
	for _, name := range []string{"server", "transport"} {
		b.Run(name, func(b *testing.B) {
			target := benchTargets(b)[name]
			p, err := openaicompat.New(openaicompat.Config{
				BaseURL:    target.url,
				APIKeyEnv:  "BENCH_KEY",
				HTTPClient: target.client,
				LookupEnv:  func(string) (string, bool) { return "sk-bench", true },
			})
			if err != nil {
				b.Fatal(err)
			}
			models := catalog()
			models[1].Spec.Provider = "openai"
			g, err := gateway.New(gateway.Config{
				Models:    models[1:2],
				Providers: map[string]gateway.Provider{"openai": p},
				Budgets:   []gateway.Budget{{Name: "bench", MaxUSD: 1e9, Scope: gateway.ScopeRun}},
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			budget := gateway.WithBudget("bench", "run-1")
			b.ReportAllocs()
			for b.Loop() {
				res, err := g.Generate(ctx, "small", benchReq, budget)
				if err != nil || res.Text != "Paris" {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkRawOpenAIGo is the baseline of BenchmarkGenerateHTTP: the same
// request, sent with openai-go alone.
//
// The "+deadline" variants give each call a deadline, as the gateway's
// per-request timeout does, which costs the HTTP transport a cancellable
// request.
func BenchmarkRawOpenAIGo(b *testing.B) {
	for _, name := range []string{"server", "server+deadline", "transport"} {
		b.Run(name, func(b *testing.B) {
			target := benchTargets(b)[strings.TrimSuffix(name, "+deadline")]
			deadline := strings.HasSuffix(name, "+deadline")
			client := openai.NewClient(
				option.WithBaseURL(target.url),
				option.WithAPIKey("sk-bench"),
				option.WithHTTPClient(target.client),
				option.WithMaxRetries(0),
			)
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if deadline {
					ctx, cancel = context.WithTimeout(ctx, time.Minute)
				}
				res, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
					Model: "gpt-4o-mini-2024-07-18",
					Messages: []openai.ChatCompletionMessageParamUnion{
						openai.SystemMessage("Answer with the city only."),
						openai.UserMessage("What is the capital of France?"),
					},
					MaxCompletionTokens: openai.Int(50),
				})
				cancel()
				if err != nil || res.Choices[0].Message.Content != "Paris" {
					b.Fatal(res, err)
				}
			}
		})
	}
}

// BenchmarkGenerateFakeStacked is BenchmarkGenerateFake charged as a
// service with keys charges a call: the run's budget, a tenant's budget per
// Berlin day that applies to every call, and a per-key rate limit of
// requests and tokens, all in memory. Its difference from
// BenchmarkGenerateFake is the cost of stacking and limits.
func BenchmarkGenerateFakeStacked(b *testing.B) {
	p, err := fake.New(fake.Config{Loop: true, Script: []fake.Step{{Text: "Paris"}}})
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Models:    catalog(),
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets: []gateway.Budget{{Name: "bench", MaxUSD: 1e9, Scope: gateway.ScopeRun},
			{Name: "tenant_daily", MaxUSD: 1e9, Scope: gateway.ScopeTenant, Window: "day", TimeZone: "Europe/Berlin", AppliesToAll: true}},
		RateLimits: []gateway.RateLimit{{Name: "per_key", Scope: gateway.RateScopeKey, RequestsPerMinute: 1e12, TokensPerMinute: 1e15}},
		Tracer:     noop.NewTracerProvider().Tracer("bench"),
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := kind.WithCaller(context.Background(), kind.Caller{Key: "frontend", Tenant: "acme"})
	budget := gateway.WithBudget("bench", "run-1")
	b.ReportAllocs()
	for b.Loop() {
		res, err := g.Generate(ctx, "small", benchReq, budget)
		if err != nil || res.Text != "Paris" {
			b.Fatal(res, err)
		}
	}
}
