package service

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// TestRateLimitedAnswer: a call a rate limit refused, however deep the
// error, is a 429 of OpenAI's shape with Retry-After and the
// x-ratelimit-* headers of the limit that refused; one that can never fit
// is not to be retried.
func TestRateLimitedAnswer(t *testing.T) {
	rl := &gateway.RateLimitedError{
		Limit: "per_key", Scope: gateway.RateScopeKey, Key: "frontend", Dimension: "tokens",
		Requests:   gateway.RateStatus{Limit: 60, Remaining: 12, Reset: 41 * time.Second},
		Tokens:     gateway.RateStatus{Limit: 10_000, Remaining: 300, Reset: 41*time.Second + 500*time.Millisecond},
		RetryAfter: 1500 * time.Millisecond,
	}
	rec := httptest.NewRecorder()
	writeError(rec, fmt.Errorf("run r1: %w", rl), nil)
	var body struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusTooManyRequests || body.Error.Code != CodeRateLimited || body.Error.Type != TypeRateLimit || body.Error.Message != rl.Error() {
		t.Errorf("%d %+v", rec.Code, body.Error)
	}
	want := map[string]string{
		"Retry-After":                    "2",
		"X-Should-Retry":                 "true",
		"x-ratelimit-limit-requests":     "60",
		"x-ratelimit-remaining-requests": "12",
		"x-ratelimit-reset-requests":     "41s",
		"x-ratelimit-limit-tokens":       "10000",
		"x-ratelimit-remaining-tokens":   "300",
		"x-ratelimit-reset-tokens":       "41.5s",
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}

	never := *rl
	never.Requests, never.RetryAfter = gateway.RateStatus{}, 0
	rec = httptest.NewRecorder()
	writeError(rec, &never, nil)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "" || rec.Header().Get("X-Should-Retry") != "false" ||
		rec.Header().Get("x-ratelimit-limit-requests") != "" || rec.Header().Get("x-ratelimit-limit-tokens") != "10000" {
		t.Errorf("a call that never fits: %d %v", rec.Code, rec.Header())
	}
}
