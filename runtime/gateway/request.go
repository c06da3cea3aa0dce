package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Role says who wrote a message.
type Role string

// The message roles, as in the chat-completions wire format.
const (
	// RoleSystem carries instructions.
	RoleSystem Role = "system"
	// RoleUser carries the user's input.
	RoleUser Role = "user"
	// RoleAssistant carries an earlier model answer, with its tool calls.
	RoleAssistant Role = "assistant"
	// RoleTool carries the observation of one tool call.
	RoleTool Role = "tool"
)

// Message is one turn of a conversation.
type Message struct {
	// Role says who wrote the message.
	Role Role
	// Content is the text of the message.
	Content string
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string
	// Name optionally names the participant (or, for a tool message, the
	// tool).
	Name string
	// Failed marks a tool message whose call failed: its content is the
	// error the model reads (a tool that failed or timed out, a call that
	// was refused or not run). A provider whose API can say so sends it
	// (Anthropic's is_error); the others send the content alone.
	Failed bool
	// Reasoning is what the provider that wrote an assistant message gave
	// to be sent back with it on the next step (Response.Reasoning): the
	// Responses API's reasoning items, their encrypted content included.
	// It is opaque to all but that provider, which ignores what another
	// model wrote; the others ignore it.
	Reasoning json.RawMessage
}

// ToolDef declares a tool the model may call.
type ToolDef struct {
	// Name is the tool's name, as the model will call it.
	Name string
	// Description tells the model when to use the tool.
	Description string
	// Parameters is the JSON Schema of the tool's arguments; nil means no
	// arguments.
	Parameters json.RawMessage
}

// ToolCall is one call of a tool requested by the model.
type ToolCall struct {
	// ID identifies the call so that its observation can refer to it.
	ID string
	// Name is the tool to call.
	Name string
	// Arguments is the JSON object of arguments, as the model wrote it.
	Arguments json.RawMessage
}

// ToolChoiceMode says whether and how the model must use tools.
type ToolChoiceMode string

// The tool choice modes.
const (
	// ToolChoiceAuto lets the model decide; it is the provider default.
	ToolChoiceAuto ToolChoiceMode = "auto"
	// ToolChoiceNone forbids tool calls.
	ToolChoiceNone ToolChoiceMode = "none"
	// ToolChoiceRequired demands at least one tool call.
	ToolChoiceRequired ToolChoiceMode = "required"
	// ToolChoiceTool demands a call of the tool named in ToolChoice.Name.
	ToolChoiceTool ToolChoiceMode = "tool"
)

// ToolChoice constrains tool use; the zero value leaves it to the provider.
type ToolChoice struct {
	// Mode is the constraint; empty means the provider default.
	Mode ToolChoiceMode
	// Name is the tool to call when Mode is ToolChoiceTool.
	Name string
}

// JSONSchema asks for an answer that is a JSON document matching Schema.
type JSONSchema struct {
	// Name names the schema, as providers require.
	Name string
	// Description tells the model what the document is for.
	Description string
	// Schema is the JSON Schema the answer must match.
	Schema json.RawMessage
	// Strict asks the provider to enforce the schema exactly.
	Strict bool
}

// Request is one chat call, independent of any provider's wire format.
type Request struct {
	// Messages is the conversation so far.
	Messages []Message
	// Tools are the tools the model may call; a non-empty list requires
	// CapabilityTools.
	Tools []ToolDef
	// ToolChoice constrains tool use.
	ToolChoice ToolChoice
	// ParallelToolCalls, when set to false, asks for at most one tool call
	// per answer; nil leaves it to the provider, which allows several.
	ParallelToolCalls *bool
	// ResponseFormat, when set, asks for structured JSON output and
	// requires CapabilityJSON.
	ResponseFormat *JSONSchema
	// MaxOutputTokens bounds the answer; zero means the model's
	// MaxOutputTokens. It is also the output part of the worst case a
	// budget reserves.
	MaxOutputTokens int
	// Temperature, when set, is the sampling temperature.
	Temperature *float64
	// TopP, when set, is the nucleus sampling mass.
	TopP *float64
	// Stop lists sequences that end the answer.
	Stop []string
	// Seed, when set, asks the provider for reproducible sampling.
	Seed *int64
	// Cache asks a provider that caches prompt prefixes to cache this
	// request's stable prefix; the zero value asks for nothing. A provider
	// that cannot honour a part of it ignores that part: caching changes
	// what a call costs, never what it answers.
	Cache PromptCache
}

// CacheTTL is the lifetime of a prompt-cache entry a call writes.
type CacheTTL string

// The cache lifetimes Anthropic's Messages API offers, priced apart.
const (
	// CacheTTL5m is the five-minute lifetime, the API's default.
	CacheTTL5m CacheTTL = "5m"
	// CacheTTL1h is the one-hour lifetime, dearer to write.
	CacheTTL1h CacheTTL = "1h"
)

// PromptCache says which parts of a request's prefix a provider should
// cache, and for how long. A provider with explicit breakpoints
// (Anthropic's cache_control) marks the end of each part asked for; one
// with automatic caching keyed by the caller (OpenAI's prompt_cache_key)
// sends Key. The parts are the ones every step of an agent repeats: the
// tool definitions, the system prompt and the history up to the last turn.
type PromptCache struct {
	// TTL is the lifetime of the entries written; empty with any part set
	// means CacheTTL5m. It is what a budget reserves the prompt at: a call
	// that asks for caching is held as if it wrote its whole prompt.
	TTL CacheTTL
	// Tools marks a breakpoint after the tool definitions.
	Tools bool
	// System marks a breakpoint after the system prompt.
	System bool
	// History marks a breakpoint on the last message, so that the next
	// step of the same conversation reads everything before it from the
	// cache.
	History bool
	// Key groups requests that share a prefix (an agent's thread), for an
	// upstream that routes its automatic cache by a key; empty sends none.
	Key string
}

// Breakpoints reports whether the policy marks any part of the prefix.
func (c PromptCache) Breakpoints() bool { return c.Tools || c.System || c.History }

// ttl returns the lifetime of the entries the policy writes: TTL, or
// CacheTTL5m when it marks parts and names none.
func (c PromptCache) ttl() CacheTTL {
	if c.TTL == "" {
		return CacheTTL5m
	}
	return c.TTL
}

// requiredCapabilities returns what the request needs beyond plain chat.
func (r *Request) requiredCapabilities(dst []Capability) []Capability {
	if len(r.Tools) > 0 {
		dst = append(dst, CapabilityTools)
	}
	if r.ResponseFormat != nil {
		dst = append(dst, CapabilityJSON)
	}
	return dst
}

// validate refuses what the OpenAI API specification (the chat-completions
// request schema) forbids, before anything is reserved or sent. The rules
// are the schema's own bounds on the fields a Request carries.
func (r *Request) validate() error {
	if len(r.Messages) == 0 {
		return &InvalidRequestError{Field: "messages", Rule: "the specification requires at least one message (minItems 1), got none"}
	}
	if len(r.Stop) > maxStopSequences {
		return &InvalidRequestError{Field: "stop", Rule: fmt.Sprintf("the specification allows at most %d stop sequences (maxItems %d), got %d", maxStopSequences, maxStopSequences, len(r.Stop))}
	}
	if t := r.Temperature; t != nil && !(*t >= 0 && *t <= 2) {
		return &InvalidRequestError{Field: "temperature", Rule: fmt.Sprintf("the specification requires a number from 0 to 2, got %v", *t)}
	}
	if p := r.TopP; p != nil && !(*p >= 0 && *p <= 1) {
		return &InvalidRequestError{Field: "top_p", Rule: fmt.Sprintf("the specification requires a number from 0 to 1, got %v", *p)}
	}
	return nil
}

// maxStopSequences is the chat-completions schema's maxItems for stop.
const maxStopSequences = 4

// validateEmbedInput refuses embedding inputs the OpenAI API specification
// forbids: an input "cannot be an empty string".
func validateEmbedInput(texts []string) error {
	for i, t := range texts {
		if t == "" {
			return &InvalidRequestError{Field: "input[" + strconv.Itoa(i) + "]", Rule: "the specification forbids an empty string"}
		}
	}
	return nil
}

// Usage counts the tokens of one call.
type Usage struct {
	// InputTokens counts the prompt, cached tokens included.
	InputTokens int64
	// CachedInputTokens counts the part of InputTokens the provider served
	// from its prompt cache and bills at a discount; it is a subset, not an
	// addition, as in the OpenAI wire format, where prompt_tokens includes
	// prompt_tokens_details.cached_tokens. Price bills it at the cost
	// profile's CachedInputPer1kUSD. The gateway reports it as the provider
	// did, except that a count outside 0..InputTokens, which no honest
	// provider sends, is reported and billed as zero: the whole prompt at
	// the input price, the dearer reading.
	CachedInputTokens int64
	// CacheWrite5mInputTokens counts the part of InputTokens the provider
	// wrote to its prompt cache with a five-minute lifetime, billed at the
	// cost profile's CacheWrite5mPer1kUSD (Anthropic's
	// cache_creation.ephemeral_5m_input_tokens).
	CacheWrite5mInputTokens int64
	// CacheWrite1hInputTokens counts the part of InputTokens written to the
	// prompt cache with a one-hour lifetime, billed at
	// CacheWrite1hPer1kUSD. Cache reads and both kinds of write are
	// disjoint parts of the input; a report in which they do not fit in
	// InputTokens, which no honest provider sends, is billed as parts
	// clamped to fit, reads first dropped (see Usage.cacheParts).
	CacheWrite1hInputTokens int64
	// OutputTokens counts the answer.
	OutputTokens int64
	// TotalTokens is their sum, as reported by the provider.
	TotalTokens int64
	// Estimated is true when the provider reported no usage and the
	// gateway charged its own estimate instead (see EstimateInputTokens).
	Estimated bool
}

// CacheWriteInputTokens returns the input tokens written to the prompt
// cache, of either lifetime.
func (u Usage) CacheWriteInputTokens() int64 {
	return u.CacheWrite5mInputTokens + u.CacheWrite1hInputTokens
}

// cacheParts returns the cache reads and the five-minute and one-hour cache
// writes Price bills, each a part of the input. An honest report is
// returned as is. One whose parts are negative or do not fit in InputTokens
// contradicts itself and is read the dearer way: the reads, the only
// discount, are dropped, and each write is clamped to what is left of the
// input, one-hour writes first. A hostile upstream can therefore not make a
// call look cheaper than its prompt at the input price.
func (u Usage) cacheParts() (read, w5m, w1h int64) {
	read, w5m, w1h = u.CachedInputTokens, u.CacheWrite5mInputTokens, u.CacheWrite1hInputTokens
	if read >= 0 && w5m >= 0 && w1h >= 0 && read+w5m+w1h <= u.InputTokens && read <= u.InputTokens && w5m <= u.InputTokens && w1h <= u.InputTokens {
		return read, w5m, w1h
	}
	left := max(u.InputTokens, 0)
	w1h = min(max(w1h, 0), left)
	left -= w1h
	w5m = min(max(w5m, 0), left)
	return 0, w5m, w1h
}

// total returns TotalTokens, or the sum when the provider left it out.
func (u Usage) total() int64 {
	if u.TotalTokens > 0 {
		return u.TotalTokens
	}
	return u.InputTokens + u.OutputTokens
}

// FinishReason says why the model stopped.
type FinishReason string

// The finish reasons of the chat-completions wire format.
const (
	// FinishStop is a natural end or a stop sequence.
	FinishStop FinishReason = "stop"
	// FinishLength is the output bound.
	FinishLength FinishReason = "length"
	// FinishToolCalls means the answer is a set of tool calls.
	FinishToolCalls FinishReason = "tool_calls"
	// FinishContentFilter means the provider withheld content.
	FinishContentFilter FinishReason = "content_filter"
)

// Response is what a provider returns for one chat call.
type Response struct {
	// Text is the answer's text.
	Text string
	// ToolCalls are the tool calls the model asked for.
	ToolCalls []ToolCall
	// FinishReason says why the model stopped.
	FinishReason FinishReason
	// Usage is the provider's token count; zero means not reported.
	Usage Usage
	// Model is the model id the provider says answered, when it says so.
	Model string
	// Reasoning is the provider's own state for the answer, to be kept on
	// the assistant message (Message.Reasoning) and sent back with it;
	// nil for a provider that keeps none.
	Reasoning json.RawMessage
}

// ToolCallDelta is a fragment of a tool call in a stream. Fragments with the
// same Index belong to the same call; ID and Name arrive once, Arguments in
// pieces to be concatenated.
type ToolCallDelta struct {
	// Index is the position of the call in the answer.
	Index int
	// ID is the call id, set on the call's first fragment.
	ID string
	// Name is the tool name, set on the call's first fragment.
	Name string
	// Arguments is the next piece of the JSON arguments.
	Arguments string
}

// Delta is one event of a provider stream.
type Delta struct {
	// Text is the next piece of the answer's text.
	Text string
	// ToolCalls are the next fragments of tool calls.
	ToolCalls []ToolCallDelta
	// FinishReason is set once, when the model stops.
	FinishReason FinishReason
	// Usage is set when the provider reports usage, usually last.
	Usage *Usage
	// Model is the model id the provider says answered, when it says so.
	Model string
	// Reasoning is set once, when the provider has its state for the
	// answer (Response.Reasoning).
	Reasoning json.RawMessage
}

// EmbedResponse is what a provider returns for one embedding call.
type EmbedResponse struct {
	// Vectors holds one vector per input text, in input order.
	Vectors [][]float32
	// Usage is the provider's token count; zero means not reported.
	Usage Usage
	// Model is the model id the provider says answered, when it says so.
	Model string
}

// Attempt records one try of one alias. An alias skipped because the
// request does not fit its context window is recorded too, with a
// *ContextWindowExceededError and no duration: nothing was sent.
type Attempt struct {
	// Alias is the alias tried.
	Alias string
	// Model is the pinned model id behind it.
	Model string
	// Deployment names the deployment tried, for an alias with
	// deployments or a cool-down; empty otherwise.
	Deployment string
	// Retry counts earlier tries of the same alias in this call: 0 is the
	// first try.
	Retry int
	// Duration is how long the try took.
	Duration time.Duration
	// Err is why the try failed; nil for the try that answered.
	Err error
}

// Result is the outcome of Generate, and of a stream once it ends.
type Result struct {
	// Text is the answer's text.
	Text string
	// ToolCalls are the tool calls the model asked for.
	ToolCalls []ToolCall
	// FinishReason says why the model stopped.
	FinishReason FinishReason
	// Usage is the token count charged.
	Usage Usage
	// CostUSD is the price charged, from the pinned cost profile.
	CostUSD float64
	// Alias is the alias that answered.
	Alias string
	// Model is the pinned model id that answered.
	Model string
	// Attempts lists every try in order, the answering one last.
	Attempts []Attempt
	// FellBack is true when the answer came from a fallback alias rather
	// than the one asked for.
	FellBack bool
	// Reasoning is the answering provider's state for the answer
	// (Response.Reasoning), for the assistant message that keeps it.
	Reasoning json.RawMessage
}

// EmbedResult is the outcome of Embed.
type EmbedResult struct {
	// Vectors holds one vector per input text, in input order.
	Vectors [][]float32
	// Usage is the token count charged.
	Usage Usage
	// CostUSD is the price charged, from the pinned cost profile.
	CostUSD float64
	// Alias is the alias that answered.
	Alias string
	// Model is the pinned model id that answered.
	Model string
	// Attempts lists every try in order, the answering one last.
	Attempts []Attempt
}

// Chunk is one element of a Stream: a piece of the answer, or, last, the
// final Result.
type Chunk struct {
	// Text is the next piece of the answer's text.
	Text string
	// ToolCalls are the next fragments of tool calls.
	ToolCalls []ToolCallDelta
	// Result is set on the last chunk only, once the stream has been
	// priced and settled; it carries the whole answer.
	Result *Result
}
