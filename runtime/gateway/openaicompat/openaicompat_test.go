package openaicompat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// sentinel is the API key of every test: it must reach the server's
// Authorization header and nothing else.
const sentinel = "sk-SENTINEL-d0n0tl3ak-0123456789abcdef"

const (
	large = "gpt-4o-2024-08-06"
	small = "gpt-4o-mini-2024-07-18"
)

// largeCachedPer1k is the cached-input price of the "large" alias; "small"
// sets none, so that its cached tokens cost the input price.
var largeCachedPer1k = 0.00125

var chatCaps = []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming}

type env struct {
	g     *gateway.Gateway
	srv   *fakeServer
	spans *tracetest.SpanRecorder
	logs  *bytes.Buffer
}

func setup(t *testing.T, h handler, edit ...func(*openaicompat.Config)) env {
	t.Helper()
	srv := newServer(t, h)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := openaicompat.Config{
		BaseURL:    srv.url(),
		APIKeyEnv:  "AID_TEST_OPENAI_KEY",
		Timeout:    2 * time.Second,
		HTTPClient: &http.Client{Transport: tr},
		LookupEnv: func(name string) (string, bool) {
			if name == "AID_TEST_OPENAI_KEY" {
				return sentinel, true
			}
			return "", false
		},
	}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := openaicompat.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	logs := &bytes.Buffer{}
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{
			{Alias: "large", Spec: gateway.ModelSpec{ID: large, Provider: "openai", MaxOutputTokens: 256,
				Cost: gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01, CachedInputPer1kUSD: &largeCachedPer1k}, Capabilities: chatCaps}},
			{Alias: "small", Spec: gateway.ModelSpec{ID: small, Provider: "openai", MaxOutputTokens: 128,
				Cost: gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006}, Capabilities: chatCaps}},
			{Alias: "embed", Spec: gateway.ModelSpec{ID: "text-embedding-3-small", Provider: "openai", Kind: gateway.KindEmbedding, Dimensions: 3,
				Cost: gateway.CostProfile{InputPer1kUSD: 0.00002}}},
		},
		Providers: map[string]gateway.Provider{"openai": p},
		Budgets:   []gateway.Budget{{Name: "nightly", MaxUSD: 5, Scope: gateway.ScopeRun}},
		Tracer:    tp.Tracer("test"),
		Logger:    slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Retry:     gateway.RetryPolicy{MaxAttempts: 2, BaseDelay: 5 * time.Millisecond, MaxDelay: 10 * time.Millisecond, MaxRetryAfter: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	return env{g: g, srv: srv, spans: sr, logs: logs}
}

func ask(text string) gateway.Request {
	return gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: text}}}
}

func modelOf(body map[string]any) string { s, _ := body["model"].(string); return s }

func TestGenerateSendsTheWireFormat(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, completion(large, textMessage("Paris"), "stop", 42, 2))
	})
	temp := 0.2
	req := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Be brief."},
			{Role: gateway.RoleUser, Content: "Where is order A-42?", Name: "ana"},
			{Role: gateway.RoleAssistant, ToolCalls: []gateway.ToolCall{{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"A-42"}`)}}},
			{Role: gateway.RoleTool, ToolCallID: "call_1", Content: `{"status":"shipped"}`},
		},
		Tools:           []gateway.ToolDef{{Name: "lookup_order", Description: "Find an order.", Parameters: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}},
		ToolChoice:      gateway.ToolChoice{Mode: gateway.ToolChoiceTool, Name: "lookup_order"},
		ResponseFormat:  &gateway.JSONSchema{Name: "answer", Schema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`), Strict: true},
		MaxOutputTokens: 64,
		Temperature:     &temp,
		Stop:            []string{"END"},
		// One call per answer.
		ParallelToolCalls: new(bool),
	}
	res, err := e.g.Generate(t.Context(), "large", req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Paris" || res.Usage != (gateway.Usage{InputTokens: 42, OutputTokens: 2, TotalTokens: 44}) || res.FinishReason != gateway.FinishStop {
		t.Errorf("result %+v", res)
	}
	if want := 42*0.0025/1000 + 2*0.01/1000; res.CostUSD < want-1e-12 || res.CostUSD > want+1e-9 {
		t.Errorf("cost %v, want %v", res.CostUSD, want)
	}
	reqs := e.srv.recorded()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	if reqs[0].Path != "/v1/chat/completions" || reqs[0].Auth != "Bearer "+sentinel {
		t.Errorf("request to %s with auth %q", reqs[0].Path, reqs[0].Auth)
	}
	want := map[string]any{
		"model": large,
		"messages": []any{
			map[string]any{"role": "system", "content": "Be brief."},
			map[string]any{"role": "user", "content": "Where is order A-42?", "name": "ana"},
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "lookup_order", "arguments": `{"id":"A-42"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"status":"shipped"}`},
		},
		"tools": []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "lookup_order", "description": "Find an order.",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}},
		}}},
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "lookup_order"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": "answer", "strict": true,
			"schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		}},
		"max_completion_tokens": float64(64),
		"temperature":           0.2,
		"stop":                  []any{"END"},
		"parallel_tool_calls":   false,
	}
	if diff := gocmp.Diff(want, reqs[0].Body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
}

func TestGenerateToolCalls(t *testing.T) {
	msg := `{"role":"assistant","content":null,"tool_calls":[
		{"id":"call_1","type":"function","function":{"name":"lookup_order","arguments":"{\"id\":\"A-42\"}"}},
		{"id":"call_2","type":"function","function":{"name":"refund","arguments":"{}"}}]}`
	e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, completion(large, msg, "tool_calls", 80, 20))
	})
	req := ask("Refund A-42")
	req.Tools = []gateway.ToolDef{{Name: "lookup_order"}, {Name: "refund"}}
	req.ToolChoice = gateway.ToolChoice{Mode: gateway.ToolChoiceRequired}
	res, err := e.g.Generate(t.Context(), "large", req)
	if err != nil {
		t.Fatal(err)
	}
	want := []gateway.ToolCall{
		{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"A-42"}`)},
		{ID: "call_2", Name: "refund", Arguments: json.RawMessage(`{}`)},
	}
	if diff := gocmp.Diff(want, res.ToolCalls); diff != "" || res.FinishReason != gateway.FinishToolCalls {
		t.Errorf("tool calls (-want +got):\n%s finish %q", diff, res.FinishReason)
	}
	if got := e.srv.recorded()[0].Body["tool_choice"]; got != "required" {
		t.Errorf("tool_choice %v", got)
	}
}

func TestStreamTextAndToolCallDeltas(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		s := startSSE(w)
		s.data(chunk(large, `{"role":"assistant","content":""}`, ""))
		s.data(chunk(large, textDelta("Let me "), ""))
		s.data(chunk(large, textDelta("check."), ""))
		s.data(chunk(large, toolDelta(0, "call_1", "lookup_order", ""), ""))
		s.data(chunk(large, toolDelta(0, "", "", `{"id":`), ""))
		s.data(chunk(large, toolDelta(0, "", "", `"A-42"}`), ""))
		s.data(chunk(large, toolDelta(1, "call_2", "refund", "{}"), ""))
		s.data(chunk(large, `{}`, "tool_calls"))
		s.data(usageChunk(large, 30, 12))
		s.data("[DONE]")
	})
	req := ask("Refund A-42")
	req.Tools = []gateway.ToolDef{{Name: "lookup_order"}, {Name: "refund"}}
	var text strings.Builder
	var fragments int
	var res *gateway.Result
	for c, err := range e.g.Stream(t.Context(), "large", req, gateway.WithBudget("nightly", "r1")) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(c.Text)
		fragments += len(c.ToolCalls)
		if c.Result != nil {
			res = c.Result
		}
	}
	if text.String() != "Let me check." || fragments != 4 {
		t.Errorf("streamed %q and %d tool-call fragments", text.String(), fragments)
	}
	if res == nil {
		t.Fatal("no result")
	}
	wantCalls := []gateway.ToolCall{
		{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"A-42"}`)},
		{ID: "call_2", Name: "refund", Arguments: json.RawMessage(`{}`)},
	}
	if diff := gocmp.Diff(wantCalls, res.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
	if res.Usage != (gateway.Usage{InputTokens: 30, OutputTokens: 12, TotalTokens: 42}) || res.FinishReason != gateway.FinishToolCalls {
		t.Errorf("usage %+v finish %q: the final chunk's usage was not used", res.Usage, res.FinishReason)
	}
	body := e.srv.recorded()[0].Body
	if body["stream"] != true || !gocmp.Equal(body["stream_options"], map[string]any{"include_usage": true}) {
		t.Errorf("stream %v, stream_options %v", body["stream"], body["stream_options"])
	}
}

func TestFailures(t *testing.T) {
	type want struct {
		text      string // the answer, when the call succeeds
		status    int    // the ProviderError status, when it fails
		timeout   bool
		retryable bool
		requests  []string // models asked, in order
		minTime   time.Duration
	}
	tests := []struct {
		name    string
		timeout time.Duration
		h       handler
		want    want
	}{
		{
			name: "429 with Retry-After seconds is waited for",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if n == 0 {
					w.Header().Set("Retry-After", "1")
					writeJSON(w, 429, apiError(429, "rate_limit_exceeded", "slow down"))
					return
				}
				writeJSON(w, 200, completion(modelOf(body), textMessage("after the wait"), "stop", 5, 3))
			},
			want: want{text: "after the wait", requests: []string{large, large}, minTime: 900 * time.Millisecond},
		},
		{
			name: "429 asking for longer than the policy allows falls back at once",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if modelOf(body) == large {
					w.Header().Set("Retry-After", "120")
					writeJSON(w, 429, apiError(429, "rate_limit_exceeded", "come back later"))
					return
				}
				writeJSON(w, 200, completion(modelOf(body), textMessage("small answered"), "stop", 5, 3))
			},
			want: want{text: "small answered", requests: []string{large, small}},
		},
		{
			name: "429 whose error is a bare string is still retried",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if n == 0 {
					w.Header().Set("Retry-After-Ms", "1")
					writeJSON(w, 429, `{"error":"too many requests"}`)
					return
				}
				writeJSON(w, 200, completion(modelOf(body), textMessage("after the wait"), "stop", 5, 3))
			},
			want: want{text: "after the wait", requests: []string{large, large}},
		},
		{
			name: "503 with an HTML body keeps its status",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(503)
				_, _ = io.WriteString(w, "<html><body><h1>503 Service Unavailable</h1></body></html>")
			},
			want: want{status: 503, retryable: true, requests: []string{large, large, small, small}},
		},
		{
			name: "500 is retried then falls back",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if modelOf(body) == large {
					writeJSON(w, 500, apiError(500, "server_error", "oops"))
					return
				}
				writeJSON(w, 200, completion(modelOf(body), textMessage("small answered"), "stop", 5, 3))
			},
			want: want{text: "small answered", requests: []string{large, large, small}},
		},
		{
			name: "every alias returns 500",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				writeJSON(w, 503, apiError(503, "server_error", "down"))
			},
			want: want{status: 503, retryable: true, requests: []string{large, large, small, small}},
		},
		{
			name:    "hung upstream times out",
			timeout: 100 * time.Millisecond,
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				<-r.Context().Done()
			},
			want: want{timeout: true, retryable: true, requests: []string{large, large, small, small}},
		},
		{
			name: "malformed JSON is not retried but falls back",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				writeJSON(w, 200, `{"id":"x","choices":[{"index":0,"message":`)
			},
			want: want{requests: []string{large, small}},
		},
		{
			name: "400 is not retried",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				writeJSON(w, 400, apiError(400, "invalid_request_error", "bad"))
			},
			want: want{status: 400, requests: []string{large, small}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.h, func(c *openaicompat.Config) {
				if tt.timeout > 0 {
					c.Timeout = tt.timeout
				}
			})
			start := time.Now()
			res, err := e.g.Generate(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small"))
			elapsed := time.Since(start)
			if tt.want.text != "" {
				if err != nil {
					t.Fatalf("Generate: %v", err)
				}
				if res.Text != tt.want.text {
					t.Errorf("text %q, want %q", res.Text, tt.want.text)
				}
			} else {
				var pe *gateway.ProviderError
				if !errors.As(err, &pe) {
					t.Fatalf("Generate: %v, want a *ProviderError", err)
				}
				if pe.StatusCode != tt.want.status || pe.Timeout != tt.want.timeout || pe.Retryable != tt.want.retryable {
					t.Errorf("provider error %+v, want status %d timeout %v retryable %v", pe, tt.want.status, tt.want.timeout, tt.want.retryable)
				}
			}
			var asked []string
			for _, r := range e.srv.recorded() {
				asked = append(asked, modelOf(r.Body))
			}
			if diff := gocmp.Diff(tt.want.requests, asked); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if elapsed < tt.want.minTime {
				t.Errorf("took %v, want at least %v", elapsed, tt.want.minTime)
			}
			if elapsed > 10*time.Second {
				t.Errorf("took %v", elapsed)
			}
		})
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name      string
		timeout   time.Duration
		h         handler
		wantText  string
		wantOK    bool
		wantErr   func(*gateway.ProviderError) bool
		wantCalls int
	}{
		{
			name: "cut mid-way after text",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				s := startSSE(w)
				s.data(chunk(large, textDelta("The answer is "), ""))
				s.data(chunk(large, textDelta("forty"), ""))
			},
			wantText: "The answer is forty",
			wantErr: func(pe *gateway.ProviderError) bool {
				return strings.Contains(pe.Error(), "stream ended before the model finished")
			},
			wantCalls: 1,
		},
		{
			name: "connection dropped mid-way",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				s := startSSE(w)
				s.data(chunk(large, textDelta("The answer"), ""))
				conn, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					panic(err)
				}
				_, _ = buf.WriteString("3\r\nda")
				_ = buf.Flush()
				_ = conn.Close()
			},
			wantText:  "The answer",
			wantErr:   func(pe *gateway.ProviderError) bool { return pe.Retryable },
			wantCalls: 1,
		},
		{
			name: "cut before any text is retried",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				s := startSSE(w)
				if n == 0 {
					s.data(chunk(large, `{"role":"assistant","content":""}`, ""))
					return
				}
				s.data(chunk(large, textDelta("second try"), ""))
				s.data(chunk(large, `{}`, "stop"))
				s.data("[DONE]")
			},
			wantText:  "second try",
			wantOK:    true,
			wantCalls: 2,
		},
		{
			name:    "upstream hangs mid-way",
			timeout: 150 * time.Millisecond,
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				s := startSSE(w)
				s.data(chunk(large, textDelta("Thinking"), ""))
				<-r.Context().Done()
			},
			wantText:  "Thinking",
			wantErr:   func(pe *gateway.ProviderError) bool { return pe.Timeout },
			wantCalls: 1,
		},
		{
			name: "error event in the stream",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				s := startSSE(w)
				s.data(chunk(large, textDelta("Hm"), ""))
				s.data(`{"error":{"message":"overloaded","type":"server_error"}}`)
			},
			wantText:  "Hm",
			wantErr:   func(pe *gateway.ProviderError) bool { return strings.Contains(pe.Error(), "overloaded") },
			wantCalls: 1,
		},
		{
			name: "refused before streaming falls back",
			h: func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if modelOf(body) == large {
					writeJSON(w, 400, apiError(400, "invalid_request_error", "no"))
					return
				}
				s := startSSE(w)
				s.data(chunk(small, textDelta("small streams"), ""))
				s.data(chunk(small, `{}`, "stop"))
				s.data("[DONE]")
			},
			wantText:  "small streams",
			wantOK:    true,
			wantCalls: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, tt.h, func(c *openaicompat.Config) {
				if tt.timeout > 0 {
					c.Timeout = tt.timeout
				}
			})
			var text strings.Builder
			var res *gateway.Result
			var err error
			for c, e := range e.g.Stream(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small"), gateway.WithBudget("nightly", "r")) {
				if e != nil {
					err = e
					break
				}
				text.WriteString(c.Text)
				if c.Result != nil {
					res = c.Result
				}
			}
			if text.String() != tt.wantText {
				t.Errorf("streamed %q, want %q", text.String(), tt.wantText)
			}
			if tt.wantOK {
				if err != nil || res == nil {
					t.Fatalf("stream: %v", err)
				}
			} else {
				var pe *gateway.ProviderError
				if !errors.As(err, &pe) || !tt.wantErr(pe) {
					t.Fatalf("stream error %v, not the one wanted", err)
				}
			}
			if got := len(e.srv.recorded()); got != tt.wantCalls {
				t.Errorf("%d requests, want %d", got, tt.wantCalls)
			}
			s, _ := e.g.Spend(t.Context())
			if s.Calls != 1 && (tt.wantOK || tt.wantText != "") {
				t.Errorf("%d calls settled, want 1", s.Calls)
			}
			for _, a := range s.ByAccount {
				if a.Reserved != (gateway.Amount{}) {
					t.Errorf("still held: %+v", a.Reserved)
				}
			}
		})
	}
}

func TestAPIKeyNeverLeaks(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		if r.URL.Path == "/v1/embeddings" {
			writeJSON(w, 500, apiError(500, "server_error", "key "+sentinel+" broke the server"))
			return
		}
		if body["stream"] == true {
			s := startSSE(w)
			s.data(chunk(large, textDelta("x"), ""))
			s.data(`{"error":{"message":"stream died for ` + sentinel + `"}}`)
			return
		}
		writeJSON(w, 401, apiError(401, "invalid_request_error", "Incorrect API key provided: "+sentinel+"."))
	})
	var errs []string
	_, err := e.g.Generate(t.Context(), "large", ask("hi"), gateway.WithFallbacks("small"))
	errs = append(errs, fmt.Sprint(err), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
	for _, err := range e.g.Stream(t.Context(), "large", ask("hi")) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	_, err = e.g.Embed(t.Context(), "embed", []string{"a"})
	errs = append(errs, fmt.Sprint(err))
	for _, r := range e.srv.recorded() {
		if r.Auth != "Bearer "+sentinel {
			t.Fatalf("the server did not get the key: %q", r.Auth)
		}
	}
	for _, s := range errs {
		if strings.Contains(s, sentinel) || strings.Contains(s, sentinel[len(sentinel)-12:]) {
			t.Errorf("error shows the key: %s", s)
		}
		if !strings.Contains(s, "[redacted]") && !strings.Contains(s, "<nil>") && strings.Contains(s, "API key provided") {
			t.Errorf("echoed key not redacted: %s", s)
		}
	}
	if strings.Contains(e.logs.String(), sentinel) {
		t.Errorf("logs show the key:\n%s", e.logs.String())
	}
	if e.logs.Len() == 0 {
		t.Error("nothing was logged, so the log check proves nothing")
	}
	spans := e.spans.Ended()
	if len(spans) == 0 {
		t.Fatal("no spans")
	}
	for _, s := range spans {
		dump := fmt.Sprintf("%s %v %v", s.Name(), s.Attributes(), s.Status())
		for _, ev := range s.Events() {
			dump += fmt.Sprintf(" %s %v", ev.Name, ev.Attributes)
		}
		if strings.Contains(dump, sentinel) {
			t.Errorf("span shows the key: %s", dump)
		}
	}
}

func TestAPIKeyFromTheNamedVariable(t *testing.T) {
	t.Setenv("AID_TEST_KEY_VAR", sentinel)
	t.Setenv("OPENAI_API_KEY", "sk-from-the-default-variable")
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		writeJSON(w, 200, completion(large, textMessage("ok"), "stop", 1, 1))
	})
	spec := gateway.ModelSpec{ID: large, MaxOutputTokens: 10}

	p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.url(), APIKeyEnv: "AID_TEST_KEY_VAR"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Generate(t.Context(), spec, ask("hi")); err != nil {
		t.Fatal(err)
	}
	keyless, err := openaicompat.New(openaicompat.Config{BaseURL: srv.url()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keyless.Generate(t.Context(), spec, ask("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := srv.recorded()
	if reqs[0].Auth != "Bearer "+sentinel {
		t.Errorf("auth %q, want the named variable's key", reqs[0].Auth)
	}
	if reqs[1].Auth != "" {
		t.Errorf("a provider configured without a key sent %q", reqs[1].Auth)
	}

	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("provider", "p", p)
	for _, s := range []string{fmt.Sprintf("%v %+v %#v", p, p, p), fmt.Sprintf("%+v", struct{ P *openaicompat.Provider }{p}), logged.String()} {
		if strings.Contains(s, sentinel) {
			t.Errorf("printing the provider shows the key: %s", s)
		}
	}

	_, err = openaicompat.New(openaicompat.Config{BaseURL: srv.url(), APIKeyEnv: "AID_TEST_UNSET_VARIABLE"})
	if err == nil || !strings.Contains(err.Error(), "AID_TEST_UNSET_VARIABLE") {
		t.Errorf("New with an unset key variable: %v", err)
	}
}

func TestEmbedBatches(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		inputs := body["input"].([]any)
		var data []string
		for i := len(inputs) - 1; i >= 0; i-- { // out of order on purpose
			v := float64(len(inputs[i].(string)))
			data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":[%v,0.5,-1]}`, i, v))
		}
		writeJSON(w, 200, fmt.Sprintf(`{"object":"list","model":"text-embedding-3-small","data":[%s],"usage":{"prompt_tokens":%d,"total_tokens":%d}}`,
			strings.Join(data, ","), 10*len(inputs), 10*len(inputs)))
	}, func(c *openaicompat.Config) { c.EmbedBatchSize = 2; c.SendDimensions = true })
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee"}
	res, err := e.g.Embed(t.Context(), "embed", texts)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range res.Vectors {
		if want := []float32{float32(len(texts[i])), 0.5, -1}; !gocmp.Equal(want, v) {
			t.Errorf("vector %d = %v, want %v", i, v, want)
		}
	}
	if res.Usage.InputTokens != 50 {
		t.Errorf("usage %+v, want the sum over batches", res.Usage)
	}
	reqs := e.srv.recorded()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 batches", len(reqs))
	}
	for _, r := range reqs {
		if r.Path != "/v1/embeddings" || r.Body["encoding_format"] != "float" || r.Body["dimensions"] != float64(3) {
			t.Errorf("embedding request %s %v", r.Path, r.Body)
		}
	}
}

func TestNoGoroutineOutlivesAStream(t *testing.T) {
	e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		s := startSSE(w)
		for i := range 1000 {
			select {
			case <-r.Context().Done():
				return
			default:
			}
			s.data(chunk(large, textDelta(fmt.Sprint(i, " ")), ""))
			time.Sleep(time.Millisecond)
		}
	}, func(c *openaicompat.Config) { c.Timeout = time.Minute }) // only closing the stream may end it
	before := runtime.NumGoroutine()
	for range 5 {
		n := 0
		for c, err := range e.g.Stream(t.Context(), "large", ask("count")) {
			if err != nil {
				t.Fatal(err)
			}
			if c.Text != "" {
				n++
			}
			if n == 3 {
				break
			}
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	for range e.g.Stream(ctx, "large", ask("count")) {
	}
	cancel()
	s, _ := e.g.Spend(t.Context())
	if s.Calls != 6 {
		t.Errorf("%d streams settled, want 6", s.Calls)
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+2 {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after abandoning streams:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestCachedTokensArePricedApart has the upstream report
// prompt_tokens_details.cached_tokens, in an answer and in a stream's usage
// chunk: the gateway reads them as a part of the prompt, prices them at the
// alias's cached price (the input price where none is set), and records
// them in the ledger. A count above the prompt's is billed uncached.
func TestCachedTokensArePricedApart(t *testing.T) {
	const prompt, completionTokens = 2006, 300
	tests := []struct {
		name     string
		alias    string
		cached   int
		wantNano int64
		wantUse  int64 // the cached tokens charged
	}{
		// 86 × 2,500 + 1,920 × 1,250 + 300 × 10,000 nanodollars.
		{"cached price", "large", 1920, 215_000 + 2_400_000 + 3_000_000, 1920},
		// 2,006 × 150 + 300 × 600: no cached price, so the input price.
		{"no cached price", "small", 1920, 300_900 + 180_000, 1920},
		{"none cached", "large", 0, 5_015_000 + 3_000_000, 0},
		{"more cached than the prompt", "large", 5000, 5_015_000 + 3_000_000, 0},
	}
	for _, stream := range []bool{false, true} {
		for _, tt := range tests {
			name := tt.name + map[bool]string{false: " answer", true: " stream"}[stream]
			t.Run(name, func(t *testing.T) {
				model := map[string]string{"large": large, "small": small}[tt.alias]
				use := fmt.Sprintf(`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,
					"prompt_tokens_details":{"cached_tokens":%d,"audio_tokens":0},
					"completion_tokens_details":{"reasoning_tokens":0}}`, prompt, completionTokens, prompt+completionTokens, tt.cached)
				e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
					if !stream {
						writeJSON(w, 200, fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%q,
							"choices":[{"index":0,"message":%s,"finish_reason":"stop","logprobs":null}],%s}`, model, textMessage("Paris"), use))
						return
					}
					s := startSSE(w)
					s.data(chunk(model, textDelta("Paris"), ""))
					s.data(chunk(model, `{}`, "stop"))
					s.data(fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[],%s}`, model, use))
					s.data("[DONE]")
				})
				var res gateway.Result
				var err error
				if stream {
					res, err = gateway.Collect(e.g.Stream(t.Context(), tt.alias, ask("Capital of France?"), gateway.WithBudget("nightly", "r1")))
				} else {
					res, err = e.g.Generate(t.Context(), tt.alias, ask("Capital of France?"), gateway.WithBudget("nightly", "r1"))
				}
				if err != nil {
					t.Fatal(err)
				}
				wantUsage := gateway.Usage{InputTokens: prompt, CachedInputTokens: tt.wantUse, OutputTokens: completionTokens, TotalTokens: prompt + completionTokens}
				if res.Text != "Paris" || res.Usage != wantUsage {
					t.Errorf("text %q usage %+v, want %+v", res.Text, res.Usage, wantUsage)
				}
				if got := int64(res.CostUSD*1e9 + 0.5); got != tt.wantNano {
					t.Errorf("cost %d nanodollars, want %d", got, tt.wantNano)
				}
				s, err := e.g.Spend(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				want := gateway.Amount{NanoUSD: tt.wantNano, Tokens: prompt + completionTokens, CachedInputTokens: tt.wantUse}
				if s.Total != want || len(s.ByAccount) != 1 || s.ByAccount[0].Spent != want {
					t.Errorf("ledger %+v, want %+v", s, want)
				}
			})
		}
	}
}

// TestRedirectsAreNotFollowedElsewhere: a redirect within the upstream's
// origin is followed; one to another origin gets no request carrying the
// key, and the call fails with the redirect's status, not retried. An
// answer longer than any model writes is refused rather than held.
func TestRedirectsAreNotFollowedElsewhere(t *testing.T) {
	var elsewhere []recorded
	other := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		elsewhere = append(elsewhere, recorded{Path: r.URL.Path, Auth: r.Header.Get("Authorization")})
		writeJSON(w, 200, completion(large, textMessage("followed"), "stop", 1, 1))
	})
	// A client with a policy of its own (here a timeout) sends through
	// http.Client; one without, through its transport: both behave alike.
	var pe *gateway.ProviderError
	for _, client := range []string{"transport", "client"} {
		withClient := func(c *openaicompat.Config) {
			if client == "client" {
				c.HTTPClient = &http.Client{Timeout: time.Minute}
			}
		}
		e := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			switch r.URL.Path {
			case "/v1/moved/chat/completions":
				writeJSON(w, 200, completion(large, textMessage("followed"), "stop", 1, 1))
			case "/v1/chat/completions":
				http.Redirect(w, r, "/v1/moved/chat/completions", http.StatusTemporaryRedirect)
			}
		}, withClient)
		if res, err := e.g.Generate(t.Context(), "large", ask("hi")); err != nil || res.Text != "followed" {
			t.Errorf("%s: redirect within the origin: %+v %v", client, res, err)
		}
		if got := e.srv.recorded(); len(got) != 2 || got[1].Auth != "Bearer "+sentinel || got[1].Body["model"] != large {
			t.Errorf("%s: redirect within the origin: requests %+v", client, got)
		}
		e = setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
			http.Redirect(w, r, other.url()+"/chat/completions", http.StatusTemporaryRedirect)
		}, withClient)
		_, err := e.g.Generate(t.Context(), "large", ask("hi"))
		if !errors.As(err, &pe) || pe.StatusCode != http.StatusTemporaryRedirect || pe.Retryable {
			t.Errorf("%s: redirect to another origin: %v, want a provider error with status 307, not retryable", client, err)
		}
		if n := len(e.srv.recorded()); n != 1 {
			t.Errorf("%s: redirect to another origin: the upstream got %d requests, want 1", client, n)
		}
	}
	if len(elsewhere) != 0 {
		t.Errorf("the redirect was followed to another origin: %+v", elsewhere)
	}

	huge := setup(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model":"m","choices":[{"message":{"content":"`)
		chunk := strings.Repeat("a", 1<<20)
		for range 9 {
			if _, err := io.WriteString(w, chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"}}]}`)
	}, func(c *openaicompat.Config) { c.Timeout = time.Minute })
	_, err := huge.g.Generate(t.Context(), "large", ask("hi"))
	if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("a 9 MiB answer: %v, want a provider error saying it is too long", err)
	}
}
