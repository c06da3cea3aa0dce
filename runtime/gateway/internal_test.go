package gateway

import (
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "3"}, 3 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "0.25"}, 250 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(7 * time.Second).Format(http.TimeFormat)}, 7 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "120", "Retry-After": "9"}, 120 * time.Millisecond},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
		{"negative", map[string]string{"Retry-After": "-4"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := ParseRetryAfter(h, now); got != tt.want {
				t.Errorf("ParseRetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 5, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, MaxRetryAfter: 3 * time.Second}
	tests := []struct {
		retry      int
		retryAfter time.Duration
		lo, hi     time.Duration
		ok         bool
	}{
		{0, 0, 50 * time.Millisecond, 100 * time.Millisecond, true},
		{1, 0, 100 * time.Millisecond, 200 * time.Millisecond, true},
		{3, 0, 400 * time.Millisecond, 800 * time.Millisecond, true},
		{10, 0, 500 * time.Millisecond, time.Second, true},
		{200, 0, 500 * time.Millisecond, time.Second, true},
		{0, 2 * time.Second, 2 * time.Second, 2 * time.Second, true},
		{0, 4 * time.Second, 0, 0, false},
	}
	for _, tt := range tests {
		for range 50 {
			d, ok := p.delay(tt.retry, tt.retryAfter)
			if ok != tt.ok || d < tt.lo || d > tt.hi {
				t.Fatalf("delay(%d, %v) = %v, %v; want within [%v, %v], %v", tt.retry, tt.retryAfter, d, ok, tt.lo, tt.hi, tt.ok)
			}
		}
	}
	if got := (RetryPolicy{MaxAttempts: 1}).withDefaults(); got.MaxAttempts != 1 || got.BaseDelay != DefaultRetryPolicy().BaseDelay {
		t.Errorf("withDefaults = %+v", got)
	}
}

func TestPrice(t *testing.T) {
	tests := []struct {
		name string
		cost CostProfile
		use  Usage
		want Amount
	}{
		{"gpt-4o", CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01}, Usage{InputTokens: 1000, OutputTokens: 1000}, Amount{NanoUSD: 12_500_000, Tokens: 2000}},
		{"no float noise", CostProfile{InputPer1kUSD: 0.0025}, Usage{InputTokens: 1}, Amount{NanoUSD: 2500, Tokens: 1}},
		{"rounds a fraction up", CostProfile{InputPer1kUSD: 0.00002}, Usage{InputTokens: 1, TotalTokens: 1}, Amount{NanoUSD: 20, Tokens: 1}},
		{"sub-nano rounds up", CostProfile{InputPer1kUSD: 0.0000001}, Usage{InputTokens: 1}, Amount{NanoUSD: 1, Tokens: 1}},
		{"total from provider", CostProfile{}, Usage{InputTokens: 1, OutputTokens: 1, TotalTokens: 5}, Amount{Tokens: 5}},
		{"free", CostProfile{}, Usage{}, Amount{}},
	}
	for _, tt := range tests {
		if got := Price(tt.cost, tt.use); got != tt.want {
			t.Errorf("%s: Price = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := (Budget{MaxUSD: 0.29}).limit().NanoUSD; got != 290_000_000 {
		t.Errorf("limit of $0.29 = %d nano", got)
	}
}

func TestEstimateInputTokens(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want int64
	}{
		{"empty", Request{}, 3},
		{"one message", Request{Messages: []Message{{Role: RoleUser, Content: "12345"}}}, 3 + 4 + 2},
		{"tool call and tool", Request{
			Messages: []Message{{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "abcd", Arguments: []byte(`{"a":1}`)}}}},
			Tools:    []ToolDef{{Name: "abcd", Description: "12345678", Parameters: []byte(`{}`)}},
		}, 3 + 4 + (4 + 1 + 2) + (8 + 1 + 2 + 1)},
		{"schema", Request{ResponseFormat: &JSONSchema{Name: "a", Schema: []byte(`{"type":"object"}`)}}, 3 + 8 + 1 + 5},
	}
	for _, tt := range tests {
		if got := EstimateInputTokens(tt.req); got != tt.want {
			t.Errorf("%s: EstimateInputTokens = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestBudgetLimitIsTheAmountWritten checks that a money limit written as a
// price the gateway reported (Amount.USD, EstimateCost) is that price to the
// nanodollar, however large, and that a limit between two nanodollars rounds
// down, so that rounding never lets a call through.
func TestBudgetLimitIsTheAmountWritten(t *testing.T) {
	tests := []struct {
		usd  float64
		want int64
	}{
		{0.29, 290_000_000},
		{0.1685, 168_500_000},
		{264.540273799, 264_540_273_799},
		{17453.524291001, 17_453_524_291_001},
		{554002.220501327, 554_002_220_501_327},
		{1.5e-9, 1},
		{1e-10, 0},
		{1e300, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := (Budget{MaxUSD: tt.usd}).limit().NanoUSD; got != tt.want {
			t.Errorf("limit of $%v = %d nano, want %d", tt.usd, got, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		n := r.Int64N(1e15)
		if got := (Budget{MaxUSD: Amount{NanoUSD: n}.USD()}).limit().NanoUSD; got != n {
			t.Fatalf("a limit of %d nano written in dollars is %d nano", n, got)
		}
	}
}

// TestStreamAccumulatorInterleavedToolCalls: a stream whose tool calls'
// pieces interleave (a piece of the first call after the second began) is
// assembled, and does not panic: growing the calls must not copy a
// builder that is written again.
func TestStreamAccumulatorInterleavedToolCalls(t *testing.T) {
	var a streamAccumulator
	for _, d := range []ToolCallDelta{
		{Index: 0, ID: "a", Name: "f", Arguments: `{"x"`},
		{Index: 1, ID: "b", Name: "g", Arguments: `{"y":2}`},
		{Index: 0, Arguments: `:1}`},
		{Index: 3, ID: "d", Name: "h", Arguments: `{}`},
		{Index: 1, Arguments: ``},
		{Index: 0, Arguments: ` `},
	} {
		a.add(Delta{ToolCalls: []ToolCallDelta{d}})
	}
	got := a.response(Request{}).ToolCalls
	want := []ToolCall{{ID: "a", Name: "f", Arguments: []byte(`{"x":1} `)}, {ID: "b", Name: "g", Arguments: []byte(`{"y":2}`)}, {ID: "d", Name: "h", Arguments: []byte(`{}`)}}
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].ID != want[i].ID || got[i].Name != want[i].Name || string(got[i].Arguments) != string(want[i].Arguments) {
			t.Errorf("call %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
