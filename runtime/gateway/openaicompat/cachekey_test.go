package openaicompat_test

import (
	"net/http"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// TestPromptCacheKey sends a request's cache key as prompt_cache_key, in a
// whole answer and in a stream, only to a provider that says its upstream
// accepts the field; others never see it.
func TestPromptCacheKey(t *testing.T) {
	h := func(w http.ResponseWriter, _ *http.Request, body map[string]any, _ int) {
		if body["stream"] == true {
			s := startSSE(w)
			s.data(chunk(large, textDelta("ok"), "stop"))
			s.data("[DONE]")
			return
		}
		writeJSON(w, 200, completion(large, textMessage("ok"), "stop", 5, 1))
	}
	req := gateway.Request{
		Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}},
		Cache:    gateway.PromptCache{History: true, Key: "aid-0123"},
	}
	for _, accepts := range []bool{false, true} {
		e := setup(t, h, func(c *openaicompat.Config) { c.PromptCacheKey = accepts })
		if _, err := e.g.Generate(t.Context(), "large", req); err != nil {
			t.Fatal(err)
		}
		for _, err := range e.g.Stream(t.Context(), "large", req) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := len(e.srv.recorded()); n != 2 {
			t.Fatalf("%d requests, want 2", n)
		}
		for i, r := range e.srv.recorded() {
			key, sent := r.Body["prompt_cache_key"]
			if sent != accepts || (accepts && key != "aid-0123") {
				t.Errorf("accepts %v, request %d: prompt_cache_key %v (sent %v)", accepts, i, key, sent)
			}
		}
	}
}
