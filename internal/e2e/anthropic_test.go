package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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
// as the request asks (a conversation about two orders looks both up and
// fetches an invoice first: see script). Whatever it finds wrong in a
// request it answers with an error and remembers.
//
// It honours cache_control as the Messages API documents it (see
// promptCache): its usage reports what it read from and wrote to its
// cache apart from the plain input.
type claudeServer struct {
	*httptest.Server
	mu       sync.Mutex
	calls    int
	streamed int
	problems []string
	cache    promptCache
	// usage is what each answer reported, in order.
	usage []claudeUsage
}

// claudeMock is the one mock of the claude variant, whose URL is written
// into the variant's app file when it is first built; TestMain closes it.
var (
	claudeOnce sync.Once
	claudeMock *claudeServer
)

// newClaude returns the claude variant's mock with its counts, usage and
// cache reset, so that a test sees only its own calls.
func newClaude(t *testing.T) *claudeServer {
	t.Helper()
	claudeOnce.Do(func() {
		claudeMock = &claudeServer{cache: promptCache{now: time.Now}}
		claudeMock.Server = httptest.NewServer(http.HandlerFunc(claudeMock.serve))
	})
	s := claudeMock
	s.mu.Lock()
	s.calls, s.streamed, s.problems, s.usage = 0, 0, nil, nil
	s.mu.Unlock()
	s.cache.reset()
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
	raw, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(raw, &req)
	}
	if err != nil {
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
	var results []string
	for _, m := range req.Messages {
		for _, c := range m.Content {
			if c.Type == "tool_result" {
				if m.Role != "user" || !strings.HasPrefix(c.ToolUseID, "toolu_e2e") {
					s.fail(w, "tool result %+v in a %s turn", c, m.Role)
					return
				}
				results = append(results, string(c.Content))
			}
		}
	}
	question := ""
	if len(req.Messages) > 0 && len(req.Messages[0].Content) > 0 {
		question = req.Messages[0].Content[0].Text
	}
	next, err := script(question, results)
	if err != nil {
		s.fail(w, "%v", err)
		return
	}
	u, err := s.cache.usage(raw)
	if err != nil {
		s.fail(w, "%v", err)
		return
	}
	u.out = 20
	s.mu.Lock()
	if req.Stream {
		s.streamed++
	}
	s.usage = append(s.usage, u)
	s.mu.Unlock()
	s.answer(w, req.Stream, next, u)
}

// step is one answer of the script: a tool_use block (tool and input) or
// the final text.
type step struct {
	tool, id, input, text string
}

// script is the mock model: it looks the order up and answers from the
// row; asked about both orders, it looks each up and fetches the first
// one's invoice before answering, one tool call a step.
func script(question string, results []string) (step, error) {
	if strings.Contains(question, "AB-654321") {
		calls := []step{
			{tool: "lookup_order", input: `{"order_id": "AB-123456"}`},
			{tool: "lookup_order", input: `{"order_id": "AB-654321"}`},
			{tool: "get_invoice", input: `{"order_id": "AB-123456"}`},
		}
		wants := []string{"2024-06-03", "in_transit", "59.90"}
		for i, r := range results {
			if i >= len(wants) || !strings.Contains(r, wants[i]) {
				return step{}, fmt.Errorf("tool result %d %s is not the script's", i, r)
			}
		}
		if n := len(results); n < len(calls) {
			c := calls[n]
			c.id = fmt.Sprintf("toolu_e2e_%d", n)
			return c, nil
		}
		return step{text: twoOrdersAnswer}, nil
	}
	switch {
	case len(results) == 0:
		return step{tool: "lookup_order", id: "toolu_e2e", input: `{"order_id": "AB-123456"}`}, nil
	case strings.Contains(results[0], "2024-06-03"):
		return step{text: claudeAnswer}, nil
	}
	return step{}, fmt.Errorf("the tool result %s lacks the order row", results[0])
}

// twoOrdersAnswer is the answer about both orders.
const twoOrdersAnswer = "AB-123456 was delivered on 2024-06-03 (invoice attached); AB-654321 is in transit."

// answer writes one content block, a tool_use or a text, the stop reason
// and the usage, as JSON or as events.
func (s *claudeServer) answer(w http.ResponseWriter, stream bool, next step, u claudeUsage) {
	stop, block, piece := "end_turn", `{"type":"text","text":""}`, next.text
	if next.tool != "" {
		stop, piece = "tool_use", next.input
		block = fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":{}}`, next.id, next.tool)
	}
	usage := func(out int64) string {
		return fmt.Sprintf(`{"input_tokens":%d,"output_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d,"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d}}`,
			u.in, out, u.read, u.w5m+u.w1h, u.w5m, u.w1h)
	}
	if !stream {
		var content string
		if stop == "tool_use" {
			content = fmt.Sprintf(`{"type":"tool_use","id":%q,"name":%q,"input":%s}`, next.id, next.tool, piece)
		} else {
			content = fmt.Sprintf(`{"type":"text","text":%q}`, piece)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":"msg_e2e","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[%s],"stop_reason":%q,"usage":%s}`, content, stop, usage(u.out))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	f := w.(http.Flusher)
	event := func(name, data string) {
		_, _ = io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n")
		f.Flush()
	}
	event("message_start", `{"type":"message_start","message":{"id":"msg_e2e","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"usage":`+usage(1)+`}}`)
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
	event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q},"usage":{"output_tokens":%d}}`, stop, u.out))
	event("message_stop", `{"type":"message_stop"}`)
}

func (s *claudeServer) stats() (calls, streamed int, problems []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls, s.streamed, slices.Clone(s.problems)
}

// answered returns the usage of each answer so far.
func (s *claudeServer) answered() []claudeUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.usage)
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
	var in, read int64
	for _, u := range claude.answered() {
		in, read = in+u.input(), read+u.read
	}
	if calls != 2 || cc.Usage.PromptTokens != in || cc.Usage.PromptTokensDetails.CachedTokens != read || cc.Usage.CompletionTokens != 40 {
		t.Errorf("%d calls, usage %+v; want 2 calls of %d input tokens in all, %d read from the cache, and 20 out each", calls, cc.Usage, in, read)
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

// TestAnthropicPromptCaching runs support-desk's claude_desk agent, its
// model served by the anthropic provider kind on the mock, which honours
// cache_control: asked about two orders, it takes four steps (two lookups,
// an invoice, the answer) with the agent's default caching policy
// (breakpoints on the tools, the system prompt and the last turn, five
// minutes). From step 2 on, at least 70% of each step's input is read
// from the cache; the run's cost, each step's and the ledger's spend
// equal Anthropic's price formula over the mock's usage to the
// nanodollar, cache writes at 1.25 times the input price and reads at a
// tenth of it.
func TestAnthropicPromptCaching(t *testing.T) {
	claude := newClaude(t)
	bin, dir := build(t, variant{name: "claude", overlay: "claude.cue", replace: map[string]string{"@CLAUDE@": claude.URL}})
	p := start(t, bin, dir, "AID_E2E_CLAUDE_KEY="+claudeKey)
	client := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithMaxRetries(0))
	spentBefore, _ := metric(t, p, "", `aid_budget_spent_usd{budget="daily",scope="global"}`)
	var resp *http.Response
	cc, err := client.Chat.Completions.New(withTimeout(t), openai.ChatCompletionNewParams{
		Model:    "claude_desk",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("How are my orders AB-123456 and AB-654321 doing? Send me the first one's invoice.")},
	}, option.WithResponseInto(&resp))
	if _, _, problems := claude.stats(); len(problems) > 0 {
		t.Fatalf("the mock refused requests: %q", problems)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := cc.Choices[0].Message.Content; got != twoOrdersAnswer {
		t.Fatalf("answer %q", got)
	}
	usage := claude.answered()
	if len(usage) != 4 {
		t.Fatalf("%d model calls, want 4", len(usage))
	}
	// Anthropic's formula for claude-sonnet-4-5 (claude.cue), in
	// nanodollars per token: input 3,000, cache reads 300, 5-minute
	// writes 3,750 (1.25x), 1-hour writes 6,000, output 15,000.
	price := func(u claudeUsage) int64 {
		return u.in*3000 + u.read*300 + u.w5m*3750 + u.w1h*6000 + u.out*15000
	}
	var want, in, read int64
	for i, u := range usage {
		want += price(u)
		in, read = in+u.input(), read+u.read
		if i == 0 && (u.w5m == 0 || u.read != 0) {
			t.Errorf("step 1: %+v, want a first write to the cache and no read", u)
		}
		if share := float64(u.read) / float64(u.input()); i > 0 && share < 0.7 {
			t.Errorf("step %d read %d of its %d input tokens from the cache (%.0f%%), want at least 70%%", i+1, u.read, u.input(), 100*share)
		}
		t.Logf("step %d: %d input tokens, %d read (%.0f%%), %d written; %d nanodollars", i+1, u.input(), u.read, 100*float64(u.read)/float64(u.input()), u.w5m+u.w1h, price(u))
	}
	if cc.Usage.PromptTokens != in || cc.Usage.PromptTokensDetails.CachedTokens != read {
		t.Errorf("the answer's usage %+v, want %d prompt tokens, %d of them cached", cc.Usage, in, read)
	}
	nano := func(usd float64) int64 { return int64(math.Round(usd * 1e9)) }
	var rec runRecord
	p.doJSON(t, "GET", "/v1/runs/"+resp.Header.Get("X-Aid-Run-Id"), "", "", http.StatusOK, &rec)
	if len(rec.Steps) != len(usage) {
		t.Fatalf("the run has %d steps, want %d", len(rec.Steps), len(usage))
	}
	for i, s := range rec.Steps {
		if got := nano(s.CostUSD); got != price(usage[i]) {
			t.Errorf("step %d cost %d nanodollars, the formula says %d", i+1, got, price(usage[i]))
		}
	}
	if got := nano(rec.CostUSD); got != want {
		t.Errorf("run cost %d nanodollars, the formula says %d", got, want)
	}
	spent, ok := metric(t, p, "", `aid_budget_spent_usd{budget="daily",scope="global"}`)
	if !ok {
		t.Fatal("no aid_budget_spent_usd for the daily budget in /metrics")
	}
	if got := nano(spent) - nano(spentBefore); got != want {
		t.Errorf("the ledger's daily spend grew by %d nanodollars, the formula says %d", got, want)
	}
}
