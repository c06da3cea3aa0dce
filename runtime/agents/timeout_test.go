package agents_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// slowStep is a model answer that never comes before a timeout.
var slowStep = fake.Step{Text: "never", Delay: time.Hour}

// TestTimeoutsStopWithAPartialResult runs into a run timeout and a step
// timeout, in a model call and in read and write tool calls: the run ends
// timed_out with a *TimeoutError, its completed steps, its last text and
// its cost so far, and the store holds the same; a call stopped in flight
// is interrupted, recorded without a result, never done.
func TestTimeoutsStopWithAPartialResult(t *testing.T) {
	tests := []struct {
		name      string
		script    []fake.Step
		timeouts  agents.Timeouts
		blockTool bool
		wantScope agents.TimeoutScope
		wantSteps int // in the result, the stopped step included
		wantCall  string
		wantText  string
	}{
		{
			name:     "run timeout mid model call",
			script:   []fake.Step{{Text: "Let me look.", ToolCalls: calls(call("l", "lookup", `{"id":"A"}`)).ToolCalls}, slowStep},
			timeouts: agents.Timeouts{Run: 50 * time.Millisecond}, wantScope: agents.TimeoutRun,
			wantSteps: 1, wantText: "Let me look.",
		},
		{
			name:     "step timeout mid model call",
			script:   []fake.Step{calls(call("l", "lookup", `{"id":"A"}`)), slowStep},
			timeouts: agents.Timeouts{Step: 50 * time.Millisecond}, wantScope: agents.TimeoutStep,
			wantSteps: 1,
		},
		{
			name:     "step timeout mid read call",
			script:   []fake.Step{calls(call("l", "lookup", `{"id":"A"}`))},
			timeouts: agents.Timeouts{Step: 50 * time.Millisecond}, blockTool: true, wantScope: agents.TimeoutStep,
			wantSteps: 1, wantCall: "lookup",
		},
		{
			name:     "run timeout mid write call",
			script:   []fake.Step{calls(call("s", "send", `{"id":"A"}`))},
			timeouts: agents.Timeouts{Run: 50 * time.Millisecond}, blockTool: true, wantScope: agents.TimeoutRun,
			wantSteps: 1, wantCall: "send",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newShutdownDesk(t, tt.script...)
			d.block.Store(tt.blockTool)
			d.timeouts = tt.timeouts
			res, err := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{})
			te, ok := errors.AsType[*agents.TimeoutError](err)
			if !ok || te.Scope != tt.wantScope || te.RunID != res.RunID || te.Agent != "desk" {
				t.Fatalf("error %v (%T), want a %s *TimeoutError", err, err, tt.wantScope)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("a timeout does not match context.DeadlineExceeded")
			}
			if res.Status != agents.StatusTimedOut || len(res.Steps) != tt.wantSteps || res.LastText != tt.wantText {
				t.Fatalf("result %s, %d steps, last text %q", res.Status, len(res.Steps), res.LastText)
			}
			if res.CostUSD <= 0 || res.CostUSD != res.Steps[0].CostUSD || res.Checkpoint == nil {
				t.Fatalf("cost so far %v (step 1 cost %v), checkpoint %v", res.CostUSD, res.Steps[0].CostUSD, res.Checkpoint)
			}
			rec, err := d.store.LoadRun(context.Background(), res.RunID)
			if err != nil || rec.Status != agents.StatusTimedOut || rec.Checkpoint.CostUSD != res.CostUSD {
				t.Fatalf("stored %s %v, cost %v", rec.Status, err, rec.Checkpoint.CostUSD)
			}
			if tt.wantCall == "" {
				if rec.Checkpoint.Pending != nil || len(rec.Checkpoint.Steps) != 1 {
					t.Fatalf("stored checkpoint: %d steps, pending %+v", len(rec.Checkpoint.Steps), rec.Checkpoint.Pending)
				}
				return
			}
			// The call in flight: interrupted, not done, in the result, the
			// checkpoint and the store.
			c := res.Steps[0].ToolCalls[0]
			if c.Name != tt.wantCall || !c.Interrupted || c.Done || c.Observation != "" {
				t.Fatalf("stopped call in the result: %+v", c)
			}
			p := rec.Checkpoint.Pending
			if p == nil || !p.Step.ToolCalls[0].Interrupted || p.Step.ToolCalls[0].Done || len(rec.Checkpoint.Steps) != 0 {
				t.Fatalf("stored checkpoint: pending %+v, steps %d", p, len(rec.Checkpoint.Steps))
			}
			if sc, err := d.store.Call(context.Background(), res.RunID, "1.0"); err != nil || sc.Result != nil {
				t.Fatalf("interrupted call in the store: %+v %v", sc, err)
			}
			if d.lookups.Load()+d.sends.Load() != 0 {
				t.Fatalf("a stopped call counted as run")
			}
		})
	}
}

// TestTimeoutDeadlineOfTheCaller gives a run a context whose deadline's
// cause is a *TimeoutError, as a service's request timeout does: the run
// ends timed_out, not failed.
func TestTimeoutDeadlineOfTheCaller(t *testing.T) {
	d := newShutdownDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), slowStep)
	ctx, cancel := context.WithTimeoutCause(context.Background(), 50*time.Millisecond, &agents.TimeoutError{Scope: agents.TimeoutDeadline, Timeout: 50 * time.Millisecond})
	defer cancel()
	res, err := d.runtime(t).Run(ctx, "desk", "help", agents.RunOptions{})
	te, ok := errors.AsType[*agents.TimeoutError](err)
	if !ok || te.Scope != agents.TimeoutDeadline || te.RunID != res.RunID || res.Status != agents.StatusTimedOut || len(res.Steps) != 1 {
		t.Fatalf("%s %d steps, %v", res.Status, len(res.Steps), err)
	}
	// A deadline without that cause still fails the run.
	d = newShutdownDesk(t, slowStep)
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if res, _ := d.runtime(t).Run(ctx, "desk", "help", agents.RunOptions{}); res.Status != agents.StatusFailed {
		t.Fatalf("plain deadline: %s", res.Status)
	}
}

// TestToolTimeoutIsAnObservationWithinTheStep keeps the tool's own timeout
// apart from the step's: a tool that exceeds it is an error observation,
// and the run goes on.
func TestToolTimeoutIsAnObservationWithinTheStep(t *testing.T) {
	d := newShutdownDesk(t, calls(call("l", "lookup", `{"id":"A"}`)), answer("done"))
	d.block.Store(true)
	d.toolTimeout = 20 * time.Millisecond
	d.timeouts = agents.Timeouts{Step: time.Hour, Run: time.Hour}
	res, err := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Steps[0].ToolCalls[0].ErrorKind != agents.KindTimeout {
		t.Fatalf("%s %v %+v", res.Status, err, res.Steps)
	}
}

// TestDelegatedStepTimeoutIsAnObservation lets a delegated agent run out of
// its own step time: the delegation fails as an observation and the caller
// goes on, since its own time is not up.
func TestDelegatedStepTimeoutIsAnObservation(t *testing.T) {
	fx := newFixture(t, fake.Config{Agents: map[string][]fake.Step{
		"lead":   {calls(call("d", "delegate_to_helper", `{"input":"q"}`)), answer("without help")},
		"helper": {slowStep},
	}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{
		{Name: "lead", Model: "small", Delegates: []string{"helper"}},
		{Name: "helper", Model: "small", Timeouts: agents.Timeouts{Step: 30 * time.Millisecond}},
	}})
	res, err := r.Run(context.Background(), "lead", "go", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "without help" {
		t.Fatalf("%s %v", res.Status, err)
	}
	c := res.Steps[0].ToolCalls[0]
	if c.ErrorKind != agents.KindDelegateFailed || c.Delegate == nil || c.Delegate.Status != agents.StatusTimedOut {
		t.Fatalf("delegation %+v", c)
	}
}

// TestTimeoutMarksTheSpans checks that a timed-out run's agent span says
// so, and that the tool span of the call it stopped is marked interrupted.
func TestTimeoutMarksTheSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	d := newShutdownDesk(t, calls(call("l", "lookup", `{"id":"A"}`)))
	d.block.Store(true)
	d.timeouts = agents.Timeouts{Step: 30 * time.Millisecond}
	d.tracer = tp.Tracer("agents")
	if res, _ := d.runtime(t).Run(context.Background(), "desk", "help", agents.RunOptions{}); res.Status != agents.StatusTimedOut {
		t.Fatalf("status %s", res.Status)
	}
	var agent, tool sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "invoke_agent desk":
			agent = s
		case "execute_tool lookup":
			tool = s
		}
	}
	if agent == nil || tool == nil {
		t.Fatalf("spans missing")
	}
	if v, _ := attr(agent, "aid.run.status"); v.AsString() != "timed_out" || agent.Status().Code != codes.Error {
		t.Fatalf("agent span: status attribute %q, code %v", v.AsString(), agent.Status().Code)
	}
	var stoppedEvent bool
	for _, e := range agent.Events() {
		stoppedEvent = stoppedEvent || e.Name == "aid.run.stopped"
	}
	if !stoppedEvent {
		t.Fatalf("agent span has no aid.run.stopped event")
	}
	if v, _ := attr(tool, "aid.tool.error_kind"); v.AsString() != "interrupted" || tool.Status().Code != codes.Error {
		t.Fatalf("tool span: error kind %q, code %v", v.AsString(), tool.Status().Code)
	}
}

func TestNegativeTimeoutsAreRefused(t *testing.T) {
	fx := newFixture(t, fake.Config{})
	for _, cfg := range []agents.Config{
		{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Timeouts: agents.Timeouts{Step: -time.Second}}}},
		{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small"}}, Timeouts: agents.Timeouts{Run: -time.Second}},
	} {
		if _, err := agents.New(cfg); err == nil {
			t.Errorf("negative timeout accepted: %+v", cfg)
		}
	}
}
