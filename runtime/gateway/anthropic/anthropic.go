package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/internal/upstream"
)

// DefaultBaseURL is the root of Anthropic's own API, the base URL of a
// configuration that names none.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultTimeout bounds one attempt of a configuration that sets no
// timeout.
const DefaultTimeout = 60 * time.Second

// Config configures an Anthropic provider.
type Config struct {
	// BaseURL is the API root, under which the Messages API is at
	// v1/messages; empty means DefaultBaseURL. A proxy or gateway in front
	// of the API is named here.
	BaseURL string
	// APIKeyEnv names the environment variable holding the API key. Empty
	// means the endpoint needs no key (a proxy that adds its own); then no
	// key is sent, not even one found in ANTHROPIC_API_KEY.
	APIKeyEnv string
	// Timeout bounds one attempt: a whole message request, or, for a
	// stream, the wait for each next event. Zero means DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means a client on
	// kind.DefaultTransport, which keeps idle connections for concurrent
	// calls.
	HTTPClient *http.Client
	// LookupEnv reads the environment; nil means os.LookupEnv. Tests set
	// it to avoid touching the process environment.
	LookupEnv func(string) (string, bool)
}

// providerName is the gen_ai.provider.name of the OpenTelemetry GenAI
// semantic conventions for Anthropic.
const providerName = "anthropic"

// Provider is the Anthropic gateway.Provider. It is safe for concurrent
// use.
type Provider struct {
	// client is the SDK client's Messages service, not the client: see
	// openaicompat.Provider for why holding a whole client costs megabytes.
	client  sdk.MessageService
	red     *upstream.Redactor
	timeout time.Duration
	baseURL string
	classes upstream.Classifier
}

// New builds a provider. It fails when APIKeyEnv names a variable that is not
// set, naming the variable and never its value, and when BaseURL is not an
// http or https URL.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("anthropic: base URL %q is not an http or https URL", cfg.BaseURL)
	}
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	key, err := upstream.APIKey(lookup, cfg.APIKeyEnv)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	p := &Provider{red: upstream.NewRedactor(key), timeout: cfg.Timeout, baseURL: cfg.BaseURL}
	if p.timeout <= 0 {
		p.timeout = DefaultTimeout
	}
	p.classes = upstream.Classifier{Timeout: p.timeout, Answer: p.answerError, SDK: p.sdkError, Other: p.otherError}
	opts := []option.RequestOption{
		// Nothing from the environment (ANTHROPIC_BASE_URL, the
		// credential chain, ANTHROPIC_CUSTOM_HEADERS): the configuration
		// says it all.
		option.WithoutEnvironmentDefaults(),
		option.WithBaseURL(cfg.BaseURL),
		// A redirect to another origin is answered as an error: the key
		// must not follow it there.
		option.WithHTTPClient(upstream.SameOrigin(cfg.HTTPClient, base)),
		// The gateway retries, traces and bounds every attempt.
		option.WithMaxRetries(0),
		option.WithoutOpenTelemetry(),
		option.WithMiddleware(middleware),
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	p.client = sdk.NewClient(opts...).Messages
	return p, nil
}

// Format prints the provider without its key, whatever the verb, so that
// %+v or %#v of a struct holding it cannot leak the key.
func (p *Provider) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "anthropic.Provider{baseURL: %s}", p.baseURL)
}

// LogValue keeps the key out of structured logs.
func (p *Provider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", providerName), slog.String("base_url", p.baseURL))
}

// Kind implements gateway.Provider.
func (p *Provider) Kind() string { return providerName }

// Capabilities implements gateway.Provider: the adapter serialises tools,
// JSON-schema output (output_config.format) and streaming. It cannot send
// images, and the Messages API has no embeddings.
func (p *Provider) Capabilities() []gateway.Capability {
	return []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming}
}

// Generate implements gateway.Provider.
func (p *Provider) Generate(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	params, err := params(model, req)
	if err != nil {
		return gateway.Response{}, p.fail(model, err, false)
	}
	actx, cancel := upstream.Attempt(ctx, p.timeout)
	defer cancel()
	actx, x := upstream.WithExchange(actx)
	// The request timeout is the attempt's own, which actx already
	// bounds; saying so keeps the SDK from refusing a large max_tokens
	// without streaming.
	msg, err := p.client.New(actx, params, option.WithRequestTimeout(p.timeout))
	if err != nil {
		return gateway.Response{}, p.classify(ctx, actx, model, err, x)
	}
	resp := gateway.Response{
		FinishReason: p.finish(msg.StopReason),
		Model:        p.red.String(string(msg.Model)),
		Usage:        countsOf(msg.Usage).usage(req.Cache),
	}
	var text strings.Builder
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 || string(args) == "null" {
				args = json.RawMessage("{}")
			}
			resp.ToolCalls = append(resp.ToolCalls, gateway.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "thinking", "redacted_thinking":
			// The adapter never asks for thinking; a proxy that adds it
			// gets the answer without it.
		default:
			return gateway.Response{}, p.malformed(model, fmt.Errorf("answer has a %q content block, which the gateway cannot represent", p.red.Excerpt(b.Type)))
		}
	}
	resp.Text = text.String()
	return resp, nil
}

// finish translates a stop reason: end_turn and stop_sequence are a
// natural stop, max_tokens and model_context_window_exceeded the output
// bound, tool_use tool calls, refusal withheld content. Any other reason
// (pause_turn, of server tools the adapter never declares) is passed on,
// redacted.
func (p *Provider) finish(r sdk.StopReason) gateway.FinishReason {
	switch r {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		return gateway.FinishStop
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		return gateway.FinishLength
	case sdk.StopReasonToolUse:
		return gateway.FinishToolCalls
	case sdk.StopReasonRefusal:
		return gateway.FinishContentFilter
	}
	return gateway.FinishReason(p.red.String(string(r)))
}

// counts are the API's token counts of one message.
type counts struct {
	// in is input_tokens: the input neither read from nor written to the
	// prompt cache.
	in int64
	// read is cache_read_input_tokens.
	read int64
	// write is cache_creation_input_tokens, and w5m and w1h its split by
	// lifetime (cache_creation.ephemeral_5m_input_tokens and
	// ephemeral_1h_input_tokens).
	write, w5m, w1h int64
	// out is output_tokens.
	out int64
}

// countsOf reads a message's usage.
func countsOf(u sdk.Usage) counts {
	return counts{
		in: u.InputTokens, read: u.CacheReadInputTokens, write: u.CacheCreationInputTokens,
		w5m: u.CacheCreation.Ephemeral5mInputTokens, w1h: u.CacheCreation.Ephemeral1hInputTokens,
		out: u.OutputTokens,
	}
}

// usage translates the API's token counts. Its input_tokens leaves out
// the tokens read from and written to the prompt cache, which
// gateway.Usage counts as parts of the input: InputTokens is their sum,
// CachedInputTokens the cache reads, and CacheWrite5mInputTokens and
// CacheWrite1hInputTokens the writes, each billed at its own price. The
// writes are split by lifetime as cache_creation says; a response without
// that split (or with one that does not add up) has its writes counted at
// the dearer of the lifetimes the request asked for, so that they are
// never billed below what the provider charges.
func (c counts) usage(asked gateway.PromptCache) gateway.Usage {
	in := c.in + c.read + c.write
	u := gateway.Usage{InputTokens: in, CachedInputTokens: c.read, OutputTokens: c.out, TotalTokens: in + c.out}
	switch {
	case c.w5m >= 0 && c.w1h >= 0 && c.w5m+c.w1h == c.write:
		u.CacheWrite5mInputTokens, u.CacheWrite1hInputTokens = c.w5m, c.w1h
	case asked.TTL == gateway.CacheTTL1h:
		u.CacheWrite1hInputTokens = c.write
	default:
		u.CacheWrite5mInputTokens = c.write
	}
	return u
}

// Stream implements gateway.Provider. The attempt's timeout bounds the wait
// for the response and then for each next event, so a hung upstream ends
// the stream with a retryable timeout.
func (p *Provider) Stream(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.DeltaStream, error) {
	params, err := params(model, req)
	if err != nil {
		return nil, p.fail(model, err, false)
	}
	at := upstream.NewStreamAttempt(ctx, p.timeout)
	actx, x := upstream.WithExchange(at.Ctx)
	s := p.client.NewStreaming(actx, params)
	if err := s.Err(); err != nil {
		at.Stop()
		cerr := p.classify(ctx, actx, model, err, x)
		_ = s.Close()
		at.Close()
		return nil, cerr
	}
	return &stream{p: p, model: model, cache: req.Cache, ctx: ctx, actx: actx, at: at, s: s, x: x, tools: map[int64]int{}}, nil
}

// stream is an open message stream. The events are message_start (the
// model and the input's usage), content_block_start (a text or tool_use
// block), content_block_delta (text_delta, or input_json_delta with a
// piece of a tool call's arguments), content_block_stop, message_delta
// (the stop reason and the output's usage), message_stop and, on failure,
// error; ping and unknown events are skipped.
type stream struct {
	p     *Provider
	model gateway.ModelSpec
	cache gateway.PromptCache
	ctx   context.Context
	actx  context.Context
	at    upstream.StreamAttempt
	s     *ssestream.Stream[sdk.MessageStreamEventUnion]
	x     *upstream.Exchange
	// tools maps a content block's index to its tool call's index in the
	// answer; args records which tool calls have had arguments.
	tools map[int64]int
	args  []bool
	// n is the usage so far.
	n counts
}

// Next implements gateway.DeltaStream.
func (s *stream) Next() (gateway.Delta, error) {
	for {
		s.at.Next()
		if !s.s.Next() {
			s.at.Stop()
			if err := s.s.Err(); err != nil {
				return gateway.Delta{}, s.p.classify(s.ctx, s.actx, s.model, err, s.x)
			}
			if err := context.Cause(s.actx); err != nil {
				return gateway.Delta{}, s.p.classify(s.ctx, s.actx, s.model, err, s.x)
			}
			return gateway.Delta{}, io.EOF
		}
		e := s.s.Current()
		switch e.Type {
		case "message_start":
			s.n = countsOf(e.Message.Usage)
			return gateway.Delta{Model: s.p.red.String(string(e.Message.Model))}, nil
		case "content_block_start":
			if e.ContentBlock.Type != "tool_use" {
				continue
			}
			i := len(s.args)
			s.tools[e.Index] = i
			s.args = append(s.args, false)
			return gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, ID: e.ContentBlock.ID, Name: e.ContentBlock.Name}}}, nil
		case "content_block_delta":
			switch e.Delta.Type {
			case "text_delta":
				if e.Delta.Text != "" {
					return gateway.Delta{Text: e.Delta.Text}, nil
				}
			case "input_json_delta":
				i, ok := s.tools[e.Index]
				if !ok {
					return gateway.Delta{}, s.p.malformed(s.model, fmt.Errorf("stream has tool arguments for block %d, which is not a tool call", e.Index))
				}
				if e.Delta.PartialJSON != "" {
					s.args[i] = true
					return gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, Arguments: e.Delta.PartialJSON}}}, nil
				}
			}
		case "content_block_stop":
			// A tool call without arguments has the empty object.
			if i, ok := s.tools[e.Index]; ok && !s.args[i] {
				s.args[i] = true
				return gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, Arguments: "{}"}}}, nil
			}
		case "message_delta":
			u := &e.Usage
			// The output count is cumulative; the input counts, when a
			// delta has them, replace message_start's.
			s.n.out = u.OutputTokens
			if u.InputTokens > 0 || u.CacheReadInputTokens > 0 || u.CacheCreationInputTokens > 0 {
				s.n.in, s.n.read = u.InputTokens, u.CacheReadInputTokens
				if u.CacheCreationInputTokens != s.n.write {
					// The delta has no split by lifetime: message_start's
					// no longer adds up, and usage counts the writes at
					// the lifetime asked for.
					s.n.write, s.n.w5m, s.n.w1h = u.CacheCreationInputTokens, -1, -1
				}
			}
			total := s.n.usage(s.cache)
			d := gateway.Delta{Usage: &total}
			if e.Delta.StopReason != "" {
				d.FinishReason = s.p.finish(e.Delta.StopReason)
			}
			return d, nil
		}
	}
}

// Close implements gateway.DeltaStream.
func (s *stream) Close() error { return s.at.CloseStream(s.s) }

// Embed implements gateway.Provider. The Messages API has no embeddings,
// so Embed refuses every call with a *gateway.CapabilityMismatchError; the
// gateway refuses before calling it, since Capabilities leaves out
// embeddings.
func (p *Provider) Embed(_ context.Context, model gateway.ModelSpec, _ []string) (gateway.EmbedResponse, error) {
	return gateway.EmbedResponse{}, &gateway.CapabilityMismatchError{
		Alias: model.ID, Model: model.ID, Provider: model.Provider,
		MissingInProvider: []gateway.Capability{gateway.CapabilityEmbeddings},
	}
}

// fail wraps a failure that is not a transport or HTTP error, its text
// redacted.
func (p *Provider) fail(model gateway.ModelSpec, err error, retryable bool) error {
	return &gateway.ProviderError{Provider: providerName, Model: model.ID, Retryable: retryable, Err: p.red.Error(err)}
}

// malformed wraps an answer the adapter cannot read.
func (p *Provider) malformed(model gateway.ModelSpec, err error) error {
	return &gateway.ProviderError{Provider: providerName, Model: model.ID, Failure: gateway.FailureMalformed, Err: p.red.Error(err)}
}

// classify turns an SDK error into the gateway's terms
// (upstream.Classifier): its cause holds only redacted text, never the
// SDK's error (which holds the request, whose headers carry the key) nor
// any other value built from the upstream's answer. x is what the
// middleware saw of the answer.
func (p *Provider) classify(ctx, actx context.Context, model gateway.ModelSpec, err error, x *upstream.Exchange) error {
	return p.classes.Classify(ctx, actx, providerName, model, err, x)
}

// answerError is an error answer's error and failure: overloaded for an
// overloaded_error.
func (p *Provider) answerError(status int, body []byte) (gateway.ProviderFailure, error) {
	e := p.apiError(status, body)
	return failureOf(e.Type, ""), e
}

// sdkError classifies an error event in a stream that opened (status
// 200): its type says whether another attempt may help.
func (p *Provider) sdkError(pe *gateway.ProviderError, err error) bool {
	var apiErr *sdk.Error
	switch {
	case errors.As(err, &apiErr):
		e := p.apiError(0, []byte(apiErr.RawJSON()))
		pe.Retryable = retryableType(e.Type)
		pe.Failure = failureOf(e.Type, gateway.FailureErrorEvent)
		pe.Err = fmt.Errorf("error event in the stream: %w", e)
	case strings.HasPrefix(err.Error(), "received error while streaming: "):
		// An error event whose data is not JSON.
		pe.Failure = gateway.FailureErrorEvent
		pe.Err = fmt.Errorf("error event in the stream: %w", p.apiError(0, []byte(strings.TrimPrefix(err.Error(), "received error while streaming: "))))
	default:
		return false
	}
	return true
}

// otherError is the redacted start of an error nothing else explains.
func (p *Provider) otherError(err error) error { return errors.New(p.red.Excerpt(err.Error())) }

// failureOf is the failure an error of the API's type is: overloaded for
// overloaded_error, otherwise other.
func failureOf(typ string, other gateway.ProviderFailure) gateway.ProviderFailure {
	if typ == "overloaded_error" {
		return gateway.FailureOverloaded
	}
	return other
}

// retryableType reports the error types of the API that another attempt
// may not meet: an overloaded service, a rate limit, an internal error, a
// timeout.
func retryableType(t string) bool {
	switch t {
	case "overloaded_error", "rate_limit_error", "api_error", "timeout_error":
		return true
	}
	return false
}

// APIError is an error answer of the service, reduced to what is safe to
// keep: the SDK's own error holds the request, whose headers carry the
// key. Every string in it came from the service and has the key redacted;
// when the answer was not an Anthropic error object, Message is the start
// of its body.
type APIError struct {
	// StatusCode is the HTTP status; zero for an error event in a stream.
	StatusCode int
	// Type is the service's error type, for example "overloaded_error" or
	// "invalid_request_error".
	Type string
	// Message is the service's message.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = strings.ToLower(http.StatusText(e.StatusCode))
	}
	if e.Type != "" {
		return e.Type + ": " + msg
	}
	return msg
}

// apiError reads an error answer, or an error event's data: an Anthropic
// error object ({"type": "error", "error": {"type", "message"}}), whose
// type and message it keeps, or anything else, whose start becomes the
// message. Every string has the key redacted before it is cut short.
func (p *Provider) apiError(status int, body []byte) *APIError {
	e := &APIError{StatusCode: status}
	var envelope struct {
		Error *struct {
			Type    any `json:"type"`
			Message any `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &envelope) == nil && envelope.Error != nil {
		e.Type, e.Message = p.text(envelope.Error.Type), p.text(envelope.Error.Message)
		return e
	}
	e.Message = p.red.Excerpt(string(body))
	return e
}

// text renders one value of an error object: a string as itself, null as
// nothing, anything else as its JSON; redacted and cut short.
func (p *Provider) text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return p.red.Excerpt(v)
	}
	b, _ := json.Marshal(v)
	return p.red.Excerpt(string(b))
}
