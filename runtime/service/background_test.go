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
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/service"
)

// withLocalQueue gives the service an in-process queue, stopped when the
// test ends.
func withLocalQueue(t *testing.T, cfg jobs.Config) func(*service.Config) {
	return func(c *service.Config) {
		q, err := jobs.NewLocal(c.Agents, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Stop(context.Background()) })
		c.Jobs = q
	}
}

// pollRun reads GET /v1/runs/{id} until the run has the status.
func (e *env) pollRun(t *testing.T, id string, want agents.Status) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body := e.do(t, "GET", "/v1/runs/"+id, "")
		var v map[string]any
		if err := json.Unmarshal(body, &v); status != 200 || err != nil {
			t.Fatalf("get run: %d %s", status, body)
		}
		if v["status"] == string(want) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, want %s", id, v["status"], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBackgroundRunResumeAndContinue starts a run in the background, has
// it resumed in the background after its pause, and follows both through
// the runs API: each request answers 202 at once with the run queued.
func TestBackgroundRunResumeAndContinue(t *testing.T) {
	var refunds atomic.Int32
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "refund", `{"order":"A1"}`)),
			answer("Refunded A1."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Refund.", Tools: []string{"refund"}}},
		tools:  []agents.Tool{{Name: "refund", Description: "Refund an order.", Input: refundSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		impls: map[string]agents.Implementation{"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			refunds.Add(1)
			return "refunded " + string(args), nil
		})},
		svc: withLocalQueue(t, jobs.Config{}),
	})
	// POST /v1/runs names the agent in the body (the entry when left out).
	status, hdr, body := e.do(t, "POST", "/v1/runs", `{"input":"Refund A1","background":true,"thread_id":"th"}`)
	id := hdr.Get("X-Aid-Run-Id")
	if status != http.StatusAccepted || id == "" || hdr.Get("Location") != "/v1/runs/"+id ||
		!strings.Contains(string(body), `"status":"queued"`) || !strings.Contains(string(body), `"agent":"triage"`) {
		t.Fatalf("background run: %d %v %s", status, hdr, body)
	}
	v := e.pollRun(t, id, agents.StatusPaused)
	if v["pending"] == nil || refunds.Load() != 0 {
		t.Fatalf("paused run %v, %d refunds", v, refunds.Load())
	}
	status, _, body = e.do(t, "POST", "/v1/runs/"+id+"/resume", `{"action":"approve","by":"alice","background":true}`)
	if status != http.StatusAccepted || !strings.Contains(string(body), `"status":"queued"`) {
		t.Fatalf("background resume: %d %s", status, body)
	}
	v = e.pollRun(t, id, agents.StatusCompleted)
	// A background client reads the answer where a synchronous one does.
	if refunds.Load() != 1 || v["last_text"] != "Refunded A1." || v["answer"] != "Refunded A1." {
		t.Fatalf("completed run %v, %d refunds", v, refunds.Load())
	}
	// A decision the runtime refuses is refused at once, not queued.
	status, _, body = e.do(t, "POST", "/v1/runs/"+id+"/resume", `{"action":"approve","background":true}`)
	if code, _, _ := servicetest.APIError(t, body); status != http.StatusConflict || code != service.CodeRunNotPaused {
		t.Fatalf("background resume of a completed run: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/runs/"+id+"/continue", `{"background":true}`)
	if code, _, _ := servicetest.APIError(t, body); status != http.StatusConflict || code != service.CodeRunNotContinuable {
		t.Fatalf("background continue of a completed run: %d %s", status, body)
	}
	// The agent route takes background too; an unknown agent is 404.
	status, _, body = e.do(t, "POST", "/v1/agents/nobody/runs", `{"input":"x","background":true}`)
	if code, _, _ := servicetest.APIError(t, body); status != http.StatusNotFound || code != service.CodeModelNotFound {
		t.Fatalf("background run of an unknown agent: %d %s", status, body)
	}
	status, _, body = e.do(t, "POST", "/v1/agents/triage/runs", `{"input":"x","agent":"other","background":true}`)
	if _, _, param := servicetest.APIError(t, body); status != http.StatusBadRequest || param != "agent" {
		t.Fatalf("two agents: %d %s", status, body)
	}
}

// TestBackgroundQueueFull fills the queue: the next background request is
// 429 with Retry-After and creates no run.
func TestBackgroundQueueFull(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "wait", `{}`)),
			answer("done"),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Wait.", Tools: []string{"wait"}}},
		tools:  []agents.Tool{{Name: "wait", Description: "Wait.", Input: json.RawMessage(`{"type":"object"}`)}},
		impls: map[string]agents.Implementation{"wait": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			select {
			case <-release:
				return "ok", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})},
		svc: withLocalQueue(t, jobs.Config{Workers: 1, MaxQueued: 1, RetryAfter: 3 * time.Second}),
	})
	status, hdr, _ := e.do(t, "POST", "/v1/runs", `{"input":"one","background":true}`)
	if status != http.StatusAccepted {
		t.Fatalf("first: %d", status)
	}
	e.pollRun(t, hdr.Get("X-Aid-Run-Id"), agents.StatusRunning)
	if status, _, _ := e.do(t, "POST", "/v1/runs", `{"input":"two","background":true}`); status != http.StatusAccepted {
		t.Fatalf("second: %d", status)
	}
	status, hdr, body := e.do(t, "POST", "/v1/runs", `{"input":"three","background":true}`)
	if code, typ, _ := servicetest.APIError(t, body); status != http.StatusTooManyRequests || code != service.CodeQueueFull || typ != service.TypeRateLimit ||
		hdr.Get("Retry-After") != "3" || hdr.Get("X-Should-Retry") != "true" || hdr.Get("X-Aid-Run-Id") != "" {
		t.Fatalf("full queue: %d %v %s", status, hdr, body)
	}
}

// TestBackgroundWithoutAQueue refuses background on a service that has no
// queue, naming the field.
func TestBackgroundWithoutAQueue(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Script: []fake.Step{answer("hi")}}})
	status, _, body := e.do(t, "POST", "/v1/runs", `{"input":"hi","background":true}`)
	if _, _, param := servicetest.APIError(t, body); status != http.StatusBadRequest || param != "background" {
		t.Fatalf("background without a queue: %d %s", status, body)
	}
	// Without background, POST /v1/runs runs the entry agent and answers.
	status, _, body = e.do(t, "POST", "/v1/runs", `{"input":"hi"}`)
	if status != 200 || !strings.Contains(string(body), `"status":"completed"`) {
		t.Fatalf("run: %d %s", status, body)
	}
}

// TestFollowABackgroundRun follows a background run as server-sent
// events: the run as it stands while a worker drives it, then its result
// once it stops.
func TestFollowABackgroundRun(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "wait", `{}`)),
			answer("Hello."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Wait.", Tools: []string{"wait"}}},
		tools:  []agents.Tool{{Name: "wait", Description: "Wait.", Input: json.RawMessage(`{"type":"object"}`)}},
		impls: map[string]agents.Implementation{"wait": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			select {
			case <-release:
				return "ok", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})},
		svc: withLocalQueue(t, jobs.Config{Replica: "desk-7"}),
	})
	status, hdr, _ := e.do(t, "POST", "/v1/runs", `{"input":"hi","background":true}`)
	if status != http.StatusAccepted {
		t.Fatalf("background run: %d", status)
	}
	id := hdr.Get("X-Aid-Run-Id")
	// A running run names the replica that drives it.
	if v := e.pollRun(t, id, agents.StatusRunning); v["driven_by"] != "desk-7" {
		t.Fatalf("running run's driven_by is %v, want desk-7: %v", v["driven_by"], v)
	}
	time.AfterFunc(300*time.Millisecond, func() { close(release) })
	status, hdr, body := e.do(t, "GET", "/v1/runs/"+id, "", "Accept", "text/event-stream")
	if status != 200 || hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("follow: %d %v", status, hdr)
	}
	stream := string(body)
	result, ok := strings.CutPrefix(stream[strings.LastIndex(stream, "event: "):], "event: result\ndata: ")
	if !ok || !strings.Contains(result, `"status":"completed"`) || !strings.Contains(result, `"last_text":"Hello."`) || !strings.Contains(result, `"answer":"Hello."`) {
		t.Fatalf("stream does not end with the completed run:\n%s", body)
	}
	if !strings.HasPrefix(stream, "event: run\ndata: ") || !strings.Contains(stream, `"status":"running"`) {
		t.Fatalf("stream does not start with the running run:\n%s", body)
	}
	status, _, body = e.do(t, "GET", "/v1/runs/nope", "", "Accept", "text/event-stream")
	if status != http.StatusNotFound {
		t.Fatalf("follow an unknown run: %d %s", status, body)
	}
}
