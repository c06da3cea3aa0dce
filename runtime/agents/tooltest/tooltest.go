// Package tooltest runs a tool kind's implementations inside a real agent
// run, on the keyless fake provider, so that a kind's tests (http,
// fixture, and the kinds that come after them) see what the model would
// read: observations, error observations, timeouts. It is for tests only.
package tooltest

import (
	"encoding/json"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// Model is the alias the run's agent answers on.
const Model = "small"

// Call is a tool call the model asks for.
func Call(id, name, args string) gateway.ToolCall {
	return gateway.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// Run runs agent "a", which offers tools (implemented by impls), on the
// input "go": the model's first answer asks for calls, all at once, and its
// second answers "done". It fails the test when the runtime cannot be
// built or the run fails, and returns the result and the requests the
// model received, the last of which holds the observations it read.
func Run(t testing.TB, tools []agents.Tool, impls map[string]agents.Implementation, calls ...gateway.ToolCall) (agents.RunResult, []gateway.Request) {
	t.Helper()
	p, err := fake.New(fake.Config{Record: true, Script: []fake.Step{{ToolCalls: calls}, {Text: "done"}}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: Model, Spec: gateway.ModelSpec{
			ID: "m-small", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100,
			Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
		Retry:     gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(tools))
	for i, tool := range tools {
		names[i] = tool.Name
	}
	r, err := agents.New(agents.Config{
		Gateway:         gw,
		Agents:          []agents.Agent{{Name: "a", Model: Model, Tools: names}},
		Tools:           tools,
		Implementations: impls,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context(), "a", "go", agents.RunOptions{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res, p.Requests()
}
