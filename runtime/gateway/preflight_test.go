package gateway_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// countingProvider counts every call of every kind that reaches an adapter.
type countingProvider struct {
	gateway.Provider
	calls atomic.Int64
}

func (p *countingProvider) Generate(ctx context.Context, m gateway.ModelSpec, r gateway.Request) (gateway.Response, error) {
	p.calls.Add(1)
	return p.Provider.Generate(ctx, m, r)
}

func (p *countingProvider) Stream(ctx context.Context, m gateway.ModelSpec, r gateway.Request) (gateway.DeltaStream, error) {
	p.calls.Add(1)
	return p.Provider.Stream(ctx, m, r)
}

func (p *countingProvider) Embed(ctx context.Context, m gateway.ModelSpec, texts []string) (gateway.EmbedResponse, error) {
	p.calls.Add(1)
	return p.Provider.Embed(ctx, m, texts)
}

// countingLedger records the alias of every reservation asked for.
type countingLedger struct {
	gateway.Ledger
	mu       sync.Mutex
	reserved []string
}

func (l *countingLedger) Reserve(ctx context.Context, r gateway.Reservation) error {
	l.mu.Lock()
	l.reserved = append(l.reserved, r.Alias)
	l.mu.Unlock()
	return l.Ledger.Reserve(ctx, r)
}

func (l *countingLedger) aliases() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reserved)
}

// countingGateway is newGateway with every provider call and every
// reservation counted.
func countingGateway(t *testing.T, fc fake.Config, edit ...func(*gateway.Config)) (*gateway.Gateway, *countingProvider, *countingLedger) {
	t.Helper()
	base, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	cp := &countingProvider{Provider: base}
	cl := &countingLedger{Ledger: gateway.NewMemoryLedger()}
	g, _ := newGateway(t, fc, append([]func(*gateway.Config){func(c *gateway.Config) {
		c.Providers["fake"] = cp
		c.Ledger = cl
	}}, edit...)...)
	return g, cp, cl
}

func streamErr(g *gateway.Gateway, ctx context.Context, alias string, req gateway.Request, opts ...gateway.CallOption) error {
	_, _, _, err := drain(g.Stream(ctx, alias, req, opts...))
	return err
}

// TestSpecForbiddenRequestsNeverLeave sends requests the OpenAI API
// specification forbids and checks that each is refused with an
// *InvalidRequestError naming the field, before any reservation or provider
// call, on Generate, Stream and Embed alike.
func TestSpecForbiddenRequestsNeverLeave(t *testing.T) {
	with := func(edit func(*gateway.Request)) gateway.Request {
		r := user("hi")
		edit(&r)
		return r
	}
	five := []string{"a", "b", "c", "d", "e"}
	hot, nan, wide := 2.5, math.NaN(), 1.5
	opts := []gateway.CallOption{gateway.WithFallbacks("small"), gateway.WithBudget("org", "")}
	tests := []struct {
		name      string
		call      func(context.Context, *gateway.Gateway) error
		wantField string // empty: the request is valid and must be sent
	}{
		{"generate without messages", func(ctx context.Context, g *gateway.Gateway) error {
			_, err := g.Generate(ctx, "large", gateway.Request{}, opts...)
			return err
		}, "messages"},
		{"stream without messages", func(ctx context.Context, g *gateway.Gateway) error {
			return streamErr(g, ctx, "large", gateway.Request{Messages: []gateway.Message{}}, opts...)
		}, "messages"},
		{"generate with five stop sequences", func(ctx context.Context, g *gateway.Gateway) error {
			_, err := g.Generate(ctx, "large", with(func(r *gateway.Request) { r.Stop = five }), opts...)
			return err
		}, "stop"},
		{"stream with five stop sequences", func(ctx context.Context, g *gateway.Gateway) error {
			return streamErr(g, ctx, "large", with(func(r *gateway.Request) { r.Stop = five }), opts...)
		}, "stop"},
		{"four stop sequences are allowed", func(ctx context.Context, g *gateway.Gateway) error {
			_, err := g.Generate(ctx, "large", with(func(r *gateway.Request) { r.Stop = five[:4] }), opts...)
			return err
		}, ""},
		{"temperature above 2", func(ctx context.Context, g *gateway.Gateway) error {
			_, err := g.Generate(ctx, "large", with(func(r *gateway.Request) { r.Temperature = &hot }), opts...)
			return err
		}, "temperature"},
		{"temperature NaN", func(ctx context.Context, g *gateway.Gateway) error {
			return streamErr(g, ctx, "large", with(func(r *gateway.Request) { r.Temperature = &nan }), opts...)
		}, "temperature"},
		{"top_p above 1", func(ctx context.Context, g *gateway.Gateway) error {
			_, err := g.Generate(ctx, "large", with(func(r *gateway.Request) { r.TopP = &wide }), opts...)
			return err
		}, "top_p"},
		{"embed an empty string", func(ctx context.Context, g *gateway.Gateway) error {
			_, err := g.Embed(ctx, "embed", []string{"refunds", ""}, gateway.WithBudget("org", ""))
			return err
		}, "input[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, p, l := countingGateway(t, fake.Config{Analyzer: analysis.English{}})
			err := tt.call(t.Context(), g)
			if tt.wantField == "" {
				if err != nil || p.calls.Load() != 1 {
					t.Fatalf("valid request: %v after %d calls", err, p.calls.Load())
				}
				return
			}
			var ie *gateway.InvalidRequestError
			if !errors.As(err, &ie) || ie.Field != tt.wantField {
				t.Fatalf("error %v, want *InvalidRequestError on %q", err, tt.wantField)
			}
			if !strings.Contains(err.Error(), tt.wantField) || !strings.Contains(err.Error(), "specification") {
				t.Errorf("message %q does not name the field and the rule", err)
			}
			if n := p.calls.Load(); n != 0 {
				t.Errorf("%d provider calls, want none", n)
			}
			if r := l.aliases(); len(r) != 0 {
				t.Errorf("reserved for %v, want nothing", r)
			}
			if gateway.IsFallbackEligible(err) {
				t.Error("an invalid request falls back")
			}
		})
	}
}

// withTiny adds two aliases with a 1000-token window (one with a
// 50-token output bound, one with 100) to the test catalog.
func withTiny(c *gateway.Config) {
	for _, m := range []struct {
		alias string
		out   int
	}{{"tiny", 50}, {"tiny100", 100}} {
		c.Models = append(c.Models, gateway.PinnedModel{Alias: m.alias, Spec: gateway.ModelSpec{
			ID: "fake-" + m.alias + "-1", Provider: "fake", ContextWindow: 1000, MaxOutputTokens: m.out,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.0001, OutputPer1kUSD: 0.0002}, Capabilities: chatCaps,
		}})
	}
}

// bytesFor returns a one-message request whose estimated input is n tokens:
// 3 for the reply's priming, 4 for the message, and four bytes a token.
func bytesFor(n int) gateway.Request { return user(strings.Repeat("x", 4*(n-7))) }

// TestContextWindow checks the window rule: a request whose estimated input
// plus output bound exceeds an alias's window is refused for that alias
// before anything is reserved or sent, with an error naming the estimate and
// the window; the call falls back only to aliases whose window fits.
func TestContextWindow(t *testing.T) {
	large := "fake-large-2024-08-06"
	tests := []struct {
		name         string
		alias        string
		req          gateway.Request
		fallbacks    []string
		byModel      map[string][]fake.Step
		wantText     string   // empty: the call fails
		wantAttempts []string // alias:outcome, outcome window, ok or failed
		wantReserved []string
		wantCalls    int64
	}{
		{"exactly the window is sent", "tiny", bytesFor(950), nil, nil, "x",
			[]string{"tiny:ok"}, []string{"tiny"}, 1},
		{"one token over is refused", "tiny", bytesFor(951), nil, nil, "",
			[]string{"tiny:window"}, nil, 0},
		{"the output bound counts", "tiny100", bytesFor(950), nil, nil, "",
			[]string{"tiny100:window"}, nil, 0},
		{"a smaller output bound from the request fits", "tiny100", func() gateway.Request { r := bytesFor(950); r.MaxOutputTokens = 50; return r }(), nil, nil, "x",
			[]string{"tiny100:ok"}, []string{"tiny100"}, 1},
		{"falls back past every alias that does not fit", "tiny", bytesFor(2000), []string{"tiny100", "large"}, nil, "x",
			[]string{"tiny:window", "tiny100:window", "large:ok"}, []string{"large"}, 1},
		{"a provider failure does not fall back to an alias that does not fit", "large", bytesFor(2000), []string{"tiny"},
			map[string][]fake.Step{large: {{Err: serverError(400)}}}, "",
			[]string{"large:failed", "tiny:window"}, []string{"large"}, 1},
		{"nothing fits", "tiny", bytesFor(200000), []string{"large"}, nil, "",
			[]string{"tiny:window", "large:window"}, nil, 0},
	}
	for _, tt := range tests {
		for _, mode := range []string{"generate", "stream"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				fc := fake.Config{Analyzer: analysis.English{}, ByModel: tt.byModel, Script: []fake.Step{{Text: "x"}}, Loop: true}
				g, p, l := countingGateway(t, fc, withTiny)
				opts := []gateway.CallOption{gateway.WithFallbacks(tt.fallbacks...), gateway.WithBudget("org", "")}
				var res gateway.Result
				var err error
				if mode == "generate" {
					res, err = g.Generate(t.Context(), tt.alias, tt.req, opts...)
				} else {
					res, err = gateway.Collect(g.Stream(t.Context(), tt.alias, tt.req, opts...))
				}
				attempts := res.Attempts
				if tt.wantText != "" {
					if err != nil || res.Text != tt.wantText {
						t.Fatalf("call = %q, %v; want %q", res.Text, err, tt.wantText)
					}
				} else {
					var ce *gateway.CallError
					if !errors.As(err, &ce) {
						t.Fatalf("call: %v, want a *CallError", err)
					}
					attempts = ce.Attempts
				}
				var got []string
				for _, a := range attempts {
					outcome := "ok"
					var we *gateway.ContextWindowExceededError
					switch {
					case errors.As(a.Err, &we):
						outcome = "window"
						if we.Alias != a.Alias || we.ContextWindow <= 0 || we.InputTokens+we.OutputTokens <= int64(we.ContextWindow) {
							t.Errorf("window error %+v does not name a request that exceeds the window", we)
						}
						msg := we.Error()
						for _, n := range []int64{we.InputTokens, we.OutputTokens, int64(we.ContextWindow)} {
							if !strings.Contains(msg, strconv.FormatInt(n, 10)) {
								t.Errorf("message %q does not name %d", msg, n)
							}
						}
					case a.Err != nil:
						outcome = "failed"
					}
					got = append(got, a.Alias+":"+outcome)
				}
				if !slices.Equal(got, tt.wantAttempts) {
					t.Errorf("attempts %v, want %v", got, tt.wantAttempts)
				}
				if r := l.aliases(); !slices.Equal(r, tt.wantReserved) {
					t.Errorf("reserved for %v, want %v", r, tt.wantReserved)
				}
				if n := p.calls.Load(); n != tt.wantCalls {
					t.Errorf("%d provider calls, want %d", n, tt.wantCalls)
				}
				settled := int64(0)
				if tt.wantText != "" {
					settled = 1
				}
				assertSettled(t, g, settled)
			})
		}
	}
}
