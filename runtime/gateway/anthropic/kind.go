package anthropic

import (
	"context"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// Kind is the configuration of a provider of kind anthropic, as the IR
// spells it (providers: NAME: {kind: "anthropic", baseURL, apiKeyEnv,
// timeout, maxRetries}). It is plain data, so a generated service holds it
// as a literal; NewProvider builds a Provider from a Config.
type Kind struct {
	// BaseURL is the API root, under which the Messages API is at
	// v1/messages; empty means DefaultBaseURL. A proxy in front of the API
	// is named here.
	BaseURL string `json:"baseURL,omitempty"`
	// APIKeyEnv names the environment variable holding the API key; the
	// key itself is never in a configuration. Empty means no key is sent.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// Timeout bounds one HTTP attempt; zero means DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxRetries is how many times a retryable failure (429, 529
	// overloaded, another 5xx, a timeout) is retried before the gateway
	// falls back.
	MaxRetries int `json:"maxRetries,omitempty"`
}

// ProviderKind implements gateway.ProviderKind.
func (Kind) ProviderKind() string { return kind.ProviderAnthropic }

// RetryPolicy implements gateway.ProviderKind: MaxRetries retries after
// the first attempt.
func (k Kind) RetryPolicy() gateway.RetryPolicy {
	return gateway.RetryPolicy{MaxAttempts: k.MaxRetries + 1}
}

// NewProvider implements gateway.ProviderKind, with the environment's
// HTTP client and its variables.
func (k Kind) NewProvider(_ context.Context, env kind.Env) (gateway.Provider, error) {
	return New(Config{
		BaseURL:    k.BaseURL,
		APIKeyEnv:  k.APIKeyEnv,
		Timeout:    k.Timeout,
		HTTPClient: env.HTTPClient,
		LookupEnv:  env.Lookup,
	})
}
