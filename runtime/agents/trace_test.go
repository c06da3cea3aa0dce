package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestSpansNestPerGenAIConventions(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := fake.New(fake.Config{ByModel: map[string][]fake.Step{
		"m-small": {calls(call("d1", "delegate_to_research", `{"input":"q"}`), call("t1", "transfer_to_billing", `{}`))},
		"m-tiny":  {answer("research answer")},
		"m-large": {calls(call("r1", "refund", `{"id":"A"}`))},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Models: catalog(), Providers: map[string]gateway.Provider{"fake": p}, Tracer: tp.Tracer("gateway")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := team(fixture{gw: gw})
	cfg.Tracer = tp.Tracer("agents")
	cfg.Agents[1].Tools = []string{"refund"}
	cfg.Agents[1].Delegates, cfg.Agents[2].Delegates = nil, nil // a delegated run cannot pause
	cfg.Tools = []agents.Tool{{Name: "refund", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}}
	cfg.Implementations = map[string]agents.Implementation{"refund": echoTool}
	res, err := newRuntime(t, cfg).Run(context.Background(), "triage", "hi", agents.RunOptions{ThreadID: "th"})
	if err != nil || res.Status != agents.StatusPaused {
		t.Fatalf("%s %v", res.Status, err)
	}
	spans := rec.Ended()
	byName := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = append(byName[s.Name()], s)
	}
	one := func(name string) sdktrace.ReadOnlySpan {
		t.Helper()
		if len(byName[name]) != 1 {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name())
			}
			t.Fatalf("%d spans named %q; spans: %v", len(byName[name]), name, names)
		}
		return byName[name][0]
	}
	triage, billing, research := one("invoke_agent triage"), one("invoke_agent billing"), one("invoke_agent research")
	delegate, transfer := one("execute_tool delegate_to_research"), one("execute_tool transfer_to_billing")
	chats := byName["chat m-small"]
	if len(chats) != 1 || chats[0].Parent().SpanID() != triage.SpanContext().SpanID() {
		t.Fatalf("triage's chat span is not its child")
	}
	if delegate.Parent().SpanID() != triage.SpanContext().SpanID() || transfer.Parent().SpanID() != triage.SpanContext().SpanID() {
		t.Fatalf("tool spans are not children of the agent span")
	}
	if research.Parent().SpanID() != delegate.SpanContext().SpanID() {
		t.Fatalf("the delegated agent's span is not a child of the delegate call")
	}
	if one("chat m-tiny").Parent().SpanID() != research.SpanContext().SpanID() {
		t.Fatalf("research's chat span is not its child")
	}
	if billing.Parent().SpanID() != triage.Parent().SpanID() {
		t.Fatalf("the transfer target's span is not a sibling of the caller's")
	}
	for _, c := range []struct {
		span      sdktrace.ReadOnlySpan
		key, want string
	}{
		{triage, "gen_ai.operation.name", "invoke_agent"},
		{triage, "gen_ai.agent.name", "triage"},
		{triage, "gen_ai.conversation.id", "th"},
		{triage, "aid.run.id", res.RunID},
		{triage, "aid.agent.transferred_to", "billing"},
		{billing, "aid.run.status", "paused"},
		{delegate, "gen_ai.operation.name", "execute_tool"},
		{delegate, "gen_ai.tool.name", "delegate_to_research"},
		{delegate, "gen_ai.tool.call.id", "d1"},
	} {
		if v, ok := attr(c.span, c.key); !ok || v.String() != c.want {
			t.Errorf("%s: %s = %q, want %q", c.span.Name(), c.key, v.String(), c.want)
		}
	}
	var paused bool
	for _, e := range billing.Events() {
		if e.Name == "aid.run.paused" {
			paused = true
		}
	}
	if !paused {
		t.Fatalf("no pause event on billing's span")
	}
}

// TestCancellationMidTool cancels a run while a tool blocks: the run ends
// as failed with the context's error, the call has its one result, and no
// goroutine is left behind.
func TestCancellationMidTool(t *testing.T) {
	before := runtime.NumGoroutine()
	started := make(chan struct{}, 2) // buffered: a tool never misses the signal
	fx := newFixture(t, fake.Config{Script: []fake.Step{calls(call("a", "wait", `{}`), call("b", "wait", `{}`))}})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Tools: []string{"wait"}}},
		Tools: []agents.Tool{{Name: "wait", Description: "d"}},
		Implementations: map[string]agents.Implementation{"wait": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return "", ctx.Err()
		})},
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	res, err := r.Run(ctx, "a", "go", agents.RunOptions{})
	if !errors.Is(err, context.Canceled) || res.Status != agents.StatusFailed {
		t.Fatalf("status %s err %v", res.Status, err)
	}
	cs, _ := r.Store().Calls(context.Background(), res.RunID)
	for _, c := range cs {
		if c.Result == nil {
			t.Fatalf("call %s has no result", c.Key)
		}
	}
	rec, _ := r.Store().LoadRun(context.Background(), res.RunID)
	if rec.Status != agents.StatusFailed {
		t.Fatalf("stored status %s", rec.Status)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after the run, %d before", n, before)
	}
}

func TestThousandConcurrentRuns(t *testing.T) {
	fx := newFixture(t, fake.Config{}) // echo mode: each answer names its input
	fx.fake = nil
	r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "echo"}}})
	const n = 1000
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := fmt.Sprintf("input %d", i)
			res, err := r.Run(context.Background(), "a", in, agents.RunOptions{ThreadID: fmt.Sprint(i % 7)})
			switch {
			case err != nil:
				errs <- err
			case res.Answer != "echo: "+in || res.Status != agents.StatusCompleted:
				errs <- fmt.Errorf("run %d answered %q (%s)", i, res.Answer, res.Status)
			}
			ids[i] = res.RunID
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("run id %s used twice", id)
		}
		seen[id] = true
		if rec, err := r.Store().LoadRun(context.Background(), id); err != nil || rec.Status != agents.StatusCompleted {
			t.Fatalf("stored %s: %v %v", id, rec.Status, err)
		}
	}
}
