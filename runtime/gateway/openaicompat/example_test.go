package openaicompat_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

func Example() {
	// A local stand-in for the service; in production BaseURL is e.g.
	// https://api.openai.com/v1 and the key lives in the named variable.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06",
			"choices":[{"index":0,"message":{"role":"assistant","content":"Paris"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":14,"completion_tokens":1,"total_tokens":15}}`)
	}))
	defer srv.Close()
	os.Setenv("EXAMPLE_OPENAI_KEY", "sk-example")
	defer os.Unsetenv("EXAMPLE_OPENAI_KEY")

	openai, err := openaicompat.New(openaicompat.Config{BaseURL: srv.URL + "/v1", APIKeyEnv: "EXAMPLE_OPENAI_KEY"})
	if err != nil {
		log.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "large", Spec: gateway.ModelSpec{
			ID: "gpt-4o-2024-08-06", Provider: "openai", ContextWindow: 128000, MaxOutputTokens: 4096,
			Cost:         gateway.CostProfile{InputPer1kUSD: 0.0025, OutputPer1kUSD: 0.01},
			Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming},
		}}},
		Providers: map[string]gateway.Provider{"openai": openai},
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := g.Generate(context.Background(), "large", gateway.Request{
		Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "Capital of France?"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d+%d tokens, $%.6f\n", res.Text, res.Usage.InputTokens, res.Usage.OutputTokens, res.CostUSD)
	// Output: Paris: 14+1 tokens, $0.000045
}
