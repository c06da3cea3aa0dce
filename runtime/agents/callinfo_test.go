package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// infoRecorder wraps a provider and records the call info of every chat
// call.
type infoRecorder struct {
	gateway.Provider
	mu    sync.Mutex
	infos []gateway.CallInfo
}

func (r *infoRecorder) Generate(ctx context.Context, m gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	ci, _ := gateway.CallInfoFromContext(ctx)
	r.mu.Lock()
	r.infos = append(r.infos, ci)
	r.mu.Unlock()
	return r.Provider.Generate(ctx, m, req)
}

// agentScriptRuntime builds a runtime over a fake that plays agent scripts:
// lead delegates to helper, calls an approval tool, answers invalid JSON
// once (the repair step), then valid JSON.
func agentScriptRuntime(t *testing.T, loop bool) (*agents.Runtime, *infoRecorder) {
	t.Helper()
	p, err := fake.New(fake.Config{Loop: loop, Agents: map[string][]fake.Step{
		"lead": {
			calls(call("", "delegate_to_helper", `{"input":"check the policy"}`)),
			calls(call("", "act", `{"id":"A"}`)),
			answer("not json"),
			answer(`{"answer":"done"}`),
		},
		"helper": {answer("the policy allows it")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &infoRecorder{Provider: p}
	gw, err := gateway.New(gateway.Config{Models: catalog(), Providers: map[string]gateway.Provider{"fake": rec}, Retry: gateway.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return newRuntime(t, agents.Config{
		Gateway: gw,
		Agents: []agents.Agent{
			{Name: "lead", Model: "small", Tools: []string{"act"}, Delegates: []string{"helper"}, Output: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)},
			{Name: "helper", Model: "small"},
		},
		Tools:           []agents.Tool{{Name: "act", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		Implementations: map[string]agents.Implementation{"act": echoTool},
	}), rec
}

// The loop puts (agent, step, run) on every model call: the step counts
// the agent's calls in its turn, a delegated agent starts its own turn at
// 1, a repair is a step, and a resumed run continues the numbering.
func TestCallInfoNumbersStepsPerAgentTurn(t *testing.T) {
	r, rec := agentScriptRuntime(t, false)
	res := mustRun(t, r, "lead", "go", agents.RunOptions{})
	if res.Status != agents.StatusPaused {
		t.Fatalf("status %s", res.Status)
	}
	if obs := res.Steps[0].ToolCalls[0].Observation; obs != "the policy allows it" {
		t.Fatalf("delegate observation %q", obs)
	}
	res, err := r.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != `{"answer":"done"}` {
		t.Fatalf("resume: %s %q %v", res.Status, res.Answer, err)
	}
	var got []string
	for _, ci := range rec.infos {
		if ci.RunID != res.RunID {
			t.Errorf("call info run %q, want %q", ci.RunID, res.RunID)
		}
		got = append(got, fmt.Sprintf("%s/%d", ci.Agent, ci.Step))
	}
	if want := "lead/1 helper/1 lead/2 lead/3 lead/4"; strings.Join(got, " ") != want {
		t.Fatalf("call info %v, want %s", got, want)
	}
}

// Concurrent runs each play the script from their own step numbers, not
// from a queue shared by every call.
func TestAgentScriptsUnderConcurrentRuns(t *testing.T) {
	r, _ := agentScriptRuntime(t, false)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			res, err := r.Run(t.Context(), "lead", "go", agents.RunOptions{})
			if err != nil || res.Status != agents.StatusPaused {
				errs <- fmt.Errorf("run: %s %v", res.Status, err)
				return
			}
			res, err = r.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
			if err != nil || res.Answer != `{"answer":"done"}` || len(res.Steps) != 4 {
				errs <- fmt.Errorf("resume: %s %q %d steps %v", res.Status, res.Answer, len(res.Steps), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
