package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/aidgen/aid/runtime/gateway"
)

// params translates a gateway request into a Messages API request for
// model. System messages become the top-level system prompt, in order;
// user, assistant and tool messages become content blocks of alternating
// user and assistant turns: an assistant's tool calls are tool_use blocks,
// a tool message is a tool_result block of a user turn, consecutive tool
// results are one user turn, and a turn's tool results come before its
// text, as the API requires. Empty text is left out (the API refuses empty
// text blocks).
func params(model gateway.ModelSpec, req gateway.Request) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:         sdk.Model(model.ID),
		MaxTokens:     int64(req.MaxOutputTokens),
		StopSequences: req.Stop,
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case gateway.RoleSystem:
			if m.Content != "" {
				p.System = append(p.System, sdk.TextBlockParam{Text: m.Content})
			}
		case gateway.RoleUser:
			if m.Content != "" {
				p.Messages = appendBlock(p.Messages, false, sdk.NewTextBlock(m.Content))
			}
		case gateway.RoleAssistant:
			if m.Content != "" {
				p.Messages = appendBlock(p.Messages, true, sdk.NewTextBlock(m.Content))
			}
			for _, tc := range m.ToolCalls {
				args := tc.Arguments
				if len(bytes.TrimSpace(args)) == 0 {
					args = json.RawMessage("{}")
				}
				if !jsonObject(args) || !json.Valid(args) {
					return p, fmt.Errorf("message %d: tool call %q: arguments are not a JSON object", i, tc.ID)
				}
				p.Messages = appendBlock(p.Messages, true, sdk.NewToolUseBlock(tc.ID, args, tc.Name))
			}
		case gateway.RoleTool:
			if m.ToolCallID == "" {
				return p, fmt.Errorf("message %d: a tool message must name the call it answers", i)
			}
			res := sdk.ToolResultBlockParam{ToolUseID: m.ToolCallID}
			if m.Content != "" {
				res.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			p.Messages = appendBlock(p.Messages, false, sdk.ContentBlockParamUnion{OfToolResult: &res})
		default:
			return p, fmt.Errorf("message %d has unknown role %q", i, m.Role)
		}
	}
	if len(p.Messages) == 0 {
		return p, fmt.Errorf("the request has no user or assistant message with content, which the Messages API requires")
	}
	for _, t := range req.Tools {
		// The API requires a schema: a tool without parameters takes an
		// empty object.
		raw := t.Parameters
		if len(raw) == 0 {
			raw = json.RawMessage(`{"type":"object"}`)
		} else if !jsonObject(raw) {
			return p, fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
		}
		schema := param.Override[sdk.ToolInputSchemaParam](raw)
		tool := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	switch req.ToolChoice.Mode {
	case "":
	case gateway.ToolChoiceAuto:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{}}
	case gateway.ToolChoiceNone:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case gateway.ToolChoiceRequired:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{}}
	case gateway.ToolChoiceTool:
		p.ToolChoice = sdk.ToolChoiceParamOfTool(req.ToolChoice.Name)
	default:
		return p, fmt.Errorf("unknown tool choice %q", req.ToolChoice.Mode)
	}
	if rf := req.ResponseFormat; rf != nil {
		var schema map[string]any
		if !jsonObject(rf.Schema) || json.Unmarshal(rf.Schema, &schema) != nil {
			return p, fmt.Errorf("response schema %q is not a JSON object", rf.Name)
		}
		p.OutputConfig.Format = sdk.JSONOutputFormatParam{Schema: schema}
	}
	return p, nil
}

// appendBlock adds block to the last turn when it has the same role, and
// as a new turn otherwise. A tool result goes before the user turn's other
// blocks: the API wants a turn's tool results first.
func appendBlock(msgs []sdk.MessageParam, assistant bool, block sdk.ContentBlockParamUnion) []sdk.MessageParam {
	if n := len(msgs); n > 0 {
		last := &msgs[n-1]
		switch {
		case assistant && last.OfAssistant != nil:
			last.OfAssistant.Content = append(last.OfAssistant.Content, block)
			return msgs
		case !assistant && last.OfUser != nil:
			c := last.OfUser.Content
			at := len(c)
			if block.OfToolResult != nil {
				for at > 0 && c[at-1].OfToolResult == nil {
					at--
				}
			}
			last.OfUser.Content = append(c[:at:at], append([]sdk.ContentBlockParamUnion{block}, c[at:]...)...)
			return msgs
		}
	}
	if assistant {
		return append(msgs, sdk.NewAssistantMessage(block))
	}
	return append(msgs, sdk.NewUserMessage(block))
}

// jsonObject reports whether raw is a JSON object: its first byte that is
// not white space opens one.
func jsonObject(raw json.RawMessage) bool {
	b := bytes.TrimLeft(raw, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
