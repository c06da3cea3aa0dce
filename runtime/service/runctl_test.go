package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
)

// stopped is the part of a run answer that carries a partial result.
type stopped struct {
	RunID         string                `json:"run_id"`
	Status        string                `json:"status"`
	LastText      string                `json:"last_text"`
	CostUSD       float64               `json:"cost_usd"`
	Steps         []agents.StepRecord   `json:"steps"`
	ContinueURL   string                `json:"continue_url"`
	Continuations []agents.Continuation `json:"continuations"`
	Answer        string                `json:"answer"`
	Error         *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// slowEnv has a triage agent whose second model call outlasts its step
// timeout once, and then answers.
func slowEnv(t *testing.T, timeouts agents.Timeouts, svc func(*service.Config)) *env {
	return newEnv(t, options{
		// In order: the slow call is the second, and a continuation's
		// call the third.
		fake: fake.Config{Script: []fake.Step{
			{Text: "Looking it up.", ToolCalls: calls(call("c1", "lookup", `{"id":"A1"}`)).ToolCalls},
			{Text: "too late", Delay: time.Hour},
			answer("Shipped on Monday."),
		}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Look up.", Tools: []string{"lookup"}, Timeouts: timeouts}},
		tools:  []agents.Tool{{Name: "lookup", Description: "Look up an order."}},
		impls: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return "status: shipped", nil
		})},
		svc: svc,
	})
}

// TestTimedOutRunAnswersWithItsPartialResultAndContinues runs into a step
// timeout through the runs API: the answer is 504 run_timed_out with the
// run id, the completed step, the last text, the cost so far and where to
// continue; the continue endpoint then completes the same run, whose
// record lists the continuation.
func TestTimedOutRunAnswersWithItsPartialResultAndContinues(t *testing.T) {
	e := slowEnv(t, agents.Timeouts{Step: 50 * time.Millisecond}, nil)
	status, hdr, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Where is A1?"}`)
	var got stopped
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusGatewayTimeout || got.Error == nil || got.Error.Code != service.CodeRunTimedOut || hdr.Get("X-Should-Retry") != "false" {
		t.Fatalf("status %d %s", status, body)
	}
	if got.Status != "timed_out" || got.RunID == "" || hdr.Get("X-Aid-Run-Id") != got.RunID || len(got.Steps) != 1 ||
		got.LastText != "Looking it up." || got.CostUSD <= 0 || got.ContinueURL != "/v1/runs/"+got.RunID+"/continue" {
		t.Fatalf("partial result %s", body)
	}
	// The stored run says the same.
	status, _, body = e.do(t, "GET", "/v1/runs/"+got.RunID, "")
	var rec stopped
	if err := json.Unmarshal(body, &rec); err != nil || status != 200 || rec.Status != "timed_out" || rec.LastText != "Looking it up." || rec.ContinueURL == "" {
		t.Fatalf("GET: %d %s", status, body)
	}
	// Bad continuations are refused before the runtime sees them.
	for _, tt := range []struct{ body, param string }{
		{`{"steps":-1}`, "steps"},
		{`{"steps":101}`, "steps"},
		{`{"timeout":"soon"}`, "timeout"},
		{`{"timeout":"-5s"}`, "timeout"},
	} {
		status, _, body := e.do(t, "POST", got.ContinueURL, tt.body)
		if code, _, param := servicetest.APIError(t, body); status != 400 || code != service.CodeInvalidRequest || param != tt.param {
			t.Errorf("%s: %d %s", tt.body, status, body)
		}
	}
	// Continue, with no body at all.
	status, _, body = e.do(t, "POST", got.ContinueURL, "")
	var done stopped
	if err := json.Unmarshal(body, &done); err != nil || status != 200 || done.Status != "completed" || done.Answer != "Shipped on Monday." || done.RunID != got.RunID {
		t.Fatalf("continue: %d %s", status, body)
	}
	status, _, body = e.do(t, "GET", "/v1/runs/"+got.RunID, "")
	rec = stopped{}
	if err := json.Unmarshal(body, &rec); err != nil || rec.Status != "completed" || len(rec.Continuations) != 1 || rec.Continuations[0].From != agents.StatusTimedOut || rec.ContinueURL != "" {
		t.Fatalf("GET after continue: %d %s", status, body)
	}
	// A completed run is not continued; an unknown one is not found.
	status, _, body = e.do(t, "POST", got.ContinueURL, `{"steps":2,"by":"ops"}`)
	if code, _, _ := servicetest.ErrorOnly(t, body); status != http.StatusConflict || code != service.CodeRunNotContinuable {
		t.Errorf("continue of a completed run: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/run_nope/continue", "")
	if code, _, _ := servicetest.ErrorOnly(t, body); status != http.StatusNotFound || code != service.CodeRunNotFound {
		t.Errorf("continue of an unknown run: %d %s", status, body)
	}
}

// TestChatCompletionTimedOutCarriesTheRun answers a chat completion that
// ran out of the service's request timeout: the run ends timed_out (not
// failed) and the OpenAI error carries the run's partial result in its aid
// extension.
func TestChatCompletionTimedOutCarriesTheRun(t *testing.T) {
	e := slowEnv(t, agents.Timeouts{}, func(c *service.Config) { c.Limits.RequestTimeout = 80 * time.Millisecond })
	status, hdr, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Where is A1?"}]}`)
	var v struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Aid stopped `json:"aid"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	if status != http.StatusGatewayTimeout || v.Error.Code != service.CodeRunTimedOut || v.Aid.Status != "timed_out" ||
		v.Aid.RunID != hdr.Get("X-Aid-Run-Id") || v.Aid.LastText != "Looking it up." || v.Aid.ContinueURL == "" || v.Aid.CostUSD <= 0 {
		t.Fatalf("%d %s", status, body)
	}
	rec, err := e.runtime.Store().LoadRun(context.Background(), v.Aid.RunID)
	if err != nil || rec.Status != agents.StatusTimedOut {
		t.Fatalf("stored %s %v", rec.Status, err)
	}
}

// TestCancelThroughTheService cancels, through one service, a run that
// another service on the same store drives (two replicas), blocked in a
// write tool: the cancel answers 200 with the cancelled run and who asked;
// the request that started the run answers 409 run_cancelled with its
// partial result. Cancelling a completed run is refused; a paused one is
// cancelled by the cancel itself.
func TestCancelThroughTheService(t *testing.T) {
	store := agents.NewInMemoryStore()
	started := make(chan string, 1)
	opts := options{
		fake:   fake.Config{Agents: map[string][]fake.Step{"triage": {calls(call("c1", "send", `{"id":"A1"}`)), answer("sent")}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Send.", Tools: []string{"send"}}},
		tools:  []agents.Tool{{Name: "send", Description: "Send a parcel.", Effects: agents.EffectsWrite}},
		impls: map[string]agents.Implementation{"send": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			ri, _ := agents.RunInfoFromContext(ctx)
			started <- ri.RunID
			<-ctx.Done()
			return "", ctx.Err()
		})},
		store: store,
	}
	a, b := newEnv(t, opts), newEnv(t, opts)
	type answer struct {
		status int
		body   []byte
		id     string
	}
	done := make(chan answer, 1)
	go func() {
		status, hdr, body := a.do(t, "POST", "/v1/agents/triage/runs", `{"input":"Send A1"}`)
		done <- answer{status, body, hdr.Get("X-Aid-Run-Id")}
	}()
	id := <-started
	status, _, body := b.do(t, "POST", "/v1/runs/"+id+"/cancel", `{"by":"ops@example.com"}`)
	var rec struct {
		Status      string                `json:"status"`
		CancelledBy *agents.CancelRequest `json:"cancelled_by"`
		Steps       []agents.StepRecord   `json:"steps"`
		ContinueURL string                `json:"continue_url"`
	}
	if err := json.Unmarshal(body, &rec); err != nil || status != 200 || rec.Status != "cancelled" || rec.CancelledBy == nil ||
		rec.CancelledBy.By != "admin" || len(rec.Steps) != 1 || !rec.Steps[0].ToolCalls[0].Interrupted || rec.ContinueURL == "" {
		t.Fatalf("cancel: %d %s", status, body)
	}
	got := <-done
	var run stopped
	if err := json.Unmarshal(got.body, &run); err != nil || got.status != http.StatusConflict || run.Error == nil || run.Error.Code != service.CodeRunCancelled ||
		run.Status != "cancelled" || got.id != id || run.CostUSD <= 0 {
		t.Fatalf("the run's own request: %d %s", got.status, got.body)
	}
	// Cancel again: the run has stopped, it says so.
	if status, _, body := b.do(t, "POST", "/v1/runs/"+id+"/cancel", ""); status != 200 {
		t.Fatalf("second cancel: %d %s", status, body)
	}
	for _, tt := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/v1/runs/run_nope/cancel", "", 404, service.CodeRunNotFound},
		{"/v1/runs/" + id + "/cancel", `{"by":"` + strings.Repeat("x", agents.MaxByBytes+1) + `"}`, 400, service.CodeInvalidRequest},
		{"/v1/runs/" + id + "/cancel", `{"by":"a\u0000b"}`, 400, service.CodeInvalidRequest},
		{"/v1/runs/" + id + "/continue", `{"by":"a\u0000b"}`, 400, service.CodeInvalidRequest},
		{"/v1/runs/" + id + "/cancel", `{"who":"x"}`, 400, service.CodeInvalidJSON},
	} {
		status, _, body := b.do(t, "POST", tt.path, tt.body)
		if code, _, _ := servicetest.APIError(t, body); status != tt.status || code != tt.code {
			t.Errorf("%s %s: %d %s", tt.path, tt.body, status, body)
		}
	}
}

// TestCancelAPausedRunThroughTheService cancels a run waiting for
// approval, and refuses to cancel a completed one.
func TestCancelAPausedRunThroughTheService(t *testing.T) {
	var refunds atomic.Int32
	e := approvalEnv(t, &refunds)
	_, hdr, _ := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Refund A1"}]}`)
	id := hdr.Get("X-Aid-Run-Id")
	status, _, body := e.do(t, "POST", "/v1/runs/"+id+"/cancel", "")
	if status != 200 || !strings.Contains(string(body), `"status":"cancelled"`) {
		t.Fatalf("cancel a paused run: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/"+id+"/resume", `{"action":"approve"}`)
	if code, _, _ := servicetest.ErrorOnly(t, body); status != http.StatusConflict || code != service.CodeRunNotPaused || refunds.Load() != 0 {
		t.Fatalf("resume of a cancelled run: %d %s", status, body)
	}
	_, hdr, _ = e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Refund A1"}]}`)
	id = hdr.Get("X-Aid-Run-Id")
	if status, _, body := e.do(t, "POST", "/v1/runs/"+id+"/resume", `{"action":"reject"}`); status != 200 {
		t.Fatalf("reject: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/"+id+"/cancel", "")
	if code, _, _ := servicetest.ErrorOnly(t, body); status != http.StatusConflict || code != service.CodeRunNotCancellable {
		t.Fatalf("cancel of a completed run: %d %s", status, body)
	}
}

// TestApprovalPolicyThroughTheService runs an agent under a policy that
// denies large refunds and asks about the rest: the denial is an
// observation with the rule's reason; the ask pauses with the rule in the
// pending call; an approval for the thread is kept, and the thread's next
// run does not ask. Bad scopes are refused without touching the run.
func TestApprovalPolicyThroughTheService(t *testing.T) {
	var refunds atomic.Int32
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "refund", `{"order":"A1","amount_usd":900}`), call("c2", "refund", `{"order":"A2","amount_usd":30}`)),
			answer("Refunded A2."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Refund.", Tools: []string{"refund"}}},
		tools:  []agents.Tool{{Name: "refund", Description: "Refund an order.", Input: json.RawMessage(`{"type":"object","properties":{"order":{"type":"string"},"amount_usd":{"type":"number"}}}`), Effects: agents.EffectsWrite}},
		impls: map[string]agents.Implementation{"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			refunds.Add(1)
			return "refunded " + string(args), nil
		})},
		approvals: policy.Policy{Rules: []policy.Rule{
			{Tool: "refund", When: "args.amount_usd > 500", Action: policy.Deny, Reason: "refunds above 500 USD go through finance"},
			{Tool: "refund", Action: policy.Ask, Reason: "refunds move money"},
		}},
	})
	start := func() run {
		status, _, body := e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"refund","thread_id":"th-9"}`)
		if status != 200 {
			t.Fatalf("start: %d %s", status, body)
		}
		return decodeRun(t, body)
	}
	r := start()
	var pend struct {
		Pending struct {
			Tool   string               `json:"tool"`
			Policy *agents.PolicyRecord `json:"policy"`
		} `json:"pending"`
	}
	_, _, body := e.do(t, "GET", "/v1/runs/"+r.RunID, "")
	if err := json.Unmarshal(body, &pend); err != nil || r.Status != "paused" || pend.Pending.Policy == nil || pend.Pending.Policy.Rule != 2 || pend.Pending.Policy.Reason != "refunds move money" {
		t.Fatalf("paused run %s: %s", r.Status, body)
	}
	for _, tt := range []struct{ body, param string }{
		{`{"action":"approve","scope":"forever"}`, "scope"},
		{`{"action":"reject","scope":"thread"}`, "scope"},
	} {
		status, _, body := e.do(t, "POST", "/v1/runs/"+r.RunID+"/resume", tt.body)
		if code, _, param := servicetest.APIError(t, body); status != 400 || code != service.CodeInvalidRequest || param != tt.param {
			t.Errorf("%s: %d %s", tt.body, status, body)
		}
	}
	status, _, body := e.do(t, "POST", "/v1/runs/"+r.RunID+"/resume", `{"action":"approve","scope":"thread","by":"carol"}`)
	done := decodeRun(t, body)
	if status != 200 || done.Status != "completed" || refunds.Load() != 1 {
		t.Fatalf("resume: %d %s", status, body)
	}
	denied, approved := done.Steps[0].ToolCalls[0], done.Steps[0].ToolCalls[1]
	if denied.ErrorKind != agents.KindDenied || !strings.Contains(denied.Observation, "refunds above 500 USD go through finance") {
		t.Fatalf("denied call %+v", denied)
	}
	// Who approved is the key (the token, an admin key); the body's name
	// is only a claim.
	if a := approved.Approval; a == nil || a.By != "admin" || a.ClaimedBy != "carol" || a.Scope != agents.GrantThread {
		t.Fatalf("approval %+v", approved.Approval)
	}
	// The thread's next run: the small refund runs on the thread grant.
	r = start()
	if r.Status != "completed" || refunds.Load() != 2 || r.Steps[0].ToolCalls[1].Policy.Grant == nil {
		t.Fatalf("the thread's next run: %s, %d refunds", r.Status, refunds.Load())
	}
}

// TestRunEventsAsJSONLines exports a paused-then-resumed run's event log
// and reads it back as a recording.
func TestRunEventsAsJSONLines(t *testing.T) {
	var refunds atomic.Int32
	e := approvalEnv(t, &refunds)
	_, hdr, _ := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Refund A1"}]}`)
	id := hdr.Get("X-Aid-Run-Id")
	if status, _, body := e.do(t, "POST", "/v1/runs/"+id+"/resume", `{"action":"approve","by":"dana"}`); status != 200 {
		t.Fatalf("resume: %d %s", status, body)
	}
	status, hdr, body := e.do(t, "GET", "/v1/runs/"+id+"/events?format=jsonl", "")
	if status != 200 || hdr.Get("Content-Type") != "application/jsonl" {
		t.Fatalf("events: %d %s %s", status, hdr.Get("Content-Type"), body)
	}
	rec, err := agents.ReadRecording(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("read: %v\n%s", err, body)
	}
	if rec.Run.RunID != id || rec.Run.Input != "Refund A1" || rec.Run.Status != agents.StatusCompleted || len(rec.Steps) != 2 ||
		rec.Steps[0].ToolCalls[0].Approval == nil || rec.Steps[0].ToolCalls[0].Approval.By != "admin" || rec.Steps[0].ToolCalls[0].Approval.ClaimedBy != "dana" || rec.Steps[0].Model != "m-large" {
		t.Fatalf("recording %+v %+v", rec.Run, rec.Steps)
	}
	for _, tt := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/runs/" + id + "/events?format=csv", 400, service.CodeInvalidRequest},
		{"/v1/runs/run_nope/events", 404, service.CodeRunNotFound},
	} {
		status, _, body := e.do(t, "GET", tt.path, "")
		if code, _, _ := servicetest.APIError(t, body); status != tt.status || code != tt.code {
			t.Errorf("%s: %d %s", tt.path, status, body)
		}
	}
}
