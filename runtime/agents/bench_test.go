package agents

import (
	"context"
	"encoding/json"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/internal/rusage"
)

// stubModel answers with a tool call until the conversation holds steps-1
// assistant messages, then with text. It costs next to nothing, so a
// benchmark through it measures the loop alone.
type stubModel struct{ steps int }

func (s stubModel) Generate(_ context.Context, alias string, req gateway.Request, _ ...gateway.CallOption) (gateway.Result, error) {
	n := 0
	for i := range req.Messages {
		if req.Messages[i].Role == gateway.RoleAssistant {
			n++
		}
	}
	res := gateway.Result{Alias: alias, Model: "m-small", Usage: gateway.Usage{InputTokens: 50, OutputTokens: 10, TotalTokens: 60}, CostUSD: 0.0001}
	if n < s.steps-1 {
		res.ToolCalls = []gateway.ToolCall{{ID: "c", Name: "lookup", Arguments: json.RawMessage(`{"id":"A-1"}`)}}
		res.FinishReason = gateway.FinishToolCalls
	} else {
		res.Text, res.FinishReason = "done", gateway.FinishStop
	}
	return res, nil
}

func benchRuntime(b testing.TB) *Runtime {
	b.Helper()
	p, err := fake.New(fake.Config{})
	if err != nil {
		b.Fatal(err)
	}
	caps := []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON}
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 100000, MaxOutputTokens: 100, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{
		Gateway: gw,
		Agents:  []Agent{{Name: "a", Model: "small", Instructions: "You look up orders.", Tools: []string{"lookup"}, MaxSteps: 100}},
		Tools:   []Tool{{Name: "lookup", Description: "Look up an order.", Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}},
		Implementations: map[string]Implementation{"lookup": ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return `{"status":"shipped"}`, nil
		})},
	})
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkStep measures the loop's own overhead per step: a 20-step run
// (19 tool steps and an answer) against a stub model, so the provider and
// the gateway are excluded; each step builds the request, validates the
// arguments, records the call before it runs and its result after, and
// checkpoints the run. It also reports the size of the run's 20-step
// checkpoint as JSON, whole and per step.
func BenchmarkStep(b *testing.B) {
	const steps = 20
	r := benchRuntime(b)
	r.gen = stubModel{steps: steps}
	ctx := context.Background()
	var last RunResult
	b.ReportAllocs()
	cpu0, err := rusage.CPU()
	if err != nil {
		b.Skipf("getrusage: %v", err)
	}
	for b.Loop() {
		// A fresh store per run: the in-memory store keeps every run, and
		// the garbage collector scanning an ever larger heap is not the
		// loop's cost.
		r.store = NewInMemoryStore()
		res, err := r.Run(ctx, "a", "where is order A-1?", RunOptions{})
		if err != nil || len(res.Steps) != steps {
			b.Fatalf("%d steps, %v", len(res.Steps), err)
		}
		last = res
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
	// The process's CPU time, the collector's included: on a shared
	// machine the wall time also counts the waits for a core.
	if cpu1, err := rusage.CPU(); err == nil {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N*steps), "cpu-ns/step")
	}
	rec, err := r.store.LoadRun(ctx, last.RunID)
	if err != nil {
		b.Fatal(err)
	}
	data, err := MarshalCheckpoint(rec.Checkpoint)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(data)), "checkpoint-B")
	b.ReportMetric(float64(len(data))/steps, "checkpoint-B/step")
}

// BenchmarkStepGateway is BenchmarkStep through the real gateway and the
// fake provider, for comparison: the difference is the gateway's cost.
func BenchmarkStepGateway(b *testing.B) {
	const steps = 20
	script := make([]fake.Step, steps)
	for i := range steps - 1 {
		script[i] = fake.Step{ToolCalls: []gateway.ToolCall{{ID: "c", Name: "lookup", Arguments: json.RawMessage(`{"id":"A-1"}`)}}}
	}
	script[steps-1] = fake.Step{Text: "done"}
	p, err := fake.New(fake.Config{Script: script, Loop: true})
	if err != nil {
		b.Fatal(err)
	}
	r := benchRuntime(b)
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 100000, MaxOutputTokens: 100, Capabilities: []gateway.Capability{gateway.CapabilityTools}, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		b.Fatal(err)
	}
	r.gw, r.gen = gw, gw
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.store = NewInMemoryStore()
		res, err := r.Run(ctx, "a", "where is order A-1?", RunOptions{})
		if err != nil || len(res.Steps) != steps {
			b.Fatalf("%d steps, %v", len(res.Steps), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
}

// BenchmarkRunStart measures what Run does before the first model call (the
// run id, its state, its record in the in-memory store) and keeps the
// started runs live, 4,096 at a time, so that -benchmem's B/op is the memory
// a started run holds. The window is fixed so that the figure does not
// depend on b.N through the size of the heap the collector scans.
func BenchmarkRunStart(b *testing.B) {
	const window = 4096
	r := benchRuntime(b)
	ctx := context.Background()
	live := make([]*runState, window)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		if i%window == 0 {
			r.store = NewInMemoryStore()
		}
		st, err := r.start(ctx, "a", "where is order A-1?", RunOptions{})
		if err != nil {
			b.Fatal(err)
		}
		live[i%window] = st
		i++
	}
}

// BenchmarkLiveRunStack reports the goroutine stack a run holds while it
// waits on its model, through the real gateway and a fake provider that
// answers after a delay: 1,000 runs are started, each on its own goroutine,
// and the stack in use is read while all of them wait (stack-B/run), and
// again after a collection (gc-stack-B/run), which shrinks a stack that
// grew during the run but uses under a quarter of it while it waits. The
// two are equal when no run's stack grew past what it needs to wait.
func BenchmarkLiveRunStack(b *testing.B) {
	const runs = 1000
	p, err := fake.New(fake.Config{Script: []fake.Step{{Text: "done"}}, Loop: true, Latency: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 100000, MaxOutputTokens: 100, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}}},
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets:   []gateway.Budget{{Name: "per-run", MaxUSD: 1, Scope: gateway.ScopeRun}},
	})
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Config{Gateway: gw, Budgets: []gateway.Budget{{Name: "per-run", MaxUSD: 1, Scope: gateway.ScopeRun}},
		Agents: []Agent{{Name: "a", Model: "small", Instructions: "Answer.", Budget: "per-run"}}})
	if err != nil {
		b.Fatal(err)
	}
	var perRun, afterGC float64
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.StackInuse
		var wg sync.WaitGroup
		target := p.Calls() + runs
		for range runs {
			wg.Go(func() { _, _ = r.Run(ctx, "a", "hi", RunOptions{}) })
		}
		for p.Calls() < target {
			time.Sleep(time.Millisecond)
		}
		runtime.ReadMemStats(&ms)
		perRun = float64(ms.StackInuse-before) / runs
		runtime.GC()
		runtime.ReadMemStats(&ms)
		afterGC = float64(ms.StackInuse-before) / runs
		cancel()
		wg.Wait()
	}
	b.ReportMetric(perRun, "stack-B/run")
	b.ReportMetric(afterGC, "gc-stack-B/run")
}

// BenchmarkToolCallStack is BenchmarkLiveRunStack with the runs inside a
// tool call rather than waiting on their model: 1,000 runs, each on its
// own goroutine, are parked in a tool that waits for its context to end,
// and the stack in use is read while all of them wait (stack-B/run) and
// again after a collection (gc-stack-B/run). A run's goroutine then holds
// the loop's frames down to the tool's implementation.
func BenchmarkToolCallStack(b *testing.B) {
	const runs = 1000
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"a": {
		{ToolCalls: []gateway.ToolCall{{ID: "c", Name: "wait", Arguments: json.RawMessage(`{"id":"A-1"}`)}}},
		{Text: "done"},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models:    []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 100000, MaxOutputTokens: 100, Capabilities: []gateway.Capability{gateway.CapabilityTools}, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		b.Fatal(err)
	}
	var parked sync.WaitGroup
	r, err := New(Config{Gateway: gw,
		Agents: []Agent{{Name: "a", Model: "small", Instructions: "Answer.", Tools: []string{"wait"}}},
		Tools:  []Tool{{Name: "wait", Description: "Wait.", Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`), Timeout: time.Hour}},
		Implementations: map[string]Implementation{"wait": ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			parked.Done()
			<-ctx.Done()
			return "", ctx.Err()
		})},
	})
	if err != nil {
		b.Fatal(err)
	}
	var perRun, afterGC float64
	for b.Loop() {
		r.store = NewInMemoryStore()
		ctx, cancel := context.WithCancel(context.Background())
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		before := ms.StackInuse
		var wg sync.WaitGroup
		parked.Add(runs)
		for range runs {
			wg.Go(func() { _, _ = r.Run(ctx, "a", "hi", RunOptions{}) })
		}
		parked.Wait()
		runtime.ReadMemStats(&ms)
		perRun = float64(ms.StackInuse-before) / runs
		runtime.GC()
		runtime.ReadMemStats(&ms)
		afterGC = float64(ms.StackInuse-before) / runs
		cancel()
		wg.Wait()
	}
	b.ReportMetric(perRun, "stack-B/run")
	b.ReportMetric(afterGC, "gc-stack-B/run")
}
