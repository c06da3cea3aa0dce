package agents_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
)

// exampleGateway is a gateway over a scripted fake provider.
func exampleGateway(script ...fake.Step) *gateway.Gateway {
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}, Script: script})
	if err != nil {
		panic(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "m-small", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 256,
			Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON},
			Cost:         gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		panic(err)
	}
	return gw
}

// A runtime built by hand: one agent with one typed Go tool.
func Example() {
	gw := exampleGateway(
		fake.Step{ToolCalls: []gateway.ToolCall{{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"id":"A-1"}`)}}},
		fake.Step{Text: "Order A-1 has shipped."},
	)
	type order struct {
		ID string `json:"id"`
	}
	r, err := agents.New(agents.Config{
		Gateway: gw,
		Agents: []agents.Agent{{
			Name: "support", Model: "small", Instructions: "Answer questions about orders.",
			Tools: []string{"lookup_order"},
		}},
		Tools: []agents.Tool{{
			Name: "lookup_order", Description: "Look up an order by id.",
			Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
		}},
		Implementations: map[string]agents.Implementation{
			"lookup_order": agents.Typed(func(_ context.Context, o order) (string, error) {
				return "order " + o.ID + ": shipped", nil
			}),
		},
	})
	if err != nil {
		panic(err)
	}
	res, err := r.Run(context.Background(), "support", "Where is my order A-1?", agents.RunOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Answer)
	for _, s := range res.Steps {
		for _, c := range s.ToolCalls {
			fmt.Printf("step %d: %s(%s) -> %s\n", s.Number, c.Name, c.Arguments, c.Observation)
		}
	}
	// Output:
	// completed Order A-1 has shipped.
	// step 1: lookup_order({"id":"A-1"}) -> order A-1: shipped
}

// A tool that needs approval pauses the run; its checkpoint is JSON that a
// fresh runtime, here with an empty store, resumes with the decision.
func ExampleRuntime_ResumeFrom() {
	cfg := func(gw *gateway.Gateway) agents.Config {
		return agents.Config{
			Gateway: gw,
			Agents:  []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"refund"}}},
			Tools: []agents.Tool{{Name: "refund", Description: "Refund an order.", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways,
				Input: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`)}},
			Implementations: map[string]agents.Implementation{"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
				return "refunded " + string(args), nil
			})},
		}
	}
	first, err := agents.New(cfg(exampleGateway(
		fake.Step{ToolCalls: []gateway.ToolCall{{ID: "c1", Name: "refund", Arguments: json.RawMessage(`{"id":"A-1"}`)}}},
	)))
	if err != nil {
		panic(err)
	}
	res, err := first.Run(context.Background(), "desk", "Refund A-1, please.", agents.RunOptions{})
	if err != nil {
		panic(err)
	}
	pending, _ := res.Checkpoint.Pending.Call()
	fmt.Println(res.Status, pending.Name, pending.Arguments)
	data, err := agents.MarshalCheckpoint(*res.Checkpoint)
	if err != nil {
		panic(err)
	}

	// Later, perhaps in another process.
	cp, err := agents.UnmarshalCheckpoint(data)
	if err != nil {
		panic(err)
	}
	second, err := agents.New(cfg(exampleGateway(fake.Step{Text: "Done: A-1 is refunded."})))
	if err != nil {
		panic(err)
	}
	res, err = second.ResumeFrom(context.Background(), cp, agents.Decision{Action: agents.Approve})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Answer)
	// Output:
	// paused refund {"id":"A-1"}
	// completed Done: A-1 is refunded.
}

// A transfer hands the conversation over for good: the run ends on the
// target, and the path records the way.
func ExampleRuntime_Run_transfer() {
	gw := exampleGateway(
		fake.Step{ToolCalls: []gateway.ToolCall{{ID: "t1", Name: "transfer_to_billing", Arguments: json.RawMessage(`{}`)}}},
		fake.Step{Text: "Your invoice is paid."},
	)
	r, err := agents.New(agents.Config{
		Gateway: gw,
		Agents: []agents.Agent{
			{Name: "triage", Model: "small", Instructions: "Route the user.", Handoffs: []string{"billing"}},
			{Name: "billing", Model: "small", Instructions: "Answer billing questions.", Description: "Invoices and payments."},
		},
	})
	if err != nil {
		panic(err)
	}
	res, err := r.Run(context.Background(), "triage", "Is my invoice paid?", agents.RunOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Agent, res.Path, res.Answer)
	// Output:
	// billing [triage billing] Your invoice is paid.
}

// An agent that names a retriever searches it with the tool
// search_<retriever>. Any Searcher serves; a *retrieval.Retriever is one.
// The observation lists passages the answer can cite as source#heading.
func ExampleSearcher() {
	gw := exampleGateway(
		fake.Step{ToolCalls: []gateway.ToolCall{{ID: "s1", Name: "search_kb", Arguments: json.RawMessage(`{"query":"refund time limit","k":1}`)}}},
		fake.Step{Text: "Within 30 days of delivery [refunds.md#Refunds]."},
	)
	kb := agents.SearchFunc(func(_ context.Context, query string, k int) ([]retrieval.Hit, error) {
		return []retrieval.Hit{{
			Chunk: retrieval.Chunk{ID: "c1", Source: "refunds.md", Heading: "Refunds", Start: 0, End: 44, Text: "Ask for a refund within 30 days of delivery."},
			Score: 0.8125,
		}}, nil
	})
	r, err := agents.New(agents.Config{
		Gateway:    gw,
		Agents:     []agents.Agent{{Name: "researcher", Model: "small", Instructions: "Search, then answer citing sources.", Retrievers: []string{"kb"}}},
		Retrievers: map[string]agents.Searcher{"kb": kb},
	})
	if err != nil {
		panic(err)
	}
	res, err := r.Run(context.Background(), "researcher", "How long do I have to ask for a refund?", agents.RunOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Steps[0].ToolCalls[0].Observation)
	fmt.Println(res.Answer)
	// Output:
	// {"query":"refund time limit","passages":[{"cite":"refunds.md#Refunds","source":"refunds.md","heading":"Refunds","id":"c1","start":0,"end":44,"score":0.8125,"text":"Ask for a refund within 30 days of delivery."}]}
	// Within 30 days of delivery [refunds.md#Refunds].
}
