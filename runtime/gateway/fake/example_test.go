package fake_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// An evaluation runs each case several times; the eval runner puts the case
// and sample index on the context, and the fake answers correctly with the
// configured accuracy, the same way every time for the same seed.
func Example_answerKey() {
	p, err := fake.New(fake.Config{Analyzer: analysis.English{},
		Seed: 2024,
		AnswerKey: &fake.AnswerKey{Accuracy: 0.6, Cases: []fake.Case{
			{ID: "fr", Input: "Capital of France?", Answer: "Paris"},
			{ID: "jp", Input: "Capital of Japan?", Answer: "Tokyo"},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	model := gateway.ModelSpec{ID: "fake-1", Provider: "fake", MaxOutputTokens: 16}
	for i := range 5 {
		ctx := gateway.WithSample(context.Background(), gateway.SampleKey{Case: "fr", Index: i})
		res, err := p.Generate(ctx, model, gateway.Request{
			Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Capital of France?"}},
		})
		if err != nil {
			log.Fatal(err)
		}
		correct, _ := fake.Coin(2024, gateway.SampleKey{Case: "fr", Index: i}, 0.6)
		fmt.Printf("sample %d: %s (correct: %v)\n", i, res.Text, correct)
	}
	// Output:
	// sample 0: Tokyo (correct: false)
	// sample 1: Paris (correct: true)
	// sample 2: Tokyo (correct: false)
	// sample 3: Paris (correct: true)
	// sample 4: Paris (correct: true)
}

// Scripted mode makes a test say exactly what the model answers, including
// failures.
func Example_script() {
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{
		{ToolCalls: []gateway.ToolCall{{ID: "call_1", Name: "lookup_order", Arguments: []byte(`{"id":"A-42"}`)}}},
		{Text: "Your order has shipped."},
	}})
	if err != nil {
		log.Fatal(err)
	}
	model := gateway.ModelSpec{ID: "fake-1", Provider: "fake", MaxOutputTokens: 64}
	for range 2 {
		res, err := p.Generate(context.Background(), model, gateway.Request{
			Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Where is A-42?"}},
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.FinishReason, res.Text, len(res.ToolCalls))
	}
	// Output:
	// tool_calls  1
	// stop Your order has shipped. 0
}

// Agent scripts are keyed by the agent and its step number, which the agent
// runtime puts on every model call, so concurrent runs play the same way.
func Example_agentScript() {
	sc, err := fake.ParseScript("script.json", []byte(`{"agents": {
		"triage": [
			{"toolCalls": [{"name": "lookup_order", "arguments": {"order_id": "AB-123456"}}]},
			{"toolCalls": [{"name": "transfer_to_billing"}]}
		],
		"billing": [{"output": {"answer": "Refunded."}}]
	}}`))
	if err != nil {
		log.Fatal(err)
	}
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}, Agents: sc.Agents})
	if err != nil {
		log.Fatal(err)
	}
	model := gateway.ModelSpec{ID: "fake-1", Provider: "fake", MaxOutputTokens: 64}
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Refund AB-123456"}}}
	for _, ci := range []gateway.CallInfo{{Agent: "billing", Step: 1}, {Agent: "triage", Step: 2}, {Agent: "triage", Step: 1}} {
		res, err := p.Generate(gateway.WithCallInfo(context.Background(), ci), model, req)
		if err != nil {
			log.Fatal(err)
		}
		if len(res.ToolCalls) > 0 {
			c := res.ToolCalls[0]
			fmt.Printf("%s step %d: %s %s %s\n", ci.Agent, ci.Step, c.ID, c.Name, c.Arguments)
			continue
		}
		fmt.Printf("%s step %d: %s\n", ci.Agent, ci.Step, res.Text)
	}
	// Output:
	// billing step 1: {"answer":"Refunded."}
	// triage step 2: call_triage_2_1 transfer_to_billing {}
	// triage step 1: call_triage_1_1 lookup_order {"order_id":"AB-123456"}
}
