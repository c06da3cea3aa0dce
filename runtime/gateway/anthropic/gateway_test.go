package anthropic_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func contextWithTimeout(t *testing.T, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), d)
}

// newGateway is a gateway over providers whose first model is alias
// "large" and second, if any, "small", retrying twice with short waits.
func newGateway(t *testing.T, providers map[string]gateway.Provider, models ...gateway.ModelSpec) *gateway.Gateway {
	t.Helper()
	var pinned []gateway.PinnedModel
	for i, m := range models {
		pinned = append(pinned, gateway.PinnedModel{Alias: []string{"large", "small"}[i], Spec: m})
	}
	g, err := gateway.New(gateway.Config{
		Models:    pinned,
		Providers: providers,
		Retry:     gateway.RetryPolicy{MaxAttempts: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxRetryAfter: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestFallbackFromOverloaded: an anthropic model that answers 529
// overloaded is retried, honouring Retry-After, then the call falls back
// to a model of another provider, which answers; streamed or not.
func TestFallbackFromOverloaded(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		w.Header().Set("Retry-After", "0.05")
		writeJSON(w, 529, apiError("overloaded_error", "Overloaded"))
	})
	other, err := fake.New(fake.Config{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	small := gateway.ModelSpec{ID: "fake-small", Provider: "other", ContextWindow: 8000, MaxOutputTokens: 64, Capabilities: chatCaps}
	g := newGateway(t, map[string]gateway.Provider{"claude": newProvider(t, srv.URL), "other": other}, spec(sonnet), small)
	res, err := g.Generate(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.FellBack || res.Alias != "small" || res.Text == "" {
		t.Errorf("result %+v, want the fallback's answer", res)
	}
	if len(res.Attempts) != 3 {
		t.Fatalf("%d attempts, want 2 on large and 1 on small: %+v", len(res.Attempts), res.Attempts)
	}
	for _, a := range res.Attempts[:2] {
		var pe *gateway.ProviderError
		if a.Alias != "large" || !errors.As(a.Err, &pe) || pe.StatusCode != 529 || !pe.Retryable || pe.RetryAfter != 50*time.Millisecond {
			t.Errorf("attempt %+v, want a retryable 529 asking for 50ms", a)
		}
	}
	if n := len(srv.recorded()); n != 2 {
		t.Errorf("%d requests to the overloaded service, want 2", n)
	}
	sres, err := gateway.Collect(g.Stream(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small")))
	if err != nil || !sres.FellBack || sres.Alias != "small" {
		t.Errorf("stream: %+v, %v; want the fallback's answer", sres, err)
	}
}

// TestUnauthorisedFallsBackAtOnce: a 401 is not retried; the error the
// caller gets says the key was refused, in the service's words.
func TestUnauthorisedFallsBackAtOnce(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 401, apiError("authentication_error", "invalid x-api-key"))
	})
	g := newGateway(t, map[string]gateway.Provider{"claude": newProvider(t, srv.URL)}, spec(sonnet))
	_, err := g.Generate(t.Context(), "large", ask("hi"))
	if err == nil || gateway.IsRetryable(err) || !strings.Contains(err.Error(), "status 401: authentication_error: invalid x-api-key") {
		t.Errorf("401: %v", err)
	}
	if n := len(srv.recorded()); n != 1 {
		t.Errorf("%d requests, want 1: a 401 is not retried", n)
	}
}
