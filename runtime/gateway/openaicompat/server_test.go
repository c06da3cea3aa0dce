package openaicompat_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeServer is an httptest server speaking the OpenAI wire format. Each
// test gives it a handler; it records every request.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	Path string
	Auth string
	Body map[string]any
}

// handler answers request number n (from 0) with body already decoded.
type handler func(w http.ResponseWriter, r *http.Request, body map[string]any, n int)

func newServer(t *testing.T, h handler) *fakeServer {
	t.Helper()
	s := &fakeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		s.mu.Lock()
		n := len(s.requests)
		s.requests = append(s.requests, recorded{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: body})
		s.mu.Unlock()
		h(w, r, body, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeServer) recorded() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.requests...)
}

func (s *fakeServer) url() string { return s.URL + "/v1" }

func writeJSON(w http.ResponseWriter, status int, v string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, v)
}

func completion(model, message, finish string, prompt, completionTokens int) string {
	return fmt.Sprintf(`{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":%q,
		"choices":[{"index":0,"message":%s,"finish_reason":%q,"logprobs":null}],
		"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		model, message, finish, prompt, completionTokens, prompt+completionTokens)
}

func textMessage(text string) string {
	return fmt.Sprintf(`{"role":"assistant","content":%q,"refusal":null}`, text)
}

func apiError(status int, typ, message string) string {
	return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":null}}`, message, typ)
}

// sse writes server-sent events, flushing after each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	f.Flush()
	return &sse{w: w, f: f}
}

func (s *sse) data(v string) {
	_, _ = io.WriteString(s.w, "data: "+strings.ReplaceAll(v, "\n", "")+"\n\n")
	s.f.Flush()
}

func chunk(model, delta string, finish string) string {
	fr := "null"
	if finish != "" {
		fr = fmt.Sprintf("%q", finish)
	}
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`, model, delta, fr)
}

func usageChunk(model string, prompt, completionTokens int) string {
	return fmt.Sprintf(`{"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		model, prompt, completionTokens, prompt+completionTokens)
}

func textDelta(s string) string { return fmt.Sprintf(`{"content":%q}`, s) }

func toolDelta(index int, id, name, args string) string {
	head := ""
	if id != "" {
		head = fmt.Sprintf(`"id":%q,"type":"function",`, id)
	}
	fn := fmt.Sprintf(`"arguments":%q`, args)
	if name != "" {
		fn = fmt.Sprintf(`"name":%q,`, name) + fn
	}
	return fmt.Sprintf(`{"tool_calls":[{"index":%d,%s"function":{%s}}]}`, index, head, fn)
}
