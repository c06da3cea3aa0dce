// Package anthropic is the gateway.Provider for Anthropic's Messages API,
// built on the official Go SDK (github.com/anthropics/anthropic-sdk-go/v2).
//
// It translates gateway requests to the Messages API and back. System
// messages become the top-level system prompt, in their order (a system
// message late in a conversation joins it too: the API has no other
// place for one). User and assistant messages become content blocks of
// alternating turns: an assistant's tool calls are tool_use blocks, each
// tool message a tool_result block, consecutive tool results one user turn,
// and a turn's tool results come before its text, as the API requires.
// Text that is empty or only white space is left out, since the API
// refuses text blocks without a visible character, and message names are
// dropped, since it has none. A tool call id the API refuses (it takes
// ^[a-zA-Z0-9_-]+$; another provider's, such as functions.get_weather:0,
// may not match) is sent as its accepted characters and a hash of the
// whole id, the same in the tool_use and its tool_result at every step. A
// failed call's result (gateway.Message.Failed) is flagged is_error. Tools
// are sent with their JSON Schema as input_schema, an object schema: a
// tool without parameters, or whose schema names no type, takes one, and
// a schema of another type is refused before sending; tool choice auto,
// none, required and a named tool become auto, none, any and tool, with
// disable_parallel_tool_use for a request whose ParallelToolCalls is
// false; a response schema becomes
// output_config.format (structured outputs); the output bound is always
// max_tokens, and stop sequences are stop_sequences. Answers are read
// back as text and tool calls; stop reasons end_turn and stop_sequence
// finish with stop, max_tokens and model_context_window_exceeded with
// length, tool_use with tool calls and refusal with content filter. The
// usage counts the cache's reads and writes as a part of the input, as
// gateway.Usage does, and the reads as the cached input. Streams are
// read event by event: text deltas, each tool call's id and name at its
// content_block_start and its arguments in input_json_delta pieces, the
// stop reason and the output's usage at message_delta, and an error event
// as the stream's failure.
//
// It does not send temperature, top_p or seed (the Messages API of the
// SDK has no sampling parameters, and never had a seed; the kind's
// kind.Info says NoSampling, so that vet refuses an agent declaring a
// temperature on a model of this kind), images (requests
// cannot carry them, so the adapter does not declare vision), prompt
// caching marks, extended thinking, citations, server tools or batches;
// thinking blocks a proxy adds to an answer are skipped, and any other
// block the gateway cannot represent fails the answer. The Messages API
// has no embeddings: the adapter does not declare them, so the gateway
// refuses an embedding model on an anthropic provider with a
// *gateway.CapabilityMismatchError, and Embed returns the same error.
//
// Failures are *gateway.ProviderError with the status code, whether a
// retry may help and the Retry-After the service asked for: a 408, 409,
// 429, 529 (overloaded_error) or other 5xx is retryable, and so is an
// error event of type overloaded_error, rate_limit_error, api_error or
// timeout_error in a stream; a 400, 401, 403 or 404 is not. The adapter
// does not retry: the SDK's retries are switched off, so that the gateway
// retries, traces and bounds every attempt (the SDK's own OpenTelemetry
// spans are off too). An attempt is bounded by the configured timeout, a
// stream's wait for each event by the same; an answer is read up to 8 MB
// and a stream's event up to 1 MB, so an upstream gone wrong fails rather
// than fills memory.
//
// The API key is read once, from the environment variable the
// configuration names, and sent only in the request's headers. Nothing
// else comes from the environment: the SDK's defaults (ANTHROPIC_BASE_URL,
// ANTHROPIC_API_KEY, ANTHROPIC_AUTH_TOKEN, profiles, federation,
// ANTHROPIC_CUSTOM_HEADERS) are switched off, and a redirect to another
// origin is not followed, so the key never leaves the configured one.
// Every string of the service that can reach an error (an error object's
// type and message, an error body that is not JSON, error events, a
// content block's type, the model name and stop reason of an answer) has
// any echo of the key redacted, as package openaicompat does; errors never
// wrap the SDK's error, which holds the request and its headers. The
// answer's text and tool calls are the caller's data and are passed on as
// they came.
//
// To go through a proxy or an API gateway in front of Anthropic, set the
// base URL to its root (the Messages API is at v1/messages under it) and
// the key variable to the one holding the proxy's key; an HTTP proxy for
// outgoing connections is the environment's HTTPS_PROXY, which the
// default transport honours.
//
// It is the provider kind anthropic: Kind is the configuration an
// application names (base URL, the variable holding the key, timeout,
// retries), plain data a generated service holds as a literal, and it
// implements gateway.ProviderKind. Only a program whose description names
// this kind links this package, and the SDK with it.
package anthropic
