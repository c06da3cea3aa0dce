// Package openaicompat is the gateway.Provider for services speaking the
// OpenAI chat-completions and embeddings wire format (OpenAI itself, and the
// many servers that copy it), built on the official openai-go client.
//
// It translates gateway requests to the wire format and back (tools and tool
// choice, JSON-schema response format, streaming with text and tool-call
// deltas and usage in the final chunk, the cached part of the prompt from
// usage.prompt_tokens_details.cached_tokens, batched embeddings) and classifies
// failures as *gateway.ProviderError with the status code, whether a retry
// may help and the Retry-After the server asked for. It does not retry: the
// client's own retries are switched off so that the gateway retries, traces
// and bounds every attempt.
//
// The API key is read once, from the environment variable the configuration
// names. It is sent only in the Authorization header: it never appears in an
// error, a log line or a span. Every string the server sends that can reach
// one (each field of an error object, an error body that is not JSON, SSE
// error events, the model name and finish reason of an answer) has any echo
// of the key redacted: as sent or as the header's value, in any case,
// percent-encoded, JSON- or HTML-escaped, base64-encoded, or as any run of
// eight or more of its characters. Errors never wrap openai-go's error,
// which holds the request and its headers. The answer's text and tool
// calls are the caller's data and are passed on as they came.
//
// It is the provider kind openai-compatible: Kind is the configuration an
// application names (base URL, the variable holding the key, timeout,
// retries), plain data a generated service holds as a literal, and it
// implements gateway.ProviderKind. Only a program whose description names
// this kind links this package, and openai-go with it.
//
// A model whose spec names APIResponses (gateway.ModelSpec.API) is called
// through the Responses API instead (responses.go), with store false and
// the reasoning items' encrypted content included: the items an answer
// carries are the answer's gateway.Response.Reasoning, which the caller
// keeps on the assistant message and which this adapter sends back, to the
// same model, on the next step. Usage and failures are read as for chat
// completions.
//
// It is not a general OpenAI client: only chat completions, the Responses
// API's model calls and embeddings are spoken; images, audio and files are
// not. Requests cannot carry images, so the adapter does not declare
// vision.
package openaicompat
