package app

import "testing"

// TestRetryPolicyByKind: an openai-compatible provider gets its retries
// after the first attempt; a fake gets one attempt whatever it says.
func TestRetryPolicyByKind(t *testing.T) {
	for _, tt := range []struct {
		p    Provider
		want int
	}{
		{Provider{Kind: ProviderOpenAICompatible, MaxRetries: 2}, 3},
		{Provider{Kind: ProviderOpenAICompatible}, 1},
		{Provider{Kind: ProviderFake, MaxRetries: 5}, 1},
	} {
		if got := retryPolicy(tt.p).MaxAttempts; got != tt.want {
			t.Errorf("%s with %d retries: %d attempts, want %d", tt.p.Kind, tt.p.MaxRetries, got, tt.want)
		}
	}
}
