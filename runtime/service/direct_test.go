package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
)

// directEnv is a service exposing large and small (large falls back to
// small) beside its triage agent, charging direct calls to budget.
func directEnv(t *testing.T, fc fake.Config, budget gateway.Budget) *env {
	t.Helper()
	return newEnv(t, options{fake: fc, budgets: []gateway.Budget{budget}, svc: func(c *service.Config) {
		c.Aliases = []service.Alias{{Name: "large", Fallbacks: []string{"small"}}, {Name: "small"}, {Name: "plain"}}
		c.AliasBudget = budget.Name
	}})
}

// TestDirectAliasAnswersThroughTheGateway: a chat completion naming an
// exposed alias is the gateway's call on that alias, with every message,
// the client's tools and sampling fields, answered in the OpenAI shape,
// priced, charged to the declared budget, and with no run behind it.
func TestDirectAliasAnswersThroughTheGateway(t *testing.T) {
	usage := gateway.Usage{InputTokens: 40, OutputTokens: 5, TotalTokens: 45, CachedInputTokens: 8}
	e := directEnv(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"m-large": {{Text: "Paris", Usage: &usage}, {ToolCalls: []gateway.ToolCall{{ID: "call_1", Name: "lookup", Arguments: json.RawMessage(`{"id":"A-1"}`)}}}, {Text: "It has shipped."}},
	}}, gateway.Budget{Name: "gw", MaxUSD: 1, Scope: gateway.ScopeRun})
	client := e.clientPtr()
	var raw *http.Response
	cc, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "large",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("Answer with the city only."),
			openai.DeveloperMessage("Be terse."),
			openai.UserMessage("What is the capital of France?"),
		},
		Temperature:         openai.Float(0.3),
		TopP:                openai.Float(0.9),
		MaxCompletionTokens: openai.Int(20),
		Seed:                openai.Int(7),
		Stop:                openai.ChatCompletionNewParamsStopUnion{OfString: openai.String("END")},
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if cc.Choices[0].Message.Content != "Paris" || cc.Choices[0].FinishReason != "stop" || cc.Model != "m-large" || cc.Object != "chat.completion" {
		t.Errorf("completion %+v", cc)
	}
	if cc.Usage.PromptTokens != 40 || cc.Usage.CompletionTokens != 5 || cc.Usage.TotalTokens != 45 || cc.Usage.PromptTokensDetails.CachedTokens != 8 {
		t.Errorf("usage %+v", cc.Usage)
	}
	if raw.Header.Get("X-Aid-Run-Id") != "" {
		t.Error("a direct call answered with a run id")
	}
	temp, topP, seed := 0.3, 0.9, int64(7)
	want := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Answer with the city only."},
			{Role: gateway.RoleSystem, Content: "Be terse."},
			{Role: gateway.RoleUser, Content: "What is the capital of France?"},
		},
		MaxOutputTokens: 20, Temperature: &temp, TopP: &topP, Seed: &seed, Stop: []string{"END"},
	}
	if diff := gocmp.Diff(want, e.fake.Requests()[0]); diff != "" {
		t.Errorf("gateway request (-want +got):\n%s", diff)
	}

	// Client tools go to the model, and its tool calls come back.
	cc, err = client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "large",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where is A-1?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "lookup", Description: openai.String("Find an order."),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
		})},
		ToolChoice:        openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")},
		ParallelToolCalls: openai.Bool(false),
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := cc.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].ID != "call_1" || calls[0].Function.Name != "lookup" || calls[0].Function.Arguments != `{"id":"A-1"}` || cc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("tool calls %+v finish %q", calls, cc.Choices[0].FinishReason)
	}
	sent := e.fake.Requests()[1]
	if len(sent.Tools) != 1 || sent.Tools[0].Name != "lookup" || sent.Tools[0].Description != "Find an order." || sent.ToolChoice.Mode != gateway.ToolChoiceRequired {
		t.Errorf("tools sent %+v choice %+v", sent.Tools, sent.ToolChoice)
	}
	if pc := sent.ParallelToolCalls; pc == nil || *pc {
		t.Errorf("parallel_tool_calls false reaches the gateway as %v", pc)
	}

	// The tool's result goes back as a tool message, and the answer's
	// extension says which alias answered and what it cost.
	status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"large","messages":[
		{"role":"user","content":"Where is A-1?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup","arguments":"{\"id\":\"A-1\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"shipped"}]}`)
	var out struct {
		Aid struct {
			Alias    string  `json:"alias"`
			FellBack bool    `json:"fell_back"`
			CostUSD  float64 `json:"cost_usd"`
		} `json:"aid"`
	}
	if err := json.Unmarshal(body, &out); err != nil || status != 200 || out.Aid.Alias != "large" || out.Aid.FellBack || out.Aid.CostUSD <= 0 {
		t.Errorf("third call: %d %s", status, body)
	}
	if got := e.fake.Requests()[2].Messages; len(got) != 3 || got[2].Role != gateway.RoleTool || got[2].ToolCallID != "call_1" || got[1].ToolCalls[0].Name != "lookup" {
		t.Errorf("messages sent %+v", got)
	}

	// Priced and charged to the alias budget; a run-scoped budget counts
	// each request on its own and forgets it after.
	spend := e.spend(t)
	if spend.Calls != 3 || len(spend.ByAlias) != 1 || spend.ByAlias[0].Name != "large" || len(spend.ByAccount) != 0 {
		t.Errorf("ledger %+v", spend)
	}
	byBudget, err := e.gw.SpendByBudget(t.Context())
	if err != nil || len(byBudget) != 1 || byBudget[0].Budget != "gw" || byBudget[0].Calls != 3 {
		t.Errorf("spend by budget %+v %v", byBudget, err)
	}
	_, _, mb := e.do(t, "GET", "/metrics", "")
	m := string(mb)
	if sample(t, m, `aid_alias_requests_total{alias="large",code="200"}`) != 3 {
		t.Errorf("alias metric:\n%s", grep(m, "aid_alias"))
	}
	if strings.Contains(m, "aid_runs_total") {
		t.Errorf("a direct call counted a run:\n%s", grep(m, "aid_runs_total"))
	}
	if !strings.Contains(e.logs.String(), `"alias":"large"`) {
		t.Errorf("no alias in the log line:\n%s", e.logs)
	}
}

// TestDirectAliasStreams: with stream true the answer arrives as
// chat.completion.chunk events that openai-go's accumulator reads back
// whole, tool calls and usage included.
func TestDirectAliasStreams(t *testing.T) {
	e := directEnv(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"m-large": {
			{Text: "The capital of France is Paris."},
			{Text: "Let me look.", ToolCalls: []gateway.ToolCall{{ID: "call_9", Name: "lookup", Arguments: json.RawMessage(`{"id":"A-1"}`)}}},
		},
	}}, gateway.Budget{Name: "gw", MaxUSD: 1, Scope: gateway.ScopeGlobal})
	client := e.clientPtr()
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "large",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Capital of France?")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != "The capital of France is Paris." || chunks < 4 {
		t.Errorf("streamed %q in %d chunks", got, chunks)
	}
	if acc.Choices[0].FinishReason != "stop" || acc.Usage.TotalTokens == 0 || acc.Model != "m-large" {
		t.Errorf("finish %q usage %+v model %q", acc.Choices[0].FinishReason, acc.Usage, acc.Model)
	}

	stream = client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:    "large",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where is A-1?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "lookup", Parameters: shared.FunctionParameters{"type": "object"},
		})},
	})
	acc = openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if msg.Content != "Let me look." || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].ID != "call_9" || msg.ToolCalls[0].Function.Name != "lookup" ||
		msg.ToolCalls[0].Function.Arguments != `{"id":"A-1"}` || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("streamed message %+v finish %q", msg, acc.Choices[0].FinishReason)
	}
	if s := e.spend(t); s.Calls != 2 || s.ByAlias[0].Name != "large" {
		t.Errorf("ledger %+v", s)
	}
}

// TestDirectAliasFallsBackAndFails: a failing alias falls back to the
// aliases declared for it, and what cannot be answered gets the error
// shapes of every other chat completion, streamed or not.
func TestDirectAliasFallsBackAndFails(t *testing.T) {
	down := &gateway.ProviderError{Provider: "fake", Model: "m-large", StatusCode: 503, Retryable: true, Err: errors.New("upstream down")}
	e := directEnv(t, fake.Config{Analyzer: analysis.English{}, ByModel: map[string][]fake.Step{
		"m-large": {{Err: down}, {Err: down}, {Err: down}},
		"m-small": {{Text: "small answered"}, {Err: down}, {Err: down}},
	}}, gateway.Budget{Name: "gw", MaxTotalTokens: 400, Scope: gateway.ScopeGlobal})
	client := e.clientPtr()
	cc, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "large", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || cc.Choices[0].Message.Content != "small answered" || cc.Model != "m-small" {
		t.Fatalf("fallback: %+v %v", cc, err)
	}
	var ext struct {
		Aid struct {
			Alias    string `json:"alias"`
			FellBack bool   `json:"fell_back"`
		} `json:"aid"`
	}
	if err := json.Unmarshal([]byte(cc.RawJSON()), &ext); err != nil || ext.Aid.Alias != "small" || !ext.Aid.FellBack {
		t.Errorf("extension of a fallback answer: %s", cc.RawJSON())
	}

	tests := []struct {
		name, body           string
		status               int
		code, typ, param     string
		stream, streamStatus bool
		msg                  string // the message, when given
	}{
		{name: "every alias down", body: `{"model":"large","messages":[{"role":"user","content":"hi"}]}`, status: 502, code: service.CodeUpstream, typ: service.TypeServer},
		{name: "every alias down, streamed", body: `{"model":"small","stream":true,"messages":[{"role":"user","content":"hi"}]}`, status: 502, code: service.CodeUpstream, typ: service.TypeServer},
		{name: "budget", body: `{"model":"small","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 800) + `"}]}`, status: 402, code: service.CodeBudgetExceeded, typ: service.TypeQuota},
		{name: "budget, streamed", body: `{"model":"small","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 800) + `"}]}`, status: 402, code: service.CodeBudgetExceeded, typ: service.TypeQuota},
		{name: "tools on a model without them", body: `{"model":"plain","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`, status: 400, code: service.CodeUnsupportedParameter, typ: service.TypeInvalidRequest, param: "tools"},
		{name: "json_object", body: `{"model":"small","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, status: 400, code: service.CodeUnsupportedParameter, typ: service.TypeInvalidRequest, param: "response_format.type"},
		{name: "n", body: `{"model":"small","n":2,"messages":[{"role":"user","content":"hi"}]}`, status: 400, code: service.CodeUnsupportedParameter, typ: service.TypeInvalidRequest, param: "n"},
		{name: "temperature", body: `{"model":"small","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, status: 400, code: service.CodeInvalidRequest, typ: service.TypeInvalidRequest, param: "temperature"},
		{name: "stop", body: `{"model":"small","stop":5,"messages":[{"role":"user","content":"hi"}]}`, status: 400, code: service.CodeInvalidRequest, typ: service.TypeInvalidRequest, param: "stop"},
		{name: "tool without a name", body: `{"model":"small","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{}}]}`, status: 400, code: service.CodeInvalidRequest, typ: service.TypeInvalidRequest, param: "tools[0].function.name"},
		{name: "tools not an array", body: `{"model":"small","messages":[{"role":"user","content":"hi"}],"tools":"all"}`, status: 400, code: service.CodeInvalidJSON, typ: service.TypeInvalidRequest, param: "tools", msg: "tools must be an array, not a string"},
		{name: "tool name not a string", body: `{"model":"small","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":5}}]}`, status: 400, code: service.CodeInvalidJSON, typ: service.TypeInvalidRequest, param: "tools[0].function.name", msg: "tools[0].function.name must be a string, not a number"},
		{name: "response_format not an object", body: `{"model":"small","messages":[{"role":"user","content":"hi"}],"response_format":"json"}`, status: 400, code: service.CodeInvalidJSON, typ: service.TypeInvalidRequest, param: "response_format", msg: "response_format must be an object, not a string"},
		{name: "tool message without its call", body: `{"model":"small","messages":[{"role":"tool","content":"x"}]}`, status: 400, code: service.CodeInvalidRequest, typ: service.TypeInvalidRequest, param: "messages[0].tool_call_id"},
		{name: "no messages", body: `{"model":"small","messages":[]}`, status: 400, code: service.CodeInvalidRequest, typ: service.TypeInvalidRequest, param: "messages"},
		{name: "unknown model", body: `{"model":"medium","messages":[{"role":"user","content":"hi"}]}`, status: 404, code: service.CodeModelNotFound, typ: service.TypeNotFound, param: "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := e.do(t, "POST", "/v1/chat/completions", tt.body)
			code, typ, param := servicetest.APIError(t, body)
			if status != tt.status || code != tt.code || typ != tt.typ || param != tt.param {
				t.Errorf("%d %s, want %d %s %s param %q", status, body, tt.status, tt.code, tt.typ, tt.param)
			}
			if tt.msg != "" && !bytes.Contains(body, []byte(`"message":"`+tt.msg+`"`)) {
				t.Errorf("message of %s, want %q", body, tt.msg)
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
		})
	}
	if s := e.spend(t); s.Calls != 1 {
		t.Errorf("refused calls were charged: %+v", s)
	}
	// Behind the same auth.
	_, err = e.clientPtr(option.WithAPIKey("sk-wrong")).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "large", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 {
		t.Errorf("wrong token: %v", err)
	}
}

// TestDirectAliasModelsAndConfig: /v1/models lists the agents and the
// exposed aliases; a service refuses aliases that would be ambiguous or
// cannot answer a chat completion.
func TestDirectAliasModelsAndConfig(t *testing.T) {
	e := directEnv(t, fake.Config{Analyzer: analysis.English{}}, gateway.Budget{Name: "gw", MaxUSD: 1, Scope: gateway.ScopeGlobal})
	page, err := e.clientPtr().Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if diff := gocmp.Diff([]string{"triage", "large", "small", "plain"}, ids); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	if m, err := e.clientPtr().Models.Get(context.Background(), "small"); err != nil || m.ID != "small" {
		t.Errorf("get small: %+v %v", m, err)
	}

	for _, tt := range []struct {
		name    string
		aliases []service.Alias
		budget  string
		want    string
	}{
		{"unknown alias", []service.Alias{{Name: "medium"}}, "", `unknown model alias "medium"`},
		{"embedding alias", []service.Alias{{Name: "embed"}}, "", `not a chat model`},
		{"alias shadowing an agent", []service.Alias{{Name: "triage"}}, "", `has the name of an agent`},
		{"listed twice", []service.Alias{{Name: "large"}, {Name: "large"}}, "", `listed twice`},
		{"fallback to itself", []service.Alias{{Name: "large", Fallbacks: []string{"large"}}}, "", `the alias itself`},
		{"embedding fallback", []service.Alias{{Name: "large", Fallbacks: []string{"embed"}}}, "", `not a chat model`},
		{"unknown budget", []service.Alias{{Name: "large"}}, "nightly", `budget "nightly" is not in the gateway`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := service.New(service.Config{
				Gateway: e.gw, Agents: e.runtime, Auth: service.Auth{Kind: service.AuthNone},
				Aliases: tt.aliases, AliasBudget: tt.budget,
			})
			var ce *service.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want a *ConfigError saying %q", err, tt.want)
			}
		})
	}
}

// TestDirectAliasThreadBudget: under a thread-scoped budget, requests of
// one X-Aid-Thread-Id share an account; one without is its own thread.
func TestDirectAliasThreadBudget(t *testing.T) {
	spent := gateway.Usage{InputTokens: 60, OutputTokens: 40, TotalTokens: 100}
	e := directEnv(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{{Text: "one", Usage: &spent}}, Loop: true},
		gateway.Budget{Name: "gw", MaxTotalTokens: 130, Scope: gateway.ScopeThread})
	body := `{"model":"small","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	if status, _, b := e.do(t, "POST", "/v1/chat/completions", body, "X-Aid-Thread-Id", "t1"); status != 200 {
		t.Fatalf("first call in t1: %d %s", status, b)
	}
	if status, _, b := e.do(t, "POST", "/v1/chat/completions", body, "X-Aid-Thread-Id", "t1"); status != 402 {
		t.Errorf("second call in t1 fit a budget that holds one: %d %s", status, b)
	}
	for range 3 {
		if status, _, b := e.do(t, "POST", "/v1/chat/completions", body); status != 200 {
			t.Errorf("a call without a thread: %d %s", status, b)
		}
	}
	var keys []string
	for _, a := range e.spend(t).ByAccount {
		keys = append(keys, a.Account.Key)
	}
	if diff := gocmp.Diff([]string{"t1"}, keys); diff != "" {
		t.Errorf("accounts kept (-want +got):\n%s", diff)
	}
}
