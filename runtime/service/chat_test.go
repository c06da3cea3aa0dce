package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestChatCompletionOpenAIClient(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("Paris is the capital.")}}}})
	var resp *http.Response
	cc, err := e.clientPtr().Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are a pirate."),
			openai.UserMessage("Hi"),
			openai.AssistantMessage("Hello! What can I do?"),
			openai.UserMessage("What is the capital of France?"),
		},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Choices[0].Message.Content; got != "Paris is the capital." {
		t.Errorf("content = %q", got)
	}
	if cc.Model != "triage" || cc.Object != "chat.completion" || cc.Choices[0].FinishReason != "stop" {
		t.Errorf("model %q object %q finish %q", cc.Model, cc.Object, cc.Choices[0].FinishReason)
	}
	// The usage is the run's, which is what the ledger charged.
	sp := e.spend(t)
	if cc.Usage.TotalTokens == 0 || cc.Usage.TotalTokens != sp.Total.Tokens || sp.Calls != 1 {
		t.Errorf("usage %+v, ledger %+v", cc.Usage, sp)
	}
	runID := resp.Header.Get("X-Aid-Run-Id")
	if !strings.HasPrefix(runID, "run_") || cc.ID != "chatcmpl-"+runID {
		t.Errorf("run id header %q, completion id %q", runID, cc.ID)
	}
	if got := resp.Header.Get("X-Aid-Ignored-System-Messages"); got != "1" {
		t.Errorf("ignored system messages header = %q", got)
	}
	// The mapping: the system message is left out, the earlier turns are
	// the thread, the last user message is the input.
	reqs := e.fake.Requests()
	var roles []string
	for _, m := range reqs[0].Messages {
		roles = append(roles, string(m.Role)+":"+m.Content)
	}
	want := []string{"system:Answer.", "user:Hi", "assistant:Hello! What can I do?", "user:What is the capital of France?"}
	if strings.Join(roles, "|") != strings.Join(want, "|") {
		t.Errorf("messages sent to the model:\n got %q\nwant %q", roles, want)
	}
}

func TestChatCompletionEntryAgentWhenModelEmpty(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("ok")}}}})
	status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var cc struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &cc)
	if cc.Model != "triage" {
		t.Errorf("model = %q", cc.Model)
	}
	if in := e.fake.Requests()[0].Messages[1].Content; in != "ab" {
		t.Errorf("input = %q, want the text parts joined", in)
	}
}

func TestChatCompletionStreamOpenAIClient(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("Streamed answer here.")}}}})
	stream := e.clientPtr().Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "triage",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	var contents []string
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) == 1 && ch.Choices[0].Delta.Content != "" {
			contents = append(contents, ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Streamed answer here." || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("accumulated %+v", acc.ChatCompletion)
	}
	if acc.Model != "triage" || acc.Usage.TotalTokens == 0 || acc.Usage.TotalTokens != e.spend(t).Total.Tokens {
		t.Errorf("model %q usage %+v ledger %+v", acc.Model, acc.Usage, e.spend(t).Total)
	}
	// The answer arrives as the model writes it, word by word, not in one
	// piece at the run's end.
	if d := cmp.Diff([]string{"Streamed ", "answer ", "here."}, contents); d != "" {
		t.Errorf("content chunks (-want +got):\n%s", d)
	}
	// The same conversation without streaming answers the same text.
	e = newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("Streamed answer here.")}}}})
	cc, err := e.clientPtr().Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go")},
	})
	if err != nil || cc.Choices[0].Message.Content != strings.Join(contents, "") {
		t.Errorf("non-stream answer %+v, %v; streamed %q", cc, err, strings.Join(contents, ""))
	}
}

// TestChatCompletionCachedTokens: an agent's chat completion reports its
// run's cached prompt tokens in the one usage shape every chat completion
// has (an exposed alias's too, TestDirectAliasAnswersThroughTheGateway),
// streamed or not.
func TestChatCompletionCachedTokens(t *testing.T) {
	usage := gateway.Usage{InputTokens: 40, CachedInputTokens: 32, OutputTokens: 2, TotalTokens: 42}
	steps := func() fake.Config {
		return fake.Config{Agents: map[string][]fake.Step{"triage": {{Text: "Paris.", Usage: &usage}}}}
	}
	params := openai.ChatCompletionNewParams{Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Capital of France?")}}
	cc, err := newEnv(t, options{fake: steps()}).clientPtr().Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if u := cc.Usage; u.PromptTokens != 40 || u.PromptTokensDetails.CachedTokens != 32 || u.CompletionTokens != 2 || u.TotalTokens != 42 {
		t.Errorf("usage %+v", u)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := newEnv(t, options{fake: steps()}).clientPtr().Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if u := acc.Usage; u.PromptTokens != 40 || u.PromptTokensDetails.CachedTokens != 32 || u.TotalTokens != 42 {
		t.Errorf("streamed usage %+v", u)
	}
}

// TestChatCompletionStreamPreambleAndDelegate: a delegate's answer is an
// observation, not content; a preamble before a tool call is content, set
// apart from the answer by a blank line.
func TestChatCompletionStreamPreambleAndDelegate(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{
			"triage":   {{Text: "Let me ask.", ToolCalls: []gateway.ToolCall{call("d", "delegate_to_research", `{"input":"find it"}`)}}, answer("It is found.")},
			"research": {answer("secret research notes")},
		}},
		agents: []agents.Agent{
			{Name: "triage", Model: "large", Delegates: []string{"research"}},
			{Name: "research", Model: "large"},
		},
	})
	status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","stream":true,"messages":[{"role":"user","content":"q"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	if got := streamedContent(t, body); got != "Let me ask.\n\nIt is found." {
		t.Errorf("content %q\n%s", got, body)
	}
}

func TestChatCompletionStreamWithoutUsage(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("x")}}}})
	status, hdr, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","stream":true,"messages":[{"role":"user","content":"q"}]}`)
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d type %q", status, hdr.Get("Content-Type"))
	}
	s := string(body)
	if !strings.HasSuffix(s, "data: [DONE]\n\n") || strings.Contains(s, `"usage"`) {
		t.Errorf("stream:\n%s", s)
	}
}

func TestChatCompletionErrors(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("x")}}}})
	tests := []struct {
		name, body  string
		status      int
		code, param string
	}{
		{"not json", `{"model":`, 400, service.CodeInvalidJSON, ""},
		{"trailing data", `{"model":"triage","messages":[{"role":"user","content":"q"}]} {}`, 400, service.CodeInvalidJSON, ""},
		{"no messages", `{"model":"triage","messages":[]}`, 400, service.CodeInvalidRequest, "messages"},
		{"last not user", `{"model":"triage","messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`, 400, service.CodeInvalidRequest, "messages"},
		{"unknown role", `{"model":"triage","messages":[{"role":"function","content":"q"},{"role":"user","content":"q"}]}`, 400, service.CodeInvalidRequest, "messages[0].role"},
		{"tool without id", `{"model":"triage","messages":[{"role":"tool","content":"q"},{"role":"user","content":"q"}]}`, 400, service.CodeInvalidRequest, "messages[0].tool_call_id"},
		{"bad tool arguments", `{"model":"triage","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{"}}]},{"role":"user","content":"q"}]}`, 400, service.CodeInvalidRequest, "messages[0].tool_calls[0].function.arguments"},
		{"image part", `{"model":"triage","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400, service.CodeUnsupportedParameter, "messages[0].content"},
		{"client tools", `{"model":"triage","tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"q"}]}`, 400, service.CodeUnsupportedParameter, "tools"},
		{"n", `{"model":"triage","n":2,"messages":[{"role":"user","content":"q"}]}`, 400, service.CodeUnsupportedParameter, "n"},
		{"tool_choice required", `{"model":"triage","tool_choice":"required","messages":[{"role":"user","content":"q"}]}`, 400, service.CodeUnsupportedParameter, "tool_choice"},
		{"json schema format", `{"model":"triage","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"q"}]}`, 400, service.CodeUnsupportedParameter, "response_format"},
		{"unknown agent", `{"model":"nobody","messages":[{"role":"user","content":"q"}]}`, 404, service.CodeModelNotFound, "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, hdr, body := e.do(t, "POST", "/v1/chat/completions", tt.body)
			code, _, param := servicetest.APIError(t, body)
			if status != tt.status || code != tt.code || param != tt.param {
				t.Errorf("got %d %s param %q, want %d %s param %q: %s", status, code, param, tt.status, tt.code, tt.param, body)
			}
			if hdr.Get("X-Should-Retry") != "false" {
				t.Errorf("X-Should-Retry = %q", hdr.Get("X-Should-Retry"))
			}
		})
	}
	if n := e.fake.Calls(); n != 0 {
		t.Errorf("refused requests reached the provider %d times", n)
	}
	// Sampling parameters are accepted, not applied.
	status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","temperature":0.3,"max_tokens":5,"tool_choice":"auto","response_format":{"type":"text"},"messages":[{"role":"user","content":"q"}]}`)
	if status != 200 {
		t.Errorf("sampling parameters: %d %s", status, body)
	}
}

func TestChatCompletionUnknownAgentOpenAIError(t *testing.T) {
	e := newEnv(t, options{})
	_, err := e.clientPtr().Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "ghost", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("q")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != service.CodeModelNotFound || oe.Param != "model" || oe.Type != service.TypeNotFound {
		t.Fatalf("err = %v", err)
	}
}

func TestChatCompletionBudgetExceeded(t *testing.T) {
	// A run budget far below one call's worst case: the gateway refuses
	// the first call before it is made.
	budget := gateway.Budget{Name: "tight", MaxUSD: 0.000001, Scope: gateway.ScopeRun}
	e := newEnv(t, options{
		fake:    fake.Config{Agents: map[string][]fake.Step{"triage": {answer("x")}}},
		agents:  []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Budget: "tight"}},
		budgets: []gateway.Budget{budget},
	})
	// The SDK's default retries are on: the answer must tell it not to.
	c := e.client(option.WithMaxRetries(2))
	cp := &c
	var resp *http.Response
	_, err := cp.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("q")},
	}, option.WithResponseInto(&resp))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusPaymentRequired || oe.Code != service.CodeBudgetExceeded || oe.Type != service.TypeQuota {
		t.Fatalf("err = %v", err)
	}
	if e.fake.Calls() != 0 || e.spend(t).Calls != 0 {
		t.Errorf("provider calls %d, ledger %+v", e.fake.Calls(), e.spend(t))
	}
	var body struct {
		Aid struct {
			RunID  string `json:"run_id"`
			Status string `json:"status"`
		} `json:"aid"`
	}
	if err := json.Unmarshal([]byte(oe.RawJSON()), &body); err != nil {
		t.Fatal(err)
	}
	raw := oe.Response
	if raw == nil || raw.Header.Get("X-Aid-Run-Id") == "" {
		t.Fatal("no run id header on the error")
	}
	rec, err := e.runtime.Store().LoadRun(context.Background(), raw.Header.Get("X-Aid-Run-Id"))
	if err != nil || rec.Status != agents.StatusBudgetExceeded {
		t.Errorf("stored run %+v, %v", rec.Status, err)
	}
	// One request, despite two retries allowed.
	if got := strings.Count(e.logs.String(), `"route":"POST /v1/chat/completions"`); got != 1 {
		t.Errorf("%d requests logged, want 1 (no retry)", got)
	}
}

// TestUserMemoryNeedsAUser: an agent that keeps memory per user cannot run
// for nobody. Without user (chat) or user_id (runs) the answer is a 400
// naming the field, not a 500: the client's request is what is missing.
func TestUserMemoryNeedsAUser(t *testing.T) {
	e := newEnv(t, options{
		fake:   fake.Config{Agents: map[string][]fake.Step{"triage": {answer("hello")}}},
		memory: map[string]agents.MemoryStore{"mem": agents.NewInMemoryMemory()},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Memory: &agents.Memory{User: &agents.StoredMemory{Store: "mem"}}}},
	})
	for _, tt := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/agents/triage/runs", `{"input":"hi"}`},
	} {
		status, _, body := e.do(t, "POST", tt.path, tt.body)
		var eb struct {
			Error struct {
				Code, Param, Message string
			}
		}
		if err := json.Unmarshal(body, &eb); err != nil {
			t.Fatalf("%s: %s", tt.path, body)
		}
		if status != http.StatusBadRequest || eb.Error.Code != service.CodeInvalidRequest || eb.Error.Param != "user" || !strings.Contains(eb.Error.Message, "user_id") {
			t.Errorf("%s without a user: status %d %s", tt.path, status, body)
		}
	}
	// With a user the run goes.
	if status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"user":"u1","messages":[{"role":"user","content":"hi"}]}`); status != http.StatusOK {
		t.Errorf("with a user: status %d %s", status, body)
	}
}

// TestChatCompletionStreamFailsMidAnswer: a provider breaking after part of
// the answer was sent ends the stream with an error chunk, which the client
// reports, rather than a finish chunk that would pass the part as whole.
func TestChatCompletionStreamFailsMidAnswer(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {{Text: "Half an answer", Err: errors.New("connection reset")}}}}})
	stream := e.clientPtr().Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go")},
	})
	var content string
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) == 1 {
			content += ch.Choices[0].Delta.Content
			if ch.Choices[0].FinishReason != "" {
				t.Fatalf("finish chunk %+v", ch)
			}
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "error") || content != "Half an answer" {
		t.Fatalf("err %v, content %q", err, content)
	}
	if h := e.spend(t); h.Calls != 1 {
		t.Errorf("%d settled calls, want the broken stream settled", h.Calls)
	}
}

// TestChatCompletionToolMessagesChecked refuses conversations an OpenAI
// model refuses: a tool message that answers no call of the assistant
// message before it, or answers one twice, and an assistant's calls left
// unanswered when the next user or assistant message comes. The refusal is
// a 400 naming the message, never a run that the provider then fails.
func TestChatCompletionToolMessagesChecked(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("x")}}}})
	const (
		u   = `{"role":"user","content":"q"}`
		a   = `{"role":"assistant","content":"a"}`
		a1  = `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		a12 = `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]}`
		t1  = `{"role":"tool","tool_call_id":"c1","content":"r1"}`
		t2  = `{"role":"tool","tool_call_id":"c2","content":"r2"}`
		sys = `{"role":"system","content":"s"}`
	)
	msgs := func(ms ...string) string {
		return `{"model":"triage","messages":[` + strings.Join(ms, ",") + `]}`
	}
	for _, tt := range []struct {
		name, body, param, want string
	}{
		{"orphan tool message", msgs(u, t1, u), "messages[1]", `tool_call_id "c1" answers none`},
		{"tool message after a plain answer", msgs(u, a, t1, u), "messages[2]", "answers none"},
		{"mismatched id", msgs(u, a1, t2, u), "messages[2]", `tool_call_id "c2" is not a call of the assistant message messages[1] (its calls: c1)`},
		{"answered twice", msgs(u, a1, t1, t1, u), "messages[3]", `tool call "c1" is answered twice`},
		{"unanswered before the input", msgs(u, a12, t1, u), "messages[1]", "unanswered: c2"},
		{"unanswered before an assistant message", msgs(u, a1, a, u), "messages[1]", "unanswered: c1"},
		{"unanswered before a user message", msgs(u, a1, u, t1, u), "messages[1]", "unanswered: c1"},
		{"tool message without content", msgs(u, a1, `{"role":"tool","tool_call_id":"c1","content":null}`, u), "messages[2].content", "needs content"},
		{"one id twice in a message", msgs(u, `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}`, t1, u), "messages[1].tool_calls[1]", `"c1" appears twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := e.do(t, "POST", "/v1/chat/completions", tt.body)
			code, typ, param := servicetest.APIError(t, body)
			if status != 400 || code != service.CodeInvalidRequest || typ != service.TypeInvalidRequest || param != tt.param || !strings.Contains(errMessage(t, body), tt.want) {
				t.Errorf("got %d %s param %q: %s; want 400 param %q saying %q", status, code, param, body, tt.param, tt.want)
			}
		})
	}
	// The runs API checks its history the same way.
	status, _, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"q","history":[`+u+`,`+a1+`]}`)
	if _, _, param := servicetest.APIError(t, body); status != 400 || param != "history[1]" {
		t.Errorf("runs history with an unanswered call: %d %s", status, body)
	}
	if n := e.fake.Calls(); n != 0 {
		t.Fatalf("refused conversations reached the provider %d times", n)
	}
	// Answers in any order, with a system message between, are a thread.
	status, _, body = e.do(t, "POST", "/v1/chat/completions", msgs(u, a12, t2, sys, t1, a, u))
	if status != 200 {
		t.Fatalf("a consistent thread: %d %s", status, body)
	}
}

// TestChatCompletionOneContentRule: a chat completion's content is the same
// streamed or not — the triage agent's sentence before its handoff, a
// blank line, then the answer; and before a pause's message, what was said
// before it.
func TestChatCompletionOneContentRule(t *testing.T) {
	handoff := func(approval agents.Approval) options {
		return options{
			fake: fake.Config{Agents: map[string][]fake.Step{
				"triage":  {{Text: "Let me pass you to billing.", ToolCalls: []gateway.ToolCall{call("t", "transfer_to_billing", `{}`)}}},
				"billing": {{Text: "I will refund it.", ToolCalls: []gateway.ToolCall{call("r", "refund", `{"order":"A1"}`)}}, answer("Refunded.")},
			}},
			agents: []agents.Agent{
				{Name: "triage", Model: "large", Handoffs: []string{"billing"}},
				{Name: "billing", Model: "large", Tools: []string{"refund"}},
			},
			tools: []agents.Tool{{Name: "refund", Description: "Refund an order.", Input: refundSchema, Effects: agents.EffectsWrite, Approval: approval}},
			impls: map[string]agents.Implementation{"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })},
		}
	}
	const req = `{"model":"triage","messages":[{"role":"user","content":"refund A1"}]`
	runID := regexp.MustCompile(`run_[0-9a-f]+`)
	for _, tc := range []struct {
		approval agents.Approval
		want     string
	}{
		{agents.ApprovalNever, "Let me pass you to billing.\n\nI will refund it.\n\nRefunded."},
		{agents.ApprovalAlways, "Let me pass you to billing.\n\nI will refund it.\n\nRun run_X is paused: tool refund waits"},
	} {
		_, _, body := newEnv(t, handoff(tc.approval)).do(t, "POST", "/v1/chat/completions", req+`,"stream":true}`)
		stream := runID.ReplaceAllString(streamedContent(t, body), "run_X")
		_, _, body = newEnv(t, handoff(tc.approval)).do(t, "POST", "/v1/chat/completions", req+`}`)
		var cc struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &cc); err != nil || len(cc.Choices) != 1 {
			t.Fatalf("non-streamed: %v %s", err, body)
		}
		if !strings.HasPrefix(stream, tc.want) {
			t.Errorf("approval %s: streamed content %q, want it to start %q", tc.approval, stream, tc.want)
		}
		if got := runID.ReplaceAllString(cc.Choices[0].Message.Content, "run_X"); got != stream {
			t.Errorf("approval %s: non-streamed content %q\nstreamed %q", tc.approval, got, stream)
		}
	}
}

// streamedContent is the content a streamed chat completion's chunks carry,
// put together.
func streamedContent(t *testing.T, body []byte) string {
	t.Helper()
	var content strings.Builder
	for _, ev := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if len(ch.Choices) == 1 {
			content.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	return content.String()
}
