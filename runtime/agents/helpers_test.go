package agents_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// catalog is the test models: three rungs of decreasing price.
func catalog() []gateway.PinnedModel {
	caps := []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON}
	return []gateway.PinnedModel{
		{Alias: "large", Spec: gateway.ModelSpec{ID: "m-large", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.01, OutputPer1kUSD: 0.03}}},
		{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}},
		{Alias: "tiny", Spec: gateway.ModelSpec{ID: "m-tiny", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.00001, OutputPer1kUSD: 0.00002}}},
	}
}

type fixture struct {
	gw   *gateway.Gateway
	fake *fake.Provider
}

// newFixture builds a gateway over a recording fake provider.
func newFixture(t testing.TB, fc fake.Config, budgets ...gateway.Budget) fixture {
	t.Helper()
	fc.Record = true
	p, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: catalog(), Providers: map[string]gateway.Provider{"fake": p}, Budgets: budgets,
		Retry: gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{gw: gw, fake: p}
}

func newRuntime(t testing.TB, cfg agents.Config) *agents.Runtime {
	t.Helper()
	r, err := agents.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func answer(text string) fake.Step { return fake.Step{Text: text} }

func calls(cs ...gateway.ToolCall) fake.Step { return fake.Step{ToolCalls: cs} }

func call(id, name, args string) gateway.ToolCall {
	return gateway.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// echoTool returns its arguments as the observation.
var echoTool = agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
	return "got " + string(args), nil
})

var lookupSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)

func mustRun(t *testing.T, r *agents.Runtime, agent, input string, opts agents.RunOptions) agents.RunResult {
	t.Helper()
	res, err := r.Run(context.Background(), agent, input, opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func roles(msgs []gateway.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = string(m.Role)
		if m.Role == gateway.RoleTool {
			out[i] += ":" + m.ToolCallID
		}
	}
	return out
}
