package openaicompat_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/gateway/openaicompat"
	"github.com/aidgen/aid/runtime/kind"
)

// TestKind builds the provider from its configuration: the key is read
// through the environment the kind is lent, never os's, and MaxRetries
// retries follow the first attempt.
func TestKind(t *testing.T) {
	k := openaicompat.Kind{BaseURL: "https://api.example.test/v1", APIKeyEnv: "AID_KIND_KEY", MaxRetries: 2}
	if k.ProviderKind() != kind.ProviderOpenAICompatible || k.RetryPolicy().MaxAttempts != 3 {
		t.Errorf("kind %q, retry policy %+v", k.ProviderKind(), k.RetryPolicy())
	}
	if got := (openaicompat.Kind{}).RetryPolicy().MaxAttempts; got != 1 {
		t.Errorf("no retries: %d attempts, want 1", got)
	}
	t.Setenv("AID_KIND_KEY", "sk-from-os")
	none := func(string) (string, bool) { return "", false }
	if _, err := k.NewProvider(t.Context(), kind.Env{LookupEnv: none}); err == nil || !strings.Contains(err.Error(), "AID_KIND_KEY") {
		t.Errorf("without the key in the kind's environment: %v", err)
	}
	env := func(name string) (string, bool) { return "sk-test", name == "AID_KIND_KEY" }
	if _, err := k.NewProvider(t.Context(), kind.Env{LookupEnv: env}); err != nil {
		t.Fatal(err)
	}
}
