package openaicompat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// reasoner is the model of the Responses tests; its first answer carries a
// reasoning item whose encrypted content the second request must send
// back.
const (
	reasoner         = "o-reasoner-2025-01-01"
	reasoningID      = "rs_step1"
	encryptedContent = "gAAAA-encrypted-reasoning-of-step-1"
)

// The usage of the desk script's two answers, the same through either API:
// the reasoning tokens are part of the output.
var deskUsage = [2]struct{ in, cached, out, reasoning int }{{120, 0, 30, 20}, {210, 100, 12, 4}}

// deskServer plays the desk script on both APIs: step 1 asks for the
// refund tool, step 2 (a request carrying its result) answers. On the
// Responses API it refuses (400) a step 2 that does not carry step 1's
// reasoning item, encrypted content included, before the function call,
// and any request that does not ask for the encrypted reasoning with store
// false.
type deskServer struct {
	mu       sync.Mutex
	problems []string
	paths    []string
}

func (d *deskServer) problem(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	d.mu.Lock()
	d.problems = append(d.problems, msg)
	d.mu.Unlock()
	writeJSON(w, 400, apiError(400, "invalid_request_error", msg))
}

func (d *deskServer) serve(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
	d.mu.Lock()
	d.paths = append(d.paths, r.URL.Path)
	d.mu.Unlock()
	stream, _ := body["stream"].(bool)
	switch r.URL.Path {
	case "/v1/chat/completions":
		step := 0
		for _, m := range body["messages"].([]any) {
			if m.(map[string]any)["role"] == "tool" {
				step = 1
			}
		}
		d.chat(w, step, stream)
	case "/v1/responses":
		step, err := responsesStep(body)
		if err != nil {
			d.problem(w, "%v", err)
			return
		}
		d.responses(w, step, stream)
	default:
		d.problem(w, "unexpected path %s", r.URL.Path)
	}
}

// responsesStep checks a Responses request and says which step it is.
func responsesStep(body map[string]any) (int, error) {
	if store, ok := body["store"].(bool); !ok || store {
		return 0, fmt.Errorf("store is %v, want false", body["store"])
	}
	if inc, _ := body["include"].([]any); !slices.Contains(inc, any("reasoning.encrypted_content")) {
		return 0, fmt.Errorf("include is %v, want reasoning.encrypted_content", body["include"])
	}
	if body["instructions"] != "You refund orders." {
		return 0, fmt.Errorf("instructions %q", body["instructions"])
	}
	tools, _ := body["tools"].([]any)
	if len(tools) != 1 {
		return 0, fmt.Errorf("tools %v", body["tools"])
	}
	if tool := tools[0].(map[string]any); tool["type"] != "function" || tool["name"] != "refund" || tool["strict"] != false || tool["parameters"] == nil {
		return 0, fmt.Errorf("tool %v", tool)
	}
	input, _ := body["input"].([]any)
	reasoning, call, output := -1, -1, -1
	for i, it := range input {
		item := it.(map[string]any)
		switch item["type"] {
		case "reasoning":
			if item["id"] != reasoningID || item["encrypted_content"] != encryptedContent {
				return 0, fmt.Errorf("reasoning item %v is not step 1's", item)
			}
			reasoning = i
		case "function_call":
			if item["call_id"] != "call_1" || item["name"] != "refund" || item["arguments"] != `{"id":"A-1"}` {
				return 0, fmt.Errorf("function call %v", item)
			}
			call = i
		case "function_call_output":
			if item["call_id"] != "call_1" || item["output"] != "refunded A-1" {
				return 0, fmt.Errorf("function call output %v", item)
			}
			output = i
		case "message":
			if item["role"] != "user" || item["content"] != "Refund order A-1." {
				return 0, fmt.Errorf("message %v", item)
			}
		default:
			return 0, fmt.Errorf("unexpected input item %v", item)
		}
	}
	switch {
	case output < 0 && call < 0 && reasoning < 0:
		return 0, nil
	case reasoning < 0:
		return 0, errors.New("step 2 does not carry step 1's reasoning item")
	case !(reasoning < call && call < output):
		return 0, fmt.Errorf("step 2's items are out of order: reasoning %d, call %d, output %d", reasoning, call, output)
	}
	return 1, nil
}

func (d *deskServer) chat(w http.ResponseWriter, step int, stream bool) {
	u := deskUsage[step]
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d},"completion_tokens_details":{"reasoning_tokens":%d}}`,
		u.in, u.out, u.in+u.out, u.cached, u.reasoning)
	if !stream {
		msg, finish := textMessage("Refunded A-1."), "stop"
		if step == 0 {
			msg, finish = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"refund","arguments":"{\"id\":\"A-1\"}"}}]}`, "tool_calls"
		}
		writeJSON(w, 200, fmt.Sprintf(`{"id":"c","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":%s,"finish_reason":%q}],"usage":%s}`, reasoner, msg, finish, usage))
		return
	}
	s := startSSE(w)
	if step == 0 {
		s.data(chunk(reasoner, toolDelta(0, "call_1", "refund", `{"id":`), ""))
		s.data(chunk(reasoner, toolDelta(0, "", "", `"A-1"}`), "tool_calls"))
	} else {
		s.data(chunk(reasoner, textDelta("Refunded "), ""))
		s.data(chunk(reasoner, textDelta("A-1."), "stop"))
	}
	s.data(fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","created":1,"model":%q,"choices":[],"usage":%s}`, reasoner, usage))
	s.data("[DONE]")
}

// responseObject is a Responses API response with output items.
func responseObject(status string, items []string, u struct{ in, cached, out, reasoning int }) string {
	usage := fmt.Sprintf(`{"input_tokens":%d,"input_tokens_details":{"cached_tokens":%d,"cache_write_tokens":0},"output_tokens":%d,"output_tokens_details":{"reasoning_tokens":%d},"total_tokens":%d}`,
		u.in, u.cached, u.out, u.reasoning, u.in+u.out)
	if status == "in_progress" {
		usage = "null"
	}
	return fmt.Sprintf(`{"id":"resp_1","object":"response","created_at":1700000000,"status":%q,"error":null,"incomplete_details":null,"instructions":null,"model":%q,"output":[%s],"parallel_tool_calls":true,"temperature":1,"tool_choice":"auto","tools":[],"top_p":1,"store":false,"usage":%s}`,
		status, reasoner, strings.Join(items, ","), usage)
}

// respSSE writes Responses API events, numbered.
type respSSE struct {
	*sse
	seq int
}

func (s *respSSE) event(typ, fields string) {
	if fields != "" {
		fields = "," + fields
	}
	_, _ = fmt.Fprintf(s.w, "event: %s\ndata: {\"type\":%q,\"sequence_number\":%d%s}\n\n", typ, typ, s.seq, fields)
	s.f.Flush()
	s.seq++
}

func (d *deskServer) responses(w http.ResponseWriter, step int, stream bool) {
	reasoning := fmt.Sprintf(`{"type":"reasoning","id":%q,"summary":[],"encrypted_content":%q}`, reasoningID, encryptedContent)
	call := `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"refund","arguments":"{\"id\":\"A-1\"}","status":"completed"}`
	message := `{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Refunded A-1.","annotations":[]}]}`
	items := []string{reasoning, call}
	if step == 1 {
		items = []string{message}
	}
	final := responseObject("completed", items, deskUsage[step])
	if !stream {
		writeJSON(w, 200, final)
		return
	}
	s := &respSSE{sse: startSSE(w)}
	s.event("response.created", `"response":`+responseObject("in_progress", nil, deskUsage[step]))
	s.event("response.in_progress", `"response":`+responseObject("in_progress", nil, deskUsage[step]))
	if step == 0 {
		s.event("response.output_item.added", fmt.Sprintf(`"output_index":0,"item":{"type":"reasoning","id":%q,"summary":[]}`, reasoningID))
		s.event("response.output_item.done", `"output_index":0,"item":`+reasoning)
		s.event("response.output_item.added", `"output_index":1,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"refund","arguments":"","status":"in_progress"}`)
		s.event("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"{\"id\":"`)
		s.event("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":1,"delta":"\"A-1\"}"`)
		s.event("response.function_call_arguments.done", `"item_id":"fc_1","output_index":1,"arguments":"{\"id\":\"A-1\"}"`)
		s.event("response.output_item.done", `"output_index":1,"item":`+call)
	} else {
		s.event("response.output_item.added", `"output_index":0,"item":{"type":"message","id":"msg_1","role":"assistant","status":"in_progress","content":[]}`)
		s.event("response.content_part.added", `"item_id":"msg_1","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}`)
		s.event("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Refunded ","logprobs":[]`)
		s.event("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"A-1.","logprobs":[]`)
		s.event("response.output_text.done", `"item_id":"msg_1","output_index":0,"content_index":0,"text":"Refunded A-1.","logprobs":[]`)
		s.event("response.output_item.done", `"output_index":0,"item":`+message)
	}
	s.event("response.completed", `"response":`+final)
}

// ledgerEntry is one reservation or settlement, without the ids and
// account keys that differ from run to run.
type ledgerEntry struct {
	Op, Alias, Model string
	Budgets          []string
	Amount           gateway.Amount
}

// recordingLedger records what the gateway asks of a memory ledger.
type recordingLedger struct {
	*gateway.MemoryLedger
	mu      sync.Mutex
	held    map[string]ledgerEntry
	entries []ledgerEntry
}

func (l *recordingLedger) Reserve(ctx context.Context, r gateway.Reservation) error {
	e := ledgerEntry{Op: "reserve", Alias: r.Alias, Model: r.Model, Amount: r.Amount}
	for _, lim := range r.Limits {
		e.Budgets = append(e.Budgets, lim.Account.Budget)
	}
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.held[r.ID] = e
	l.mu.Unlock()
	return l.MemoryLedger.Reserve(ctx, r)
}

func (l *recordingLedger) Settle(ctx context.Context, id string, actual gateway.Amount) error {
	l.mu.Lock()
	e := l.held[id]
	e.Op, e.Amount = "settle", actual
	l.entries = append(l.entries, e)
	l.mu.Unlock()
	return l.MemoryLedger.Settle(ctx, id, actual)
}

// deskRun runs the refund desk through api, streaming or not: step 1
// calls the approval-gated refund tool, so the run pauses; its checkpoint
// goes through JSON to a fresh runtime, which resumes it with an approval;
// step 2 answers.
func deskRun(t *testing.T, api string, stream bool) ([]ledgerEntry, agents.RunResult, *deskServer) {
	t.Helper()
	d := &deskServer{}
	srv := newServer(t, d.serve)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.url(), Timeout: 5 * time.Second, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	caps := []gateway.Capability{gateway.CapabilityTools}
	if stream {
		caps = append(caps, gateway.CapabilityStreaming)
	}
	cached := 0.0005
	budgets := []gateway.Budget{{Name: "per_run", MaxUSD: 1, MaxTotalTokens: 100_000, Scope: gateway.ScopeRun}}
	ledger := &recordingLedger{MemoryLedger: gateway.NewMemoryLedger(), held: map[string]ledgerEntry{}}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "reasoner", Spec: gateway.ModelSpec{ID: reasoner, Provider: "openai", API: api,
			ContextWindow: 100_000, MaxOutputTokens: 1000, Capabilities: caps,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.002, OutputPer1kUSD: 0.008, CachedInputPer1kUSD: &cached}}}},
		Providers: map[string]gateway.Provider{"openai": p},
		Budgets:   budgets,
		Ledger:    ledger,
		Retry:     gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := agents.Config{
		Gateway: gw, Budgets: budgets, Store: agents.NewInMemoryStore(),
		Agents: []agents.Agent{{Name: "desk", Model: "reasoner", Budget: "per_run", Instructions: "You refund orders.", Tools: []string{"refund"}}},
		Tools: []agents.Tool{{Name: "refund", Description: "Refund an order.", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways,
			Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}},
		Implementations: map[string]agents.Implementation{"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct{ ID string }
			_ = json.Unmarshal(args, &a)
			return "refunded " + a.ID, nil
		})},
	}
	r1, err := agents.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r1.Run(t.Context(), "desk", "Refund order A-1.", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusPaused || res.Checkpoint == nil {
		t.Fatalf("%s: step 1: %v, status %s, problems %v", api, err, res.Status, d.problems)
	}
	data, err := agents.MarshalCheckpoint(*res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if has := bytes.Contains(data, []byte(encryptedContent)); has != (api == openaicompat.APIResponses) {
		t.Errorf("%s: the checkpoint holds the encrypted reasoning: %v", api, has)
	}
	cp, err := agents.UnmarshalCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = agents.NewInMemoryStore()
	r2, err := agents.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err = r2.ResumeFrom(t.Context(), cp, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "Refunded A-1." {
		t.Fatalf("%s: step 2: %v, status %s, answer %q, problems %v", api, err, res.Status, res.Answer, d.problems)
	}
	return ledger.entries, res, d
}

// TestResponsesAPIRunMatchesChat: a paused and resumed two-step run through
// a model declared api "responses" completes, step 2 carrying step 1's
// reasoning (the mock refuses it otherwise), and charges the ledger
// exactly what the same run through chat completions does, streamed or
// not.
func TestResponsesAPIRunMatchesChat(t *testing.T) {
	want, chatRes, d := deskRun(t, openaicompat.APIChat, false)
	if len(want) != 4 || slices.ContainsFunc(d.paths, func(p string) bool { return p != "/v1/chat/completions" }) {
		t.Fatalf("chat run: ledger %+v, paths %v", want, d.paths)
	}
	// The ledger is priced from the script's usage: step 2's cached tokens
	// at the cached price, reasoning tokens as output.
	nano := func(in, cached, out int) int64 {
		return int64(in-cached)*2000 + int64(cached)*500 + int64(out)*8000
	}
	if got := []int64{want[1].Amount.NanoUSD, want[3].Amount.NanoUSD}; !slices.Equal(got, []int64{nano(120, 0, 30), nano(210, 100, 12)}) {
		t.Errorf("chat settlements %v nano-dollars", got)
	}
	for _, stream := range []bool{false, true} {
		for _, api := range []string{openaicompat.APIChat, openaicompat.APIResponses} {
			got, res, d := deskRun(t, api, stream)
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("%s (stream %v): ledger entries differ from chat's (-chat +got):\n%s", api, stream, diff)
			}
			if res.Usage != chatRes.Usage || res.CostUSD != chatRes.CostUSD || len(res.Steps) != 2 {
				t.Errorf("%s (stream %v): usage %+v cost %v steps %d, chat's %+v %v", api, stream, res.Usage, res.CostUSD, len(res.Steps), chatRes.Usage, chatRes.CostUSD)
			}
			if len(d.problems) != 0 {
				t.Errorf("%s (stream %v): the upstream refused requests: %v", api, stream, d.problems)
			}
			if wantPath := "/v1/" + map[string]string{"chat": "chat/completions", "responses": "responses"}[api]; !slices.Equal(d.paths, []string{wantPath, wantPath}) {
				t.Errorf("%s (stream %v): paths %v", api, stream, d.paths)
			}
		}
	}
}

// TestResponsesStepWithoutReasoningIsRefused: the mock is not lenient, so
// the run above shows the reasoning was carried: a step 2 without it fails.
func TestResponsesStepWithoutReasoningIsRefused(t *testing.T) {
	d := &deskServer{}
	srv := newServer(t, d.serve)
	p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.url()})
	if err != nil {
		t.Fatal(err)
	}
	spec := gateway.ModelSpec{ID: reasoner, Provider: "openai", API: openaicompat.APIResponses, MaxOutputTokens: 100}
	req := gateway.Request{Messages: []gateway.Message{
		{Role: gateway.RoleSystem, Content: "You refund orders."},
		{Role: gateway.RoleUser, Content: "Refund order A-1."},
	}, Tools: []gateway.ToolDef{{Name: "refund", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	res, err := p.Generate(t.Context(), spec, req)
	if err != nil || len(res.ToolCalls) != 1 || res.Reasoning == nil || res.FinishReason != gateway.FinishToolCalls {
		t.Fatalf("step 1: %+v %v", res, err)
	}
	after := func(reasoning json.RawMessage) gateway.Request {
		r := req
		r.Messages = append(slices.Clone(req.Messages),
			gateway.Message{Role: gateway.RoleAssistant, ToolCalls: res.ToolCalls, Reasoning: reasoning},
			gateway.Message{Role: gateway.RoleTool, ToolCallID: "call_1", Content: "refunded A-1"})
		return r
	}
	if _, err := p.Generate(t.Context(), spec, after(res.Reasoning)); err != nil {
		t.Errorf("step 2 with the reasoning: %v", err)
	}
	var pe *gateway.ProviderError
	if _, err := p.Generate(t.Context(), spec, after(nil)); !errors.As(err, &pe) || pe.StatusCode != 400 || !strings.Contains(err.Error(), "reasoning item") {
		t.Errorf("step 2 without the reasoning: %v, want the mock's 400", err)
	}
	// Reasoning another model wrote is not sent to this one.
	other := spec
	other.ID = "o-other-2025-01-01"
	if _, err := p.Generate(t.Context(), other, after(res.Reasoning)); !errors.As(err, &pe) || !strings.Contains(err.Error(), "reasoning item") {
		t.Errorf("step 2 on another model: %v, want the mock's 400", err)
	}
}

// failure is what a call's error says, in the terms retries, fallbacks,
// budgets and tracing read.
type failure struct {
	Status     int
	Retryable  bool
	RetryAfter time.Duration
	Failure    gateway.ProviderFailure
	Code       string
	Message    string
}

func failureOf(t *testing.T, err error) failure {
	t.Helper()
	var pe *gateway.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a provider error", err, err)
	}
	f := failure{Status: pe.StatusCode, Retryable: pe.Retryable, RetryAfter: pe.RetryAfter, Failure: pe.Failure}
	var ae *openaicompat.APIError
	if errors.As(err, &ae) {
		f.Code, f.Message = ae.Code, ae.Message
	}
	return f
}

// TestResponsesErrorsAreClassifiedAsChat: every failure of the table, on
// a generated and a streamed call, is the same provider error through the
// Responses API as through chat completions.
func TestResponsesErrorsAreClassifiedAsChat(t *testing.T) {
	errorBody := func(code, msg string) string {
		return fmt.Sprintf(`{"error":{"message":%q,"type":"invalid_request_error","param":"input","code":%q}}`, msg, code)
	}
	tests := []struct {
		name string
		// h answers either API; chat says which the request is for.
		h    func(w http.ResponseWriter, chat, stream bool)
		want failure
	}{
		{"400 context length", func(w http.ResponseWriter, chat, stream bool) {
			writeJSON(w, 400, errorBody("context_length_exceeded", "Your input exceeds the context window of this model."))
		}, failure{Status: 400, Code: "context_length_exceeded", Message: "Your input exceeds the context window of this model."}},
		{"429 with retry-after", func(w http.ResponseWriter, chat, stream bool) {
			w.Header().Set("Retry-After", "7")
			writeJSON(w, 429, errorBody("rate_limit_exceeded", "slow down"))
		}, failure{Status: 429, Retryable: true, RetryAfter: 7 * time.Second, Code: "rate_limit_exceeded", Message: "slow down"}},
		{"500", func(w http.ResponseWriter, chat, stream bool) {
			writeJSON(w, 500, `{"error":{"message":"The server had an error.","type":"server_error","param":null,"code":null}}`)
		}, failure{Status: 500, Retryable: true, Message: "The server had an error."}},
		{"malformed body", func(w http.ResponseWriter, chat, stream bool) {
			if stream {
				s := startSSE(w)
				_, _ = io.WriteString(s.w, "data: {\"id\": not json\n\n")
				return
			}
			writeJSON(w, 200, `{"id":"x", "output": [`)
		}, failure{Failure: gateway.FailureMalformed}},
		{"error event mid-stream", func(w http.ResponseWriter, chat, stream bool) {
			s := startSSE(w)
			if chat {
				s.data(chunk(reasoner, textDelta("Partly"), ""))
				s.data(`{"error":{"message":"The model is overloaded.","type":"server_error","param":null,"code":"server_error"}}`)
				return
			}
			rs := &respSSE{sse: s}
			rs.event("response.output_text.delta", `"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Partly"`)
			rs.event("error", `"code":"server_error","message":"The model is overloaded.","param":null`)
		}, failure{Failure: gateway.FailureErrorEvent, Code: "server_error", Message: "The model is overloaded."}},
	}
	for _, tt := range tests {
		for _, stream := range []bool{false, true} {
			if tt.name == "error event mid-stream" && !stream {
				continue
			}
			got := map[string]failure{}
			for _, api := range []string{openaicompat.APIChat, openaicompat.APIResponses} {
				srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
					tt.h(w, r.URL.Path == "/v1/chat/completions", stream)
				})
				p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.url(), Timeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				spec := gateway.ModelSpec{ID: reasoner, Provider: "openai", API: api, MaxOutputTokens: 100}
				got[api] = failureOf(t, callProvider(t, p, spec, stream))
				if n := len(srv.recorded()); n != 1 {
					t.Errorf("%s, %s: %d requests, want 1 (the provider does not retry)", tt.name, api, n)
				}
			}
			if got[openaicompat.APIChat] != got[openaicompat.APIResponses] {
				t.Errorf("%s (stream %v): chat %+v, responses %+v", tt.name, stream, got[openaicompat.APIChat], got[openaicompat.APIResponses])
			}
			if w := got[openaicompat.APIResponses]; w != tt.want {
				t.Errorf("%s (stream %v): %+v, want %+v", tt.name, stream, w, tt.want)
			}
		}
	}
}

// callProvider makes one call, generated or streamed to its end, and
// returns its error.
func callProvider(t *testing.T, p *openaicompat.Provider, spec gateway.ModelSpec, stream bool) error {
	t.Helper()
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}}
	if !stream {
		_, err := p.Generate(t.Context(), spec, req)
		return err
	}
	s, err := p.Stream(t.Context(), spec, req)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		if _, err := s.Next(); err != nil {
			if errors.Is(err, io.EOF) {
				t.Fatal("the stream ended without an error")
			}
			return err
		}
	}
}

// TestResponsesAnswersAreBounded: a 50 MB answer, whole or as one event of
// a stream, fails as the chat path's does, without being held.
func TestResponsesAnswersAreBounded(t *testing.T) {
	const huge = 50 << 20
	got := map[string]failure{}
	for _, stream := range []bool{false, true} {
		for _, api := range []string{openaicompat.APIChat, openaicompat.APIResponses} {
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, body map[string]any, n int) {
				if stream {
					s := startSSE(w)
					_, _ = io.WriteString(s.w, `data: {"type":"response.output_text.delta","delta":"`)
				} else {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"object":"response","output":[{"type":"message","content":[{"type":"output_text","text":"`)
				}
				chunk := strings.Repeat("a", 64<<10)
				for sent := 0; sent < huge; sent += len(chunk) {
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
			})
			p, err := openaicompat.New(openaicompat.Config{BaseURL: srv.url(), Timeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			spec := gateway.ModelSpec{ID: reasoner, Provider: "openai", API: api, MaxOutputTokens: 100}
			err = callProvider(t, p, spec, stream)
			got[fmt.Sprint(api, stream)] = failureOf(t, err)
			if !stream && (!strings.Contains(err.Error(), "answer is longer than 8388608 bytes") || failureOf(t, err).Failure != gateway.FailureTooLarge) {
				t.Errorf("%s: a 50 MB answer: %v, want it refused as too large", api, err)
			}
		}
		if c, r := got[fmt.Sprint(openaicompat.APIChat, stream)], got[fmt.Sprint(openaicompat.APIResponses, stream)]; c != r || r.Retryable {
			t.Errorf("stream %v: chat %+v, responses %+v; want the same, not retryable", stream, c, r)
		}
	}
}
