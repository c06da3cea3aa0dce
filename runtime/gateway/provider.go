package gateway

import (
	"context"

	"github.com/aidgen/aid/runtime/kind"
)

// ProviderKind is the typed configuration of a provider kind: what an
// application says about one provider of that kind (an endpoint and where
// its key is, a seed and a script). Each kind is a package under
// runtime/gateway whose configuration, plain data with the IR's JSON field
// names, implements it (openaicompat.Kind, fake.Kind); an application
// description holds it as a provider's Kind, and app.Assemble calls
// NewProvider, so a program links only the provider kinds its description
// names.
type ProviderKind interface {
	// ProviderKind returns the kind's name, as the IR spells it
	// (kind.ProviderFake).
	ProviderKind() string
	// NewProvider builds the provider adapter, reading what it needs from
	// env: keys from the environment, scripts and datasets from the
	// application's files.
	NewProvider(ctx context.Context, env kind.Env) (Provider, error)
	// RetryPolicy is how the gateway retries the provider's retryable
	// failures: a remote endpoint's own setting, a single attempt for a
	// provider that never fails transiently.
	RetryPolicy() RetryPolicy
}

// Provider is an adapter to one model service. The gateway owns everything
// around the call (aliases, capability checks, budgets, pricing, retries,
// fallbacks, tracing), so an adapter only translates a Request to its wire
// format and back, and classifies its failures as *ProviderError (with
// Retryable, StatusCode and RetryAfter set) so that the gateway can retry or
// fall back. Implementations must be safe for concurrent use and must return
// promptly when ctx ends.
type Provider interface {
	// Kind returns the provider's name for tracing, the value of the
	// gen_ai.provider.name attribute (for example "openai").
	Kind() string
	// Capabilities lists what the adapter can serialise. A capability the
	// model has but the adapter lacks is unusable.
	Capabilities() []Capability
	// Generate makes one chat call. req.MaxOutputTokens is always set: the
	// gateway has bounded it to what it reserved.
	Generate(ctx context.Context, model ModelSpec, req Request) (Response, error)
	// Stream starts one streaming chat call. An error before the stream
	// opens (a refused request) is returned here, so that the gateway can
	// retry or fall back before anything reached the caller.
	Stream(ctx context.Context, model ModelSpec, req Request) (DeltaStream, error)
	// Embed turns texts into vectors of the model's width, one per text,
	// in order.
	Embed(ctx context.Context, model ModelSpec, texts []string) (EmbedResponse, error)
}

// DeltaStream is an open provider stream. The gateway calls Close exactly
// once, whether the stream ended or the caller abandoned it.
type DeltaStream interface {
	// Next returns the next delta, or io.EOF once the stream has ended
	// normally. Any other error ends the stream.
	Next() (Delta, error)
	// Close releases the stream's resources; it unblocks a pending Next.
	Close() error
}
