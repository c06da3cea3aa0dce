package openaicompat

import (
	"context"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// Kind is the configuration of a provider of kind openai-compatible, as the
// IR spells it (providers: NAME: {kind: "openai-compatible", baseURL,
// apiKeyEnv, timeout, maxRetries}). It is plain data, so a generated
// service holds it as a literal; NewProvider builds a Provider from a
// Config.
type Kind struct {
	// BaseURL is the API root, for example "https://api.openai.com/v1".
	BaseURL string `json:"baseURL"`
	// APIKeyEnv names the environment variable holding the API key; the
	// key itself is never in a configuration.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// Timeout bounds one HTTP attempt; zero means New's default.
	Timeout time.Duration `json:"timeout,omitempty"`
	// MaxRetries is how many times a retryable failure (429, 5xx, a
	// timeout) is retried before the gateway falls back.
	MaxRetries int `json:"maxRetries,omitempty"`
	// PromptCacheKey says the upstream accepts prompt_cache_key: each
	// request carries one per agent and thread (Config.PromptCacheKey).
	PromptCacheKey bool `json:"promptCacheKey,omitempty"`
}

// ProviderKind implements gateway.ProviderKind.
func (Kind) ProviderKind() string { return kind.ProviderOpenAICompatible }

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

		PromptCacheKey: k.PromptCacheKey,
		LookupEnv:      env.Lookup,
	})
}
