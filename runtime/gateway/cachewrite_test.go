package gateway_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
)

// sonnet is Anthropic's published price list for a Sonnet model per 1,000
// tokens: $3 per million input, $15 per million output, reads at 0.1×,
// five-minute writes at 1.25× and one-hour writes at 2×.
var sonnet = gateway.CostProfile{
	InputPer1kUSD: 0.003, OutputPer1kUSD: 0.015, CachedInputPer1kUSD: usd(0.0003),
	CacheWrite5mPer1kUSD: usd(0.00375), CacheWrite1hPer1kUSD: usd(0.006),
}

// TestPriceCacheWrites prices cache writes of both lifetimes to the
// nanodollar, as Anthropic's formula does: each part of the input at its
// own rate, each rounded up on its own.
func TestPriceCacheWrites(t *testing.T) {
	unset := gateway.CostProfile{InputPer1kUSD: 0.003, OutputPer1kUSD: 0.015}
	tests := []struct {
		name string
		cost gateway.CostProfile
		use  gateway.Usage
		want gateway.Amount
	}{
		// 100 × 3,000 + 900 × 3,750 + 10 × 15,000 nanodollars.
		{"5m writes at 1.25×", sonnet, gateway.Usage{InputTokens: 1000, CacheWrite5mInputTokens: 900, OutputTokens: 10},
			gateway.Amount{NanoUSD: 300_000 + 3_375_000 + 150_000, Tokens: 1010, CacheWriteInputTokens: 900}},
		// 100 × 3,000 + 900 × 6,000.
		{"1h writes at 2×", sonnet, gateway.Usage{InputTokens: 1000, CacheWrite1hInputTokens: 900},
			gateway.Amount{NanoUSD: 300_000 + 5_400_000, Tokens: 1000, CacheWriteInputTokens: 900}},
		// 50 × 3,000 + 800 × 300 + 100 × 3,750 + 50 × 6,000 + 20 × 15,000.
		{"reads and both writes", sonnet, gateway.Usage{InputTokens: 1000, CachedInputTokens: 800, CacheWrite5mInputTokens: 100, CacheWrite1hInputTokens: 50, OutputTokens: 20},
			gateway.Amount{NanoUSD: 150_000 + 240_000 + 375_000 + 300_000 + 300_000, Tokens: 1020, CachedInputTokens: 800, CacheWriteInputTokens: 150}},
		{"unset write prices bill the input price", unset, gateway.Usage{InputTokens: 1000, CacheWrite5mInputTokens: 600, CacheWrite1hInputTokens: 400},
			gateway.Amount{NanoUSD: 3_000_000, Tokens: 1000, CacheWriteInputTokens: 1000}},
		// Parts that overflow the input lose the read discount and are
		// clamped, one-hour writes first: 0 plain, 700 × 6,000, 300 × 3,750.
		{"overflowing parts are billed the dearer way", sonnet, gateway.Usage{InputTokens: 1000, CachedInputTokens: 900, CacheWrite5mInputTokens: 900, CacheWrite1hInputTokens: 700},
			gateway.Amount{NanoUSD: 4_200_000 + 1_125_000, Tokens: 1000, CacheWriteInputTokens: 1000}},
		{"a negative write is billed as none", sonnet, gateway.Usage{InputTokens: 1000, CachedInputTokens: 500, CacheWrite5mInputTokens: -500},
			gateway.Amount{NanoUSD: 3_000_000, Tokens: 1000}},
	}
	for _, tt := range tests {
		if got := gateway.Price(tt.cost, tt.use); got != tt.want {
			t.Errorf("%s: Price = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestHoldCoversCacheWrites checks that a request asking for caching is
// reserved as if it wrote its whole prompt at the dearer write price of its
// lifetime, so that settling the real usage (all writes, the first step of
// a thread) never exceeds the hold; a request that asks for none is held at
// the input price.
func TestHoldCoversCacheWrites(t *testing.T) {
	spec := gateway.ModelSpec{ID: "m", Provider: "p", ContextWindow: 200_000, MaxOutputTokens: 100, Cost: sonnet}
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "0123456789012345678901234567890123456789"}}}
	plain := gateway.EstimateUsage(spec, req)
	if plain.CacheWriteInputTokens() != 0 {
		t.Fatalf("a request without caching holds writes: %+v", plain)
	}
	for _, ttl := range []gateway.CacheTTL{"", gateway.CacheTTL5m, gateway.CacheTTL1h} {
		req.Cache = gateway.PromptCache{TTL: ttl, History: true}
		hold := gateway.Price(spec.Cost, gateway.EstimateUsage(spec, req))
		u := gateway.EstimateUsage(spec, req)
		worst := gateway.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
		if ttl == gateway.CacheTTL1h {
			worst.CacheWrite1hInputTokens = u.InputTokens
		} else {
			worst.CacheWrite5mInputTokens = u.InputTokens
		}
		if got := gateway.Price(spec.Cost, worst); got.NanoUSD > hold.NanoUSD {
			t.Errorf("ttl %q: all-writes usage costs %d nanodollars, above the hold of %d", ttl, got.NanoUSD, hold.NanoUSD)
		}
		if p := gateway.Price(spec.Cost, plain); hold.NanoUSD <= p.NanoUSD {
			t.Errorf("ttl %q: hold %d is not above the plain hold %d", ttl, hold.NanoUSD, p.NanoUSD)
		}
	}
}
