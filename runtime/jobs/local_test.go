package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/jobs"
)

// gate is a read tool that blocks until released, counting the calls in
// flight at once.
type gate struct {
	release  chan struct{}
	inFlight atomic.Int32
	mu       sync.Mutex
	peak     map[string]int32
	calls    atomic.Int32
}

func newGate() *gate { return &gate{release: make(chan struct{}), peak: map[string]int32{}} }

func (g *gate) impl(agent string, inAgent *atomic.Int32) agents.Implementation {
	return agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
		g.calls.Add(1)
		n := inAgent.Add(1)
		defer inAgent.Add(-1)
		g.inFlight.Add(1)
		defer g.inFlight.Add(-1)
		g.mu.Lock()
		g.peak[agent] = max(g.peak[agent], n)
		g.mu.Unlock()
		select {
		case <-g.release:
			return "open", nil
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	})
}

// newRuntime builds agents a and b, each calling its own gated tool once
// and then answering.
func newRuntime(t *testing.T, g *gate) *agents.Runtime {
	t.Helper()
	step := fake.Step{ToolCalls: []gateway.ToolCall{{ID: "w", Name: "wait", Arguments: json.RawMessage(`{}`)}}}
	stepB := fake.Step{ToolCalls: []gateway.ToolCall{{ID: "w", Name: "wait_b", Arguments: json.RawMessage(`{}`)}}}
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"a": {step, {Text: "done a"}}, "b": {stepB, {Text: "done b"}}}})
	if err != nil {
		t.Fatal(err)
	}
	caps := []gateway.Capability{gateway.CapabilityTools}
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100, Capabilities: caps}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	var inA, inB atomic.Int32
	schema := json.RawMessage(`{"type":"object"}`)
	rt, err := agents.New(agents.Config{
		Gateway: gw, Store: agents.NewInMemoryStore(),
		Agents:          []agents.Agent{{Name: "a", Model: "small", Tools: []string{"wait"}}, {Name: "b", Model: "small", Tools: []string{"wait_b"}}},
		Tools:           []agents.Tool{{Name: "wait", Description: "d", Input: schema}, {Name: "wait_b", Description: "d", Input: schema}},
		Implementations: map[string]agents.Implementation{"wait": g.impl("a", &inA), "wait_b": g.impl("b", &inB)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// waitFor polls until cond holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func status(t *testing.T, rt *agents.Runtime, id string) agents.Status {
	t.Helper()
	rec, err := rt.Store().LoadRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Status
}

// TestLocalLimits submits more runs than the workers and the per-agent
// limit allow: each submission answers at once with the run queued, the
// limits hold, the queue refuses what exceeds MaxQueued without writing
// anything, and every accepted run completes.
func TestLocalLimits(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	rt := newRuntime(t, g)
	q, err := jobs.NewLocal(rt, jobs.Config{Workers: 2, AgentConcurrency: map[string]int{"b": 1}, MaxQueued: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	submit := func(agent string) error {
		rec, err := q.Submit(ctx, agent, "go", agents.RunOptions{})
		if err == nil {
			if rec.Status != agents.StatusQueued {
				t.Fatalf("submitted run is %s", rec.Status)
			}
			ids = append(ids, rec.RunID)
		}
		return err
	}
	// Two runs of a take both shared workers, one of b takes b's one
	// slot; the second of b waits for it, and so do two more of a.
	for _, a := range []string{"a", "a", "b"} {
		if err := submit(a); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "three runs in their tool", func() bool { return g.inFlight.Load() == 3 })
	for i, a := range []string{"b", "a", "a"} {
		if err := submit(a); err != nil {
			t.Fatal(err)
		}
		if q.Waiting() != i+1 {
			t.Fatalf("%d waiting, want %d", q.Waiting(), i+1)
		}
	}
	err = submit("a")
	var full *jobs.FullError
	if !errors.As(err, &full) || full.Waiting != 3 || full.Max != 3 || full.RetryAfter != jobs.DefaultRetryAfter {
		t.Fatalf("submission to a full queue: %v", err)
	}
	if len(ids) != 6 {
		t.Fatalf("%d runs accepted, want 6", len(ids))
	}
	close(g.release)
	for _, id := range ids {
		waitFor(t, "run "+id+" to complete", func() bool { return status(t, rt, id) == agents.StatusCompleted })
	}
	if g.peak["a"] > 2 || g.peak["b"] != 1 {
		t.Fatalf("peak concurrency a=%d (limit 2) b=%d (limit 1)", g.peak["a"], g.peak["b"])
	}
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Submit(ctx, "a", "late", agents.RunOptions{}); !errors.As(err, new(*jobs.ClosedError)) {
		t.Fatalf("submission after Stop: %v", err)
	}
}

// TestLocalStopInterrupts stops a queue whose run does not end within the
// stop's deadline: the run is interrupted, not failed, and stays running
// in the store, to be recovered.
func TestLocalStopInterrupts(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	rt := newRuntime(t, g)
	q, err := jobs.NewLocal(rt, jobs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := q.Submit(ctx, "a", "go", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run in its tool", func() bool { return g.inFlight.Load() == 1 })
	sctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := q.Stop(sctx); err == nil {
		t.Fatal("Stop returned nil though it interrupted a run")
	}
	if s := status(t, rt, rec.RunID); s != agents.StatusRunning {
		t.Fatalf("interrupted run is %s, want running", s)
	}
	close(g.release)
	res, err := rt.Drive(ctx, rec.RunID, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("recover: %s %v", res.Status, err)
	}
}

// TestConfigChecks refuses limits a queue cannot use.
func TestConfigChecks(t *testing.T) {
	for name, c := range map[string]jobs.Config{
		"rescue before timeout": {RunTimeout: time.Minute, RescueAfter: time.Minute},
		"zero agent limit":      {AgentConcurrency: map[string]int{"a": 0}},
		"agent not a queue":     {AgentConcurrency: map[string]int{"Billing Desk": 1}},
		"negative queue":        {MaxQueued: -1},
		"heartbeat too fast":    {DeadAfter: time.Second},
	} {
		if _, err := c.WithDefaults(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A crashed replica's runs go on within seconds by default, not
	// after the run timeout; every replica has a name.
	if c, err := (jobs.Config{}).WithDefaults(); err != nil || c.DeadAfter != 30*time.Second || c.DeadAfter >= c.RunTimeout || c.Replica == "" {
		t.Errorf("defaults: DeadAfter %v, RunTimeout %v, Replica %q, %v", c.DeadAfter, c.RunTimeout, c.Replica, err)
	}
	got, err := jobs.ParseAgentConcurrency(" billing=2, researcher=4 ")
	if err != nil || got["billing"] != 2 || got["researcher"] != 4 || len(got) != 2 {
		t.Fatalf("parse: %v %v", got, err)
	}
	for _, bad := range []string{"billing", "billing=x", "billing=2,billing=3", "billing=2.5"} {
		if _, err := jobs.ParseAgentConcurrency(bad); err == nil {
			t.Errorf("parse %q: accepted", bad)
		}
	}
}
