package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/kind"
)

// countingProvider answers every chat call "ok" and counts the calls per
// model id.
type countingProvider struct {
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]error // a model's answer, when it fails
}

func (p *countingProvider) Kind() string               { return "counting" }
func (p *countingProvider) Capabilities() []Capability { return nil }
func (p *countingProvider) Generate(_ context.Context, m ModelSpec, _ Request) (Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls == nil {
		p.calls = map[string]int{}
	}
	p.calls[m.ID]++
	if err := p.fail[m.ID]; err != nil {
		return Response{}, err
	}
	return Response{Text: "ok", Usage: Usage{InputTokens: 10, OutputTokens: 2, TotalTokens: 12}}, nil
}
func (p *countingProvider) Stream(context.Context, ModelSpec, Request) (DeltaStream, error) {
	return nil, errors.New("no streams")
}
func (p *countingProvider) Embed(context.Context, ModelSpec, []string) (EmbedResponse, error) {
	return EmbedResponse{}, errors.New("no embeddings")
}

func (p *countingProvider) count(model string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[model]
}

// rateGateway is a gateway with aliases a (model m-a) and b (m-b) on one
// counting provider, the rate limits, and a clock that sleeping advances.
func rateGateway(t *testing.T, limits ...RateLimit) (*Gateway, *countingProvider, *atomic.Int64) {
	t.Helper()
	p := &countingProvider{}
	spec := func(id string) ModelSpec {
		return ModelSpec{ID: id, Provider: "p", MaxOutputTokens: 10, Cost: CostProfile{InputPer1kUSD: 0.001}}
	}
	var now atomic.Int64 // nanoseconds since start
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	g, err := New(Config{
		Models:     []PinnedModel{{Alias: "a", Spec: spec("m-a")}, {Alias: "b", Spec: spec("m-b")}},
		Providers:  map[string]Provider{"p": p},
		RateLimits: limits,
		Clock:      func() time.Time { return start.Add(time.Duration(now.Load())) },
	})
	if err != nil {
		t.Fatal(err)
	}
	g.sleep = func(ctx context.Context, d time.Duration) error {
		now.Add(int64(d))
		return ctx.Err()
	}
	return g, p, &now
}

var rateReq = Request{Messages: []Message{{Role: RoleUser, Content: "hi"}}}

// TestModelQuotaWaitsInARun: a model's quota refuses a call made outside
// a run with a *RateLimitedError; inside a run (CallInfo with a run id) the
// call waits for the quota, as long as its context allows, and then runs.
func TestModelQuotaWaitsInARun(t *testing.T) {
	g, p, now := rateGateway(t, RateLimit{Name: "quota", Scope: RateScopeModel, Model: "m-a", RequestsPerMinute: 2})
	ctx := t.Context()
	for range 2 {
		if _, err := g.Generate(ctx, "a", rateReq); err != nil {
			t.Fatal(err)
		}
	}
	_, err := g.Generate(ctx, "a", rateReq)
	rl, ok := errors.AsType[*RateLimitedError](err)
	if !ok || rl.Limit != "quota" || rl.Key != "p/m-a" || rl.Dimension != "requests" || rl.RetryAfter != time.Minute {
		t.Fatalf("third call outside a run: %v, want the quota's refusal with a minute's wait", err)
	}
	if _, err := g.Generate(ctx, "b", rateReq); err != nil {
		t.Errorf("another model's calls are not the quota's: %v", err)
	}
	run := WithCallInfo(ctx, CallInfo{Agent: "triage", Step: 1, RunID: "run_1"})
	short, cancel := context.WithTimeout(run, 30*time.Second)
	defer cancel()
	if _, err := g.Generate(short, "a", rateReq); !errors.As(err, &rl) {
		t.Errorf("a run whose step ends before the quota frees: %v, want the refusal", err)
	}
	before := now.Load()
	if _, err := g.Generate(run, "a", rateReq); err != nil {
		t.Fatalf("a run's call: %v, want it to wait for the quota", err)
	}
	if waited := time.Duration(now.Load() - before); waited != time.Minute {
		t.Errorf("waited %s, want the minute until the oldest call leaves the window", waited)
	}
	if got := p.count("m-a"); got != 3 {
		t.Errorf("%d calls reached m-a, want 3", got)
	}
}

// TestRateLimitsFallBackOrNot: a model's quota is its deployment's, so a
// refused call falls back to the next alias; the caller's own limit holds
// on every alias, so it ends the call, and counts it once.
func TestRateLimitsFallBackOrNot(t *testing.T) {
	g, p, _ := rateGateway(t,
		RateLimit{Name: "quota", Scope: RateScopeModel, Model: "m-a", RequestsPerMinute: 1},
		RateLimit{Name: "per_key", Scope: RateScopeKey, RequestsPerMinute: 3},
	)
	ctx := kind.WithCaller(t.Context(), kind.Caller{Key: "frontend"})
	for i := range 3 {
		res, err := g.Generate(ctx, "a", rateReq, WithFallbacks("b"))
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if want := map[bool]string{true: "a", false: "b"}[i == 0]; res.Alias != want {
			t.Errorf("call %d answered by %s, want %s", i, res.Alias, want)
		}
	}
	_, err := g.Generate(ctx, "b", rateReq, WithFallbacks("a"))
	rl, ok := errors.AsType[*RateLimitedError](err)
	if !ok || rl.Limit != "per_key" || rl.Key != "frontend" || rl.Requests.Remaining != 0 || IsFallbackEligible(err) {
		t.Fatalf("fourth call: %v, want the key's refusal, not eligible for a fallback", err)
	}
	if p.count("m-a") != 1 || p.count("m-b") != 2 {
		t.Errorf("calls m-a %d, m-b %d; want 1 and 2", p.count("m-a"), p.count("m-b"))
	}
	other := kind.WithCaller(t.Context(), kind.Caller{Key: "other"})
	if _, err := g.Generate(other, "b", rateReq); err != nil {
		t.Errorf("another key: %v", err)
	}
}

// TestRateCheckTokens: a call larger than the whole limit never fits and
// says so (no wait); one that does not fit yet waits until enough of the
// oldest admissions leave the window.
func TestRateCheckTokens(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	c := RateCounter{Limit: "tpm", Scope: RateScopeKey, Tokens: 100}
	at := []time.Time{now.Add(-50 * time.Second), now.Add(-20 * time.Second)}
	tokens := []int64{40, 50}
	if e := RateCheck(c, now, at, tokens, 90, 10); e != nil {
		t.Errorf("10 tokens on 90 used: %v", e)
	}
	e := RateCheck(c, now, at, tokens, 90, 30)
	if e == nil || e.Dimension != "tokens" || e.RetryAfter != 10*time.Second || e.Tokens.Remaining != 10 || e.Tokens.Reset != 40*time.Second {
		t.Errorf("30 tokens on 90 used: %+v, want a wait of 10s until the 40 leave", e)
	}
	if e := RateCheck(c, now, nil, nil, 0, 101); e == nil || e.RetryAfter != 0 {
		t.Errorf("101 tokens on a limit of 100: %+v, want a refusal without a wait", e)
	}
}
