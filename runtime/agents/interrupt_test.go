package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// shutdownDesk has a read tool (lookup) and a write tool without approval
// (send); either blocks until its context ends while block is set, and
// counts the calls that ran to the end.
type shutdownDesk struct {
	fx      fixture
	store   agents.Store
	block   atomic.Bool
	started chan string
	lookups atomic.Int32
	sends   atomic.Int32

	timeouts    agents.Timeouts // the desk agent's
	toolTimeout time.Duration   // both tools'
	tracer      trace.Tracer
}

func newShutdownDesk(t *testing.T, script ...fake.Step) *shutdownDesk {
	return &shutdownDesk{fx: newFixture(t, fake.Config{Script: script}), store: agents.NewInMemoryStore(), started: make(chan string, 4)}
}

// newAgentDesk is a shutdownDesk whose fake plays the desk agent's script
// by step number, so that a model call made again (after a timeout, a
// cancellation) gets the same answer.
func newAgentDesk(t *testing.T, script ...fake.Step) *shutdownDesk {
	return &shutdownDesk{fx: newFixture(t, fake.Config{Agents: map[string][]fake.Step{"desk": script}}), store: agents.NewInMemoryStore(), started: make(chan string, 4)}
}

func (d *shutdownDesk) runtime(t *testing.T) *agents.Runtime {
	return newRuntime(t, d.config())
}

func (d *shutdownDesk) config() agents.Config {
	impl := func(name string, n *atomic.Int32) agents.Implementation {
		return agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
			if d.block.Load() {
				select {
				case d.started <- name:
				default: // nobody waits for it
				}
				<-ctx.Done()
				return "", ctx.Err()
			}
			n.Add(1)
			return name + " " + string(args), nil
		})
	}
	return agents.Config{
		Gateway: d.fx.gw,
		Store:   d.store,
		Tracer:  d.tracer,
		Agents:  []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "send"}, Timeouts: d.timeouts}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: lookupSchema, Timeout: d.toolTimeout},
			{Name: "send", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Timeout: d.toolTimeout},
		},
		Implementations: map[string]agents.Implementation{"lookup": impl("lookup", &d.lookups), "send": impl("send", &d.sends)},
	}
}

// TestShutdownLeavesRunRecoverable cancels a run with the cause
// ErrInterrupted during a model call and during a tool call: the store
// keeps it running, and Recover in a fresh runtime sharing the store
// completes it. A plain cancellation still fails the run.
func TestShutdownLeavesRunRecoverable(t *testing.T) {
	slow := fake.Step{Text: "never", Delay: time.Hour}
	tests := []struct {
		name   string
		script []fake.Step
		// blockTool blocks the tools, so the cancellation lands in one;
		// otherwise it lands in the model call numbered modelCalls.
		blockTool  bool
		modelCalls int
		cause      error
		// What the store holds after the cancellation.
		wantStored  agents.Status
		wantSteps   int
		wantPending bool
		// What Recover does, for a run left running.
		wantRecovered agents.Status
		wantLookups   int32
		wantSends     int32
	}{
		{
			name:   "mid model call",
			script: []fake.Step{calls(call("l", "lookup", `{"id":"A"}`)), slow, answer("done")},
			// The second model call, after the lookup's step.
			modelCalls: 2, cause: agents.ErrInterrupted,
			wantStored: agents.StatusRunning, wantSteps: 1,
			wantRecovered: agents.StatusCompleted, wantLookups: 1,
		},
		{
			name:      "mid read call",
			script:    []fake.Step{calls(call("l", "lookup", `{"id":"A"}`)), answer("done")},
			blockTool: true, cause: agents.ErrInterrupted,
			wantStored: agents.StatusRunning, wantPending: true,
			// The interrupted read runs again, to the end this time.
			wantRecovered: agents.StatusCompleted, wantLookups: 1,
		},
		{
			name:      "mid write call",
			script:    []fake.Step{calls(call("s", "send", `{"id":"A"}`)), answer("done")},
			blockTool: true, cause: agents.ErrInterrupted,
			wantStored: agents.StatusRunning, wantPending: true,
			// It may or may not have happened: a human decides.
			wantRecovered: agents.StatusPaused,
		},
		{
			name:       "plain cancel mid model call",
			script:     []fake.Step{calls(call("l", "lookup", `{"id":"A"}`)), slow},
			modelCalls: 2, cause: context.Canceled,
			wantStored: agents.StatusFailed, wantSteps: 1,
		},
		{
			name:      "plain cancel mid read call",
			script:    []fake.Step{calls(call("l", "lookup", `{"id":"A"}`))},
			blockTool: true, cause: errors.New("client went away"),
			wantStored: agents.StatusFailed, wantSteps: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newShutdownDesk(t, tt.script...)
			d.block.Store(tt.blockTool)
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			type outcome struct {
				res agents.RunResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := d.runtime(t).Run(ctx, "desk", "help", agents.RunOptions{})
				done <- outcome{res, err}
			}()
			if tt.blockTool {
				<-d.started
			} else {
				waitUntil(t, func() bool { return d.fx.fake.Calls() == tt.modelCalls })
			}
			cancel(tt.cause)
			o := <-done
			interruptedRun := errors.Is(o.err, agents.ErrInterrupted)
			if interruptedRun != (tt.wantStored == agents.StatusRunning) {
				t.Fatalf("run: %s %v; wraps ErrInterrupted = %v", o.res.Status, o.err, interruptedRun)
			}
			if o.res.Status != tt.wantStored {
				t.Fatalf("result status %s, want %s (err %v)", o.res.Status, tt.wantStored, o.err)
			}
			rec, err := d.store.LoadRun(context.Background(), o.res.RunID)
			if err != nil || rec.Status != tt.wantStored {
				t.Fatalf("stored %s %v, want %s", rec.Status, err, tt.wantStored)
			}
			if len(rec.Checkpoint.Steps) != tt.wantSteps || (rec.Checkpoint.Pending != nil) != tt.wantPending {
				t.Fatalf("checkpoint: %d steps, pending %+v", len(rec.Checkpoint.Steps), rec.Checkpoint.Pending)
			}
			if tt.wantStored != agents.StatusRunning {
				return
			}
			if p := rec.Checkpoint.Pending; p != nil {
				// The interrupted call has no result: not in the
				// checkpoint, not in the store.
				if p.Step.ToolCalls[0].Done {
					t.Fatalf("interrupted call saved as done: %+v", p.Step.ToolCalls[0])
				}
				c, err := d.store.Call(context.Background(), o.res.RunID, "1.0")
				if err != nil || c.Result != nil {
					t.Fatalf("interrupted call in the store: %+v %v", c, err)
				}
			}
			d.block.Store(false)
			res, err := d.runtime(t).Drive(context.Background(), o.res.RunID, agents.DriveOptions{})
			if err != nil || res.Status != tt.wantRecovered {
				t.Fatalf("recovered: %s %v, want %s", res.Status, err, tt.wantRecovered)
			}
			if d.lookups.Load() != tt.wantLookups || d.sends.Load() != tt.wantSends {
				t.Fatalf("lookups %d sends %d, want %d %d", d.lookups.Load(), d.sends.Load(), tt.wantLookups, tt.wantSends)
			}
			if res.Status == agents.StatusCompleted && res.Answer != "done" {
				t.Fatalf("answer %q", res.Answer)
			}
			if res.Status == agents.StatusPaused {
				if res.Checkpoint.Pending.Reason != agents.PauseInterrupted {
					t.Fatalf("paused for %q", res.Checkpoint.Pending.Reason)
				}
				res, err = d.runtime(t).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve})
				if err != nil || res.Status != agents.StatusCompleted || res.Answer != "done" || d.sends.Load() != 1 {
					t.Fatalf("after the decision: %s %v, sends %d", res.Status, err, d.sends.Load())
				}
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
