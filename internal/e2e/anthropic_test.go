package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// claudeKey is the API key the claude variant's service reads from
// AID_E2E_CLAUDE_KEY and must send to the mock.
const claudeKey = "sk-ant-e2e-claude-key"

// claudeToolID is the Messages API's pattern of a tool call id.
var claudeToolID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// claudeAnswer is the mock's final answer, given once it has the order
// row as a tool result.
const claudeAnswer = "Order AB-123456 was delivered on 2024-06-03."

// claudeServer is a scripted mock of Anthropic's Messages API: the first
// call of a conversation asks for lookup_order as a tool_use block, the
// second answers from its tool_result, as JSON or as server-sent events
// as the request asks. Whatever it finds wrong in a request it answers
// with an error and remembers.
type claudeServer struct {
	*httptest.Server
	mu       sync.Mutex
	calls    int
	streamed int
	problems []string
}

func newClaude(t *testing.T) *claudeServer {
	s := &claudeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *claudeServer) fail(w http.ResponseWriter, format string, args ...any) {
	s.mu.Lock()
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = fmt.Fprintf(w, `{"type":"error","error":{"type":"invalid_request_error","message":%q}}`, fmt.Sprintf(format, args...))
}

func (s *claudeServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		s.fail(w, "unexpected %s %s", r.Method, r.URL.Path)
		return
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+claudeKey {
		s.fail(w, "authorization %q is not the configured key", got)
		return
	}
	var req struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		Stream    bool   `json:"stream"`
		System    []struct {
			Text string `json:"text"`
		} `json:"system"`
		Messages []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				ToolUseID string          `json:"tool_use_id"`
				Content   json.RawMessage `json:"content"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Type string `json:"type"`
			} `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.fail(w, "decoding the request: %v", err)
		return
	}
	// The Messages API's documented rules, as the API words its refusals.
	for i, t := range req.Tools {
		if t.InputSchema.Type != "object" {
			s.fail(w, "tools.%d.custom.input_schema.type: Input should be 'object'", i)
			return
		}
	}
	for _, b := range req.System {
		if strings.TrimSpace(b.Text) == "" {
			s.fail(w, "system: text content blocks must contain non-whitespace text")
			return
		}
	}
	for i, m := range req.Messages {
		for j, c := range m.Content {
			id := c.ID + c.ToolUseID
			switch {
			case c.Type == "text" && strings.TrimSpace(c.Text) == "":
				s.fail(w, "messages: text content blocks must contain non-whitespace text")
				return
			case (c.Type == "tool_use" || c.Type == "tool_result") && !claudeToolID.MatchString(id):
				s.fail(w, "messages.%d.content.%d: tool id %q should match pattern '^[a-zA-Z0-9_-]+$'", i, j, id)
				return
			}
		}
	}
	if req.Model != "claude-sonnet-4-5-20250929" || req.MaxTokens <= 0 || req.MaxTokens > 512 {
		s.fail(w, "model %q, max_tokens %d", req.Model, req.MaxTokens)
		return
	}
	if len(req.System) == 0 || !strings.Contains(req.System[0].Text, "Look the order up") {
		s.fail(w, "system prompt %+v lacks the instructions", req.System)
		return
	}
	if !slices.ContainsFunc(req.Tools, func(t struct {
		Name        string `json:"name"`
		InputSchema struct {
			Type string `json:"type"`
		} `json:"input_schema"`
	}) bool {
		return t.Name == "lookup_order"
	}) {
		s.fail(w, "lookup_order not offered: %+v", req.Tools)
		return
	}
	var result string
	for _, m := range req.Messages {
		for _, c := range m.Content {
			if c.Type == "tool_result" {
				if m.Role != "user" || c.ToolUseID != "toolu_e2e" {
					s.fail(w, "tool result %+v in a %s turn", c, m.Role)
					return
				}
				result = string(c.Content)
			}
		}
	}
	if req.Stream {
		s.mu.Lock()
		s.streamed++
		s.mu.Unlock()
	}
	switch {
	case result == "":
		s.answer(w, req.Stream, "tool_use", `{"type":"tool_use","id":"toolu_e2e","name":"lookup_order","input":{}}`, `{"order_id": "AB-123456"}`)
	case strings.Contains(result, "2024-06-03"):
		s.answer(w, req.Stream, "end_turn", `{"type":"text","text":""}`, claudeAnswer)
	default:
		s.fail(w, "the tool result %s lacks the order row", result)
	}
}

// answer writes one content block, a tool_use whose input is piece or a
// text that is piece, and the stop reason, as JSON or as events.
func (s *claudeServer) answer(w http.ResponseWriter, stream bool, stop, block, piece string) {
	if !stream {
		var content string
		if stop == "tool_use" {
			content = `{"type":"tool_use","id":"toolu_e2e","name":"lookup_order","input":` + piece + `}`
		} else {
			content = fmt.Sprintf(`{"type":"text","text":%q}`, piece)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"msg_e2e","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[%s],"stop_reason":%q,"usage":{"input_tokens":100,"output_tokens":20}}`, content, stop)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	event := func(name, data string) {
		_, _ = io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n")
		f.Flush()
	}
	event("message_start", `{"type":"message_start","message":{"id":"msg_e2e","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":{"input_tokens":100,"output_tokens":1}}}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+block+`}`)
	half := len(piece) / 2
	for _, p := range []string{piece[:half], piece[half:]} {
		if stop == "tool_use" {
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":%q}}`, p))
		} else {
			event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, p))
		}
	}
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q},"usage":{"output_tokens":20}}`, stop))
	event("message_stop", `{"type":"message_stop"}`)
}

func (s *claudeServer) stats() (calls, streamed int, problems []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.streamed, slices.Clone(s.problems)
}

// TestAnthropicProvider builds support-desk with an agent whose model is
// served by the anthropic provider kind, runs the binary against a mock of
// the Messages API, and asks that agent about an order, in one answer and
// streamed: each time the model asks for the order as a tool_use, the
// service runs the fixture tool and sends its row back as a tool_result,
// and the model's answer reaches the client, with both calls' usage.
func TestAnthropicProvider(t *testing.T) {
	claude := newClaude(t)
	bin, dir := build(t, variant{name: "claude", overlay: "claude.cue", replace: map[string]string{"@CLAUDE@": claude.URL}})
	p := start(t, bin, dir, "AID_E2E_CLAUDE_KEY="+claudeKey)
	client := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithMaxRetries(0))
	ask := openai.ChatCompletionNewParams{
		Model:    "claude_desk",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where is order AB-123456?")},
	}

	cc, err := client.Chat.Completions.New(withTimeout(t), ask)
	calls, _, problems := claude.stats()
	if len(problems) > 0 {
		t.Fatalf("the mock refused requests: %q", problems)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Choices[0].Message.Content; got != claudeAnswer || cc.Choices[0].FinishReason != "stop" {
		t.Fatalf("answer %q, finish %q", got, cc.Choices[0].FinishReason)
	}
	if calls != 2 || cc.Usage.PromptTokens != 200 || cc.Usage.CompletionTokens != 40 {
		t.Errorf("%d calls, usage %+v; want 2 calls of 100 in and 20 out", calls, cc.Usage)
	}

	ask.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(withTimeout(t), ask)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	calls, streamed, problems := claude.stats()
	if len(problems) > 0 {
		t.Fatalf("the mock refused requests: %q", problems)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != claudeAnswer || acc.Choices[0].FinishReason != "stop" {
		t.Fatalf("streamed answer: %+v", acc.ChatCompletion)
	}
	if calls != 4 || streamed == 0 {
		t.Errorf("%d calls, %d streamed; want 4, streamed", calls, streamed)
	}
}
