package anthropic_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
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
		if problem := messagesRules(body); problem != "" {
			writeJSON(w, http.StatusBadRequest, apiError("invalid_request_error", problem))
			return
		}
		h(w, r, body, n)
	}))
	t.Cleanup(s.Close)
	return s
}

// toolIDPattern is the API's pattern of a tool_use id.
var toolIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// messagesRules returns the first of the Messages API's documented rules
// a request breaks, in the API's words, or "": every tool's input_schema
// is an object schema; every text block, in the system prompt, a turn or
// a tool result, has a character that is not white space; every tool_use
// id matches toolIDPattern, and every tool_result answers a tool_use of
// the assistant turn before it; no sampling parameter of an older API
// version (temperature, top_p) is sent.
func messagesRules(body map[string]any) string {
	if body == nil {
		return ""
	}
	for _, f := range []string{"temperature", "top_p"} {
		if _, ok := body[f]; ok {
			return f + ": Extra inputs are not permitted"
		}
	}
	tools, _ := body["tools"].([]any)
	for i, t := range tools {
		schema, _ := t.(map[string]any)["input_schema"].(map[string]any)
		if schema["type"] != "object" {
			return fmt.Sprintf("tools.%d.custom.input_schema.type: Input should be 'object'", i)
		}
	}
	blank := func(b map[string]any) bool {
		text, _ := b["text"].(string)
		return b["type"] == "text" && strings.TrimSpace(text) == ""
	}
	system, _ := body["system"].([]any)
	for _, b := range system {
		if blank(b.(map[string]any)) {
			return "system: text content blocks must contain non-whitespace text"
		}
	}
	msgs, _ := body["messages"].([]any)
	var offered map[string]bool // the tool_use ids of the assistant turn before
	for i, m := range msgs {
		m := m.(map[string]any)
		content, _ := m["content"].([]any)
		uses := map[string]bool{}
		for j, b := range content {
			b := b.(map[string]any)
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			if blank(b) {
				return "messages: text content blocks must contain non-whitespace text"
			}
			switch b["type"] {
			case "tool_use":
				id, _ := b["id"].(string)
				if !toolIDPattern.MatchString(id) {
					return at + ".tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
				}
				uses[id] = true
			case "tool_result":
				id, _ := b["tool_use_id"].(string)
				if !toolIDPattern.MatchString(id) {
					return at + ".tool_result.tool_use_id: String should match pattern '^[a-zA-Z0-9_-]+$'"
				}
				if !offered[id] {
					return fmt.Sprintf("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", at, id)
				}
				inner, _ := b["content"].([]any)
				for _, c := range inner {
					if blank(c.(map[string]any)) {
						return "messages: text content blocks must contain non-whitespace text"
					}
				}
			}
		}
		offered = uses
	}
	return ""
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
