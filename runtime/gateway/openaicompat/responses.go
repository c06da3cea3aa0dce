package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/internal/upstream"
)

// The wire APIs a model may be called through (gateway.ModelSpec.API).
const (
	// APIChat is chat completions, the default.
	APIChat = "chat"
	// APIResponses is the Responses API (POST /responses), which returns
	// a reasoning model's reasoning as items that the next step sends
	// back.
	APIResponses = "responses"
)

// usesResponses reports whether model is called through the Responses
// API, and fails for an API the provider does not speak.
func usesResponses(model gateway.ModelSpec) (bool, error) {
	switch model.API {
	case "", APIChat:
		return false, nil
	case APIResponses:
		return true, nil
	}
	return false, fmt.Errorf("model %q names api %q; an openai-compatible provider speaks %q and %q", model.ID, model.API, APIChat, APIResponses)
}

// The Responses API's request, reduced to what the gateway sends
// (CreateResponse of the OpenAI API specification). It is encoded here,
// like the chat request, so that the reasoning items the upstream returned
// go back byte for byte; openai-go's Responses client sends it and decodes
// the answer and the events.
type respRequest struct {
	Model             string     `json:"model"`
	Instructions      string     `json:"instructions,omitempty"`
	Input             []any      `json:"input"`
	Tools             []respTool `json:"tools,omitempty"`
	ToolChoice        any        `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool      `json:"parallel_tool_calls,omitempty"`
	Text              *respText  `json:"text,omitempty"`
	MaxOutputTokens   int64      `json:"max_output_tokens,omitempty"`
	Temperature       *float64   `json:"temperature,omitempty"`
	TopP              *float64   `json:"top_p,omitempty"`
	PromptCacheKey    string     `json:"prompt_cache_key,omitempty"`
	Store             bool       `json:"store"`
	Include           []string   `json:"include"`
	Stream            bool       `json:"stream,omitempty"`
}

// respMessage is an input message (EasyInputMessage).
type respMessage struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// respFunctionCall is a function call the model made, sent back.
type respFunctionCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// respFunctionOutput is a function call's result.
type respFunctionOutput struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output string `json:"output"`
}

// respTool is a function tool. Strict and parameters are required by the
// API, which enforces strict schemas unless told not to; the chat path
// sends none, so neither does this one.
type respTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type respNamedToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type respText struct {
	Format respFormat `json:"format"`
}

type respFormat struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// reasoningState is what an answer keeps on its assistant message
// (gateway.Message.Reasoning): the reasoning items as the upstream wrote
// them, and the model that wrote them, the only one they are sent back to.
type reasoningState struct {
	Model string            `json:"model"`
	Items []json.RawMessage `json:"items"`
}

// encryptedReasoning asks the upstream for each reasoning item's encrypted
// content: with store false it keeps nothing between calls, so the items
// are all the next step has of the model's reasoning.
var encryptedReasoning = []string{string(responses.ResponseIncludableReasoningEncryptedContent)}

// responsesBody encodes a gateway request as a Responses API request for
// model.
func (p *Provider) responsesBody(model gateway.ModelSpec, req gateway.Request, stream bool) ([]byte, error) {
	switch {
	case len(req.Stop) > 0:
		return nil, errors.New("the Responses API takes no stop sequences")
	case req.Seed != nil:
		return nil, errors.New("the Responses API takes no seed")
	}
	wr := respRequest{Model: model.ID, Temperature: req.Temperature, TopP: req.TopP, ParallelToolCalls: req.ParallelToolCalls,
		Include: encryptedReasoning, Stream: stream, Input: make([]any, 0, len(req.Messages)+2)}
	if p.cfg.PromptCacheKey {
		wr.PromptCacheKey = req.Cache.Key
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case gateway.RoleSystem:
			if i == 0 {
				wr.Instructions = m.Content
				continue
			}
			wr.Input = append(wr.Input, respMessage{Type: "message", Role: "system", Content: m.Content})
		case gateway.RoleUser:
			wr.Input = append(wr.Input, respMessage{Type: "message", Role: "user", Content: m.Content})
		case gateway.RoleAssistant:
			if len(m.Reasoning) > 0 {
				var rs reasoningState
				if err := json.Unmarshal(m.Reasoning, &rs); err == nil && rs.Model == model.ID {
					for _, it := range rs.Items {
						wr.Input = append(wr.Input, it)
					}
				}
			}
			if m.Content != "" || len(m.ToolCalls) == 0 {
				wr.Input = append(wr.Input, respMessage{Type: "message", Role: "assistant", Content: m.Content})
			}
			for _, tc := range m.ToolCalls {
				args := string(tc.Arguments)
				if args == "" {
					args = "{}"
				}
				wr.Input = append(wr.Input, respFunctionCall{Type: "function_call", CallID: tc.ID, Name: tc.Name, Arguments: args})
			}
		case gateway.RoleTool:
			wr.Input = append(wr.Input, respFunctionOutput{Type: "function_call_output", CallID: m.ToolCallID, Output: m.Content})
		default:
			return nil, fmt.Errorf("message %d has unknown role %q", i, m.Role)
		}
	}
	if len(req.Tools) > 0 {
		wr.Tools = make([]respTool, len(req.Tools))
		for i, t := range req.Tools {
			if len(t.Parameters) > 0 && !jsonObject(t.Parameters) {
				return nil, fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
			}
			wr.Tools[i] = respTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: t.Parameters}
		}
	}
	switch req.ToolChoice.Mode {
	case "":
	case gateway.ToolChoiceAuto, gateway.ToolChoiceNone, gateway.ToolChoiceRequired:
		wr.ToolChoice = string(req.ToolChoice.Mode)
	case gateway.ToolChoiceTool:
		wr.ToolChoice = respNamedToolChoice{Type: "function", Name: req.ToolChoice.Name}
	default:
		return nil, fmt.Errorf("unknown tool choice %q", req.ToolChoice.Mode)
	}
	if rf := req.ResponseFormat; rf != nil {
		if len(rf.Schema) > 0 && !jsonObject(rf.Schema) {
			return nil, fmt.Errorf("response schema %q is not a JSON object", rf.Name)
		}
		wr.Text = &respText{Format: respFormat{Type: "json_schema", Name: rf.Name, Description: rf.Description, Schema: rf.Schema, Strict: rf.Strict}}
	}
	if req.MaxOutputTokens > 0 {
		wr.MaxOutputTokens = int64(req.MaxOutputTokens)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&wr); err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// errAnswerTooLarge ends the read of an answer longer than maxAnswerBody.
var errAnswerTooLarge = fmt.Errorf("answer is longer than %d bytes", maxAnswerBody)

// boundAnswer is a request's middleware: the body of a successful answer
// fails with errAnswerTooLarge past maxAnswerBody, as the chat path's
// answer does, so that openai-go never holds more of it.
func boundAnswer(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil && res.StatusCode < 300 {
		res.Body = &boundedBody{ReadCloser: res.Body, left: maxAnswerBody}
	}
	return res, err
}

type boundedBody struct {
	io.ReadCloser
	left int
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errAnswerTooLarge
	}
	if len(p) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= n
	if b.left < 0 {
		return n, errAnswerTooLarge
	}
	return n, err
}

// tooLarge is the failure of an answer longer than maxAnswerBody.
func (p *Provider) tooLarge(model gateway.ModelSpec) error {
	pe := p.fail(model, errAnswerTooLarge, false)
	pe.Failure = gateway.FailureTooLarge
	return pe
}

// generateResponses is Generate through the Responses API.
func (p *Provider) generateResponses(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	body, err := p.responsesBody(model, req, false)
	if err != nil {
		return gateway.Response{}, p.fail(model, err, false)
	}
	actx, cancel := upstream.Attempt(ctx, p.timeout)
	defer cancel()
	actx, answer := withCapture(actx)
	var raw []byte
	_, err = p.responses.New(actx, responses.ResponseNewParams{},
		option.WithRequestBody("application/json", body),
		option.WithResponseBodyInto(&raw),
		option.WithMiddleware(boundAnswer))
	if err != nil {
		if errors.Is(err, errAnswerTooLarge) && ctx.Err() == nil {
			return gateway.Response{}, p.tooLarge(model)
		}
		return gateway.Response{}, p.classify(ctx, actx, model, err, answer)
	}
	var r responses.Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return gateway.Response{}, p.classify(ctx, actx, model, fmt.Errorf("error parsing response json: %w", err), nil)
	}
	if r.JSON.Output.Raw() == "" && r.JSON.Status.Raw() == "" {
		pe := p.fail(model, errors.New("answer is not a response object"), false)
		pe.Failure = gateway.FailureMalformed
		return gateway.Response{}, pe
	}
	var out respOutput
	for i := range r.Output {
		if err := out.item(&r.Output[i]); err != nil {
			return gateway.Response{}, p.fail(model, err, false)
		}
	}
	if r.Status == responses.ResponseStatusFailed {
		return gateway.Response{}, p.responseFailed(model, &r)
	}
	return gateway.Response{
		Text:         out.text.String(),
		ToolCalls:    out.calls,
		FinishReason: p.finishReason(&r, len(out.calls) > 0),
		Model:        p.red.String(string(r.Model)),
		Usage:        responsesUsage(&r.Usage),
		Reasoning:    out.reasoning(model),
	}, nil
}

// respOutput gathers an answer's output items.
type respOutput struct {
	text   bytes.Buffer
	calls  []gateway.ToolCall
	thinks []json.RawMessage
}

// item takes one output item: a message's text, a function call, a
// reasoning item kept as the upstream wrote it. Any other item is one the
// gateway cannot represent.
func (o *respOutput) item(it *responses.ResponseOutputItemUnion) error {
	switch it.Type {
	case "message":
		for _, c := range it.Content {
			if c.Type == "output_text" {
				o.text.WriteString(c.Text)
			}
		}
	case "function_call":
		o.calls = append(o.calls, gateway.ToolCall{ID: it.CallID, Name: it.Name, Arguments: json.RawMessage(it.Arguments.OfString)})
	case "reasoning":
		o.thinks = append(o.thinks, json.RawMessage(it.RawJSON()))
	default:
		return fmt.Errorf("answer has a %q output item, which the gateway cannot represent", it.Type)
	}
	return nil
}

// reasoning returns the state an assistant message keeps, nil when the
// answer had no reasoning items.
func (o *respOutput) reasoning(model gateway.ModelSpec) json.RawMessage {
	if len(o.thinks) == 0 {
		return nil
	}
	b, err := json.Marshal(reasoningState{Model: model.ID, Items: o.thinks})
	if err != nil {
		return nil // items are valid JSON, as decoded
	}
	return b
}

// finishReason translates a response's status as the chat path reads a
// finish_reason: completed is stop, or tool_calls when the model called
// tools; incomplete is length for the output bound, content_filter for a
// filter, else its reason.
func (p *Provider) finishReason(r *responses.Response, calls bool) gateway.FinishReason {
	switch {
	case r.Status == responses.ResponseStatusIncomplete && r.IncompleteDetails.Reason == "max_output_tokens":
		return gateway.FinishLength
	case r.Status == responses.ResponseStatusIncomplete && r.IncompleteDetails.Reason == "content_filter":
		return gateway.FinishContentFilter
	case r.Status == responses.ResponseStatusIncomplete:
		return gateway.FinishReason(p.red.String(r.IncompleteDetails.Reason))
	case calls:
		return gateway.FinishToolCalls
	}
	return gateway.FinishStop
}

// responseFailed is the error of a response whose status is failed, as
// the chat path reports an error event.
func (p *Provider) responseFailed(model gateway.ModelSpec, r *responses.Response) error {
	return p.errorEvent(model, "response failed", &APIError{Code: p.red.String(string(r.Error.Code)), Message: p.red.Excerpt(r.Error.Message)})
}

// errorEvent is the failure of an upstream that said, in an answer it
// began, that it failed: not retried, as classify reports an error event.
func (p *Provider) errorEvent(model gateway.ModelSpec, what string, e *APIError) error {
	return &gateway.ProviderError{Provider: p.name, Model: model.ID, Failure: gateway.FailureErrorEvent, Err: fmt.Errorf("%s: %w", what, e)}
}

// responsesUsage reads a response's usage as usage reads a completion's:
// the cached tokens are a part of the input, the reasoning tokens a part
// of the output, billed at its price.
func responsesUsage(u *responses.ResponseUsage) gateway.Usage {
	return gateway.Usage{
		InputTokens:       u.InputTokens,
		CachedInputTokens: u.InputTokensDetails.CachedTokens,
		OutputTokens:      u.OutputTokens,
		TotalTokens:       u.TotalTokens,
	}
}

// streamResponses is Stream through the Responses API, with the chat
// stream's per-event timeout.
func (p *Provider) streamResponses(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.DeltaStream, error) {
	body, err := p.responsesBody(model, req, true)
	if err != nil {
		return nil, p.fail(model, err, false)
	}
	at := upstream.NewStreamAttempt(ctx, p.timeout)
	actx, answer := withCapture(at.Ctx)
	s := p.responses.NewStreaming(actx, responses.ResponseNewParams{}, option.WithRequestBody("application/json", body))
	events, err := openSSE(p, ctx, model, at, actx, answer, s)
	if err != nil {
		return nil, err
	}
	return &respStream{sse: events}, nil
}

type respStream struct {
	sse[responses.ResponseStreamEventUnion]
	// calls maps a function call's output index to its index among the
	// answer's calls; argued marks those whose arguments came in deltas.
	calls  map[int64]int
	argued map[int64]bool
	out    respOutput
}

// Next implements gateway.DeltaStream: text and function-call deltas as
// they come, reasoning items kept from their done events, and the usage,
// finish reason and reasoning state with the completed (or incomplete)
// response.
func (s *respStream) Next() (gateway.Delta, error) {
	for {
		ev, err := s.next()
		if err != nil {
			return gateway.Delta{}, err
		}
		d, ok, err := s.event(ev)
		if err != nil || ok {
			return d, err
		}
	}
}

// event translates one event; ok is false for one that carries nothing
// for the gateway.
func (s *respStream) event(ev responses.ResponseStreamEventUnion) (d gateway.Delta, ok bool, err error) {
	switch ev.Type {
	case "response.output_text.delta":
		return gateway.Delta{Text: ev.Delta}, ev.Delta != "", nil
	case "response.output_item.added":
		if ev.Item.Type != "function_call" {
			return d, false, nil
		}
		if s.calls == nil {
			s.calls, s.argued = map[int64]int{}, map[int64]bool{}
		}
		i := len(s.calls)
		s.calls[ev.OutputIndex] = i
		args := ev.Item.Arguments.OfString
		s.argued[ev.OutputIndex] = args != ""
		return gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, ID: ev.Item.CallID, Name: ev.Item.Name, Arguments: args}}}, true, nil
	case "response.function_call_arguments.delta":
		i, known := s.calls[ev.OutputIndex]
		if !known {
			return d, false, s.p.fail(s.model, fmt.Errorf("arguments for output item %d, which is not a function call", ev.OutputIndex), false)
		}
		s.argued[ev.OutputIndex] = true
		return gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, Arguments: ev.Delta}}}, true, nil
	case "response.output_item.done":
		switch ev.Item.Type {
		case "function_call":
			// Arguments sent whole, without deltas.
			if i, known := s.calls[ev.OutputIndex]; known && !s.argued[ev.OutputIndex] && ev.Item.Arguments.OfString != "" {
				s.argued[ev.OutputIndex] = true
				return gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, Arguments: ev.Item.Arguments.OfString}}}, true, nil
			}
			return d, false, nil
		case "message":
			return d, false, nil
		}
		if err := s.out.item(&ev.Item); err != nil {
			return d, false, s.p.fail(s.model, err, false)
		}
		return d, false, nil
	case "response.completed", "response.incomplete":
		r := &ev.Response
		u := responsesUsage(&r.Usage)
		d = gateway.Delta{FinishReason: s.p.finishReason(r, len(s.calls) > 0), Model: s.p.red.String(string(r.Model)), Reasoning: s.out.reasoning(s.model)}
		if u.TotalTokens > 0 || u.InputTokens > 0 {
			d.Usage = &u
		}
		return d, true, nil
	case "response.failed":
		return d, false, s.p.responseFailed(s.model, &ev.Response)
	case "error":
		return d, false, s.p.errorEvent(s.model, "error event in the stream", &APIError{Code: s.p.red.String(ev.Code), Param: s.p.red.String(ev.Param), Message: s.p.red.Excerpt(ev.Message)})
	}
	return d, false, nil
}
