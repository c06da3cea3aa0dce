package lower_test

import (
	"testing"

	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
)

// TestModelSpecAPI lowers a model's api: "responses" reaches the gateway's
// spec; "chat" and no api are the provider's default, the empty API.
func TestModelSpecAPI(t *testing.T) {
	src := []byte(`name: "x", version: "1.0.0"
providers: oa: {kind: "openai-compatible", baseURL: "http://localhost:8080/v1", apiKeyEnv: "OPENAI_API_KEY"}
models: {
	"reasoner-1": {provider: "oa", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0.002, api: "responses"}
	"chat-1": {provider: "oa", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0.002, api: "chat"}
	"plain-1": {provider: "oa", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0.002}
}
aliases: {reasoner: "reasoner-1", chat: "chat-1", plain: "plain-1"}
`)
	doc, err := ir.LoadBytes("app.cue", src)
	if err != nil {
		t.Fatal(err)
	}
	for alias, want := range map[string]string{"reasoner": "responses", "chat": "", "plain": ""} {
		m, ok := doc.Resolve(alias)
		if !ok {
			t.Fatalf("alias %q does not resolve", alias)
		}
		if got := lower.ModelSpec(m).API; got != want {
			t.Errorf("%s: api %q, want %q", alias, got, want)
		}
	}
}
