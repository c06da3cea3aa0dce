package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
)

// wireToolCall is a tool call in the chat-completions wire format.
type wireToolCall struct {
	// Index is set in stream deltas only.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func toWireCalls(calls []gateway.ToolCall) []wireToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]wireToolCall, len(calls))
	for i, c := range calls {
		out[i] = wireToolCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: string(c.Arguments)}}
	}
	return out
}

// wireContent is a message's content as clients send it: a string, null, or
// an array of text parts.
type wireContent struct {
	text string
	set  bool
}

// UnmarshalJSON accepts a string, null or an array of {"type":"text"} parts,
// and refuses other part types (images, audio, files), which no request of
// the gateway can carry.
func (c *wireContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		c.set = true
		return json.Unmarshal(b, &c.text)
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type    string  `json:"type"`
			Text    *string `json:"text"`
			Refusal *string `json:"refusal"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var sb strings.Builder
		for i, p := range parts {
			switch {
			case p.Type == "text" && p.Text != nil:
				sb.WriteString(*p.Text)
			case p.Type == "refusal" && p.Refusal != nil:
				sb.WriteString(*p.Refusal)
			default:
				return fmt.Errorf("content part %d has type %q: only text parts are supported", i, p.Type)
			}
		}
		c.text, c.set = sb.String(), true
		return nil
	default:
		return fmt.Errorf("content must be a string, null or an array of text parts")
	}
}

// wireMessage is a message as clients send it.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    wireContent    `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	Name       string         `json:"name"`
}

// outMessage is a message as the service sends it.
type outMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

func toOutMessages(msgs []gateway.Message) []outMessage {
	out := make([]outMessage, len(msgs))
	for i, m := range msgs {
		o := outMessage{Role: string(m.Role), ToolCalls: toWireCalls(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			c := m.Content
			o.Content = &c
		}
		out[i] = o
	}
	return out
}

// toHistory maps client messages to a thread: user, assistant and tool
// messages in order; system and developer messages are counted and left out
// (the agent's instructions are the system prompt), unless system says to
// keep them, as system messages (a call straight to an alias). param names
// the field for errors.
func toHistory(param string, msgs []wireMessage, system bool) (history []gateway.Message, ignored int, err error) {
	if len(msgs) > 0 {
		history = make([]gateway.Message, 0, len(msgs))
	}
	for i, m := range msgs {
		// The field's name is built only for an error.
		at := func() string { return param + "[" + strconv.Itoa(i) + "]" }
		switch m.Role {
		case "system", "developer":
			if system {
				history = append(history, gateway.Message{Role: gateway.RoleSystem, Content: m.Content.text, Name: m.Name})
				continue
			}
			ignored++
		case "user":
			if !m.Content.set {
				return nil, 0, invalid(CodeInvalidRequest, at()+".content", "a user message needs content")
			}
			history = append(history, gateway.Message{Role: gateway.RoleUser, Content: m.Content.text, Name: m.Name})
		case "assistant":
			gm := gateway.Message{Role: gateway.RoleAssistant, Content: m.Content.text, Name: m.Name}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return nil, 0, invalid(CodeInvalidRequest, fmt.Sprintf("%s.tool_calls[%d]", at(), j), "a tool call needs an id and a function name")
				}
				args := c.Function.Arguments
				if args == "" {
					args = "{}"
				}
				if !json.Valid([]byte(args)) {
					return nil, 0, invalid(CodeInvalidRequest, fmt.Sprintf("%s.tool_calls[%d].function.arguments", at(), j), "tool call arguments must be a JSON document")
				}
				gm.ToolCalls = append(gm.ToolCalls, gateway.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(args)})
			}
			if !m.Content.set && len(gm.ToolCalls) == 0 {
				return nil, 0, invalid(CodeInvalidRequest, at()+".content", "an assistant message needs content or tool calls")
			}
			history = append(history, gm)
		case "tool":
			if m.ToolCallID == "" {
				return nil, 0, invalid(CodeInvalidRequest, at()+".tool_call_id", "a tool message needs the id of the call it answers")
			}
			history = append(history, gateway.Message{Role: gateway.RoleTool, Content: m.Content.text, ToolCallID: m.ToolCallID, Name: m.Name})
		case "":
			return nil, 0, invalid(CodeInvalidRequest, at()+".role", "a message needs a role")
		default:
			return nil, 0, invalid(CodeInvalidRequest, at()+".role", fmt.Sprintf("role %q is not supported: use system, developer, user, assistant or tool", m.Role))
		}
	}
	return history, ignored, nil
}

// usageJSON is a run's usage.
type usageJSON struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// pendingCall is the call a paused run waits on, and where to decide it.
type pendingCall struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	Reason    string `json:"reason"`
	ResumeURL string `json:"resume_url"`
}

func pendingOf(cp *agents.Checkpoint) *pendingCall {
	if cp == nil || cp.Pending == nil {
		return nil
	}
	c, ok := cp.Pending.Call()
	if !ok {
		return nil
	}
	return &pendingCall{CallID: c.ID, Tool: c.Name, Arguments: c.Arguments, Reason: string(cp.Pending.Reason),
		ResumeURL: "/v1/runs/" + cp.RunID + "/resume"}
}

// aidExt is aid's extension object on chat-completion answers and errors:
// the run behind them.
type aidExt struct {
	RunID   string       `json:"run_id"`
	Status  string       `json:"status"`
	Agent   string       `json:"agent,omitempty"`
	Path    []string     `json:"path,omitempty"`
	Pending *pendingCall `json:"pending,omitempty"`
}

func extOf(res agents.RunResult) *aidExt {
	if res.RunID == "" {
		return nil
	}
	return &aidExt{RunID: res.RunID, Status: string(res.Status), Agent: res.Agent, Path: res.Path, Pending: pendingOf(res.Checkpoint)}
}

// runJSON is a run as the runs API answers it.
type runJSON struct {
	RunID    string              `json:"run_id"`
	Agent    string              `json:"agent"`
	Path     []string            `json:"path"`
	Status   string              `json:"status"`
	Answer   string              `json:"answer,omitempty"`
	Steps    []agents.StepRecord `json:"steps"`
	Usage    usageJSON           `json:"usage"`
	CostUSD  float64             `json:"cost_usd"`
	Pending  *pendingCall        `json:"pending,omitempty"`
	Messages []outMessage        `json:"messages,omitempty"`
	Error    *apiError           `json:"error,omitempty"`
}

func runOf(res agents.RunResult, err error) runJSON {
	out := runJSON{
		RunID: res.RunID, Agent: res.Agent, Path: res.Path, Status: string(res.Status), Answer: res.Answer,
		Steps: res.Steps, CostUSD: res.CostUSD, Pending: pendingOf(res.Checkpoint), Messages: toOutMessages(res.Messages),
		Usage: usageJSON{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, TotalTokens: res.Usage.TotalTokens},
	}
	if out.Steps == nil {
		out.Steps = []agents.StepRecord{}
	}
	if err != nil {
		out.Error = classify(err)
	}
	return out
}
