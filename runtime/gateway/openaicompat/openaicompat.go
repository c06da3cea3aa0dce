package openaicompat

import (
	"bytes"
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

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/internal/upstream"
	"github.com/aidgen/aid/runtime/kind"
)

// Config configures an openai-compatible provider.
type Config struct {
	// BaseURL is the API root, for example "https://api.openai.com/v1".
	BaseURL string
	// APIKeyEnv names the environment variable holding the API key. Empty
	// means the service needs no key (a local server); then no key is sent,
	// not even one found in OPENAI_API_KEY.
	APIKeyEnv string
	// Timeout bounds one attempt: a whole chat or embedding request, or,
	// for a stream, the wait for each next event. Zero means 60 seconds.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means a client on
	// kind.DefaultTransport, which keeps idle connections for concurrent
	// calls.
	HTTPClient *http.Client
	// EmbedBatchSize is the most texts sent in one embedding request;
	// zero means 512.
	EmbedBatchSize int
	// SendDimensions sends the pinned width as the embedding request's
	// dimensions, for models that can shorten their vectors.
	SendDimensions bool
	// LegacyMaxTokens sends the output bound as max_tokens, for servers
	// that predate max_completion_tokens.
	LegacyMaxTokens bool
	// PromptCacheKey sends a request's gateway.PromptCache.Key as
	// prompt_cache_key, for upstreams that accept it (OpenAI routes its
	// automatic prompt cache by it); others may refuse the field, so it is
	// off unless said.
	PromptCacheKey bool
	// ProviderName is the gen_ai.provider.name reported in spans; empty
	// means "openai".
	ProviderName string
	// LookupEnv reads the environment; nil means os.LookupEnv. Tests set
	// it to avoid touching the process environment.
	LookupEnv func(string) (string, bool)
}

// Provider is the openai-compatible gateway.Provider. It is safe for
// concurrent use.
type Provider struct {
	// chat and embed are the two services of openai-go's client that the
	// adapter calls. The provider holds them, not the client: a client's
	// type reaches every service of the API, and since the CLI links
	// text/template (through CUE), the linker keeps every exported method of
	// every type a kept value's type reaches — some 40 MB of aidgen, for
	// endpoints no provider calls.
	chat  openai.ChatCompletionService
	embed openai.EmbeddingService
	// responses calls the models whose spec names the Responses API
	// (responses.go).
	responses responses.ResponseService
	red       *upstream.Redactor
	name      string
	timeout   time.Duration
	batch     int
	cfg       Config
	classes   upstream.Classifier
	// The non-streaming chat call is made with net/http directly (see
	// wire.go): hc is the configured client refusing redirects to another
	// origin, rt its transport when a request may skip the client (see
	// send), chatURL the endpoint, auth the Authorization header's value
	// (nil without a key).
	hc      *http.Client
	rt      http.RoundTripper
	chatURL *url.URL
	auth    []string
}

// New builds a provider. It fails when APIKeyEnv names a variable that is not
// set, naming the variable and never its value.
func New(cfg Config) (*Provider, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("openaicompat: base URL is empty")
	}
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	key, err := upstream.APIKey(lookup, cfg.APIKeyEnv)
	if err != nil {
		return nil, fmt.Errorf("openaicompat: %w", err)
	}
	p := &Provider{red: upstream.NewRedactor(key), name: cfg.ProviderName, timeout: cfg.Timeout, batch: cfg.EmbedBatchSize, cfg: cfg}
	if p.name == "" {
		p.name = "openai"
	}
	if p.timeout <= 0 {
		p.timeout = 60 * time.Second
	}
	if p.batch <= 0 {
		p.batch = 512
	}
	p.classes = upstream.Classifier{Timeout: p.timeout, Answer: p.answerError, SDK: p.sdkError, Other: p.redact}
	hc := kind.HTTPClient(cfg.HTTPClient)
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("openaicompat: base URL %q is not an http or https URL", cfg.BaseURL)
	}
	if !strings.HasSuffix(base.Path, "/") {
		base.Path += "/"
	}
	p.chatURL = base.JoinPath("chat/completions")
	// A redirect to another origin is answered as an error, as openai-go's
	// client answers one: the key must not follow it there.
	p.hc = upstream.SameOrigin(hc, base)
	if hc.Jar == nil && hc.Timeout == 0 && hc.CheckRedirect == nil {
		p.rt = hc.Transport
		if p.rt == nil {
			p.rt = http.DefaultTransport
		}
	}
	if key != "" {
		p.auth = []string{"Bearer " + key}
	}
	client := openai.NewClient(
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(hc),
		option.WithAPIKey(key),
		option.WithAdminAPIKey(""),
		option.WithHeaderDel("OpenAI-Organization"),
		option.WithHeaderDel("OpenAI-Project"),
		option.WithMaxRetries(0),
		option.WithMiddleware(upstream.CaptureErrorAnswer),
	)
	p.chat, p.embed, p.responses = client.Chat.Completions, client.Embeddings, client.Responses
	return p, nil
}

// Format prints the provider without its key, whatever the verb, so that
// %+v or %#v of a struct holding it cannot leak the key.
func (p *Provider) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, "openaicompat.Provider{name: %s, baseURL: %s}", p.name, p.cfg.BaseURL)
}

// LogValue keeps the key out of structured logs.
func (p *Provider) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", p.name), slog.String("base_url", p.cfg.BaseURL))
}

// Kind implements gateway.Provider.
func (p *Provider) Kind() string { return p.name }

// Capabilities implements gateway.Provider: the adapter serialises tools,
// JSON-schema output, streaming and embeddings. It cannot send images.
func (p *Provider) Capabilities() []gateway.Capability {
	return []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming, gateway.CapabilityEmbeddings}
}

// Generate implements gateway.Provider.
func (p *Provider) Generate(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	if model.API != "" {
		if r, err := usesResponses(model); err != nil || r {
			if err != nil {
				return gateway.Response{}, p.fail(model, err, false)
			}
			return p.generateResponses(ctx, model, req)
		}
	}
	body, err := p.chatBody(model, req, false)
	if err != nil {
		return gateway.Response{}, p.fail(model, err, false)
	}
	defer putBody(body)
	actx, cancel := upstream.Attempt(ctx, p.timeout)
	defer cancel()
	res, err := p.send(actx, body.Bytes())
	if err != nil {
		return gateway.Response{}, p.classify(ctx, actx, model, err, nil)
	}
	defer res.Body.Close()
	if res.StatusCode < 200 || res.StatusCode > 299 {
		x := &upstream.Exchange{}
		upstream.ReadErrorAnswer(res, x)
		return gateway.Response{}, p.classify(ctx, actx, model, errErrorStatus, x)
	}
	answer := bodyPool.Get().(*bytes.Buffer)
	defer putBody(answer)
	if _, err := answer.ReadFrom(io.LimitReader(res.Body, maxAnswerBody+1)); err != nil {
		return gateway.Response{}, p.classify(ctx, actx, model, err, nil)
	}
	if answer.Len() > maxAnswerBody {
		pe := p.fail(model, fmt.Errorf("answer is longer than %d bytes", maxAnswerBody), false)
		pe.Failure = gateway.FailureTooLarge
		return gateway.Response{}, pe
	}
	cc, err := decodeAnswer(answer.Bytes())
	if err != nil {
		return gateway.Response{}, p.classify(ctx, actx, model, fmt.Errorf("error parsing response json: %w", err), nil)
	}
	if len(cc.Choices) == 0 {
		pe := p.fail(model, errors.New("answer has no choices"), false)
		pe.Failure = gateway.FailureMalformed
		return gateway.Response{}, pe
	}
	ch := &cc.Choices[0]
	resp := gateway.Response{
		Text:         ch.Message.Content,
		FinishReason: gateway.FinishReason(p.red.String(ch.FinishReason)),
		Model:        p.red.String(cc.Model),
		Usage:        cc.Usage.usage(),
	}
	if len(ch.Message.ToolCalls) > 0 {
		resp.ToolCalls = make([]gateway.ToolCall, len(ch.Message.ToolCalls))
		for i, tc := range ch.Message.ToolCalls {
			if tc.Type != "" && tc.Type != "function" {
				return gateway.Response{}, p.fail(model, fmt.Errorf("answer has a %q tool call, which the gateway cannot represent", tc.Type), false)
			}
			resp.ToolCalls[i] = gateway.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)}
		}
	}
	return resp, nil
}

// send POSTs a chat request. Through a client that only sends (no cookie
// jar, no timeout, no redirect policy of its own) it is handed to the
// transport directly: http.Client copies every request's headers for the
// redirects it might follow, which costs more than the rest of the send.
// A redirect that keeps the method (307, 308) within the origin is then
// followed here, as the client would; any other is the answer.
func (p *Provider) send(ctx context.Context, body []byte) (*http.Response, error) {
	u := *p.chatURL
	req := (&http.Request{
		Method: http.MethodPost, URL: &u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        make(http.Header, 4),
		Body:          io.NopCloser(bytes.NewReader(body)),
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
		ContentLength: int64(len(body)),
	}).WithContext(ctx)
	h := req.Header
	h["Content-Type"], h["Accept"], h["User-Agent"] = jsonHeader, jsonHeader, userAgent
	if p.auth != nil {
		h["Authorization"] = p.auth
	}
	if p.rt == nil {
		return p.hc.Do(req)
	}
	for hops := 0; ; hops++ {
		res, err := p.rt.RoundTrip(req)
		if err != nil {
			return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: err}
		}
		if (res.StatusCode != http.StatusTemporaryRedirect && res.StatusCode != http.StatusPermanentRedirect) || hops == 10 {
			return res, nil
		}
		next, err := req.URL.Parse(res.Header.Get("Location"))
		if err != nil || next.Scheme != p.chatURL.Scheme || next.Host != p.chatURL.Host {
			return res, nil // elsewhere: the key does not follow
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, upstream.MaxErrorBody))
		res.Body.Close()
		req = req.Clone(ctx)
		req.URL, req.Host = next, next.Host
		req.Body, _ = req.GetBody()
	}
}

// The headers of a chat request, shared by every request: net/http only
// reads them.
var (
	jsonHeader = []string{"application/json"}
	userAgent  = []string{"aid-openaicompat"}
)

// maxAnswerBody bounds a chat answer: a model's answer is bounded by its
// output tokens (128k tokens are about 512 KB of text), so an answer this
// long is an upstream gone wrong, not one to hold in memory.
const maxAnswerBody = 8 << 20

// errErrorStatus stands for an answer with an error status, which classify
// reads from the answer itself.
var errErrorStatus = errors.New("error status")

// usage translates the wire format's usage, in an answer or in a stream's
// last chunk. The cached tokens (prompt_tokens_details.cached_tokens) are a
// part of prompt_tokens there, as gateway.Usage counts them; the gateway
// checks that they are.
func usage(u *openai.CompletionUsage) gateway.Usage {
	return gateway.Usage{
		InputTokens:       u.PromptTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		OutputTokens:      u.CompletionTokens,
		TotalTokens:       u.TotalTokens,
	}
}

// Stream implements gateway.Provider. The attempt's timeout bounds the wait
// for the response and then for each next event, so a hung upstream ends the
// stream with a retryable timeout.
func (p *Provider) Stream(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.DeltaStream, error) {
	if model.API != "" {
		if r, err := usesResponses(model); err != nil || r {
			if err != nil {
				return nil, p.fail(model, err, false)
			}
			return p.streamResponses(ctx, model, req)
		}
	}
	body, err := p.chatBody(model, req, true)
	if err != nil {
		return nil, p.fail(model, err, false)
	}
	at := upstream.NewStreamAttempt(ctx, p.timeout)
	actx, answer := withCapture(at.Ctx)
	// openai-go sends the request encoded by chatBody, so that a streamed
	// and a generated call send the same wire format, and decodes the
	// events. The body is copied: openai-go may still hold it after the
	// call returns.
	s := p.chat.NewStreaming(actx, openai.ChatCompletionNewParams{},
		option.WithRequestBody("application/json", bytes.Clone(body.Bytes())))
	putBody(body)
	events, err := openSSE(p, ctx, model, at, actx, answer, s)
	if err != nil {
		return nil, err
	}
	return &stream{sse: events}, nil
}

type stream struct {
	sse[openai.ChatCompletionChunk]
	// rawModel and modelName cache the last chunk's model name and its
	// redaction, which every chunk repeats.
	rawModel, modelName string
}

// Next implements gateway.DeltaStream.
func (s *stream) Next() (gateway.Delta, error) {
	c, err := s.next()
	if err != nil {
		return gateway.Delta{}, err
	}
	if c.Model != s.rawModel {
		s.rawModel, s.modelName = c.Model, s.p.red.String(c.Model)
	}
	d := gateway.Delta{Model: s.modelName}
	if c.Usage.TotalTokens > 0 || c.Usage.PromptTokens > 0 {
		u := usage(&c.Usage)
		d.Usage = &u
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		d.Text += ch.Delta.Content
		if ch.FinishReason != "" {
			d.FinishReason = gateway.FinishReason(s.p.red.String(ch.FinishReason))
		}
		for _, tc := range ch.Delta.ToolCalls {
			d.ToolCalls = append(d.ToolCalls, gateway.ToolCallDelta{
				Index: int(tc.Index), ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments,
			})
		}
	}
	return d, nil
}

// Embed implements gateway.Provider, sending at most EmbedBatchSize texts per
// request and putting the vectors back in input order.
func (p *Provider) Embed(ctx context.Context, model gateway.ModelSpec, texts []string) (gateway.EmbedResponse, error) {
	out := gateway.EmbedResponse{Vectors: make([][]float32, len(texts))}
	for start := 0; start < len(texts); start += p.batch {
		batch := texts[start:min(start+p.batch, len(texts))]
		params := openai.EmbeddingNewParams{
			Model:          model.ID,
			Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: batch},
			EncodingFormat: openai.EmbeddingNewParamsEncodingFormatFloat,
		}
		if p.cfg.SendDimensions && model.Dimensions > 0 {
			params.Dimensions = openai.Int(int64(model.Dimensions))
		}
		res, err := p.embedBatch(ctx, model, params)
		if err != nil {
			return gateway.EmbedResponse{}, err
		}
		for _, e := range res.Data {
			i := int(e.Index)
			if i < 0 || i >= len(batch) || out.Vectors[start+i] != nil {
				return gateway.EmbedResponse{}, p.fail(model, fmt.Errorf("answer has a bad embedding index %d", e.Index), false)
			}
			v := make([]float32, len(e.Embedding))
			for j, x := range e.Embedding {
				v[j] = float32(x)
			}
			out.Vectors[start+i] = v
		}
		out.Usage.InputTokens += res.Usage.PromptTokens
		out.Usage.TotalTokens += res.Usage.TotalTokens
		out.Model = p.red.String(res.Model)
	}
	return out, nil
}

func (p *Provider) embedBatch(ctx context.Context, model gateway.ModelSpec, params openai.EmbeddingNewParams) (*openai.CreateEmbeddingResponse, error) {
	actx, cancel := upstream.Attempt(ctx, p.timeout)
	defer cancel()
	actx, answer := withCapture(actx)
	res, err := p.embed.New(actx, params)
	if err != nil {
		return nil, p.classify(ctx, actx, model, err, answer)
	}
	return res, nil
}

// fail wraps a failure that is not a transport or HTTP error.
func (p *Provider) fail(model gateway.ModelSpec, err error, retryable bool) *gateway.ProviderError {
	return &gateway.ProviderError{Provider: p.name, Model: model.ID, Retryable: retryable, Err: p.redact(err)}
}

// classify turns an openai-go error into the gateway's terms
// (upstream.Classifier): its cause holds only redacted text, never
// openai-go's error (which holds the request, whose headers carry the key)
// nor any other value built from the upstream's answer. answer is what the
// service said with an error status, when it said anything.
func (p *Provider) classify(ctx, actx context.Context, model gateway.ModelSpec, err error, answer *upstream.Exchange) error {
	return p.classes.Classify(ctx, actx, p.name, model, err, answer)
}

// answerError is an error answer's error. openai-go drops the status of an
// error answer it cannot decode (an "error" that is a string, say), so it
// is taken from the answer itself.
func (p *Provider) answerError(status int, body []byte) (gateway.ProviderFailure, error) {
	return "", p.apiError(status, body)
}

// sdkError classifies openai-go's own errors: an error answer the
// middleware did not capture, and an error event in a stream that opened.
func (p *Provider) sdkError(pe *gateway.ProviderError, err error) bool {
	var apiErr *openai.Error
	var streamErr *ssestream.StreamError
	switch {
	case errors.As(err, &apiErr):
		pe.StatusCode = apiErr.StatusCode
		pe.Retryable = upstream.RetryableStatus(apiErr.StatusCode)
		if apiErr.Response != nil {
			pe.RetryAfter = gateway.ParseRetryAfter(apiErr.Response.Header, time.Now())
		}
		pe.Err = &APIError{
			StatusCode: apiErr.StatusCode,
			Type:       p.red.String(apiErr.Type),
			Code:       p.red.String(apiErr.Code),
			Param:      p.red.String(apiErr.Param),
			Message:    p.red.String(apiErr.Message),
		}
	case errors.As(err, &streamErr):
		pe.Failure = gateway.FailureErrorEvent
		pe.Err = fmt.Errorf("error event in the stream: %w", p.apiError(0, streamErr.Event.Data))
	default:
		return false
	}
	return true
}

// APIError is an error answer of the service, reduced to what is safe to
// keep: openai-go's own error holds the request, whose headers carry the
// key. Every string in it came from the service and has the key redacted;
// when the answer was not an OpenAI error object, Message is the start of
// its body.
type APIError struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Type is the service's error type, for example "invalid_request_error".
	Type string
	// Code is the service's error code, for example
	// "context_length_exceeded".
	Code string
	// Param names the offending request field, when the service says.
	Param string
	// Message is the service's message.
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = strings.ToLower(http.StatusText(e.StatusCode))
	}
	if e.Code != "" {
		return e.Code + ": " + msg
	}
	return msg
}

// redact returns an error with err's message, the key redacted, that does
// not wrap err.
func (p *Provider) redact(err error) error { return p.red.Error(err) }
