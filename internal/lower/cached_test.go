package lower_test

import (
	"testing"

	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/gateway"
)

// TestModelSpecCachedInputPrice lowers the three states of
// cachedInputPer1kUSD: absent (cached tokens cost the input price), an
// explicit 0 (free) and a discount; the first two must stay apart, and the
// price a call is charged shows it.
func TestModelSpecCachedInputPrice(t *testing.T) {
	src := []byte(`name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: {
	"absent-1": {provider: "p", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0.002}
	"free-1": {provider: "p", contextWindow: 100, maxOutputTokens: 10, cost: {inputPer1kUSD: 0.002, cachedInputPer1kUSD: 0}}
	"half-1": {provider: "p", contextWindow: 100, maxOutputTokens: 10, cost: {inputPer1kUSD: 0.002, cachedInputPer1kUSD: 0.001}}
}
aliases: {absent: "absent-1", free: "free-1", half: "half-1"}
`)
	doc, err := ir.LoadBytes("app.cue", src)
	if err != nil {
		t.Fatal(err)
	}
	// 1,000 input tokens, 800 of them cached.
	use := gateway.Usage{InputTokens: 1000, CachedInputTokens: 800}
	for _, tt := range []struct {
		alias    string
		wantSet  bool
		wantNano int64
	}{
		{"absent", false, 2_000_000},      // 1,000 × 2,000
		{"free", true, 400_000},           // 200 × 2,000 + 800 × 0
		{"half", true, 400_000 + 800_000}, // 200 × 2,000 + 800 × 1,000
	} {
		m, ok := doc.Resolve(tt.alias)
		if !ok {
			t.Fatalf("alias %q does not resolve", tt.alias)
		}
		spec := lower.ModelSpec(m)
		if got := spec.Cost.CachedInputPer1kUSD != nil; got != tt.wantSet {
			t.Errorf("%s: cached price set = %v, want %v", tt.alias, got, tt.wantSet)
		}
		if got := gateway.Price(spec.Cost, use).NanoUSD; got != tt.wantNano {
			t.Errorf("%s: price %d nanodollars, want %d", tt.alias, got, tt.wantNano)
		}
	}
}
