package openaicompat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/aidgen/aid/runtime/gateway"
)

// The chat-completions wire format, reduced to the fields the gateway sends
// and reads (CreateChatCompletionRequest and CreateChatCompletionResponse of
// the OpenAI API specification). The request is encoded here, not with
// openai-go's parameter types, and a non-streaming answer is decoded here:
// openai-go's reflective encoder and decoder cost most of a call's CPU
// (about 20 KB and 190 allocations per call against an in-memory
// transport), several times what the rest of the gateway and the service
// spend. TestWireMatchesOpenAIGo keeps the encoding equal to openai-go's.

// wireRequest is a chat-completions request.
type wireRequest struct {
	Model               string              `json:"model"`
	Messages            []wireMessage       `json:"messages"`
	Tools               []wireTool          `json:"tools,omitempty"`
	ToolChoice          any                 `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool               `json:"parallel_tool_calls,omitempty"`
	ResponseFormat      *wireResponseFormat `json:"response_format,omitempty"`
	MaxCompletionTokens int64               `json:"max_completion_tokens,omitempty"`
	MaxTokens           int64               `json:"max_tokens,omitempty"`
	Temperature         *float64            `json:"temperature,omitempty"`
	TopP                *float64            `json:"top_p,omitempty"`
	Stop                []string            `json:"stop,omitempty"`
	Seed                *int64              `json:"seed,omitempty"`
	PromptCacheKey      string              `json:"prompt_cache_key,omitempty"`
	Stream              bool                `json:"stream,omitempty"`
	StreamOptions       *wireStreamOptions  `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// wireMessage is a message of a request. Content is omitted only from an
// assistant message that has tool calls and no text.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content,omitempty"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type wireTool struct {
	Type     string          `json:"type"`
	Function wireFunctionDef `json:"function"`
}

type wireFunctionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

type wireNamedToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type wireResponseFormat struct {
	Type       string         `json:"type"`
	JSONSchema wireJSONSchema `json:"json_schema"`
}

type wireJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      bool            `json:"strict,omitempty"`
}

// wireAnswer is the part of a chat completion the gateway reads (see
// decodeAnswer); its tags say how encoding/json would read it, the
// reference decodeAnswer is tested against.
type wireAnswer struct {
	Model   string       `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   wireUsage    `json:"usage"`
}

type wireChoice struct {
	Message struct {
		Content   string         `json:"content"`
		ToolCalls []wireToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// decodeAnswer reads a chat completion as encoding/json reads it into a
// wireAnswer, field names matched as the specification spells them: every
// field the gateway reads must have its type or be null, every choice is
// checked though only the first is kept, and a token count is an integer
// that fits in 64 bits. It walks the document with gjson (which openai-go
// itself reads answers with) rather than encoding/json's reflection: a
// third of the allocations and time of the answer's decoding.
func decodeAnswer(raw []byte) (wireAnswer, error) {
	var a wireAnswer
	if !gjson.ValidBytes(raw) {
		return a, errors.New("answer is not valid JSON")
	}
	err := object(gjson.ParseBytes(raw), "answer", func(k string, v gjson.Result) (err error) {
		switch k {
		case "model":
			a.Model, err = str(v, "model")
		case "choices":
			a.Choices = a.Choices[:0]
			err = each(v, "choices", func(c gjson.Result) error {
				var ch wireChoice
				if err := ch.read(c); err != nil {
					return err
				}
				if len(a.Choices) == 0 {
					a.Choices = append(a.Choices, ch)
				}
				return nil
			})
		case "usage":
			a.Usage = wireUsage{}
			err = a.Usage.read(v)
		}
		return err
	})
	return a, err
}

func (c *wireChoice) read(v gjson.Result) error {
	return object(v, "choice", func(k string, v gjson.Result) (err error) {
		switch k {
		case "finish_reason":
			c.FinishReason, err = str(v, "finish_reason")
		case "message":
			c.Message.Content, c.Message.ToolCalls = "", nil
			err = object(v, "message", func(k string, v gjson.Result) (err error) {
				switch k {
				case "content":
					c.Message.Content, err = str(v, "message.content")
				case "tool_calls":
					c.Message.ToolCalls = c.Message.ToolCalls[:0]
					err = each(v, "message.tool_calls", func(t gjson.Result) error {
						var tc wireToolCall
						err := tc.read(t)
						c.Message.ToolCalls = append(c.Message.ToolCalls, tc)
						return err
					})
				}
				return err
			})
		}
		return err
	})
}

func (tc *wireToolCall) read(v gjson.Result) error {
	return object(v, "tool call", func(k string, v gjson.Result) (err error) {
		switch k {
		case "id":
			tc.ID, err = str(v, "tool call id")
		case "type":
			tc.Type, err = str(v, "tool call type")
		case "function":
			err = object(v, "tool call function", func(k string, v gjson.Result) (err error) {
				switch k {
				case "name":
					tc.Function.Name, err = str(v, "function name")
				case "arguments":
					tc.Function.Arguments, err = str(v, "function arguments")
				}
				return err
			})
		}
		return err
	})
}

func (u *wireUsage) read(v gjson.Result) error {
	return object(v, "usage", func(k string, v gjson.Result) (err error) {
		switch k {
		case "prompt_tokens":
			u.PromptTokens, err = integer(v, "prompt_tokens")
		case "completion_tokens":
			u.CompletionTokens, err = integer(v, "completion_tokens")
		case "total_tokens":
			u.TotalTokens, err = integer(v, "total_tokens")
		case "prompt_tokens_details":
			err = object(v, "prompt_tokens_details", func(k string, v gjson.Result) (err error) {
				if k == "cached_tokens" {
					u.PromptTokensDetails.CachedTokens, err = integer(v, "cached_tokens")
				}
				return err
			})
		}
		return err
	})
}

// object calls fn on each member of v, an object or null, until fn fails.
func object(v gjson.Result, what string, fn func(key string, v gjson.Result) error) error {
	switch {
	case v.Type == gjson.Null:
		return nil
	case !v.IsObject():
		return fmt.Errorf("%s is a JSON %s, not an object", what, kindOf(v))
	}
	var err error
	v.ForEach(func(k, e gjson.Result) bool {
		err = fn(k.Str, e)
		return err == nil
	})
	return err
}

// each calls fn on each element of v, an array or null, until one fails.
func each(v gjson.Result, what string, fn func(gjson.Result) error) error {
	switch {
	case v.Type == gjson.Null:
		return nil
	case !v.IsArray():
		return fmt.Errorf("%s is a JSON %s, not an array", what, kindOf(v))
	}
	var err error
	v.ForEach(func(_, e gjson.Result) bool {
		err = fn(e)
		return err == nil
	})
	return err
}

// str reads a string or null.
func str(v gjson.Result, what string) (string, error) {
	switch v.Type {
	case gjson.String:
		return v.Str, nil
	case gjson.Null:
		return "", nil
	}
	return "", fmt.Errorf("%s is a JSON %s, not a string", what, kindOf(v))
}

// integer reads an integer that fits in 64 bits, or null.
func integer(v gjson.Result, what string) (int64, error) {
	switch v.Type {
	case gjson.Null:
		return 0, nil
	case gjson.Number:
		n, err := strconv.ParseInt(v.Raw, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %s is not a 64-bit integer", what, v.Raw)
		}
		return n, nil
	}
	return 0, fmt.Errorf("%s is a JSON %s, not a number", what, kindOf(v))
}

func kindOf(v gjson.Result) string {
	switch {
	case v.IsObject():
		return "object"
	case v.IsArray():
		return "array"
	case v.Type == gjson.String:
		return "string"
	case v.Type == gjson.Number:
		return "number"
	case v.Type == gjson.True, v.Type == gjson.False:
		return "boolean"
	}
	return "null"
}

// wireUsage is a completion's usage. The cached tokens are a part of
// prompt_tokens, as gateway.Usage counts them; the gateway checks that they
// are.
type wireUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *wireUsage) usage() gateway.Usage {
	return gateway.Usage{
		InputTokens:       u.PromptTokens,
		CachedInputTokens: u.PromptTokensDetails.CachedTokens,
		OutputTokens:      u.CompletionTokens,
		TotalTokens:       u.TotalTokens,
	}
}

// bodyPool recycles the buffers requests are encoded into. A buffer goes
// back once its request is sent; an outsized one is dropped.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 64 << 10

func putBody(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		b.Reset()
		bodyPool.Put(b)
	}
}

// chatBody encodes a gateway request as a chat-completions request for
// model into a pooled buffer (give it back with putBody once sent).
func (p *Provider) chatBody(model gateway.ModelSpec, req gateway.Request, stream bool) (*bytes.Buffer, error) {
	wr := wireRequest{Model: model.ID, Temperature: req.Temperature, TopP: req.TopP, Stop: req.Stop, Seed: req.Seed, ParallelToolCalls: req.ParallelToolCalls}
	if p.cfg.PromptCacheKey {
		wr.PromptCacheKey = req.Cache.Key
	}
	wr.Messages = make([]wireMessage, 0, len(req.Messages))
	for i := range req.Messages {
		m := &req.Messages[i]
		wm := wireMessage{Role: string(m.Role), Name: m.Name}
		switch m.Role {
		case gateway.RoleSystem, gateway.RoleUser:
			wm.Content = &m.Content
		case gateway.RoleAssistant:
			if m.Content != "" || len(m.ToolCalls) == 0 {
				wm.Content = &m.Content
			}
			if len(m.ToolCalls) > 0 {
				wm.ToolCalls = make([]wireToolCall, len(m.ToolCalls))
				for j, tc := range m.ToolCalls {
					args := string(tc.Arguments)
					if args == "" {
						args = "{}"
					}
					wm.ToolCalls[j] = wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}}
				}
			}
		case gateway.RoleTool:
			wm.Name = "" // the tool message of the wire format has no name
			wm.Content, wm.ToolCallID = &m.Content, m.ToolCallID
		default:
			return nil, fmt.Errorf("message %d has unknown role %q", i, m.Role)
		}
		wr.Messages = append(wr.Messages, wm)
	}
	if len(req.Tools) > 0 {
		wr.Tools = make([]wireTool, len(req.Tools))
		for i, t := range req.Tools {
			if len(t.Parameters) > 0 && !jsonObject(t.Parameters) {
				return nil, fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
			}
			wr.Tools[i] = wireTool{Type: "function", Function: wireFunctionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}
		}
	}
	switch req.ToolChoice.Mode {
	case "":
	case gateway.ToolChoiceAuto, gateway.ToolChoiceNone, gateway.ToolChoiceRequired:
		wr.ToolChoice = string(req.ToolChoice.Mode)
	case gateway.ToolChoiceTool:
		named := wireNamedToolChoice{Type: "function"}
		named.Function.Name = req.ToolChoice.Name
		wr.ToolChoice = named
	default:
		return nil, fmt.Errorf("unknown tool choice %q", req.ToolChoice.Mode)
	}
	if rf := req.ResponseFormat; rf != nil {
		if len(rf.Schema) > 0 && !jsonObject(rf.Schema) {
			return nil, fmt.Errorf("response schema %q is not a JSON object", rf.Name)
		}
		wr.ResponseFormat = &wireResponseFormat{Type: "json_schema", JSONSchema: wireJSONSchema{
			Name: rf.Name, Description: rf.Description, Schema: rf.Schema, Strict: rf.Strict,
		}}
	}
	if req.MaxOutputTokens > 0 {
		if p.cfg.LegacyMaxTokens {
			wr.MaxTokens = int64(req.MaxOutputTokens)
		} else {
			wr.MaxCompletionTokens = int64(req.MaxOutputTokens)
		}
	}
	if stream {
		wr.Stream, wr.StreamOptions = true, &wireStreamOptions{IncludeUsage: true}
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&wr); err != nil {
		putBody(buf)
		return nil, fmt.Errorf("encode request: %w", err)
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return buf, nil
}

// jsonObject reports whether raw is a JSON object: its first byte that is
// not white space opens one. The encoder checks that it is valid JSON.
func jsonObject(raw json.RawMessage) bool {
	b := bytes.TrimLeft(raw, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
