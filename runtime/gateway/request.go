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
	// OutputTokens counts the answer.
	OutputTokens int64
	// TotalTokens is their sum, as reported by the provider.
	TotalTokens int64
	// Estimated is true when the provider reported no usage and the
	// gateway charged its own estimate instead (see EstimateInputTokens).
	Estimated bool
}

// cachedInput returns the cached input tokens Price bills at the cached
// price: CachedInputTokens when it is a part of InputTokens, and zero when
// it is not (negative, or more than the whole prompt). Such a report
// contradicts itself; zero bills the whole prompt at the input price, which
// is never less than the cached price, so a hostile or broken upstream can
// not make a call look cheaper than its prompt.
func (u Usage) cachedInput() int64 {
	if u.CachedInputTokens < 0 || u.CachedInputTokens > u.InputTokens {
		return 0
	}
	return u.CachedInputTokens
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
