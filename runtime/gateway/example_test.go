package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// exampleGateway builds a gateway by hand, the way a team that does not use
// the IR would: a catalog of pinned models, their provider, a budget.
func exampleGateway(script ...fake.Step) *gateway.Gateway {
	return exampleGatewayWith(fake.Config{Analyzer: analysis.English{}, Script: script})
}

func exampleGatewayWith(fc fake.Config) *gateway.Gateway {
	provider, err := fake.New(fc)
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{
			{Alias: "large", Spec: gateway.ModelSpec{
				ID: "fake-large-2024-08-06", Provider: "fake", ContextWindow: 128000, MaxOutputTokens: 1024,
				Cost:         gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01},
				Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityStreaming},
			}},
			{Alias: "small", Spec: gateway.ModelSpec{
				ID: "fake-small-2024-07-18", Provider: "fake", MaxOutputTokens: 512,
				Cost:         gateway.CostProfile{InputPer1kUSD: 0.00015, OutputPer1kUSD: 0.0006},
				Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityStreaming},
			}},
			{Alias: "embed", Spec: gateway.ModelSpec{
				ID: "fake-embed-3", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 16,
				Cost: gateway.CostProfile{InputPer1kUSD: 0.00002},
			}},
		},
		Providers: map[string]gateway.Provider{"fake": provider},
		Budgets:   []gateway.Budget{{Name: "nightly", MaxUSD: 0.02, Scope: gateway.ScopeRun}},
		Retry:     gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	return g
}

func Example() {
	g := exampleGateway(fake.Step{Text: "Paris", Usage: &gateway.Usage{InputTokens: 20, OutputTokens: 1}})
	res, err := g.Generate(context.Background(), "large", gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Answer with the city only."},
			{Role: gateway.RoleUser, Content: "What is the capital of France?"},
		},
	}, gateway.WithBudget("nightly", "run-42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s from %s (%s) for $%.6f\n", res.Text, res.Alias, res.Model, res.CostUSD)
	// Output: Paris from large (fake-large-2024-08-06) for $0.000060
}

func ExampleWithFallbacks() {
	overloaded := &gateway.ProviderError{Provider: "fake", StatusCode: 503, Retryable: true, Err: errors.New("overloaded")}
	g := exampleGateway(fake.Step{Err: overloaded}, fake.Step{Text: "Paris"})
	res, err := g.Generate(context.Background(), "large", gateway.Request{
		Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Capital of France?"}},
	}, gateway.WithFallbacks("small"))
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range res.Attempts {
		fmt.Printf("%s: %v\n", a.Alias, a.Err)
	}
	fmt.Println(res.Text, "fell back:", res.FellBack)
	// Output:
	// large: provider fake: status 503 (retryable): overloaded
	// small: <nil>
	// Paris fell back: true
}

func ExampleWithBudget() {
	// Every call really spends 200 input and 500 output tokens: $0.0055 on
	// large. But before each call the gateway reserves the worst case, the
	// estimated input plus large's 1024 output tokens, about $0.0103; the
	// third call no longer fits the $0.02 run budget beside the $0.011
	// already spent, so it is refused before it reaches the provider.
	g := exampleGatewayWith(fake.Config{Analyzer: analysis.English{}, Loop: true, Script: []fake.Step{
		{Text: "ok", Usage: &gateway.Usage{InputTokens: 200, OutputTokens: 500}},
	}})
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}}
	for i := 1; ; i++ {
		_, err := g.Generate(context.Background(), "large", req, gateway.WithBudget("nightly", "run-7"))
		var refused *gateway.BudgetExceededError
		if errors.As(err, &refused) {
			fmt.Printf("call %d refused by %q for run %s: %s would pass the limit\n", i, refused.Budget, refused.Key, refused.Dimension)
			break
		}
		if err != nil {
			log.Fatal(err)
		}
	}
	sum, _ := g.Spend(context.Background())
	fmt.Printf("settled %d calls for $%.6f\n", sum.Calls, sum.Total.USD())
	// Output:
	// call 3 refused by "nightly" for run run-7: usd would pass the limit
	// settled 2 calls for $0.011000
}

func ExampleGateway_Stream() {
	g := exampleGateway(fake.Step{Text: "The capital of France is Paris."})
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Capital of France?"}}}
	for chunk, err := range g.Stream(context.Background(), "small", req) {
		if err != nil {
			log.Fatal(err)
		}
		if chunk.Result != nil {
			fmt.Printf("\n%q: %s, %d output tokens\n", chunk.Result.Text, chunk.Result.FinishReason, chunk.Result.Usage.OutputTokens)
			break
		}
		fmt.Printf("[%s]", chunk.Text)
	}
	// Output:
	// [The ][capital ][of ][France ][is ][Paris.]
	// "The capital of France is Paris.": stop, 8 output tokens
}

func ExampleGateway_Embed() {
	g := exampleGateway()
	res, err := g.Embed(context.Background(), "embed", []string{"refund policy", "shipping times"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(res.Vectors), "vectors of width", len(res.Vectors[0]))
	// Output: 2 vectors of width 16
}

func ExampleGateway_Require() {
	g := exampleGateway()
	err := g.Require("small", gateway.CapabilityTools, gateway.CapabilityJSON)
	fmt.Println(err)
	// Output: alias "small" (model fake-small-2024-07-18) cannot serve the request: model lacks [json]
}

func ExampleIsFallbackEligible() {
	for _, err := range []error{
		&gateway.ProviderError{Provider: "openai", StatusCode: 500, Retryable: true},
		&gateway.ProviderError{Provider: "openai", Timeout: true, Retryable: true},
		&gateway.BudgetExceededError{Budget: "nightly"},
		&gateway.CapabilityMismatchError{Alias: "small"},
		context.Canceled,
	} {
		fmt.Printf("%T falls through: %v\n", err, gateway.IsFallbackEligible(err))
	}
	// Output:
	// *gateway.ProviderError falls through: true
	// *gateway.ProviderError falls through: true
	// *gateway.BudgetExceededError falls through: false
	// *gateway.CapabilityMismatchError falls through: false
	// *errors.errorString falls through: false
}
