package anthropic_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/anthropic"
)

func ask(text string) gateway.Request {
	return gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: text}}, MaxOutputTokens: 64}
}

// TestGenerateSendsTheMessagesAPI checks the request a conversation with
// tools becomes, and the answer read back: the system prompt apart, tool
// calls as tool_use blocks, parallel tool results merged into one user
// turn ahead of its text, the tools' schemas, tool choice, the output
// schema, the bound and the stop sequences; the key in the Authorization
// header; text and tool calls, the finish reason and the usage with the
// cache's tokens a part of the input.
func TestGenerateSendsTheMessagesAPI(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":%q,
			"content":[%s,%s,%s],"stop_reason":"tool_use","stop_sequence":null,
			"usage":{"input_tokens":40,"output_tokens":9,"cache_read_input_tokens":100,"cache_creation_input_tokens":10}}`,
			sonnet, textBlock("Let me check both."), toolUse("toolu_2", "lookup_order", `{"id":"B-7"}`), toolUse("toolu_3", "now", `{}`)))
	})
	p := newProvider(t, srv.URL)
	req := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Be brief."},
			{Role: gateway.RoleUser, Content: "Where are A-42 and B-7?", Name: "ana"},
			{Role: gateway.RoleAssistant, Content: "Looking.", ToolCalls: []gateway.ToolCall{
				{ID: "toolu_0", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"A-42"}`)},
				{ID: "toolu_1", Name: "now"},
			}},
			{Role: gateway.RoleTool, ToolCallID: "toolu_0", Name: "lookup_order", Content: `{"status":"shipped"}`},
			{Role: gateway.RoleTool, ToolCallID: "toolu_1", Name: "now", Content: ""},
			{Role: gateway.RoleUser, Content: "And B-7?"},
			{Role: gateway.RoleSystem, Content: "Answer in French."},
		},
		Tools: []gateway.ToolDef{
			{Name: "lookup_order", Description: "Find an order.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)},
			{Name: "now"},
		},
		ToolChoice:      gateway.ToolChoice{Mode: gateway.ToolChoiceTool, Name: "lookup_order"},
		ResponseFormat:  &gateway.JSONSchema{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		MaxOutputTokens: 64,
		Stop:            []string{"END"},
	}
	res, err := p.Generate(t.Context(), spec(sonnet), req)
	if err != nil {
		t.Fatal(err)
	}
	want := gateway.Response{
		Text: "Let me check both.",
		ToolCalls: []gateway.ToolCall{
			{ID: "toolu_2", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"B-7"}`)},
			{ID: "toolu_3", Name: "now", Arguments: json.RawMessage(`{}`)},
		},
		FinishReason: gateway.FinishToolCalls,
		Model:        sonnet,
		Usage:        gateway.Usage{InputTokens: 150, CachedInputTokens: 100, CacheWrite5mInputTokens: 10, OutputTokens: 9, TotalTokens: 159},
	}
	if diff := gocmp.Diff(want, res); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	got := srv.recorded()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if r.Path != "/v1/messages" {
		t.Errorf("path %q, want /v1/messages", r.Path)
	}
	if a := r.Header.Get("Authorization"); a != "Bearer "+sentinel {
		t.Errorf("Authorization %q, want the key", a)
	}
	if v := r.Header.Get("Anthropic-Version"); v == "" {
		t.Error("no anthropic-version header")
	}
	wantBody := `{
		"model": "` + sonnet + `", "max_tokens": 64, "stop_sequences": ["END"],
		"system": [{"type":"text","text":"Be brief."},{"type":"text","text":"Answer in French."}],
		"messages": [
			{"role":"user","content":[{"type":"text","text":"Where are A-42 and B-7?"}]},
			{"role":"assistant","content":[
				{"type":"text","text":"Looking."},
				{"type":"tool_use","id":"toolu_0","name":"lookup_order","input":{"id":"A-42"}},
				{"type":"tool_use","id":"toolu_1","name":"now","input":{}}]},
			{"role":"user","content":[
				{"type":"tool_result","tool_use_id":"toolu_0","content":[{"type":"text","text":"{\"status\":\"shipped\"}"}]},
				{"type":"tool_result","tool_use_id":"toolu_1"},
				{"type":"text","text":"And B-7?"}]}
		],
		"tools": [
			{"name":"lookup_order","description":"Find an order.","input_schema":{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}},
			{"name":"now","input_schema":{"type":"object"}}
		],
		"tool_choice": {"type":"tool","name":"lookup_order"},
		"output_config": {"format":{"type":"json_schema","schema":{"type":"object","properties":{"city":{"type":"string"}}}}}
	}`
	var wb map[string]any
	if err := json.Unmarshal([]byte(wantBody), &wb); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(wb, r.Body); diff != "" {
		t.Errorf("request body (-want +got):\n%s\nraw: %s", diff, r.Raw)
	}
}

// TestToolChoiceAndFinish maps each tool choice mode and each stop reason.
func TestToolChoiceAndFinish(t *testing.T) {
	stops := map[string]gateway.FinishReason{
		"end_turn": gateway.FinishStop, "stop_sequence": gateway.FinishStop, "max_tokens": gateway.FinishLength,
		"model_context_window_exceeded": gateway.FinishLength, "tool_use": gateway.FinishToolCalls,
		"refusal": gateway.FinishContentFilter, "pause_turn": "pause_turn",
	}
	modes := map[gateway.ToolChoiceMode]string{gateway.ToolChoiceAuto: "auto", gateway.ToolChoiceNone: "none", gateway.ToolChoiceRequired: "any"}
	var stop string
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, message(sonnet, "["+textBlock("ok")+"]", stop, 3, 1))
	})
	p := newProvider(t, srv.URL)
	for s, want := range stops {
		stop = s
		res, err := p.Generate(t.Context(), spec(sonnet), ask("hi"))
		if err != nil || res.FinishReason != want {
			t.Errorf("stop_reason %q: finish %q, %v; want %q", s, res.FinishReason, err, want)
		}
	}
	stop = "end_turn"
	for mode, want := range modes {
		req := ask("hi")
		req.Tools = []gateway.ToolDef{{Name: "now"}}
		req.ToolChoice = gateway.ToolChoice{Mode: mode}
		if _, err := p.Generate(t.Context(), spec(sonnet), req); err != nil {
			t.Fatal(err)
		}
		got := srv.recorded()
		tc, _ := got[len(got)-1].Body["tool_choice"].(map[string]any)
		if tc["type"] != want {
			t.Errorf("tool choice %q sent as %v, want type %q", mode, tc, want)
		}
	}
}

// TestRefusesWhatItCannotSend fails before sending a request the API
// cannot take: arguments that are not an object, a tool message naming no
// call, a schema that is not an object, no message with content.
func TestRefusesWhatItCannotSend(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, message(sonnet, "["+textBlock("ok")+"]", "end_turn", 3, 1))
	})
	p := newProvider(t, srv.URL)
	for name, req := range map[string]gateway.Request{
		"arguments not an object": {Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "x"}, {Role: gateway.RoleAssistant, ToolCalls: []gateway.ToolCall{{ID: "t", Name: "n", Arguments: json.RawMessage(`[1]`)}}}}},
		"tool message without id": {Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "x"}, {Role: gateway.RoleTool, Content: "y"}}},
		"schema not an object":    {Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "x"}}, ResponseFormat: &gateway.JSONSchema{Name: "s", Schema: json.RawMessage(`"x"`)}},
		"tool schema not object":  {Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "x"}}, Tools: []gateway.ToolDef{{Name: "n", Parameters: json.RawMessage(`[]`)}}},
		"only a system prompt":    {Messages: []gateway.Message{{Role: gateway.RoleSystem, Content: "x"}}},
		"unknown role":            {Messages: []gateway.Message{{Role: "narrator", Content: "x"}}},
	} {
		req.MaxOutputTokens = 8
		_, err := p.Generate(t.Context(), spec(sonnet), req)
		var pe *gateway.ProviderError
		if !errors.As(err, &pe) || pe.Retryable {
			t.Errorf("%s: %v, want a non-retryable provider error", name, err)
		}
	}
	if n := len(srv.recorded()); n != 0 {
		t.Errorf("%d requests sent, want none", n)
	}
}

// TestErrorStatuses classifies the API's error answers: a rate limit, an
// overloaded service (529) and a server error are retryable, with the wait
// the service asked for; a bad request, a bad key, a forbidden call and an
// unknown model are not, and say why in the service's words.
func TestErrorStatuses(t *testing.T) {
	tests := []struct {
		status     int
		retryAfter string
		body       string
		retryable  bool
		wait       time.Duration
		msg        string
	}{
		{429, "7", apiError("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"), true, 7 * time.Second, "rate_limit_error: Number of request tokens"},
		{529, "", apiError("overloaded_error", "Overloaded"), true, 0, "overloaded_error: Overloaded"},
		{500, "", apiError("api_error", "Internal server error"), true, 0, "api_error: Internal server error"},
		{503, "", "<html>upstream connect error</html>", true, 0, "<html>upstream connect error</html>"},
		{400, "", apiError("invalid_request_error", "messages: at least one message is required"), false, 0, "invalid_request_error: messages: at least one message is required"},
		{401, "", apiError("authentication_error", "invalid x-api-key"), false, 0, "authentication_error: invalid x-api-key"},
		{403, "", apiError("permission_error", "Your API key does not have permission to use the specified resource."), false, 0, "permission_error: Your API key does not have permission"},
		{404, "", apiError("not_found_error", "model: claude-nope"), false, 0, "not_found_error: model: claude-nope"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				writeJSON(w, tt.status, tt.body)
			})
			p := newProvider(t, srv.URL)
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, err = p.Stream(t.Context(), spec(sonnet), ask("hi"))
				} else {
					_, err = p.Generate(t.Context(), spec(sonnet), ask("hi"))
				}
				var pe *gateway.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("stream %v: %v, want a *gateway.ProviderError", stream, err)
				}
				if pe.StatusCode != tt.status || pe.Retryable != tt.retryable || pe.RetryAfter != tt.wait || pe.Provider != "anthropic" || pe.Model != sonnet {
					t.Errorf("stream %v: %+v", stream, pe)
				}
				if !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("stream %v: %q does not say %q", stream, err, tt.msg)
				}
			}
		})
	}
}

// TestHungServer ends an attempt at its timeout, as a retryable timeout,
// whether the server never answers or stops in the middle of a stream; the
// caller's own cancellation passes through as itself.
func TestHungServer(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		if stream, _ := body["stream"].(bool); stream {
			s := startSSE(w)
			s.start(sonnet, 3)
			s.textStart(0)
			s.text(0, "Hel")
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	p := newProvider(t, srv.URL, func(c *anthropic.Config) { c.Timeout = 150 * time.Millisecond })
	_, err := p.Generate(t.Context(), spec(sonnet), ask("hi"))
	var pe *gateway.ProviderError
	if !errors.As(err, &pe) || !pe.Timeout || !pe.Retryable {
		t.Errorf("generate: %v, want a retryable timeout", err)
	}
	s, err := p.Stream(t.Context(), spec(sonnet), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var text string
	for {
		d, err := s.Next()
		if err != nil {
			if !errors.As(err, &pe) || !pe.Timeout || !pe.Retryable {
				t.Errorf("stream: %v, want a retryable timeout", err)
			}
			break
		}
		text += d.Text
	}
	if text != "Hel" {
		t.Errorf("stream gave %q before it hung, want Hel", text)
	}
	ctx, cancel := contextWithTimeout(t, 50*time.Millisecond)
	defer cancel()
	long := newProvider(t, srv.URL, func(c *anthropic.Config) { c.Timeout = time.Minute })
	if _, err := long.Generate(ctx, spec(sonnet), ask("hi")); !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Errorf("cancelled by the caller: %v, want the context's error", err)
	}
}

// TestBoundedAnswers reads no more than a bound of an answer that never
// ends: a 50 MB JSON body, and a stream whose one event is 50 MB long.
func TestBoundedAnswers(t *testing.T) {
	const huge = 50 << 20
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		chunk := strings.Repeat("a", 64<<10)
		if stream, _ := body["stream"].(bool); stream {
			s := startSSE(w)
			s.start(sonnet, 3)
			_, _ = io.WriteString(w, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`)
		} else {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"type":"message","content":[{"type":"text","text":"`)
		}
		for sent := 0; sent < huge; sent += len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
	})
	p := newProvider(t, srv.URL, func(c *anthropic.Config) { c.Timeout = 20 * time.Second })
	_, err := p.Generate(t.Context(), spec(sonnet), ask("hi"))
	var pe *gateway.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(err.Error(), "answer is longer than 8388608 bytes") {
		t.Errorf("generate: %v, want a non-retryable error about the length", err)
	}
	s, err := p.Stream(t.Context(), spec(sonnet), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		_, err := s.Next()
		if err == nil {
			continue
		}
		if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(err.Error(), "an event of the stream is longer than 1048576 bytes") {
			t.Errorf("stream: %v, want a non-retryable error about the event's length", err)
		}
		break
	}
}

// TestMalformedAnswers fails, without retrying, an answer that is not the
// API's JSON, and an event that is not.
func TestMalformedAnswers(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		if stream, _ := body["stream"].(bool); stream {
			s := startSSE(w)
			s.start(sonnet, 3)
			s.event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`)
			return
		}
		writeJSON(w, 200, `{"type":"message","content":[{"type":"text","text":"cut`)
	})
	p := newProvider(t, srv.URL)
	_, err := p.Generate(t.Context(), spec(sonnet), ask("hi"))
	var pe *gateway.ProviderError
	if !errors.As(err, &pe) || pe.Retryable {
		t.Errorf("generate: %v, want a non-retryable provider error", err)
	}
	s, err := p.Stream(t.Context(), spec(sonnet), ask("hi"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(); err != nil {
		t.Fatalf("message_start: %v", err)
	}
	if _, err := s.Next(); !errors.As(err, &pe) || pe.Retryable {
		t.Errorf("malformed event: %v, want a non-retryable provider error", err)
	}
}

// TestStreamErrorEvent ends a stream at an error event: overloaded is
// retryable, an invalid request is not, and both say what the service
// said.
func TestStreamErrorEvent(t *testing.T) {
	for typ, retryable := range map[string]bool{"overloaded_error": true, "invalid_request_error": false} {
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			s := startSSE(w)
			s.start(sonnet, 3)
			s.textStart(0)
			s.text(0, "Par")
			s.event("error", apiError(typ, "stopped: "+typ))
		})
		p := newProvider(t, srv.URL)
		s, err := p.Stream(t.Context(), spec(sonnet), ask("hi"))
		if err != nil {
			t.Fatal(err)
		}
		var text string
		for {
			d, err := s.Next()
			if err != nil {
				var pe *gateway.ProviderError
				if !errors.As(err, &pe) || pe.Retryable != retryable || !strings.Contains(err.Error(), "error event in the stream: "+typ+": stopped: "+typ) {
					t.Errorf("%s: %v, want a provider error, retryable %v", typ, err, retryable)
				}
				break
			}
			text += d.Text
		}
		s.Close()
		if text != "Par" {
			t.Errorf("%s: text %q before the error, want Par", typ, text)
		}
	}
}

// TestStreamToolCalls assembles parallel tool calls from their streamed
// pieces through the gateway: the text before them, each call's id, name
// and arguments (a call streamed without arguments has the empty object),
// the finish reason, and the usage from message_start and message_delta.
func TestStreamToolCalls(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		s := startSSE(w)
		s.start(sonnet, 120)
		s.event("ping", `{"type":"ping"}`)
		s.textStart(0)
		s.text(0, "Checking ")
		s.text(0, "both.")
		s.stop(0)
		s.toolStart(1, "toolu_a", "lookup_order")
		s.args(1, `{"id"`)
		s.args(1, `: "A-`)
		s.args(1, `42"}`)
		s.stop(1)
		s.toolStart(2, "toolu_b", "lookup_order")
		s.args(2, `{"id": "B-7"}`)
		s.stop(2)
		s.toolStart(3, "toolu_c", "now")
		s.stop(3)
		s.end("tool_use", 31)
	})
	g := newGateway(t, map[string]gateway.Provider{"claude": newProvider(t, srv.URL)}, spec(sonnet))
	req := ask("Where are A-42 and B-7?")
	req.Tools = []gateway.ToolDef{{Name: "lookup_order", Parameters: json.RawMessage(`{"type":"object"}`)}, {Name: "now"}}
	var pieces []string
	var res gateway.Result
	for c, err := range g.Stream(t.Context(), "large", req) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Text != "" {
			pieces = append(pieces, c.Text)
		}
		if c.Result != nil {
			res = *c.Result
		}
	}
	if strings.Join(pieces, "|") != "Checking |both." {
		t.Errorf("pieces %q", pieces)
	}
	want := []gateway.ToolCall{
		{ID: "toolu_a", Name: "lookup_order", Arguments: json.RawMessage(`{"id": "A-42"}`)},
		{ID: "toolu_b", Name: "lookup_order", Arguments: json.RawMessage(`{"id": "B-7"}`)},
		{ID: "toolu_c", Name: "now", Arguments: json.RawMessage(`{}`)},
	}
	if diff := gocmp.Diff(want, res.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if res.Text != "Checking both." || res.FinishReason != gateway.FinishToolCalls {
		t.Errorf("result %q, %q", res.Text, res.FinishReason)
	}
	if u := res.Usage; u.InputTokens != 120 || u.OutputTokens != 31 || u.Estimated {
		t.Errorf("usage %+v, want 120 in and 31 out as reported", u)
	}
	if got := srv.recorded()[0].Body["stream"]; got != true {
		t.Errorf("stream = %v, want true", got)
	}
}

// TestStreamCutIsNotAnAnswer: a stream that ends before message_delta says
// why the model stopped is a broken stream, not an answer.
func TestStreamCutIsNotAnAnswer(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		s := startSSE(w)
		s.start(sonnet, 3)
		s.textStart(0)
		s.text(0, "Par")
	})
	g := newGateway(t, map[string]gateway.Provider{"claude": newProvider(t, srv.URL)}, spec(sonnet))
	_, err := gateway.Collect(g.Stream(t.Context(), "large", ask("hi")))
	if err == nil || !strings.Contains(err.Error(), "stream ended before the model finished") {
		t.Errorf("cut stream: %v", err)
	}
}

// TestNoEmbeddings refuses an embedding model on the provider with the
// capability it lacks, in the gateway and in the adapter.
func TestNoEmbeddings(t *testing.T) {
	p := newProvider(t, "http://127.0.0.1:1")
	for _, c := range p.Capabilities() {
		if c == gateway.CapabilityEmbeddings || c == gateway.CapabilityVision {
			t.Errorf("claims %s", c)
		}
	}
	emb := gateway.ModelSpec{ID: "claude-embed", Provider: "claude", Kind: gateway.KindEmbedding, Dimensions: 8, Cost: gateway.CostProfile{InputPer1kUSD: 0.0001}}
	_, err := p.Embed(t.Context(), emb, []string{"x"})
	var mismatch *gateway.CapabilityMismatchError
	if !errors.As(err, &mismatch) || len(mismatch.MissingInProvider) != 1 || mismatch.MissingInProvider[0] != gateway.CapabilityEmbeddings {
		t.Errorf("embed: %v", err)
	}
	g, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "embed", Spec: emb}},
		Providers: map[string]gateway.Provider{"claude": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Embed(t.Context(), "embed", []string{"x"})
	if !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "embeddings") {
		t.Errorf("gateway embed: %v, want a capability mismatch naming embeddings", err)
	}
}

// TestMessagesAPIRules sends what a run that fell back from an
// openai-compatible model holds to a server that enforces the Messages
// API's rules (messagesRules): client tools whose parameters are {} or
// say no type, white-space text from the system, the user and the model
// before its tool calls, the other provider's tool call ids, a failed call
// and parallel_tool_calls: false. The server accepts it, and it reads:
// object schemas, no blank text (the user's turns merged), the ids mapped
// alike in each tool_use and its tool_result, two ids never to one, the
// failed result flagged is_error and parallel tool use disabled.
func TestMessagesAPIRules(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, message(sonnet, "["+textBlock("Cold, at noon.")+"]", "end_turn", 30, 4))
	})
	p := newProvider(t, srv.URL)
	single := false
	req := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Be brief."},
			{Role: gateway.RoleSystem, Content: " \n"},
			{Role: gateway.RoleUser, Content: "Weather and time in Oslo?"},
			{Role: gateway.RoleUser, Content: "\n"},
			{Role: gateway.RoleAssistant, Content: "\n\n", ToolCalls: []gateway.ToolCall{
				{ID: "functions.get_weather:0", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Oslo"}`)},
				{ID: "functions.get_weather:1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Bergen"}`)},
				{ID: "call_ok-1", Name: "get_time"},
			}},
			{Role: gateway.RoleTool, ToolCallID: "functions.get_weather:0", Name: "get_weather", Content: "error: tool get_weather failed: timed out", Failed: true},
			{Role: gateway.RoleTool, ToolCallID: "functions.get_weather:1", Name: "get_weather", Content: "  "},
			{Role: gateway.RoleTool, ToolCallID: "call_ok-1", Name: "get_time", Content: "12:00"},
		},
		Tools: []gateway.ToolDef{
			{Name: "get_weather", Parameters: json.RawMessage(`{"properties":{"city":{"type":"string"}},"required":["city"]}`)},
			{Name: "get_time", Parameters: json.RawMessage(`{}`)},
		},
		ParallelToolCalls: &single,
		MaxOutputTokens:   64,
	}
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			var s gateway.DeltaStream
			if s, err = p.Stream(t.Context(), spec(sonnet), req); err == nil {
				s.Close()
			}
		} else {
			_, err = p.Generate(t.Context(), spec(sonnet), req)
		}
		if err != nil {
			t.Fatalf("stream %v: the server refused the request: %v", stream, err)
		}
	}
	got := srv.recorded()[0]
	var body struct {
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Tools      []map[string]any `json:"tools"`
		ToolChoice map[string]any   `json:"tool_choice"`
	}
	if err := json.Unmarshal([]byte(got.Raw), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.System) != 1 || len(body.Messages) != 3 || len(body.Messages[0].Content) != 1 || len(body.Messages[1].Content) != 3 {
		t.Fatalf("blank text is still sent, or the turns do not merge: %s", got.Raw)
	}
	uses, results := body.Messages[1].Content, body.Messages[2].Content
	for i := range uses {
		if uses[i]["id"] != results[i]["tool_use_id"] {
			t.Errorf("call %d is sent as %v and its result as %v", i, uses[i]["id"], results[i]["tool_use_id"])
		}
	}
	if uses[0]["id"] == uses[1]["id"] || uses[2]["id"] != "call_ok-1" {
		t.Errorf("ids %v, %v, %v: want two distinct mapped ids and an accepted one as it is", uses[0]["id"], uses[1]["id"], uses[2]["id"])
	}
	if results[0]["is_error"] != true || results[1]["is_error"] != nil || results[2]["is_error"] != nil {
		t.Errorf("is_error %v, %v, %v; want true for the failed call only", results[0]["is_error"], results[1]["is_error"], results[2]["is_error"])
	}
	if _, ok := results[1]["content"]; ok {
		t.Errorf("a blank tool result is sent with content: %v", results[1])
	}
	if want := (map[string]any{"type": "auto", "disable_parallel_tool_use": true}); !gocmp.Equal(body.ToolChoice, want) {
		t.Errorf("tool_choice %v, want %v", body.ToolChoice, want)
	}
	wantSchemas := []string{`{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}`, `{"type":"object"}`}
	for i, tool := range body.Tools {
		b, _ := json.Marshal(tool["input_schema"])
		if string(b) != wantSchemas[i] {
			t.Errorf("tool %d input_schema %s, want %s", i, b, wantSchemas[i])
		}
	}
	// The same call is sent under the same id at the next step.
	if again := srv.recorded()[1].Raw; !strings.Contains(again, fmt.Sprintf("%q", uses[0]["id"])) {
		t.Errorf("the streamed request sends call 0 under another id: %s", again)
	}

	// A schema of another type is refused before anything is sent.
	req.Tools = []gateway.ToolDef{{Name: "bad", Parameters: json.RawMessage(`{"type":"string"}`)}}
	if _, err := p.Generate(t.Context(), spec(sonnet), req); err == nil || !strings.Contains(err.Error(), "takes an object schema") {
		t.Errorf("a string schema: %v", err)
	}
	if n := len(srv.recorded()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}
