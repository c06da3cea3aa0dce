package gateway

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Capability names something a model, or the provider adapter in front of it,
// can do. Require checks a capability on both sides, because a model that can
// call tools is of no use behind an adapter that cannot serialise tool
// definitions.
type Capability string

// The capabilities the gateway knows. Requests imply some of them: tools for a
// request with tool definitions, json for a request with a response schema,
// streaming for Stream and embeddings for Embed.
const (
	// CapabilityTools means tool (function) definitions and tool calls.
	CapabilityTools Capability = "tools"
	// CapabilityJSON means structured output constrained by a JSON schema.
	CapabilityJSON Capability = "json"
	// CapabilityStreaming means incremental delivery of the answer.
	CapabilityStreaming Capability = "streaming"
	// CapabilityVision means image inputs. Requests cannot carry images yet,
	// so no adapter in this module declares it.
	CapabilityVision Capability = "vision"
	// CapabilityEmbeddings means turning texts into vectors. An embedding
	// model has it implicitly.
	CapabilityEmbeddings Capability = "embeddings"
)

// ModelKind tells a chat model from an embedding model, because the two are
// called, priced and checked differently.
type ModelKind string

// The model kinds.
const (
	// KindChat is a model that answers conversations.
	KindChat ModelKind = "chat"
	// KindEmbedding is a model that maps texts to vectors of a fixed width.
	KindEmbedding ModelKind = "embedding"
)

// CostProfile is the pinned price of a model in US dollars per thousand
// tokens. Every charged call is priced from it, never from a price list
// fetched at run time.
type CostProfile struct {
	// InputPer1kUSD is the price of one thousand input (prompt) tokens.
	InputPer1kUSD float64
	// OutputPer1kUSD is the price of one thousand output (completion)
	// tokens; embedding models leave it zero.
	OutputPer1kUSD float64
	// CachedInputPer1kUSD, when set, is the price of one thousand input
	// tokens the provider served from its prompt cache
	// (Usage.CachedInputTokens). Nil bills them at InputPer1kUSD, like the
	// rest of the prompt, so a profile that predates cached pricing keeps
	// its meaning; a pointer to zero makes them free. It is a discount, at
	// most InputPer1kUSD: a budget reserves a call's input at the full
	// price before anyone knows what the cache will serve, and that hold
	// must stay the worst case (see EstimateUsage).
	CachedInputPer1kUSD *float64
	// CacheWrite5mPer1kUSD, when set, is the price of one thousand input
	// tokens the provider wrote to its prompt cache with a five-minute
	// lifetime (Usage.CacheWrite5mInputTokens); Anthropic bills them at
	// 1.25 times the input price. Nil bills them at InputPer1kUSD.
	CacheWrite5mPer1kUSD *float64
	// CacheWrite1hPer1kUSD, when set, is the price of one thousand input
	// tokens written to the prompt cache with a one-hour lifetime
	// (Usage.CacheWrite1hInputTokens); Anthropic bills them at twice the
	// input price. Nil bills them at InputPer1kUSD.
	CacheWrite1hPer1kUSD *float64
}

// cacheWritePer1k returns the price of one thousand input tokens written
// to the prompt cache with lifetime ttl: the declared write price when set,
// the input price otherwise.
func (c CostProfile) cacheWritePer1k(ttl CacheTTL) float64 {
	p := c.CacheWrite5mPer1kUSD
	if ttl == CacheTTL1h {
		p = c.CacheWrite1hPer1kUSD
	}
	if p != nil {
		return *p
	}
	return c.InputPer1kUSD
}

// cachedInputPer1k returns the price of one thousand cached input tokens:
// CachedInputPer1kUSD when set, the input price otherwise.
func (c CostProfile) cachedInputPer1k() float64 {
	if c.CachedInputPer1kUSD != nil {
		return *c.CachedInputPer1kUSD
	}
	return c.InputPer1kUSD
}

// validate reports the first price that makes the profile unusable.
func (c CostProfile) validate() error {
	for _, p := range []float64{c.InputPer1kUSD, c.OutputPer1kUSD} {
		if !(p >= 0) || math.IsInf(p, 0) {
			return fmt.Errorf("has an invalid price of %v US dollars per 1k tokens (want a finite number, at least 0)", p)
		}
	}
	if p := c.CachedInputPer1kUSD; p != nil {
		switch {
		case !(*p >= 0) || math.IsInf(*p, 0):
			return fmt.Errorf("has an invalid cached input price of %v US dollars per 1k tokens", *p)
		case *p > c.InputPer1kUSD:
			return fmt.Errorf("prices cached input tokens at %v US dollars per 1k, above the input price of %v; a cached-input price is a discount, because a budget reserves the prompt at the input price", *p, c.InputPer1kUSD)
		}
	}
	for _, w := range []struct {
		ttl CacheTTL
		p   *float64
	}{{CacheTTL5m, c.CacheWrite5mPer1kUSD}, {CacheTTL1h, c.CacheWrite1hPer1kUSD}} {
		if w.p != nil && (!(*w.p >= 0) || math.IsInf(*w.p, 0)) {
			return fmt.Errorf("has an invalid %s cache-write price of %v US dollars per 1k tokens (want a finite number, at least 0)", w.ttl, *w.p)
		}
	}
	return nil
}

// ModelSpec describes one pinned model: everything the gateway needs to call,
// check and price it without asking the provider.
type ModelSpec struct {
	// ID is the exact provider model id, including its pinned version (for
	// example "gpt-4o-2024-08-06"), sent to the provider as is.
	ID string
	// Provider is the key of the provider in Config.Providers that serves
	// the model.
	Provider string
	// Kind is chat or embedding; empty means chat.
	Kind ModelKind
	// ContextWindow is the model's context size in tokens; zero means
	// unknown and is not checked.
	ContextWindow int
	// MaxOutputTokens bounds the answer. It is the worst case reserved
	// against a budget when a request does not set its own bound, so a chat
	// model must declare it.
	MaxOutputTokens int
	// Dimensions is the width of an embedding model's vectors.
	Dimensions int
	// Cost is the pinned price.
	Cost CostProfile
	// Capabilities lists what the model itself can do.
	Capabilities []Capability
	// API names the wire API the provider calls the model through, for a
	// provider that speaks more than one: empty means the provider's own
	// (chat completions for an openai-compatible provider, which also
	// takes "responses").
	API string
}

// kind returns the model kind with the chat default applied.
func (m ModelSpec) kind() ModelKind {
	if m.Kind == "" {
		return KindChat
	}
	return m.Kind
}

// Has reports whether the model itself declares capability c. An embedding
// model always has CapabilityEmbeddings.
func (m ModelSpec) Has(c Capability) bool {
	if c == CapabilityEmbeddings && m.kind() == KindEmbedding {
		return true
	}
	return slices.Contains(m.Capabilities, c)
}

// validate reports the first problem that makes the spec unusable.
func (m ModelSpec) validate() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("model id is empty")
	case m.Provider == "":
		return fmt.Errorf("model %q names no provider", m.ID)
	}
	if err := m.Cost.validate(); err != nil {
		return fmt.Errorf("model %q %w", m.ID, err)
	}
	switch m.kind() {
	case KindChat:
		if m.MaxOutputTokens <= 0 {
			return fmt.Errorf("chat model %q must declare max output tokens, the worst case a budget reserves", m.ID)
		}
	case KindEmbedding:
		if m.Dimensions <= 0 {
			return fmt.Errorf("embedding model %q must declare its dimensions", m.ID)
		}
	default:
		return fmt.Errorf("model %q has unknown kind %q (want %q or %q)", m.ID, m.Kind, KindChat, KindEmbedding)
	}
	return nil
}

// PinnedModel binds an alias, the name callers use, to one exact model.
type PinnedModel struct {
	// Alias is the stable name callers pass to Generate, Stream and Embed.
	Alias string
	// Spec is the model the alias resolves to.
	Spec ModelSpec
	// Deployments, when set, are the providers that serve the model, each
	// with a weight: a call goes to the least busy for its weight of those
	// not cooling down. The first is Spec.Provider. Empty means
	// Spec.Provider alone.
	Deployments []Deployment
	// CoolDown is how long a deployment that failed (5xx, 429, a timeout,
	// a broken connection) is skipped: the call moves at once to another
	// deployment, or falls back to the next alias, rather than retrying
	// it, and later calls skip it until the cool-down ends. Zero means
	// no cool-down: a failure is retried as RetryPolicy says.
	CoolDown time.Duration
}

// String returns "alias=model-id", the form used in logs.
func (p PinnedModel) String() string {
	var b strings.Builder
	b.WriteString(p.Alias)
	b.WriteByte('=')
	b.WriteString(p.Spec.ID)
	return b.String()
}
