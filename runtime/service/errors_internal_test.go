package service

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/anthropic"
)

// TestWriteJSONLength checks that an answer goes with its length, however
// long, that a buffer is not shared between answers, and that a value JSON
// cannot hold is a whole 500 answer rather than half a 200.
func TestWriteJSONLength(t *testing.T) {
	long := map[string]string{"text": strings.Repeat("é", 100_000)}
	for _, v := range []any{map[string]int{"n": 1}, long, map[string]int{"m": 2}} {
		rec := httptest.NewRecorder()
		writeJSON(rec, http.StatusOK, v)
		want, _ := json.Marshal(v)
		body := rec.Body.String()
		if rec.Code != 200 || strings.TrimSuffix(body, "\n") != string(want) || rec.Header().Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Fatalf("%d, Content-Length %q for %d bytes, body %.80q", rec.Code, rec.Header().Get("Content-Length"), len(body), body)
		}
	}
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "req_1")
	writeJSON(rec, http.StatusOK, map[string]float64{"cost": math.NaN()})
	var e struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Error.Code != CodeServer || e.Error.Message != "internal error (request req_1)" ||
		rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) {
		t.Fatalf("NaN: %d %q", rec.Code, rec.Body)
	}
}

// TestProviderFailuresNamed calls a real adapter (anthropic) against a
// server that answers with more than the adapter reads, an overloaded
// error event, an overloaded error answer and a body that is not JSON, and
// checks what the service's caller is told: what happened, never "could
// not be reached", and nothing of the adapter's text (its byte bound, the
// server's address).
func TestProviderFailuresNamed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream   bool `json:"stream"`
			Messages []struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch req.Messages[0].Content[0].Text {
		case "huge":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"type":"message","content":[{"type":"text","text":"`+strings.Repeat("x", 9<<20)+`"}]}`)
		case "overloaded event":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
			_, _ = io.WriteString(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
		case "overloaded answer":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"type":"message","content":[`)
		}
	}))
	defer srv.Close()
	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	model := gateway.ModelSpec{ID: "claude-x", Provider: "claude", MaxOutputTokens: 16}
	for _, tt := range []struct {
		input, want string
		stream      bool
	}{
		{"huge", "provider anthropic model claude-x sent an answer too large to read", false},
		{"overloaded event", "provider anthropic model claude-x stopped its answer: it is overloaded", true},
		{"overloaded answer", "provider anthropic model claude-x answered 529: it is overloaded", false},
		{"malformed", "provider anthropic model claude-x sent a malformed answer", false},
	} {
		req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: tt.input}}}
		if tt.stream {
			s, serr := p.Stream(t.Context(), model, req)
			if err = serr; err == nil {
				for err == nil {
					_, err = s.Next()
				}
				s.Close()
			}
		} else {
			_, err = p.Generate(t.Context(), model, req)
		}
		ae := classify(err, "req_1", "")
		if ae.Code != CodeUpstream || !strings.HasSuffix(ae.Message, tt.want) || strings.Contains(ae.Message, "reached") ||
			strings.Contains(ae.Message, "8388608") || strings.Contains(ae.Message, "127.0.0.1") {
			t.Errorf("%s: the caller is told %q (%s); want it to end %q", tt.input, ae.Message, ae.Code, tt.want)
		}
	}
}
