package anthropic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

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
// text, as the API requires. Text that is empty or only white space is
// left out (the API refuses text blocks without a visible character, such
// as the "\n\n" a model writes before a tool call), and the turns around
// it merge. A failed tool call's result is flagged is_error. A tool call
// id the API refuses (another provider's, such as
// "functions.get_weather:0", in a run that fell back from it) is sent as
// an id it accepts (toolID), the same in the tool_use and in the
// tool_result, and at every step. The answer's own calls have the API's
// ids, which need no mapping.
func params(model gateway.ModelSpec, req gateway.Request) (sdk.MessageNewParams, error) {
	p := sdk.MessageNewParams{
		Model:         sdk.Model(model.ID),
		MaxTokens:     int64(req.MaxOutputTokens),
		StopSequences: req.Stop,
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		visible := strings.TrimSpace(m.Content) != ""
		switch m.Role {
		case gateway.RoleSystem:
			if visible {
				p.System = append(p.System, sdk.TextBlockParam{Text: m.Content})
			}
		case gateway.RoleUser:
			if visible {
				p.Messages = appendBlock(p.Messages, false, sdk.NewTextBlock(m.Content))
			}
		case gateway.RoleAssistant:
			if visible {
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
				p.Messages = appendBlock(p.Messages, true, sdk.NewToolUseBlock(toolID(tc.ID), args, tc.Name))
			}
		case gateway.RoleTool:
			if m.ToolCallID == "" {
				return p, fmt.Errorf("message %d: a tool message must name the call it answers", i)
			}
			res := sdk.ToolResultBlockParam{ToolUseID: toolID(m.ToolCallID)}
			if visible {
				res.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: m.Content}}}
			}
			if m.Failed {
				res.IsError = param.NewOpt(true)
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
		raw, err := inputSchema(t)
		if err != nil {
			return p, err
		}
		schema := param.Override[sdk.ToolInputSchemaParam](raw)
		tool := sdk.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tool.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	// parallel_tool_calls: false is the API's disable_parallel_tool_use,
	// a field of the tool choice (auto when the request names none); a
	// choice of no tool has no such field, and needs none.
	var single param.Opt[bool]
	if pc := req.ParallelToolCalls; pc != nil && !*pc {
		single = param.NewOpt(true)
	}
	switch req.ToolChoice.Mode {
	case "":
		if single.Valid() && len(p.Tools) > 0 {
			p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: single}}
		}
	case gateway.ToolChoiceAuto:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAuto: &sdk.ToolChoiceAutoParam{DisableParallelToolUse: single}}
	case gateway.ToolChoiceNone:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfNone: &sdk.ToolChoiceNoneParam{}}
	case gateway.ToolChoiceRequired:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfAny: &sdk.ToolChoiceAnyParam{DisableParallelToolUse: single}}
	case gateway.ToolChoiceTool:
		p.ToolChoice = sdk.ToolChoiceUnionParam{OfTool: &sdk.ToolChoiceToolParam{Name: req.ToolChoice.Name, DisableParallelToolUse: single}}
	default:
		return p, fmt.Errorf("unknown tool choice %q", req.ToolChoice.Mode)
	}
	markCache(&p, req.Cache)
	if rf := req.ResponseFormat; rf != nil {
		var schema map[string]any
		if !jsonObject(rf.Schema) || json.Unmarshal(rf.Schema, &schema) != nil {
			return p, fmt.Errorf("response schema %q is not a JSON object", rf.Name)
		}
		p.OutputConfig.Format = sdk.JSONOutputFormatParam{Schema: schema}
	}
	return p, nil
}

// markCache marks the cache_control breakpoints the request's policy asks
// for: after the last tool definition, after the last system block and on
// the last block of the last turn, each with the policy's lifetime. The
// API caches the prefix up to a breakpoint, in the order tools, system,
// messages, and reads the longest cached prefix of the next request; a
// breakpoint on the last turn is what lets step n+1 read all of step n.
// Three breakpoints stay within the API's four.
func markCache(p *sdk.MessageNewParams, c gateway.PromptCache) {
	if !c.Breakpoints() {
		return
	}
	cc := sdk.CacheControlEphemeralParam{TTL: sdk.CacheControlEphemeralTTLTTL5m}
	if c.TTL == gateway.CacheTTL1h {
		cc.TTL = sdk.CacheControlEphemeralTTLTTL1h
	}
	if n := len(p.Tools); c.Tools && n > 0 {
		p.Tools[n-1].OfTool.CacheControl = cc
	}
	if n := len(p.System); c.System && n > 0 {
		p.System[n-1].CacheControl = cc
	}
	if n := len(p.Messages); c.History && n > 0 {
		var blocks []sdk.ContentBlockParamUnion
		switch last := p.Messages[n-1]; {
		case last.OfUser != nil:
			blocks = last.OfUser.Content
		case last.OfAssistant != nil:
			blocks = last.OfAssistant.Content
		}
		if k := len(blocks); k > 0 {
			if at := blocks[k-1].GetCacheControl(); at != nil {
				*at = cc
			}
		}
	}
}

// inputSchema is a tool's parameters as the API's input_schema, which must
// be an object schema: no parameters, or a schema that does not say its
// type (`{}`, a client's `{"properties": ...}`), is one, as the agents
// runtime makes a declared tool's; a schema of another type is refused.
func inputSchema(t gateway.ToolDef) (json.RawMessage, error) {
	if len(bytes.TrimSpace(t.Parameters)) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var schema map[string]json.RawMessage
	if !jsonObject(t.Parameters) || json.Unmarshal(t.Parameters, &schema) != nil {
		return nil, fmt.Errorf("tool %q: parameters are not a JSON object", t.Name)
	}
	typ, ok := schema["type"]
	if !ok {
		schema["type"] = json.RawMessage(`"object"`)
		return json.Marshal(schema)
	}
	var s string
	if json.Unmarshal(typ, &s) != nil || s != "object" {
		return nil, fmt.Errorf("tool %q: parameters are a schema of type %s; the Messages API takes an object schema", t.Name, typ)
	}
	return t.Parameters, nil
}

// toolID is a tool call id as the API accepts it (^[a-zA-Z0-9_-]+$): id
// itself when it is one, else its accepted characters, each other one
// replaced by "_", and a hash of the whole id, so that two ids never
// become one and the same id always becomes the same (a conversation's
// calls are sent again at every step).
func toolID(id string) string {
	ok := id != ""
	for i := 0; ok && i < len(id); i++ {
		ok = idByte(id[i])
	}
	if ok {
		return id
	}
	b := make([]byte, 0, len(id)+len(idMark)+16)
	for i := 0; i < len(id); i++ {
		if idByte(id[i]) {
			b = append(b, id[i])
		} else {
			b = append(b, '_')
		}
	}
	sum := sha256.Sum256([]byte(id))
	b = append(b, idMark...)
	return string(hex.AppendEncode(b, sum[:8]))
}

// idMark separates a mapped id's characters from its hash.
const idMark = "__aid"

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
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
