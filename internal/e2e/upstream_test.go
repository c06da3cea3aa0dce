package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
)

// upstreamKey is the API key the desk variant's service reads from
// AID_E2E_UPSTREAM_KEY and must send to the upstream.
const upstreamKey = "sk-e2e-upstream-key"

// Upstream usage per call, and the price of the model in testdata/e2e/desk.cue
// (0.5 and 1.5 USD per 1k tokens): each call costs 0.1 + 0.06 USD.
const (
	upstreamPromptTokens     = 200
	upstreamCompletionTokens = 40
	upstreamCallUSD          = 0.16
)

// upstreamAnswer is the concierge's final answer; the upstream gives it only
// after it has seen a help-centre passage from refunds.md and the order row
// among the tool observations.
// clientTool is the function tool a Responses client offers the
// concierge (openai/responses.mjs), and clientToolResult what the client
// answers it.
const (
	clientTool       = "notify_customer"
	clientToolResult = "notified by the client"
)

const upstreamAnswer = "Order AB-123456 was delivered; you can ask for a refund within 30 days of delivery (docs/refunds.md#Refunds)."

// upstreamServer is a scripted OpenAI-compatible chat-completions server:
// the first call of a conversation asks for a knowledge-base search and an
// order lookup, the second answers from their observations. Whatever it
// finds wrong in a request (the key, streaming, missing tools, missing
// observations) it answers with an error and remembers, so that a test sees
// why.
type upstreamServer struct {
	*httptest.Server
	mu       sync.Mutex
	calls    int
	problems []string
}

func newUpstream() *upstreamServer {
	u := &upstreamServer{}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	return u
}

// stats returns the number of calls and the problems seen so far.
func (u *upstreamServer) stats() (int, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls, slices.Clone(u.problems)
}

func (u *upstreamServer) fail(w http.ResponseWriter, status int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	u.mu.Lock()
	u.problems = append(u.problems, msg)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": "e2e_upstream"}})
}

type upstreamRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// text is a message content, a string or an array of text parts.
func text(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (u *upstreamServer) serve(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		u.fail(w, http.StatusNotFound, "unexpected %s %s", r.Method, r.URL.Path)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+upstreamKey {
		u.fail(w, http.StatusUnauthorized, "authorization header %q is not the configured key", got)
		return
	}
	var req upstreamRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		u.fail(w, http.StatusBadRequest, "decoding the request: %v", err)
		return
	}
	if req.Model != "upstream-chat-2024-01-01" {
		u.fail(w, http.StatusBadRequest, "model %q is not the pinned id", req.Model)
		return
	}
	if req.Stream {
		u.fail(w, http.StatusBadRequest, "the scripted upstream does not stream")
		return
	}
	var tools []string
	for _, t := range req.Tools {
		tools = append(tools, t.Function.Name)
	}
	for _, want := range []string{"lookup_order", "search_kb"} {
		if !slices.Contains(tools, want) {
			u.fail(w, http.StatusBadRequest, "tool %s not offered (tools: %v)", want, tools)
			return
		}
	}
	var observations []string
	for _, m := range req.Messages {
		if m.Role == "tool" {
			observations = append(observations, text(m.Content))
		}
	}
	if len(observations) == 0 {
		writeCompletion(w, map[string]any{
			"role": "assistant", "content": nil,
			"tool_calls": []any{
				map[string]any{"id": "call_kb", "type": "function", "function": map[string]any{"name": "search_kb", "arguments": `{"query":"how long after delivery can I ask for a refund"}`}},
				map[string]any{"id": "call_order", "type": "function", "function": map[string]any{"name": "lookup_order", "arguments": `{"order_id":"AB-123456"}`}},
			},
		}, "tool_calls")
		return
	}
	if slices.Contains(tools, clientTool) {
		// A Responses client's function tool beside the agent's own: the
		// model calls it once the agent's tools have answered, and
		// answers once the client has sent its result.
		sent := ""
		for _, m := range req.Messages {
			if m.Role == "tool" && m.ToolCallID == "call_notify" {
				sent = text(m.Content)
			}
		}
		if sent == "" {
			writeCompletion(w, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
				map[string]any{"id": "call_notify", "type": "function", "function": map[string]any{"name": clientTool, "arguments": `{"text":"refund window: 30 days"}`}},
			}}, "tool_calls")
			return
		}
		if sent != clientToolResult {
			u.fail(w, http.StatusBadRequest, "the client tool's result is %q, not %q", sent, clientToolResult)
			return
		}
	}
	all := strings.Join(observations, "\n")
	for _, want := range []string{"refunds.md", "30 days", `"delivered"`} {
		if !strings.Contains(all, want) {
			u.fail(w, http.StatusBadRequest, "the observations lack %q:\n%s", want, all)
			return
		}
	}
	writeCompletion(w, map[string]any{"role": "assistant", "content": upstreamAnswer}, "stop")
}

func writeCompletion(w http.ResponseWriter, msg map[string]any, finish string) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-upstream", "object": "chat.completion", "created": 1, "model": "upstream-chat-2024-01-01",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": upstreamPromptTokens, "completion_tokens": upstreamCompletionTokens, "total_tokens": upstreamPromptTokens + upstreamCompletionTokens},
	})
}
