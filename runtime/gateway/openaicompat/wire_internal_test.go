package openaicompat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unicode"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aidgen/aid/runtime/gateway"
)

// referenceParams is the request as openai-go builds it from its own
// parameter types: the reference the wire encoding is held to.
func (p *Provider) referenceParams(model gateway.ModelSpec, req gateway.Request) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: model.ID}
	params.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case gateway.RoleSystem:
			msg := openai.SystemMessage(m.Content)
			if m.Name != "" {
				msg.OfSystem.Name = openai.String(m.Name)
			}
			params.Messages = append(params.Messages, msg)
		case gateway.RoleUser:
			msg := openai.UserMessage(m.Content)
			if m.Name != "" {
				msg.OfUser.Name = openai.String(m.Name)
			}
			params.Messages = append(params.Messages, msg)
		case gateway.RoleAssistant:
			var a openai.ChatCompletionAssistantMessageParam
			if m.Content != "" || len(m.ToolCalls) == 0 {
				a.Content.OfString = openai.String(m.Content)
			}
			if m.Name != "" {
				a.Name = openai.String(m.Name)
			}
			for _, tc := range m.ToolCalls {
				args := string(tc.Arguments)
				if args == "" {
					args = "{}"
				}
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case gateway.RoleTool:
			params.Messages = append(params.Messages, openai.ToolMessage(m.Content, m.ToolCallID))
		default:
			return params, fmt.Errorf("message %d has unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		if len(t.Parameters) > 0 {
			var schema shared.FunctionParameters
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return params, fmt.Errorf("tool %q: parameters are not a JSON object: %w", t.Name, err)
			}
			fn.Parameters = schema
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	switch req.ToolChoice.Mode {
	case "":
	case gateway.ToolChoiceAuto, gateway.ToolChoiceNone, gateway.ToolChoiceRequired:
		params.ToolChoice.OfAuto = openai.String(string(req.ToolChoice.Mode))
	case gateway.ToolChoiceTool:
		params.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: req.ToolChoice.Name},
		}
	default:
		return params, fmt.Errorf("unknown tool choice %q", req.ToolChoice.Mode)
	}
	if rf := req.ResponseFormat; rf != nil {
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: rf.Name}
		if rf.Description != "" {
			js.Description = openai.String(rf.Description)
		}
		if rf.Strict {
			js.Strict = openai.Bool(true)
		}
		if len(rf.Schema) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(rf.Schema, &schema); err != nil {
				return params, fmt.Errorf("response schema %q is not a JSON object: %w", rf.Name, err)
			}
			js.Schema = schema
		}
		params.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}
	}
	if req.MaxOutputTokens > 0 {
		if p.cfg.LegacyMaxTokens {
			params.MaxTokens = openai.Int(int64(req.MaxOutputTokens))
		} else {
			params.MaxCompletionTokens = openai.Int(int64(req.MaxOutputTokens))
		}
	}
	if req.Temperature != nil {
		params.Temperature = openai.Float(*req.Temperature)
	}
	if req.TopP != nil {
		params.TopP = openai.Float(*req.TopP)
	}
	if len(req.Stop) > 0 {
		params.Stop.OfStringArray = req.Stop
	}
	if req.Seed != nil {
		params.Seed = openai.Int(*req.Seed)
	}
	return params, nil
}

// TestWireMatchesOpenAIGo: the request chatBody encodes is the one
// openai-go's parameter types encode, as JSON values, for every field the
// gateway sends; and a chat completion decodes to the same answer as
// openai-go decodes it.
func TestWireMatchesOpenAIGo(t *testing.T) {
	temp, topP, seed := 0.2, 0.9, int64(7)
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","pattern":"^[A-Z]-[0-9]+$"},"n":{"type":"integer","maximum":1e21}},"required":["id"]}`)
	full := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Be brief. <b>&</b>"},
			{Role: gateway.RoleSystem, Content: "", Name: "rules"},
			{Role: gateway.RoleUser, Content: "Where is order A-42? \u2028 \"quoted\"", Name: "ana"},
			{Role: gateway.RoleAssistant, ToolCalls: []gateway.ToolCall{{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"A-42"}`)}, {ID: "call_2", Name: "noop"}}},
			{Role: gateway.RoleTool, ToolCallID: "call_1", Content: `{"status":"shipped"}`, Name: "lookup_order"},
			{Role: gateway.RoleTool, ToolCallID: "call_2", Content: ""},
			{Role: gateway.RoleAssistant, Content: "Shipped.", Name: "desk", ToolCalls: []gateway.ToolCall{{ID: "call_3", Name: "notify", Arguments: json.RawMessage(`{}`)}}},
			{Role: gateway.RoleAssistant, Content: ""},
			{Role: gateway.RoleUser, Content: "Thanks ✓"},
		},
		Tools: []gateway.ToolDef{
			{Name: "lookup_order", Description: "Find an order.", Parameters: schema},
			{Name: "noop"},
			{Name: "notify", Parameters: json.RawMessage(` {"type":"object"}`)},
		},
		ToolChoice:      gateway.ToolChoice{Mode: gateway.ToolChoiceTool, Name: "lookup_order"},
		ResponseFormat:  &gateway.JSONSchema{Name: "answer", Description: "The answer.", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`), Strict: true},
		MaxOutputTokens: 64,
		Temperature:     &temp,
		TopP:            &topP,
		Stop:            []string{"END", "STOP"},
		Seed:            &seed,
	}
	zero := 0.0
	cases := map[string]gateway.Request{
		"full":        full,
		"one message": {Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}},
		"auto":        {Messages: full.Messages[:1], ToolChoice: gateway.ToolChoice{Mode: gateway.ToolChoiceAuto}, Tools: full.Tools[1:2], Temperature: &zero},
		"none":        {Messages: full.Messages[:1], ToolChoice: gateway.ToolChoice{Mode: gateway.ToolChoiceNone}},
		"required":    {Messages: full.Messages[:1], ToolChoice: gateway.ToolChoice{Mode: gateway.ToolChoiceRequired}},
		"bare schema": {Messages: full.Messages[:1], ResponseFormat: &gateway.JSONSchema{Name: "x"}},
	}
	for _, legacy := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			p := &Provider{cfg: Config{LegacyMaxTokens: legacy}}
			for name, req := range cases {
				t.Run(fmt.Sprintf("%s/legacy=%v/stream=%v", name, legacy, stream), func(t *testing.T) {
					params, err := p.referenceParams(gateway.ModelSpec{ID: "gpt-4o-2024-08-06"}, req)
					if err != nil {
						t.Fatal(err)
					}
					if stream {
						params.StreamOptions.IncludeUsage = openai.Bool(true)
					}
					want, err := json.Marshal(params)
					if err != nil {
						t.Fatal(err)
					}
					body, err := p.chatBody(gateway.ModelSpec{ID: "gpt-4o-2024-08-06"}, req, stream)
					if err != nil {
						t.Fatal(err)
					}
					var w, g map[string]any
					if err := json.Unmarshal(want, &w); err != nil {
						t.Fatal(err)
					}
					if err := json.Unmarshal(body.Bytes(), &g); err != nil {
						t.Fatalf("chatBody is not JSON: %v\n%s", err, body)
					}
					if stream {
						w["stream"] = true // openai-go's NewStreaming adds it to the body
					}
					if diff := gocmp.Diff(w, g); diff != "" {
						t.Errorf("chatBody differs from openai-go's encoding (-openai-go +chatBody):\n%s", diff)
					}
				})
			}
		}
	}
	for _, bad := range []gateway.Request{
		{Messages: []gateway.Message{{Role: "robot", Content: "x"}}},
		{Messages: full.Messages[:1], Tools: []gateway.ToolDef{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
		{Messages: full.Messages[:1], Tools: []gateway.ToolDef{{Name: "t", Parameters: json.RawMessage(`{"type":`)}}},
		{Messages: full.Messages[:1], ToolChoice: gateway.ToolChoice{Mode: "sometimes"}},
		{Messages: full.Messages[:1], ResponseFormat: &gateway.JSONSchema{Name: "x", Schema: json.RawMessage(`"object"`)}},
	} {
		p := &Provider{}
		_, werr := p.referenceParams(gateway.ModelSpec{ID: "m"}, bad)
		if _, err := p.chatBody(gateway.ModelSpec{ID: "m"}, bad, false); err == nil || (werr == nil) {
			t.Errorf("%+v: chatBody error %v, openai-go's %v: want both to refuse it", bad, err, werr)
		}
	}

	answers := []string{
		`{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"finish_reason":"stop","logprobs":null,"message":{"role":"assistant","content":"Paris","refusal":null}}],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":8}}}`,
		`{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"c2","function":{"name":"g","arguments":""}}]},"finish_reason":"tool_calls"}]}`,
		`{"model":"m","choices":[{"message":{"content":"a"},"finish_reason":"length"},{"message":{"content":"b"}}],"usage":null,"extra":{"x":[1,2]}}`,
	}
	for _, a := range answers {
		var ref openai.ChatCompletion
		if err := json.Unmarshal([]byte(a), &ref); err != nil {
			t.Fatal(err)
		}
		got, err := decodeAnswer([]byte(a))
		if err != nil {
			t.Fatal(err)
		}
		type answer struct {
			Model, Content, Finish string
			Calls                  [][3]string
			Usage                  gateway.Usage
		}
		want := answer{Model: ref.Model, Content: ref.Choices[0].Message.Content, Finish: ref.Choices[0].FinishReason, Usage: usage(&ref.Usage)}
		for _, c := range ref.Choices[0].Message.ToolCalls {
			want.Calls = append(want.Calls, [3]string{c.ID, c.Function.Name, c.Function.Arguments})
		}
		have := answer{Model: got.Model, Content: got.Choices[0].Message.Content, Finish: got.Choices[0].FinishReason, Usage: got.Usage.usage()}
		for _, c := range got.Choices[0].Message.ToolCalls {
			have.Calls = append(have.Calls, [3]string{c.ID, c.Function.Name, c.Function.Arguments})
		}
		if diff := gocmp.Diff(want, have); diff != "" {
			t.Errorf("answer %s decodes differently (-openai-go +wire):\n%s", a, diff)
		}
	}
}

// TestDecodeAnswerIsEncodingJSON: decodeAnswer reads what encoding/json
// reads into a wireAnswer, and refuses what it refuses, wrong types and
// nulls included.
func TestDecodeAnswerIsEncodingJSON(t *testing.T) {
	for _, a := range decodeCases {
		got, gerr := decodeAnswer([]byte(a))
		var want wireAnswer
		werr := json.Unmarshal([]byte(a), &want)
		if (gerr == nil) != (werr == nil) {
			t.Errorf("%s: decodeAnswer error %v, encoding/json error %v", a, gerr, werr)
			continue
		}
		if gerr != nil {
			continue
		}
		if len(want.Choices) > 1 {
			want.Choices = want.Choices[:1] // only the first is kept
		}
		if diff := gocmp.Diff(want, got, gocmp.Comparer(func(a, b []wireToolCall) bool { return gocmp.Equal(nilIfEmpty(a), nilIfEmpty(b)) }),
			gocmp.Comparer(func(a, b []wireChoice) bool { return len(a) == len(b) && (len(a) == 0 || gocmp.Equal(a[0], b[0])) })); diff != "" {
			t.Errorf("%s (-encoding/json +decodeAnswer):\n%s", a, diff)
		}
	}
}

func nilIfEmpty(s []wireToolCall) []wireToolCall {
	if len(s) == 0 {
		return nil
	}
	return s
}

// decodeCases are answers well and badly formed.
var decodeCases = []string{
	`{"model":"m","choices":[{"message":{"content":"a\u00e9\ud83d\ude00\n\"q\""},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
	`{"model":null,"choices":null,"usage":null}`,
	`{"choices":[null,{"message":null,"finish_reason":null}]}`,
	`{"choices":[{"message":{"content":null,"tool_calls":null}}]}`,
	`{"choices":[{"message":{"tool_calls":[null,{"id":null,"type":null,"function":null}]}}]}`,
	`{"choices":[{"message":{"content":"a"}},{"message":{"content":5}}]}`,
	`{"choices":[{"message":{"content":"a"}}],"choices":[{"message":{"content":"b"}}],"model":"x","model":"y"}`,
	`{"usage":{"prompt_tokens_details":{"cached_tokens":7},"prompt_tokens":9223372036854775807}}`,
	`{"usage":{"prompt_tokens":9223372036854775808}}`,
	`{"usage":{"prompt_tokens":1.5}}`,
	`{"usage":{"prompt_tokens":1e3}}`,
	`{"usage":{"prompt_tokens":-2}}`,
	`{"usage":{"prompt_tokens":"3"}}`,
	`{"usage":[]}`,
	`{"model":5}`,
	`{"model":true}`,
	`{"choices":{}}`,
	`{"choices":"x"}`,
	`{"choices":[1]}`,
	`{"choices":[{"message":{"content":["a"]}}]}`,
	`{"choices":[{"message":{"tool_calls":"x"}}]}`,
	`{"choices":[{"message":{"tool_calls":[{"function":{"arguments":{}}}]}}]}`,
	`{"choices":[{"finish_reason":1}]}`,
	`{"extra":{"deep":[1,{"x":null}],"n":1e400},"model":"m"}`,
	`[]`,
	`null`,
	`"x"`,
	``,
	`{"model":"m"`,
	`{"model":"m"} {}`,
	`{"model":"m",}`,
	`{"model":"\x"}`,
}

// FuzzDecodeAnswer: on any input decodeAnswer does not panic, and what it
// accepts encoding/json accepts too.
func FuzzDecodeAnswer(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, err := decodeAnswer(raw)
		if err != nil {
			return
		}
		var want wireAnswer
		if werr := json.Unmarshal(raw, &want); werr != nil && !bytes.ContainsFunc(raw, unicode.IsUpper) {
			// encoding/json also matches keys whatever their case, so an
			// upper-case key can carry a value it refuses.
			t.Errorf("decodeAnswer accepted %q, which encoding/json refuses: %v", raw, werr)
		}
	})
}
