package anthropic_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/gateway/anthropic"
	"github.com/aidgen/aid/runtime/kind"
)

// TestKind builds the provider from its configuration: the key is read
// through the environment the kind is lent, never os's, and MaxRetries
// retries follow the first attempt.
func TestKind(t *testing.T) {
	k := anthropic.Kind{BaseURL: "https://api.example.test", APIKeyEnv: "AID_KIND_KEY", MaxRetries: 2}
	if k.ProviderKind() != kind.ProviderAnthropic || k.RetryPolicy().MaxAttempts != 3 {
		t.Errorf("kind %q, retry policy %+v", k.ProviderKind(), k.RetryPolicy())
	}
	if got := (anthropic.Kind{}).RetryPolicy().MaxAttempts; got != 1 {
		t.Errorf("no retries: %d attempts, want 1", got)
	}
	t.Setenv("AID_KIND_KEY", "sk-from-os")
	none := func(string) (string, bool) { return "", false }
	if _, err := k.NewProvider(t.Context(), kind.Env{LookupEnv: none}); err == nil || !strings.Contains(err.Error(), "AID_KIND_KEY") {
		t.Errorf("without the key in the kind's environment: %v", err)
	}
	env := func(name string) (string, bool) { return "sk-test", name == "AID_KIND_KEY" }
	p, err := k.NewProvider(t.Context(), kind.Env{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind() != "anthropic" {
		t.Errorf("provider name %q", p.Kind())
	}
}
