package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/anthropic"
)

// sentinel is the API key of every test: it must reach the server's
// headers and nothing else.
const sentinel = "sk-ant-SENTINEL-d0n0tl3ak-0123456789abcdef"

const (
	sonnet = "claude-sonnet-4-5-20250929"
	haiku  = "claude-haiku-4-5-20251001"
)

// fakeServer is an httptest server speaking the Messages API. Each test
// gives it a handler; it records every request.
type fakeServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	Path   string
	Header http.Header
	Body   map[string]any
	Raw    string
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
		s.requests = append(s.requests, recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Raw: string(raw)})
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

// keyEnv is the environment of every provider: the key in AID_TEST_KEY.
func keyEnv(name string) (string, bool) {
	if name == "AID_TEST_KEY" {
		return sentinel, true
	}
	return "", false
}

// newProvider is a provider of the server's API with the sentinel key.
func newProvider(t *testing.T, url string, edit ...func(*anthropic.Config)) *anthropic.Provider {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := anthropic.Config{BaseURL: url, APIKeyEnv: "AID_TEST_KEY", Timeout: 2 * time.Second, HTTPClient: &http.Client{Transport: tr}, LookupEnv: keyEnv}
	for _, e := range edit {
		e(&cfg)
	}
	p, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var chatCaps = []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming}

// spec is a chat model of provider "claude".
func spec(id string) gateway.ModelSpec {
	return gateway.ModelSpec{ID: id, Provider: "claude", ContextWindow: 200000, MaxOutputTokens: 256,
		Cost: gateway.CostProfile{InputPer1kUSD: 0.003, OutputPer1kUSD: 0.015}, Capabilities: chatCaps}
}

func writeJSON(w http.ResponseWriter, status int, v string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, v)
}

// message is a Messages API answer with the content blocks content (a
// JSON array), the stop reason and the usage.
func message(model, content, stop string, in, out int) string {
	return fmt.Sprintf(`{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":%s,"stop_reason":%q,"stop_sequence":null,
		"usage":{"input_tokens":%d,"output_tokens":%d,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}`, model, content, stop, in, out)
}

func textBlock(s string) string { return fmt.Sprintf(`{"type":"text","text":%q}`, s) }

func toolUse(id, name, input string) string {
	return fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, id, name, input)
}

func apiError(typ, msg string) string {
	return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q}}`, typ, msg)
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

func (s *sse) event(name, data string) {
	_, _ = io.WriteString(s.w, "event: "+name+"\ndata: "+strings.ReplaceAll(data, "\n", "")+"\n\n")
	s.f.Flush()
}

func (s *sse) start(model string, in int) {
	s.event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"usage":{"input_tokens":%d,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}}`, model, in))
}

func (s *sse) textStart(i int) {
	s.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
}

func (s *sse) text(i int, t string) {
	s.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%q}}`, i, t))
}

func (s *sse) toolStart(i int, id, name string) {
	s.event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`, i, id, name))
}

func (s *sse) args(i int, piece string) {
	s.event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%q}}`, i, piece))
}

func (s *sse) stop(i int) {
	s.event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
}

func (s *sse) end(reason string, out int) {
	s.event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, reason, out))
	s.event("message_stop", `{"type":"message_stop"}`)
}
