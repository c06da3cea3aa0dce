package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

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
	ResponseFormat      *wireResponseFormat `json:"response_format,omitempty"`
	MaxCompletionTokens int64               `json:"max_completion_tokens,omitempty"`
	MaxTokens           int64               `json:"max_tokens,omitempty"`
	Temperature         *float64            `json:"temperature,omitempty"`
	TopP                *float64            `json:"top_p,omitempty"`
	Stop                []string            `json:"stop,omitempty"`
	Seed                *int64              `json:"seed,omitempty"`
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

// wireAnswer is the part of a chat completion the gateway reads.
type wireAnswer struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   string         `json:"content"`
			ToolCalls []wireToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage wireUsage `json:"usage"`
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
	wr := wireRequest{Model: model.ID, Temperature: req.Temperature, TopP: req.TopP, Stop: req.Stop, Seed: req.Seed}
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
