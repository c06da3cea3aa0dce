// Package gateway is the only door from aid to a model. Agents, retrieval
// embeddings, evaluations and generated services all call models through a
// *Gateway, so that pinning, capability checks, budgets, pricing, retries,
// fallbacks and tracing exist once.
//
// What it does:
//
//   - Pinning. A catalog of PinnedModel binds each alias to one exact
//     ModelSpec: provider model id with its version, kind, context window,
//     output bound, embedding width, cost profile and capabilities.
//     Resolve, ProviderFor and Require answer questions about an alias; an
//     unknown alias is an *UnknownModelAliasError, never a provider default.
//   - Capabilities. Require, and every call, check a capability on both
//     sides: the model's and the provider adapter's, and a
//     *CapabilityMismatchError names what is missing where.
//   - Requests checked before they leave. A request the OpenAI API
//     specification forbids (no messages, more than four stop sequences, a
//     temperature or top_p out of range, an empty embedding input) is
//     refused with an *InvalidRequestError before anything is reserved or
//     sent. A request too large for an alias's context window is refused
//     for that alias with a *ContextWindowExceededError, by one rule: its
//     likely input (EstimateInputTokens, about four bytes a token) plus the
//     output bound the gateway sends exceeds the window, which is the sum
//     chat-completions providers refuse. The call then falls back only to
//     aliases whose window fits; nothing is reserved for the others.
//   - Budgets that cannot overspend. Before each alias the gateway reserves
//     the request's upper bound (EstimateUsage: at most one token per byte
//     of input, capped by the context window, plus the output bound, priced
//     by Price; EstimateCost is its price) in a Ledger, atomically against
//     every budget the call names; if it does not fit the call is refused
//     with a *BudgetExceededError before any money is spent. After the call
//     the hold is settled to the real usage, or released, in a defer, so
//     that a panic cannot leave it held. Input the provider served from its
//     prompt cache (Usage.CachedInputTokens) is priced at the cost
//     profile's cached-input price and recorded apart in the ledger; the
//     hold assumes none is cached, which is why a cached-input price may
//     not exceed the input price. A call names its
//     budgets and their scope keys (which run, which thread) with
//     WithBudget, or inherits them from ContextWithBudget. MemoryLedger is
//     the default; package pgledger shares one budget across replicas.
//   - Retries and fallbacks. Retryable provider failures (429, 5xx,
//     timeouts, broken connections) are retried with exponential backoff
//     and jitter, honouring Retry-After (RetryPolicy); then the call moves
//     to the next alias given to WithFallbacks, if IsFallbackEligible says
//     the failure may fall through. Result reports every Attempt and
//     whether the answer FellBack.
//   - Streaming. Stream returns an iterator of chunks whose last carries
//     the priced Result; the ledger is settled when the stream ends, breaks,
//     is abandoned or its consumer panics.
//   - Tracing. One OpenTelemetry span per attempt, following the GenAI
//     semantic conventions, with aid-specific values under aid.*.
//
// Providers are adapters behind the Provider interface, a package per
// provider kind: openaicompat speaks the OpenAI wire format through
// openai-go, anthropic the Messages API through Anthropic's SDK, and fake
// is a deterministic, keyless provider for tests, demos and evaluations.
//
// What it is not: it is not an agent loop (no tool execution, no memory; see
// runtime/agents), not a prompt library, and not a general HTTP client. It
// imports no other package of aid, so a team can use it without the IR: build
// a Config by hand and call New.
package gateway
