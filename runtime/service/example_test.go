package service_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Example serves one agent and calls it with the OpenAI SDK, as any OpenAI
// client would. A real main calls ListenAndServe(ctx) instead of httptest.
func Example() {
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"helper": {{Text: "Paris."}}}})
	if err != nil {
		log.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "fake-small-1", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100,
			Capabilities: []gateway.Capability{gateway.CapabilityTools},
		}}},
		// The wrapper lets the service tell its own latency from the
		// provider's.
		Providers: map[string]gateway.Provider{"fake": service.InstrumentProvider(p)},
	})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := agents.New(agents.Config{Gateway: gw, Agents: []agents.Agent{{Name: "helper", Model: "small", Instructions: "Answer briefly."}}})
	if err != nil {
		log.Fatal(err)
	}
	svc, err := service.New(service.Config{
		Gateway: gw, Agents: rt, Entry: "helper",
		Auth: service.Auth{Kind: service.AuthBearer, Tokens: []string{"secret-token"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	defer srv.Close()

	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("secret-token"))
	cc, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "helper",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What is the capital of France?")},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cc.Model+":", cc.Choices[0].Message.Content)
	// Output: helper: Paris.
}
