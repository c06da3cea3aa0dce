package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// newStreamFixture is newFixture on models that can stream.
func newStreamFixture(t testing.TB, fc fake.Config, budgets ...gateway.Budget) fixture {
	t.Helper()
	fc.Record = true
	p, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	models := catalog()
	for i := range models {
		models[i].Spec.Capabilities = append(models[i].Spec.Capabilities, gateway.CapabilityStreaming)
	}
	gw, err := gateway.New(gateway.Config{
		Models: models, Providers: map[string]gateway.Provider{"fake": p}, Budgets: budgets,
		Retry: gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{gw: gw, fake: p}
}

// recorder is a hook that keeps every event. The runtime calls a hook one
// event at a time, so it has no lock: the race detector checks that claim.
type recorder struct{ events []agents.Event }

func (r *recorder) hook(ev agents.Event) { r.events = append(r.events, ev) }

// text concatenates the text events at depth 0, by step.
func (r *recorder) text() map[int]string {
	out := map[int]string{}
	for _, ev := range r.events {
		if ev.Kind == agents.EventText && ev.Depth == 0 {
			out[ev.Step] += ev.Text
		}
	}
	return out
}

func (r *recorder) count(k agents.EventKind) int {
	n := 0
	for _, ev := range r.events {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

// holds returns what budget accounts still hold.
func holds(t *testing.T, gw *gateway.Gateway) []gateway.AccountSpend {
	t.Helper()
	sum, err := gw.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []gateway.AccountSpend
	for _, a := range sum.ByAccount {
		if a.Reserved != (gateway.Amount{}) {
			out = append(out, a)
		}
	}
	return out
}

// ignoreRunIDs compares two runs of the same script that differ in their
// random ids only.
var ignoreRunIDs = cmp.Options{
	cmpopts.IgnoreFields(agents.RunResult{}, "RunID"),
	cmpopts.IgnoreFields(agents.PolicyRecord{}, "At"),
	cmpopts.EquateEmpty(),
}

// TestEventHookLeavesTheRunUnchanged runs the same scripts with and without
// a hook: the results, usage and cost included, must be the same, and the
// text events of each step must concatenate to that step's text.
func TestEventHookLeavesTheRunUnchanged(t *testing.T) {
	const maxUSD = 0.003 // large's worst case is above it, small's below
	lookup := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)
	for _, tt := range []struct {
		name    string
		fc      fake.Config
		cfg     func(fixture) agents.Config
		budgets []gateway.Budget
		agent   string
		want    func(*testing.T, agents.RunResult, *recorder)
	}{{
		name: "answer",
		fc:   fake.Config{Script: []fake.Step{answer("The order A-1 shipped on Monday.")}},
		cfg: func(fx fixture) agents.Config {
			return agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small"}}}
		},
		agent: "a",
		want: func(t *testing.T, res agents.RunResult, rec *recorder) {
			if n := rec.count(agents.EventText); n < 5 {
				t.Errorf("%d text events for a six-word answer, want one per word", n)
			}
		},
	}, {
		name: "parallel tools",
		fc: fake.Config{Script: []fake.Step{
			{Text: "Let me look. ", ToolCalls: []gateway.ToolCall{call("c1", "lookup", `{"id":"A-1"}`), call("c2", "lookup", `{"id":"A-2"}`), call("c3", "lookup", `{"id":"A-3"}`)}},
			answer("Both shipped."),
		}},
		cfg: func(fx fixture) agents.Config {
			return agents.Config{
				Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}}},
				Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookup}},
				Implementations: map[string]agents.Implementation{"lookup": echoTool},
			}
		},
		agent: "a",
		want: func(t *testing.T, res agents.RunResult, rec *recorder) {
			if rec.count(agents.EventToolCalls) != 1 || rec.count(agents.EventToolResult) != 3 {
				t.Errorf("%d tool-calls events, %d tool results", rec.count(agents.EventToolCalls), rec.count(agents.EventToolResult))
			}
		},
	}, {
		name: "handoff and delegate",
		fc: fake.Config{ByModel: map[string][]fake.Step{
			"m-small": {calls(call("d", "delegate_to_research", `{"input":"find the invoice"}`)), calls(call("t", "transfer_to_billing", `{}`))},
			"m-tiny":  {answer("invoice 7 is open")},
			"m-large": {answer("your invoice is paid now")},
		}},
		cfg:   team,
		agent: "triage",
		want: func(t *testing.T, res agents.RunResult, rec *recorder) {
			var delegated string
			var handoff, delegate bool
			for _, ev := range rec.events {
				switch {
				case ev.Kind == agents.EventText && ev.Depth == 1:
					if ev.Agent != "research" {
						t.Errorf("delegated text from %q", ev.Agent)
					}
					delegated += ev.Text
				case ev.Kind == agents.EventHandoff:
					handoff = ev.Agent == "triage" && ev.Target == "billing"
				case ev.Kind == agents.EventDelegate:
					delegate = ev.Agent == "triage" && ev.Target == "research"
				}
			}
			if delegated != "invoice 7 is open" || !handoff || !delegate {
				t.Errorf("delegated text %q, handoff %v, delegate %v", delegated, handoff, delegate)
			}
			if last := rec.events[len(rec.events)-1]; last.Kind != agents.EventEnd || last.Depth != 0 || last.Agent != "billing" || last.Text != res.Answer {
				t.Errorf("last event %+v", last)
			}
		},
	}, {
		name: "degrade then pause",
		fc:   fake.Config{Script: []fake.Step{calls(call("r", "refund", `{}`)), answer("refunded")}},
		cfg: func(fx fixture) agents.Config {
			return degradeConfig(fx, maxUSD)
		},
		budgets: []gateway.Budget{{Name: "b", MaxUSD: maxUSD, Scope: gateway.ScopeRun}},
		agent:   "a",
		want: func(t *testing.T, res agents.RunResult, rec *recorder) {
			var aliases []string
			for _, ev := range rec.events {
				if ev.Kind == agents.EventModelCall {
					aliases = append(aliases, ev.Alias)
				}
			}
			if d := cmp.Diff([]string{"large", "small"}, aliases); d != "" {
				t.Errorf("model calls (-want +got):\n%s", d)
			}
			if rec.count(agents.EventPause) != 1 || res.Status != agents.StatusPaused {
				t.Errorf("status %s, %d pause events", res.Status, rec.count(agents.EventPause))
			}
		},
	}, {
		name: "budget breach on the second step",
		fc: fake.Config{Script: []fake.Step{
			calls(call("c1", "lookup", `{"id":"A-1"}`)),
			answer("never"),
		}},
		cfg: func(fx fixture) agents.Config {
			return agents.Config{
				Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}, Budget: "b"}},
				Budgets:         []gateway.Budget{{Name: "b", MaxTotalTokens: 240, Scope: gateway.ScopeRun}},
				Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookup}},
				Implementations: map[string]agents.Implementation{"lookup": echoTool},
			}
		},
		budgets: []gateway.Budget{{Name: "b", MaxTotalTokens: 240, Scope: gateway.ScopeRun}},
		agent:   "a",
		want: func(t *testing.T, res agents.RunResult, rec *recorder) {
			last := rec.events[len(rec.events)-1]
			var be *agents.BudgetExceededError
			if res.Status != agents.StatusBudgetExceeded || len(res.Steps) != 1 || last.Kind != agents.EventEnd || !errors.As(last.Err, &be) {
				t.Errorf("status %s, %d steps, last event %+v", res.Status, len(res.Steps), last)
			}
		},
	}, {
		name: "output repaired",
		fc:   fake.Config{Script: []fake.Step{answer(`{"n":"x"}`), answer(`{"n":3}`)}},
		cfg: func(fx fixture) agents.Config {
			return agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small",
				Output: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}}}
		},
		agent: "a",
		want: func(t *testing.T, res agents.RunResult, rec *recorder) {
			// The rejected answer never reaches the hook as text.
			if d := cmp.Diff(map[int]string{2: `{"n":3}`}, rec.text()); d != "" {
				t.Errorf("text (-want +got):\n%s", d)
			}
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			run := func(hook func(agents.Event)) (agents.RunResult, fixture, error) {
				fx := newStreamFixture(t, tt.fc, tt.budgets...)
				res, err := newRuntime(t, tt.cfg(fx)).Run(context.Background(), tt.agent, "hello there", agents.RunOptions{OnEvent: hook})
				return res, fx, err
			}
			plain, _, plainErr := run(nil)
			rec := &recorder{}
			got, fx, err := run(rec.hook)
			if (err == nil) != (plainErr == nil) || (err != nil && err.Error() != strings.ReplaceAll(plainErr.Error(), plain.RunID, got.RunID)) {
				t.Fatalf("error %v, without a hook %v", err, plainErr)
			}
			if d := cmp.Diff(plain, got, ignoreRunIDs, cmpopts.IgnoreFields(agents.Checkpoint{}, "RunID")); d != "" {
				t.Fatalf("run with a hook differs (-without +with):\n%s", d)
			}
			if fx.fake.Calls() == 0 && len(got.Steps) > 0 {
				t.Fatal("no provider call")
			}
			steps := append([]agents.StepRecord(nil), got.Steps...)
			if got.Checkpoint != nil && got.Checkpoint.Pending != nil {
				steps = append(steps, got.Checkpoint.Pending.Step)
			}
			text := rec.text()
			for _, s := range steps {
				if s.Agent != "" && text[s.Number] != s.Text && !(tt.name == "output repaired" && s.Number == 1) {
					t.Errorf("step %d: text events %q, step text %q", s.Number, text[s.Number], s.Text)
				}
			}
			for _, ev := range rec.events {
				if ev.RunID != got.RunID {
					t.Fatalf("event %+v has run id %q, want %q", ev, ev.RunID, got.RunID)
				}
			}
			if h := holds(t, fx.gw); len(h) != 0 {
				t.Fatalf("holds left: %+v", h)
			}
			tt.want(t, got, rec)
		})
	}
}

// TestEventHookWithoutStreamingModel: an alias that cannot stream is called
// with Generate and its text reported in one piece.
func TestEventHookWithoutStreamingModel(t *testing.T) {
	fx := newFixture(t, fake.Config{Script: []fake.Step{answer("one whole answer")}})
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small"}}})
	rec := &recorder{}
	res := mustRun(t, r, "a", "hi", agents.RunOptions{OnEvent: rec.hook})
	if rec.count(agents.EventText) != 1 || rec.text()[1] != res.Answer {
		t.Fatalf("events %+v", rec.events)
	}
}

// TestEventHookPanics: a hook panicking in the middle of a streamed answer
// stops the run as failed with a *HookPanicError, and the stream's hold is
// settled; one panicking on a parallel tool's goroutine does not crash the
// process.
func TestEventHookPanics(t *testing.T) {
	for _, kind := range []agents.EventKind{agents.EventText, agents.EventToolResult, agents.EventModelCall} {
		fx := newStreamFixture(t, fake.Config{Script: []fake.Step{
			calls(call("c1", "lookup", `{"id":"A-1"}`), call("c2", "lookup", `{"id":"A-2"}`)),
			answer("a long answer of many words"),
		}}, gateway.Budget{Name: "b", MaxTotalTokens: 100_000, Scope: gateway.ScopeRun})
		r := newRuntime(t, agents.Config{
			Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}, Budget: "b"}},
			Budgets:         []gateway.Budget{{Name: "b", MaxTotalTokens: 100_000, Scope: gateway.ScopeRun}},
			Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
			Implementations: map[string]agents.Implementation{"lookup": echoTool},
		})
		var after int
		panicked := false
		hook := func(ev agents.Event) {
			if panicked {
				after++
			}
			if ev.Kind == kind && ev.Step == 2 || ev.Kind == kind && kind == agents.EventToolResult {
				panicked = true
				panic("hook broke")
			}
		}
		res, err := r.Run(context.Background(), "a", "hi", agents.RunOptions{OnEvent: hook})
		var hp *agents.HookPanicError
		if !errors.As(err, &hp) || hp.Value != "hook broke" || res.Status != agents.StatusFailed {
			t.Fatalf("%v: status %s, err %v", kind, res.Status, err)
		}
		if after != 0 {
			t.Fatalf("%v: %d events after the panic", kind, after)
		}
		if h := holds(t, fx.gw); len(h) != 0 {
			t.Fatalf("%v: holds left: %+v", kind, h)
		}
		rec, lerr := r.Store().LoadRun(context.Background(), res.RunID)
		if lerr != nil || rec.Status != agents.StatusFailed {
			t.Fatalf("%v: stored run %s, %v", kind, rec.Status, lerr)
		}
	}
}

// TestEventHookCancelMidStream: a client going away in the middle of an
// answer ends the run, leaves no hold and no goroutine.
func TestEventHookCancelMidStream(t *testing.T) {
	before := runtime.NumGoroutine()
	fx := newStreamFixture(t, fake.Config{Script: []fake.Step{answer("a long answer of many words")}},
		gateway.Budget{Name: "b", MaxTotalTokens: 100_000, Scope: gateway.ScopeRun})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Budget: "b"}},
		Budgets: []gateway.Budget{{Name: "b", MaxTotalTokens: 100_000, Scope: gateway.ScopeRun}},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var text string
	res, err := r.Run(ctx, "a", "hi", agents.RunOptions{OnEvent: func(ev agents.Event) {
		if ev.Kind == agents.EventText {
			text += ev.Text
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) || res.Status != agents.StatusFailed || text != "a " {
		t.Fatalf("status %s, err %v, text %q", res.Status, err, text)
	}
	if h := holds(t, fx.gw); len(h) != 0 {
		t.Fatalf("holds left: %+v", h)
	}
	sum, _ := fx.gw.Spend(context.Background())
	if sum.Calls != 1 {
		t.Fatalf("%d settled calls, want the abandoned stream settled once", sum.Calls)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestEventHookSerialized: parallel read calls finish on their own
// goroutines, but the hook is called one event at a time.
func TestEventHookSerialized(t *testing.T) {
	var cs []gateway.ToolCall
	for i := range 8 {
		cs = append(cs, call("c"+string(rune('0'+i)), "lookup", `{"id":"A"}`))
	}
	fx := newStreamFixture(t, fake.Config{Script: []fake.Step{calls(cs...), answer("done")}})
	var running sync.WaitGroup
	running.Add(8)
	slow := agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
		running.Done()
		running.Wait() // all eight run at once
		return "ok", nil
	})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, MaxParallelTools: 8,
		Agents:          []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}}},
		Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": slow},
	})
	var inside, overlaps, results int
	hook := func(ev agents.Event) {
		inside++
		if inside > 1 {
			overlaps++
		}
		if ev.Kind == agents.EventToolResult {
			results++
			time.Sleep(time.Millisecond)
		}
		inside--
	}
	mustRun(t, r, "a", "hi", agents.RunOptions{OnEvent: hook})
	if overlaps != 0 || results != 8 {
		t.Fatalf("%d overlapping hook calls, %d results", overlaps, results)
	}
}

// TestEventToolProgress: what an implementation reports with
// ReportProgress reaches the hook as EventToolProgress events naming the
// call, between the call's EventToolCalls and its EventToolResult; without
// a hook, and outside a call, reporting does nothing.
func TestEventToolProgress(t *testing.T) {
	agents.ReportProgress(context.Background(), agents.ToolProgress{Progress: 1}) // outside a call: nothing
	fx := newStreamFixture(t, fake.Config{Script: []fake.Step{calls(call("c1", "lookup", `{"id":"A"}`)), answer("done")}})
	work := agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
		for i := 1; i <= 3; i++ {
			agents.ReportProgress(ctx, agents.ToolProgress{Progress: float64(i), Total: 3, Message: "part " + string(rune('0'+i))})
		}
		return "ok", nil
	})
	r := newRuntime(t, agents.Config{
		Gateway:         fx.gw,
		Agents:          []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}}},
		Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": work},
	})
	var rec recorder
	mustRun(t, r, "a", "hi", agents.RunOptions{OnEvent: rec.hook})
	var kinds []agents.EventKind
	var got []agents.ToolProgress
	for _, ev := range rec.events {
		switch ev.Kind {
		case agents.EventToolCalls, agents.EventToolResult:
			kinds = append(kinds, ev.Kind)
		case agents.EventToolProgress:
			kinds = append(kinds, ev.Kind)
			if len(ev.Calls) != 1 || ev.Calls[0].ID != "c1" || ev.Calls[0].Name != "lookup" || ev.Step != 1 || ev.Agent != "a" {
				t.Errorf("progress event about %+v, step %d, agent %q", ev.Calls, ev.Step, ev.Agent)
			}
			got = append(got, *ev.Progress)
		}
	}
	want := []agents.EventKind{agents.EventToolCalls, agents.EventToolProgress, agents.EventToolProgress, agents.EventToolProgress, agents.EventToolResult}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("event order (-want +got):\n%s", diff)
	}
	if len(got) != 3 || got[2] != (agents.ToolProgress{Progress: 3, Total: 3, Message: "part 3"}) {
		t.Errorf("progress reported: %+v", got)
	}
	// Without a hook the same run reports nowhere and completes.
	fx2 := newStreamFixture(t, fake.Config{Script: []fake.Step{calls(call("c1", "lookup", `{"id":"A"}`)), answer("done")}})
	r2 := newRuntime(t, agents.Config{
		Gateway:         fx2.gw,
		Agents:          []agents.Agent{{Name: "a", Model: "small", Tools: []string{"lookup"}}},
		Tools:           []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": work},
	})
	mustRun(t, r2, "a", "hi", agents.RunOptions{})
}
