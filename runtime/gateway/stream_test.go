package gateway_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// drain collects a stream's text pieces, its final result and its error.
func drain(seq func(func(gateway.Chunk, error) bool)) (pieces []string, calls []gateway.ToolCallDelta, res *gateway.Result, err error) {
	for c, e := range seq {
		if e != nil {
			return pieces, calls, res, e
		}
		if c.Result != nil {
			res = c.Result
			continue
		}
		if c.Text != "" {
			pieces = append(pieces, c.Text)
		}
		calls = append(calls, c.ToolCalls...)
	}
	return pieces, calls, res, nil
}

func assertSettled(t *testing.T, g *gateway.Gateway, calls int64) gateway.SpendSummary {
	t.Helper()
	s, err := g.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls != calls {
		t.Errorf("ledger settled %d calls, want %d", s.Calls, calls)
	}
	for _, a := range s.ByAccount {
		if a.Reserved != (gateway.Amount{}) {
			t.Errorf("account %v still holds %+v", a.Account, a.Reserved)
		}
	}
	return s
}

func TestStreamText(t *testing.T) {
	const answer = "The capital of France is Paris."
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: answer}}})
	pieces, _, res, err := drain(g.Stream(t.Context(), "large", user("Capital of France?"), gateway.WithBudget("nightly", "r1")))
	if err != nil {
		t.Fatal(err)
	}
	if len(pieces) < 2 || strings.Join(pieces, "") != answer {
		t.Errorf("pieces %q do not stream %q", pieces, answer)
	}
	if res == nil {
		t.Fatal("no final result")
	}
	if res.Text != answer || res.FinishReason != gateway.FinishStop || res.Alias != "large" || res.FellBack || len(res.Attempts) != 1 {
		t.Errorf("result %+v", res)
	}
	if res.Usage.InputTokens == 0 || res.Usage.OutputTokens == 0 || res.CostUSD <= 0 {
		t.Errorf("result is not priced: %+v", res)
	}
	s := assertSettled(t, g, 1)
	if s.Total.USD() != res.CostUSD {
		t.Errorf("ledger charged $%v, result says $%v", s.Total.USD(), res.CostUSD)
	}
}

func TestStreamToolCalls(t *testing.T) {
	call := gateway.ToolCall{ID: "call_1", Name: "lookup_order", Arguments: []byte(`{"order_id":"A-42"}`)}
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{ToolCalls: []gateway.ToolCall{call}}}})
	req := user("Where is my order A-42?")
	req.Tools = []gateway.ToolDef{{Name: "lookup_order", Parameters: []byte(`{"type":"object"}`)}}
	_, deltas, res, err := drain(g.Stream(t.Context(), "large", req))
	if err != nil {
		t.Fatal(err)
	}
	if len(deltas) < 2 {
		t.Errorf("tool call arrived in %d fragments, want it in pieces", len(deltas))
	}
	if res == nil || res.FinishReason != gateway.FinishToolCalls {
		t.Fatalf("result %+v", res)
	}
	if diff := gocmp.Diff([]gateway.ToolCall{call}, res.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func TestStreamAbandonedIsSettled(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "one two three four five six seven eight"}}})
	n := 0
	for c, err := range g.Stream(t.Context(), "large", user("count"), gateway.WithBudget("nightly", "r1")) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Text != "" {
			n++
		}
		if n == 2 {
			break
		}
	}
	s := assertSettled(t, g, 1)
	// Charged the input estimate plus the two words received ("one two "
	// is 8 bytes, 2 tokens), not the worst case.
	spec := catalog()[0].Spec
	in := gateway.EstimateInputTokens(user("count"))
	want := gateway.Price(spec.Cost, gateway.Usage{InputTokens: in, OutputTokens: 2})
	if s.Total != want {
		t.Errorf("abandoned stream charged %+v, want %+v", s.Total, want)
	}
}

func TestStreamFailures(t *testing.T) {
	large, small := "fake-large-2024-08-06", "fake-small-2024-07-18"
	tests := []struct {
		name       string
		byModel    map[string][]fake.Step
		wantText   string // concatenated pieces
		wantErr    bool
		wantResult string // final text, when no error
		wantFell   bool
		wantCalls  int
		wantSettle int64
	}{
		{
			name:       "fails before the first piece, retried",
			byModel:    map[string][]fake.Step{large: {{Err: serverError(502)}, {Text: "second"}}},
			wantText:   "second",
			wantResult: "second",
			wantCalls:  2,
			wantSettle: 1,
		},
		{
			name:       "fails before the first piece, falls back",
			byModel:    map[string][]fake.Step{large: {{Err: serverError(400)}}, small: {{Text: "from small"}}},
			wantText:   "from small",
			wantResult: "from small",
			wantFell:   true,
			wantCalls:  2,
			wantSettle: 1,
		},
		{
			name:       "breaks after delivering text: no fallback, charged",
			byModel:    map[string][]fake.Step{large: {{Text: "partial answer", Err: serverError(500)}}, small: {{Text: "never"}}},
			wantText:   "partial answer",
			wantErr:    true,
			wantCalls:  1,
			wantSettle: 1,
		},
		{
			name:       "every alias fails",
			byModel:    map[string][]fake.Step{large: {{Err: serverError(400)}}, small: {{Err: serverError(400)}}},
			wantErr:    true,
			wantCalls:  2,
			wantSettle: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}, ByModel: tt.byModel})
			pieces, _, res, err := drain(g.Stream(t.Context(), "large", user("hi"), gateway.WithFallbacks("small"), gateway.WithBudget("nightly", "r1")))
			if got := strings.Join(pieces, ""); got != tt.wantText {
				t.Errorf("streamed %q, want %q", got, tt.wantText)
			}
			if tt.wantErr {
				var pe *gateway.ProviderError
				if !errors.As(err, &pe) {
					t.Errorf("error %v, want a provider error", err)
				}
				if res != nil {
					t.Errorf("a failed stream ended with a result")
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				if res == nil || res.Text != tt.wantResult || res.FellBack != tt.wantFell {
					t.Errorf("result %+v", res)
				}
			}
			if p.Calls() != tt.wantCalls {
				t.Errorf("%d provider calls, want %d", p.Calls(), tt.wantCalls)
			}
			assertSettled(t, g, tt.wantSettle)
		})
	}
}

func TestStreamRefusals(t *testing.T) {
	t.Run("adapter cannot stream", func(t *testing.T) {
		g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}, Capabilities: []gateway.Capability{gateway.CapabilityTools}})
		_, _, _, err := drain(g.Stream(t.Context(), "large", user("hi")))
		var ce *gateway.CapabilityMismatchError
		if !errors.As(err, &ce) || ce.MissingInProvider[0] != gateway.CapabilityStreaming {
			t.Fatalf("Stream: %v, want a streaming capability mismatch", err)
		}
		if p.Calls() != 0 {
			t.Error("provider was called")
		}
	})
	t.Run("budget", func(t *testing.T) {
		g, p := newGateway(t, fake.Config{Analyzer: analysis.English{}})
		req := user(strings.Repeat("x", 5000))
		_, _, _, err := drain(g.Stream(t.Context(), "large", req, gateway.WithBudget("chat", "t")))
		var be *gateway.BudgetExceededError
		if !errors.As(err, &be) || be.Dimension != gateway.DimensionTokens {
			t.Fatalf("Stream: %v, want a token budget refusal", err)
		}
		if p.Calls() != 0 {
			t.Error("provider was called")
		}
	})
}

func TestStreamCancelledMidway(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "one two three four"}}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var err error
	pieces := 0
	for c, e := range g.Stream(ctx, "large", user("hi"), gateway.WithBudget("nightly", "r")) {
		if e != nil {
			err = e
			break
		}
		if c.Text != "" {
			pieces++
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) || pieces != 1 {
		t.Fatalf("after %d pieces: %v, want the cancellation", pieces, err)
	}
	assertSettled(t, g, 1)
}

func TestCollect(t *testing.T) {
	g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "whole answer"}}})
	res, err := gateway.Collect(g.Stream(t.Context(), "small", user("hi")))
	if err != nil || res.Text != "whole answer" {
		t.Fatalf("Collect = %+v, %v", res, err)
	}
	if _, err := gateway.Collect(g.Stream(t.Context(), "nope", user("hi"))); err == nil {
		t.Fatal("Collect of a failing stream succeeded")
	}
}

// TestStreamConsumerPanicClosesTheHold ranges over a stream whose loop body
// panics, as a net/http handler's may (net/http recovers it and the service
// lives on): the hold must not outlive the loop, or the budget loses it for
// good. A panic after text was delivered is charged what was delivered, like
// an abandoned stream.
func TestStreamConsumerPanicClosesTheHold(t *testing.T) {
	tests := []struct {
		name      string
		steps     []fake.Step
		wantCalls int64 // settled calls
	}{
		{"panic on the first piece", []fake.Step{{Text: "one two three four"}}, 1},
		{"panic on the tool call fragment", []fake.Step{{ToolCalls: []gateway.ToolCall{{ID: "c1", Name: "lookup", Arguments: []byte(`{"a":1}`)}}}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}, Script: tt.steps})
			req := user("hi")
			req.Tools = []gateway.ToolDef{{Name: "lookup", Parameters: []byte(`{"type":"object"}`)}}
			func() {
				defer func() {
					if r := recover(); r != "consumer bug" {
						t.Fatalf("recovered %v, want the consumer's panic", r)
					}
				}()
				for range g.Stream(t.Context(), "large", req, gateway.WithBudget("nightly", "r1")) {
					panic("consumer bug")
				}
			}()
			s := assertSettled(t, g, tt.wantCalls)
			if s.Total == (gateway.Amount{}) {
				t.Error("a stream that delivered text before the panic was not charged")
			}
		})
	}
}

// panicProvider is an adapter with a bug: every call panics.
type panicProvider struct{ gateway.Provider }

func (panicProvider) Generate(context.Context, gateway.ModelSpec, gateway.Request) (gateway.Response, error) {
	panic("adapter bug")
}

func (panicProvider) Stream(context.Context, gateway.ModelSpec, gateway.Request) (gateway.DeltaStream, error) {
	panic("adapter bug")
}

func (panicProvider) Embed(context.Context, gateway.ModelSpec, []string) (gateway.EmbedResponse, error) {
	panic("adapter bug")
}

// TestAdapterPanicReleasesTheHold checks that a panicking adapter, which
// charged nothing, leaves no hold behind on any of the three calls.
func TestAdapterPanicReleasesTheHold(t *testing.T) {
	calls := map[string]func(*gateway.Gateway){
		"generate": func(g *gateway.Gateway) {
			_, _ = g.Generate(t.Context(), "large", user("hi"), gateway.WithBudget("nightly", "r1"))
		},
		"stream": func(g *gateway.Gateway) {
			for range g.Stream(t.Context(), "large", user("hi"), gateway.WithBudget("nightly", "r1")) {
				t.Error("a panicking adapter delivered a chunk")
			}
		},
		"embed": func(g *gateway.Gateway) {
			_, _ = g.Embed(t.Context(), "embed", []string{"x"}, gateway.WithBudget("nightly", "r1"))
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			base, _ := fake.New(fake.Config{Analyzer: analysis.English{}})
			g, _ := newGateway(t, fake.Config{Analyzer: analysis.English{}}, func(c *gateway.Config) { c.Providers["fake"] = panicProvider{base} })
			func() {
				defer func() {
					if r := recover(); r != "adapter bug" {
						t.Fatalf("recovered %v, want the adapter's panic", r)
					}
				}()
				call(g)
			}()
			assertSettled(t, g, 0)
		})
	}
}
