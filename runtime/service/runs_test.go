package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/service"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// run is the runs API's answer, as a client reads it.
type run struct {
	RunID   string              `json:"run_id"`
	Agent   string              `json:"agent"`
	Path    []string            `json:"path"`
	Status  string              `json:"status"`
	Answer  string              `json:"answer"`
	Steps   []agents.StepRecord `json:"steps"`
	CostUSD float64             `json:"cost_usd"`
	Pending *struct {
		CallID    string `json:"call_id"`
		Tool      string `json:"tool"`
		Arguments string `json:"arguments"`
		Reason    string `json:"reason"`
		ResumeURL string `json:"resume_url"`
	} `json:"pending"`
	Messages []json.RawMessage `json:"messages"`
	Error    *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func decodeRun(t testing.TB, body []byte) run {
	t.Helper()
	var r run
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("run %s: %v", body, err)
	}
	return r
}

var refundSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"}},"required":["order"],"additionalProperties":false}`)

// approvalEnv has a triage agent whose refund tool needs approval.
func approvalEnv(t *testing.T, refunds *atomic.Int32) *env {
	return newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "refund", `{"order":"A1"}`)),
			answer("Refunded A1."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Refund.", Tools: []string{"refund"}}},
		tools:  []agents.Tool{{Name: "refund", Description: "Refund an order.", Input: refundSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		impls: map[string]agents.Implementation{"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			refunds.Add(1)
			return "refunded " + string(args), nil
		})},
	})
}

func TestApprovalPauseAndResumeThroughChatAndRuns(t *testing.T) {
	var refunds atomic.Int32
	e := approvalEnv(t, &refunds)
	c := e.clientPtr()
	var resp *http.Response
	cc, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Refund A1")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	// By default a pause is a message, not a tool call a client would run:
	// it names the tool, its arguments and where to approve it.
	ch := cc.Choices[0]
	runID := resp.Header.Get("X-Aid-Run-Id")
	if ch.FinishReason != "stop" || len(ch.Message.ToolCalls) != 0 || !strings.Contains(ch.Message.Content, "tool refund") ||
		!strings.Contains(ch.Message.Content, `arguments {"order":"A1"}`) || !strings.Contains(ch.Message.Content, "POST /v1/runs/"+runID+"/resume") {
		t.Fatalf("paused answer %+v", ch)
	}
	var ext struct {
		Aid struct {
			RunID   string `json:"run_id"`
			Status  string `json:"status"`
			Pending struct {
				Tool      string `json:"tool"`
				Reason    string `json:"reason"`
				ResumeURL string `json:"resume_url"`
			} `json:"pending"`
		} `json:"aid"`
	}
	if err := json.Unmarshal([]byte(cc.RawJSON()), &ext); err != nil {
		t.Fatal(err)
	}
	if ext.Aid.RunID != runID || ext.Aid.Status != "paused" || ext.Aid.Pending.ResumeURL != "/v1/runs/"+runID+"/resume" || !strings.Contains(ch.Message.Content, runID) {
		t.Fatalf("aid extension %+v, header %q, content %q", ext.Aid, runID, ch.Message.Content)
	}
	if refunds.Load() != 0 {
		t.Fatal("the refund ran before approval")
	}

	// GET shows the pending call.
	status, _, body := e.do(t, "GET", "/v1/runs/"+runID, "")
	got := decodeRun(t, body)
	if status != 200 || got.Status != "paused" || got.Pending == nil || got.Pending.Tool != "refund" || got.Pending.Reason != "approval" ||
		got.Pending.ResumeURL != "/v1/runs/"+runID+"/resume" {
		t.Fatalf("GET run: %d %s", status, body)
	}

	// Bad decisions are refused before the runtime sees them.
	for _, tt := range []struct{ body, param string }{
		{`{"action":"maybe"}`, "action"},
		{`{"action":"reject","arguments":{"order":"B"}}`, "arguments"},
	} {
		status, _, body := e.do(t, "POST", "/v1/runs/"+runID+"/resume", tt.body)
		if code, _, param := servicetest.APIError(t, body); status != 400 || code != service.CodeInvalidRequest || param != tt.param {
			t.Errorf("%s: %d %s", tt.body, status, body)
		}
	}
	status, _, body = e.do(t, "POST", "/v1/runs/"+runID+"/resume", `{"action":"approve","extra":1}`)
	if code, _, _ := servicetest.APIError(t, body); status != 400 || code != service.CodeInvalidJSON {
		t.Errorf("unknown field: %d %s", status, body)
	}

	// Edited arguments the tool's schema refuses are refused before the
	// approval is spent: 400 on arguments, naming the problem, and the run
	// is still paused.
	status, _, body = e.do(t, "POST", "/v1/runs/"+runID+"/resume", `{"action":"approve","arguments":{"order":7}}`)
	code, typ, param := servicetest.ErrorOnly(t, body)
	if status != 400 || code != service.CodeInvalidRequest || typ != service.TypeInvalidRequest || param != "arguments" ||
		!strings.Contains(string(body), "the edited arguments do not match the input schema of tool refund: at /order: got number, want string") {
		t.Errorf("invalid edit: %d %s", status, body)
	}
	if status, _, body := e.do(t, "GET", "/v1/runs/"+runID, ""); status != 200 || decodeRun(t, body).Status != "paused" || refunds.Load() != 0 {
		t.Fatalf("after an invalid edit: %d %s, %d refunds", status, body, refunds.Load())
	}

	// Approve with edited arguments.
	status, hdr, body := e.do(t, "POST", "/v1/runs/"+runID+"/resume", `{"action":"approve","arguments":{"order":"A1-edited"}}`)
	done := decodeRun(t, body)
	if status != 200 || done.Status != "completed" || done.Answer != "Refunded A1." || hdr.Get("X-Aid-Run-Id") != runID {
		t.Fatalf("resume: %d %s", status, body)
	}
	obs := done.Steps[0].ToolCalls[0]
	if obs.Approval == nil || !obs.Approval.Approved || obs.Arguments != `{"order":"A1-edited"}` || refunds.Load() != 1 {
		t.Errorf("approved call %+v, refunds %d", obs, refunds.Load())
	}

	// A second resume of the same pause loses, and its answer is the
	// error alone, not a run with zero fields; so is a streamed one's.
	status, _, body = e.do(t, "POST", "/v1/runs/"+runID+"/resume", `{"action":"approve"}`)
	if code, _, _ := servicetest.ErrorOnly(t, body); status != http.StatusConflict || code != service.CodeRunNotPaused {
		t.Errorf("second resume: %d %s", status, body)
	}
	events := e.sse(t, "/v1/runs/"+runID+"/resume", `{"action":"approve"}`)
	if len(events) != 1 || events[0].name != "error" {
		t.Fatalf("streamed second resume: %+v", events)
	}
	if code, _, _ := servicetest.ErrorOnly(t, []byte(events[0].data)); code != service.CodeRunNotPaused {
		t.Errorf("streamed second resume: %s", events[0].data)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/run_nope/resume", `{"action":"approve"}`)
	if code, _, _ := servicetest.ErrorOnly(t, body); status != 404 || code != service.CodeRunNotFound {
		t.Errorf("unknown run: %d %s", status, body)
	}
	status, _, body = e.do(t, "GET", "/v1/runs/run_nope", "")
	if code, _, _ := servicetest.APIError(t, body); status != 404 || code != service.CodeRunNotFound {
		t.Errorf("GET unknown run: %d %s", status, body)
	}
}

// TestAStockClientLoopDoesNotRunTheServersTool drives the service with the
// loop every OpenAI client writes: while the answer asks for tool calls,
// run them and send their results. A pause is the server's, so by default
// the loop ends at once with the message that says how to approve it, and
// runs nothing; with X-Aid-Pause: tool_calls the pause keeps the shape
// that asks for the call.
func TestAStockClientLoopDoesNotRunTheServersTool(t *testing.T) {
	var refunds atomic.Int32
	e := approvalEnv(t, &refunds)
	// loop returns the tools the client ran and its last answer.
	loop := func(opts ...option.RequestOption) (ran []string, ch openai.ChatCompletionChoice) {
		params := openai.ChatCompletionNewParams{Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Refund A1")}}
		for range 3 {
			cc, err := e.clientPtr().Chat.Completions.New(context.Background(), params, opts...)
			if err != nil {
				return ran, ch // the service takes no tool results from a client
			}
			ch = cc.Choices[0]
			if ch.FinishReason != "tool_calls" {
				return ran, ch
			}
			params.Messages = append(params.Messages, ch.Message.ToParam())
			for _, tc := range ch.Message.ToolCalls {
				ran = append(ran, tc.Function.Name)
				params.Messages = append(params.Messages, openai.ToolMessage("client ran "+tc.Function.Name, tc.ID))
			}
		}
		return ran, ch
	}
	if ran, ch := loop(); len(ran) != 0 || ch.FinishReason != "stop" || !strings.Contains(ch.Message.Content, "resume") {
		t.Errorf("default: the client ran %v, last %+v", ran, ch)
	}
	if ran, _ := loop(option.WithHeader(service.PauseHeader, service.PauseToolCalls)); strings.Join(ran, ",") != "refund" {
		t.Errorf("%s: the client ran %v, want the pause taken for its own call", service.PauseToolCalls, ran)
	}
	cc, err := e.clientPtr().Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Refund A1")},
	}, option.WithHeader(service.PauseHeader, service.PauseToolCalls))
	if err != nil {
		t.Fatal(err)
	}
	if ch := cc.Choices[0]; ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "refund" ||
		ch.Message.ToolCalls[0].Function.Arguments != `{"order":"A1"}` || ch.Message.ToolCalls[0].ID != "c1" || !strings.Contains(ch.Message.Content, "/resume") {
		t.Errorf("%s: %+v", service.PauseToolCalls, ch)
	}
	status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Refund A1"}]}`, service.PauseHeader, "tools")
	if code, _, param := servicetest.ErrorOnly(t, body); status != 400 || code != service.CodeInvalidRequest || param != service.PauseHeader {
		t.Errorf("bad %s: %d %s", service.PauseHeader, status, body)
	}
	if refunds.Load() != 0 {
		t.Errorf("%d refunds ran without approval", refunds.Load())
	}
}

// TestApprovalPauseInAStream: a streamed pause carries what a non-streamed
// one does: the message as content, finish_reason stop, and the pending
// call in the aid extension of the final chunk; with X-Aid-Pause:
// tool_calls, the call as a tool-call delta and finish_reason tool_calls.
func TestApprovalPauseInAStream(t *testing.T) {
	var refunds atomic.Int32
	e := approvalEnv(t, &refunds)
	for _, tt := range []struct {
		pause  string
		finish string
		calls  int
	}{{"", "stop", 0}, {service.PauseToolCalls, "tool_calls", 1}} {
		var opts []option.RequestOption
		if tt.pause != "" {
			opts = append(opts, option.WithHeader(service.PauseHeader, tt.pause))
		}
		stream := e.clientPtr().Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
			Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Refund A1")},
		}, opts...)
		var acc openai.ChatCompletionAccumulator
		var last openai.ChatCompletionChunk
		for stream.Next() {
			acc.AddChunk(stream.Current())
			if len(stream.Current().Choices) > 0 {
				last = stream.Current()
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		var ext struct {
			Aid struct {
				RunID   string `json:"run_id"`
				Pending struct {
					Tool      string `json:"tool"`
					Arguments string `json:"arguments"`
					ResumeURL string `json:"resume_url"`
				} `json:"pending"`
			} `json:"aid"`
		}
		if err := json.Unmarshal([]byte(last.RawJSON()), &ext); err != nil {
			t.Fatal(err)
		}
		ch := acc.Choices[0]
		if ch.FinishReason != tt.finish || len(ch.Message.ToolCalls) != tt.calls || !strings.Contains(ch.Message.Content, `tool refund waits for a decision on the call c1 with arguments {"order":"A1"}`) ||
			!strings.Contains(ch.Message.Content, "POST "+ext.Aid.Pending.ResumeURL) || ext.Aid.Pending.Tool != "refund" || ext.Aid.Pending.Arguments != `{"order":"A1"}` ||
			ext.Aid.Pending.ResumeURL != "/v1/runs/"+ext.Aid.RunID+"/resume" || last.Choices[0].FinishReason != tt.finish {
			t.Errorf("streamed pause %q: %+v\nlast chunk %s", tt.pause, ch, last.RawJSON())
		}
		if tt.calls == 1 && (ch.Message.ToolCalls[0].Function.Name != "refund" || ch.Message.ToolCalls[0].Function.Arguments != `{"order":"A1"}`) {
			t.Errorf("streamed pause %q: calls %+v", tt.pause, ch.Message.ToolCalls)
		}
	}
}

func TestApprovalRejectThroughRuns(t *testing.T) {
	var refunds atomic.Int32
	e := approvalEnv(t, &refunds)
	status, _, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Refund A1","user_id":"u1"}`)
	paused := decodeRun(t, body)
	if status != 200 || paused.Status != "paused" || paused.Pending == nil || paused.Pending.CallID != "c1" {
		t.Fatalf("start: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/"+paused.RunID+"/resume", `{"action":"reject","feedback":"not eligible"}`)
	done := decodeRun(t, body)
	if status != 200 || done.Status != "completed" || refunds.Load() != 0 {
		t.Fatalf("reject: %d %s", status, body)
	}
	if c := done.Steps[0].ToolCalls[0]; c.ErrorKind != agents.KindRejected || !strings.Contains(c.Observation, "not eligible") {
		t.Errorf("rejected call %+v", c)
	}
	// A resume names no agent: it is counted under the run's entry agent.
	_, _, metrics := e.do(t, "GET", "/metrics", "")
	if want := `aid_http_requests_total{agent="triage",code="200",final_agent="triage",route="POST /v1/runs/{id}/resume"} 1`; !strings.Contains(string(metrics), want) {
		t.Errorf("no %s in metrics:\n%s", want, grep(string(metrics), "aid_http_requests_total"))
	}
}

func TestHandoffThroughChatCompletion(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{
			"triage":  {calls(call("t1", "transfer_to_billing", `{}`))},
			"billing": {answer("Your invoice is attached.")},
		}},
		agents: []agents.Agent{
			{Name: "triage", Model: "large", Instructions: "Route.", Handoffs: []string{"billing"}},
			{Name: "billing", Model: "large", Instructions: "Bill."},
		},
	})
	cc, err := e.clientPtr().Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Where is my invoice?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ext struct {
		Aid struct{ Path []string } `json:"aid"`
	}
	_ = json.Unmarshal([]byte(cc.RawJSON()), &ext)
	if cc.Model != "billing" || cc.Choices[0].Message.Content != "Your invoice is attached." || strings.Join(ext.Aid.Path, ">") != "triage>billing" {
		t.Errorf("model %q content %q path %v", cc.Model, cc.Choices[0].Message.Content, ext.Aid.Path)
	}
	// The run and its request are counted under the agent asked for and
	// the agent the run ended on.
	_, _, metrics := e.do(t, "GET", "/metrics", "")
	for _, want := range []string{
		`aid_runs_total{agent="triage",final_agent="billing",status="completed"} 1`,
		`aid_http_requests_total{agent="triage",code="200",final_agent="billing",route="POST /v1/chat/completions"} 1`,
		`aid_http_request_duration_seconds_count{agent="triage",route="POST /v1/chat/completions"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("no %s in metrics:\n%s", want, grep(string(metrics), "aid_"))
		}
	}
}

func TestDelegateThroughRuns(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{
			"triage":     {calls(call("d1", "delegate_to_researcher", `{"input":"find the policy"}`)), answer("Policy: 30 days.")},
			"researcher": {answer("30 days")},
		}},
		agents: []agents.Agent{
			{Name: "triage", Model: "large", Instructions: "Route.", Delegates: []string{"researcher"}},
			{Name: "researcher", Model: "large", Instructions: "Research."},
		},
	})
	status, _, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Return policy?"}`)
	r := decodeRun(t, body)
	if status != 200 || r.Status != "completed" || r.Agent != "triage" || strings.Join(r.Path, ">") != "triage" || r.Answer != "Policy: 30 days." {
		t.Fatalf("%d %s", status, body)
	}
	d := r.Steps[0].ToolCalls[0]
	if d.Delegate == nil || d.Delegate.Agent != "researcher" || d.Observation != "30 days" {
		t.Errorf("delegate call %+v", d)
	}
	// The run's messages are the next run's history.
	if len(r.Messages) < 4 {
		t.Errorf("messages %s", r.Messages)
	}
}

func TestRunErrors(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {calls(call("x", "nothing", `{}`))}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Loop.", MaxSteps: 1}}})
	tests := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"unknown agent", "/v1/agents/ghost/runs", `{"input":"q"}`, 404, service.CodeModelNotFound},
		{"no input", "/v1/agents/triage/runs", `{"input":"  "}`, 400, service.CodeInvalidRequest},
		{"unknown field", "/v1/agents/triage/runs", `{"input":"q","inptu":"q"}`, 400, service.CodeInvalidJSON},
		{"bad history", "/v1/agents/triage/runs", `{"input":"q","history":[{"role":"wizard","content":"x"}]}`, 400, service.CodeInvalidRequest},
		{"max steps", "/v1/agents/triage/runs", `{"input":"q"}`, 500, service.CodeMaxSteps},
		{"no route", "/v1/agents", `{}`, 404, service.CodeRouteNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := e.do(t, "POST", tt.path, tt.body)
			if code, _, _ := servicetest.APIError(t, body); status != tt.status || code != tt.code {
				t.Errorf("got %d %s, want %d %s", status, body, tt.status, tt.code)
			}
		})
	}
	// A run that failed is still a run: its id and steps come back.
	_, hdr, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"q"}`)
	r := decodeRun(t, body)
	if r.Status != "max_steps" || r.RunID == "" || hdr.Get("X-Aid-Run-Id") != r.RunID || len(r.Steps) != 1 {
		t.Errorf("failed run %s", body)
	}
}

func TestRunEventStream(t *testing.T) {
	e := newEnv(t, options{
		fake:   fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {calls(call("c1", "lookup", `{"id":"A1"}`)), answer("Shipped on Monday.")}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Look up.", Tools: []string{"lookup"}}},
		tools:  []agents.Tool{{Name: "lookup", Description: "Look up an order."}},
		impls: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			agents.ReportProgress(ctx, agents.ToolProgress{Progress: 1, Total: 2, Message: "asking the warehouse"})
			return "status: shipped", nil
		})},
	})
	status, hdr, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Where is A1?"}`, "Accept", "text/event-stream")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("%d %s", status, hdr)
	}
	var names []string
	var result run
	var tokens strings.Builder
	for _, ev := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		name, rest, _ := strings.Cut(ev, "\n")
		name = strings.TrimPrefix(name, "event: ")
		names = append(names, name)
		if name == "result" {
			result = decodeRun(t, []byte(strings.TrimPrefix(rest, "data: ")))
		}
		if name == "token" {
			var tok service.TokenEvent
			if err := json.Unmarshal([]byte(strings.TrimPrefix(rest, "data: ")), &tok); err != nil || tok.Agent != "triage" || tok.Step != 2 {
				t.Errorf("token event %s: %v", rest, err)
			}
			tokens.WriteString(tok.Text)
		}
		if name == "tool_call" && !strings.Contains(rest, `"observation":"status: shipped"`) {
			t.Errorf("tool event %s", rest)
		}
		if name == "tool_progress" {
			var p service.ToolProgressEvent
			want := service.ToolProgressEvent{Agent: "triage", Step: 1, CallID: "c1", Tool: "lookup", Progress: 1, Total: 2, Message: "asking the warehouse"}
			if err := json.Unmarshal([]byte(strings.TrimPrefix(rest, "data: ")), &p); err != nil || p != want {
				t.Errorf("tool_progress event %s: %v", rest, err)
			}
		}
	}
	if strings.Join(names, ",") != "run,model_call,tool_call_start,tool_progress,tool_call,token,token,token,model_call,result" {
		t.Errorf("events %v\n%s", names, body)
	}
	if result.Status != "completed" || result.Answer != "Shipped on Monday." || tokens.String() != result.Answer {
		t.Errorf("result %+v", result)
	}
}

// TestEveryKindOfCallHasToolEvents: a runs stream reports a search_ call,
// a Go tool's call and a transfer alike, each with a tool_call_start and a
// tool_call event; and a resumed run's stream reports the call it
// approved.
func TestEveryKindOfCallHasToolEvents(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{
			"triage":  {calls(call("s1", "search_kb", `{"query":"refunds"}`), call("l1", "lookup", `{"id":"A1"}`)), calls(call("t1", "transfer_to_billing", `{}`))},
			"billing": {answer("Refunds take 30 days.")},
		}},
		agents: []agents.Agent{
			{Name: "triage", Model: "large", Instructions: "Look.", Tools: []string{"lookup"}, Retrievers: []string{"kb"}, Handoffs: []string{"billing"}},
			{Name: "billing", Model: "large", Instructions: "Bill."},
		},
		tools: []agents.Tool{{Name: "lookup", Description: "Look up an order."}},
		impls: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return "status: shipped", nil
		})},
		searchers: map[string]agents.Searcher{"kb": agents.SearchFunc(func(context.Context, string, int) ([]retrieval.Hit, error) {
			return []retrieval.Hit{{Chunk: retrieval.Chunk{ID: "h1", Source: "docs/refunds.md", Text: "30 days"}}}, nil
		})},
	})
	toolEvents := func(events []sseEvent) map[string][]string {
		got := map[string][]string{}
		for _, ev := range events {
			if ev.name != "tool_call_start" && ev.name != "tool_call" {
				continue
			}
			var te service.ToolCallEvent
			if err := json.Unmarshal([]byte(ev.data), &te); err != nil {
				t.Fatalf("%s: %v", ev.data, err)
			}
			if te.CallID == "" || te.Agent == "" || te.Step == 0 || ev.name == "tool_call_start" && te.Arguments == "" || ev.name == "tool_call" && te.Observation == "" {
				t.Errorf("%s %s", ev.name, ev.data)
			}
			got[te.Tool] = append(got[te.Tool], ev.name)
		}
		return got
	}
	got := toolEvents(e.sse(t, "/v1/agents/triage/runs", `{"input":"How long do refunds take?"}`))
	for _, tool := range []string{"search_kb", "lookup", "transfer_to_billing"} {
		if strings.Join(got[tool], ",") != "tool_call_start,tool_call" {
			t.Errorf("%s: events %v", tool, got[tool])
		}
	}

	var refunds atomic.Int32
	a := approvalEnv(t, &refunds)
	status, _, body := a.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Refund A1"}`)
	paused := decodeRun(t, body)
	if status != 200 || paused.Status != "paused" {
		t.Fatalf("start: %d %s", status, body)
	}
	events := a.sse(t, "/v1/runs/"+paused.RunID+"/resume", `{"action":"approve"}`)
	if got := toolEvents(events); strings.Join(got["refund"], ",") != "tool_call_start,tool_call" || refunds.Load() != 1 {
		t.Errorf("resumed: events %v", events)
	}
	if last := events[len(events)-1]; last.name != "result" || !strings.Contains(last.data, `"status":"completed"`) {
		t.Errorf("resumed: last event %+v", last)
	}
}

// kb is the support-desk example's retriever over the fake embedder.
func kb(t *testing.T, gw *gateway.Gateway) *retrieval.Retriever {
	t.Helper()
	rs, err := retrieval.Build(t.Context(), gw,
		[]retrieval.StoreConfig{{Name: "kb", Distance: retrieval.DistanceCosine, Kind: memory.Kind{}}},
		[]retrieval.Config{{
			Name: "kb", Source: retrieval.Source{Dir: filepath.Join("..", "..", "examples", "support-desk"), Files: []string{"docs/**/*.md"}},
			ChunkSize: 600, ChunkOverlap: 80, EmbedModel: "embed", Store: "kb", TopK: 2, Rerank: retrieval.RerankLexical,
		}}, retrieval.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs["kb"].Ingest(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rs["kb"]
}

func TestRetrievalBackedAnswerAndSearchEndpoint(t *testing.T) {
	// The retriever needs the env's gateway, and the env its retriever: a
	// searcher that reads it late breaks the cycle.
	var r atomic.Pointer[retrieval.Retriever]
	late := agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) {
		return r.Load().Search(ctx, q, k)
	})
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {
			calls(call("s1", "search_kb", `{"query":"how long do I have to return an item"}`)),
			answer("You have 30 days [docs/refunds.md#Refunds]."),
		}}},
		agents:    []agents.Agent{{Name: "triage", Model: "large", Instructions: "Cite.", Retrievers: []string{"kb"}, Budget: "search"}},
		budgets:   []gateway.Budget{{Name: "search", MaxUSD: 1, Scope: gateway.ScopeRun}},
		searchers: map[string]agents.Searcher{"kb": late},
		svc:       func(c *service.Config) { c.SearchBudget = "search" },
	})
	r.Store(kb(t, e.gw))
	before := e.spend(t)

	status, _, body := e.do(t, "POST", "/v1/retrievers/kb/search", `{"query":"how long do I have to return an item","k":1}`)
	var res struct {
		Object string `json:"object"`
		Data   []struct {
			Source, Heading, Text string
			Score                 float64
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &res); err != nil || status != 200 || len(res.Data) != 1 || res.Data[0].Source != "docs/refunds.md" || res.Data[0].Text == "" {
		t.Fatalf("search: %d %s", status, body)
	}
	// The query's embedding was charged to the search budget, under the
	// request's account, which closed with the request.
	after := e.spend(t)
	byBudget, err := e.gw.SpendByBudget(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	charged := false
	for _, b := range byBudget {
		charged = charged || b.Budget == "search" && b.Spent.Tokens > 0
	}
	if after.Calls != before.Calls+1 || !charged || len(after.ByAccount) != 0 {
		t.Errorf("ledger before %+v after %+v, by budget %+v", before, after, byBudget)
	}

	status, _, body = e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Can I return my blender?"}`)
	run := decodeRun(t, body)
	if status != 200 || run.Answer != "You have 30 days [docs/refunds.md#Refunds]." {
		t.Fatalf("run: %d %s", status, body)
	}
	if obs := run.Steps[0].ToolCalls[0].Observation; !strings.Contains(obs, `"cite":"docs/refunds.md#Refunds"`) {
		t.Errorf("search observation %s", obs)
	}

	for _, tt := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/v1/retrievers/nope/search", `{"query":"q"}`, 404, service.CodeRetrieverNotFound},
		{"/v1/retrievers/kb/search", `{"query":""}`, 400, service.CodeInvalidRequest},
		{"/v1/retrievers/kb/search", `{"query":"q","k":21}`, 400, service.CodeInvalidRequest},
		{"/v1/retrievers/kb/search", `{"query":"q","k":-1}`, 400, service.CodeInvalidRequest},
	} {
		status, _, body := e.do(t, "POST", tt.path, tt.body)
		if code, _, _ := servicetest.APIError(t, body); status != tt.status || code != tt.code {
			t.Errorf("%s %s: %d %s", tt.path, tt.body, status, body)
		}
	}
}

func TestSearchBudgetExceeded(t *testing.T) {
	var r atomic.Pointer[retrieval.Retriever]
	e := newEnv(t, options{
		budgets:   []gateway.Budget{{Name: "search", MaxTotalTokens: 1, Scope: gateway.ScopeRun}},
		searchers: map[string]agents.Searcher{"kb": agents.SearchFunc(func(ctx context.Context, q string, k int) ([]retrieval.Hit, error) { return r.Load().Search(ctx, q, k) })},
		svc:       func(c *service.Config) { c.SearchBudget = "search" },
	})
	// Ingest outside the budget, then search within it.
	r.Store(kb(t, e.gw))
	status, _, body := e.do(t, "POST", "/v1/retrievers/kb/search", `{"query":"return an item"}`)
	if code, _, _ := servicetest.APIError(t, body); status != http.StatusPaymentRequired || code != service.CodeBudgetExceeded {
		t.Errorf("%d %s", status, body)
	}
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
