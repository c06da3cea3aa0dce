package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

func usd(v float64) *float64 { return &v }

// TestPriceCachedInput prices usage with and without cached input tokens to
// the nanodollar: the uncached input at the input price, the cached input at
// the cached price, the output at the output price, each rounded up on its
// own.
func TestPriceCachedInput(t *testing.T) {
	gpt4o := gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01, CachedInputPer1kUSD: usd(0.00125)}
	mini := gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006, CachedInputPer1kUSD: usd(0.000075)}
	unset := gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01}
	free := gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01, CachedInputPer1kUSD: usd(0)}
	tiny := gateway.CostProfile{InputPer1kUSD: 0.0000001, CachedInputPer1kUSD: usd(0.00000005)}
	tests := []struct {
		name string
		cost gateway.CostProfile
		use  gateway.Usage
		want gateway.Amount
	}{
		{"no cached tokens", gpt4o, gateway.Usage{InputTokens: 1000, OutputTokens: 1000}, gateway.Amount{NanoUSD: 12_500_000, Tokens: 2000}},
		// 400 × 2,500 + 600 × 1,250 + 1,000 × 10,000 nanodollars.
		{"600 of 1,000 cached", gpt4o, gateway.Usage{InputTokens: 1000, CachedInputTokens: 600, OutputTokens: 1000, TotalTokens: 2000},
			gateway.Amount{NanoUSD: 1_000_000 + 750_000 + 10_000_000, Tokens: 2000, CachedInputTokens: 600}},
		{"all input cached", gpt4o, gateway.Usage{InputTokens: 1000, CachedInputTokens: 1000}, gateway.Amount{NanoUSD: 1_250_000, Tokens: 1000, CachedInputTokens: 1000}},
		// 128 × 150 + 127,872 × 75 + 4,096 × 600 nanodollars.
		{"a full window, cached in 128-token blocks", mini, gateway.Usage{InputTokens: 128_000, CachedInputTokens: 127_872, OutputTokens: 4096},
			gateway.Amount{NanoUSD: 19_200 + 9_590_400 + 2_457_600, Tokens: 132_096, CachedInputTokens: 127_872}},
		{"unset cached price bills the input price", unset, gateway.Usage{InputTokens: 1000, CachedInputTokens: 600, OutputTokens: 1000},
			gateway.Amount{NanoUSD: 12_500_000, Tokens: 2000, CachedInputTokens: 600}},
		{"a cached price of zero is free", free, gateway.Usage{InputTokens: 1000, CachedInputTokens: 600, OutputTokens: 1000},
			gateway.Amount{NanoUSD: 1_000_000 + 10_000_000, Tokens: 2000, CachedInputTokens: 600}},
		// 0.2 and 0.05 nanodollars, each rounded up: 2, where one sum would be 1.
		{"each part rounds up", tiny, gateway.Usage{InputTokens: 3, CachedInputTokens: 1}, gateway.Amount{NanoUSD: 2, Tokens: 3, CachedInputTokens: 1}},
		{"more cached than input is billed uncached", gpt4o, gateway.Usage{InputTokens: 1000, CachedInputTokens: 1001, OutputTokens: 1000},
			gateway.Amount{NanoUSD: 12_500_000, Tokens: 2000}},
		{"a negative cached count is billed uncached", gpt4o, gateway.Usage{InputTokens: 1000, CachedInputTokens: -400, OutputTokens: 1000},
			gateway.Amount{NanoUSD: 12_500_000, Tokens: 2000}},
	}
	for _, tt := range tests {
		if got := gateway.Price(tt.cost, tt.use); got != tt.want {
			t.Errorf("%s: Price = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// withCachedPrice gives the "large" alias a cached-input price.
func withCachedPrice(per1k *float64) func(*gateway.Config) {
	return func(c *gateway.Config) {
		for i := range c.Models {
			if c.Models[i].Alias == "large" {
				c.Models[i].Spec.Cost.CachedInputPer1kUSD = per1k
			}
		}
	}
}

// TestCachedInputIsPricedAndLedgered runs a call whose provider reports
// cached input tokens, once answered whole and once streamed: the result,
// the ledger and the span all carry the cached count, and the price bills it
// at the cached price.
func TestCachedInputIsPricedAndLedgered(t *testing.T) {
	usage := gateway.Usage{InputTokens: 1000, CachedInputTokens: 768, OutputTokens: 50, TotalTokens: 1050}
	// 232 × 2,500 + 768 × 1,250 + 50 × 10,000 nanodollars.
	const wantNano = 580_000 + 960_000 + 500_000
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "generate", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			sr, withTracer := recorder(t)
			u := usage
			g, _ := newGateway(t, fake.Config{Script: []fake.Step{{Text: "Paris", Usage: &u}}}, withTracer, withCachedPrice(usd(0.00125)))
			var res gateway.Result
			var err error
			if stream {
				res, err = gateway.Collect(g.Stream(t.Context(), "large", user("Capital of France?"), gateway.WithBudget("org", "")))
			} else {
				res, err = g.Generate(t.Context(), "large", user("Capital of France?"), gateway.WithBudget("org", ""))
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Usage != usage {
				t.Errorf("usage %+v, want %+v", res.Usage, usage)
			}
			if got := int64(res.CostUSD*1e9 + 0.5); got != wantNano {
				t.Errorf("cost %d nanodollars, want %d", got, wantNano)
			}
			s, err := g.Spend(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			want := gateway.Amount{NanoUSD: wantNano, Tokens: 1050, CachedInputTokens: 768}
			if s.Total != want || s.ByAccount[0].Spent != want || s.ByAlias[0].Spent != want || s.ByModel[0].Spent != want {
				t.Errorf("spend %+v, want %+v everywhere", s, want)
			}
			spans := sr.Ended()
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			a := attrs(spans[0])
			if a["gen_ai.usage.cache_read.input_tokens"] != int64(768) || a["gen_ai.usage.input_tokens"] != int64(1000) {
				t.Errorf("span attributes %v, want 768 cached of 1000 input tokens", a)
			}
		})
	}
}

// TestCachedCountNotAPartOfTheInput: an upstream that reports more cached
// tokens than prompt tokens, or a negative count, contradicts itself. The
// call keeps its answer and is billed the whole prompt at the input price;
// the result, the ledger and the span report no cached tokens, and a warning
// says why.
func TestCachedCountNotAPartOfTheInput(t *testing.T) {
	for _, cached := range []int64{1001, 1 << 40, -768} {
		var logs bytes.Buffer
		sr, withTracer := recorder(t)
		u := gateway.Usage{InputTokens: 1000, CachedInputTokens: cached, OutputTokens: 50, TotalTokens: 1050}
		g, _ := newGateway(t, fake.Config{Script: []fake.Step{{Text: "Paris", Usage: &u}}}, withTracer, withCachedPrice(usd(0)),
			func(c *gateway.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
		res, err := g.Generate(t.Context(), "large", user("Capital of France?"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Paris" || res.Usage.CachedInputTokens != 0 || res.Usage.InputTokens != 1000 {
			t.Errorf("cached %d: result %+v, want the answer with no cached tokens", cached, res)
		}
		if got := int64(res.CostUSD*1e9 + 0.5); got != 3_000_000 {
			t.Errorf("cached %d: cost %d nanodollars, want 3000000, the uncached price", cached, got)
		}
		s, err := g.Spend(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if want := (gateway.Amount{NanoUSD: 3_000_000, Tokens: 1050}); s.Total != want {
			t.Errorf("cached %d: ledger %+v, want %+v", cached, s.Total, want)
		}
		if _, ok := attrs(sr.Ended()[0])["gen_ai.usage.cache_read.input_tokens"]; ok {
			t.Errorf("cached %d: span reports cached tokens", cached)
		}
		if !strings.Contains(logs.String(), "cache reads or writes that are not parts of the input") {
			t.Errorf("cached %d: no warning logged: %q", cached, logs.String())
		}
	}
}

// recordingLedger records the holds a gateway reserves.
type recordingLedger struct {
	gateway.Ledger
	mu    sync.Mutex
	holds []gateway.Amount
}

func (l *recordingLedger) Reserve(ctx context.Context, r gateway.Reservation) error {
	l.mu.Lock()
	l.holds = append(l.holds, r.Amount)
	l.mu.Unlock()
	return l.Ledger.Reserve(ctx, r)
}

// TestReservationIsTheUncachedWorstCase: what a budget holds before a call
// does not depend on the cached price, since nobody knows before the call
// what the cache will serve; it is the whole prompt at the input price.
func TestReservationIsTheUncachedWorstCase(t *testing.T) {
	req := user(strings.Repeat("refund policy ", 300))
	var holds []gateway.Amount
	var estimates []float64
	for _, per1k := range []*float64{nil, usd(0.00125), usd(0)} {
		l := &recordingLedger{Ledger: gateway.NewMemoryLedger()}
		u := gateway.Usage{InputTokens: 1000, CachedInputTokens: 1000, OutputTokens: 50}
		g, _ := newGateway(t, fake.Config{Script: []fake.Step{{Text: "ok", Usage: &u}}}, withCachedPrice(per1k),
			func(c *gateway.Config) { c.Ledger = l })
		est, err := g.EstimateCost("large", req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Generate(t.Context(), "large", req, gateway.WithBudget("org", "")); err != nil {
			t.Fatal(err)
		}
		if len(l.holds) != 1 {
			t.Fatalf("%d holds", len(l.holds))
		}
		holds, estimates = append(holds, l.holds[0]), append(estimates, est)
	}
	for i := range holds {
		if holds[i] != holds[0] || estimates[i] != estimates[0] {
			t.Errorf("hold %+v and estimate %v with cached price %d, want %+v and %v as without one", holds[i], estimates[i], i, holds[0], estimates[0])
		}
		if holds[i].CachedInputTokens != 0 {
			t.Errorf("hold %+v assumes cached tokens", holds[i])
		}
	}
	spec := catalog()[0].Spec
	if want := gateway.Price(spec.Cost, gateway.EstimateUsage(spec, req)); holds[0] != want {
		t.Errorf("hold %+v, want the uncached price of EstimateUsage, %+v", holds[0], want)
	}
}

// flakyLedger answers its first fails settlements and releases with the
// ledger unavailable, as a PostgreSQL ledger whose pool is exhausted does;
// committed says whether such a failed attempt had in fact committed.
type flakyLedger struct {
	gateway.Ledger
	mu        sync.Mutex
	fails     int
	committed bool
	attempts  int
}

func (l *flakyLedger) close(ctx context.Context, op func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts++
	if l.fails > 0 {
		l.fails--
		if l.committed {
			if err := op(); err != nil {
				return err
			}
		}
		return &kind.UnavailableError{Dependency: "budget ledger", Err: errors.New("timeout waiting for a connection")}
	}
	return op()
}

func (l *flakyLedger) Settle(ctx context.Context, id string, actual gateway.Amount) error {
	return l.close(ctx, func() error { return l.Ledger.Settle(ctx, id, actual) })
}

func (l *flakyLedger) Release(ctx context.Context, id string) error {
	return l.close(ctx, func() error { return l.Ledger.Release(ctx, id) })
}

// TestSettlementOutlivesAnUnavailableLedger: a settlement the ledger
// refuses as unavailable is tried again, so an answered call's hold does
// not stay reserved after a transient overload (it did: TestTenantBudgetAcrossReplicas
// saw answered calls left unsettled under load); an attempt that had
// committed before failing is not charged twice; a ledger that stays down
// leaves the hold, as before, and the call's answer still stands.
func TestSettlementOutlivesAnUnavailableLedger(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fails     int
		committed bool
		wantCalls int64
		wantHeld  bool
	}{
		{name: "two failures", fails: 2, wantCalls: 1},
		{name: "a failure that committed", fails: 1, committed: true, wantCalls: 1},
		{name: "down for good", fails: 100, wantHeld: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := gateway.NewMemoryLedger()
			l := &flakyLedger{Ledger: mem, fails: tc.fails, committed: tc.committed}
			u := gateway.Usage{InputTokens: 100, OutputTokens: 10}
			g, _ := newGateway(t, fake.Config{Script: []fake.Step{{Text: "ok", Usage: &u}}}, func(c *gateway.Config) { c.Ledger = l })
			if _, err := g.Generate(t.Context(), "large", user("hello"), gateway.WithBudget("org", "")); err != nil {
				t.Fatalf("the call: %v", err)
			}
			sum, err := mem.Summary(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var calls int64
			var held gateway.Amount
			for _, a := range sum.ByAccount {
				calls += a.Calls
				held = held.Add(a.Reserved)
			}
			if calls != tc.wantCalls || (held != gateway.Amount{}) != tc.wantHeld {
				t.Errorf("after %d attempts: %d calls settled, %+v held; want %d settled, held %v", l.attempts, calls, held, tc.wantCalls, tc.wantHeld)
			}
		})
	}
}
