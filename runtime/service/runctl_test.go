package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
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
		if code, _, param := apiErr(t, body); status != 400 || code != service.CodeInvalidRequest || param != tt.param {
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
	if code, _, _ := apiErr(t, body); status != http.StatusConflict || code != service.CodeRunNotContinuable {
		t.Errorf("continue of a completed run: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/run_nope/continue", "")
	if code, _, _ := apiErr(t, body); status != http.StatusNotFound || code != service.CodeRunNotFound {
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
