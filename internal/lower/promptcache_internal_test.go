package lower

import (
	"testing"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/gateway"
)

// TestPromptCache lowers each caching mode: no policy and "auto" cache
// tools, system prompt and history; "off" asks for nothing; "explicit"
// caches the parts listed, at the lifetime given.
func TestPromptCache(t *testing.T) {
	all := gateway.PromptCache{TTL: gateway.CacheTTL5m, Tools: true, System: true, History: true}
	tests := []struct {
		name string
		in   *ir.PromptCache
		want gateway.PromptCache
	}{
		{"absent", nil, all},
		{"auto", &ir.PromptCache{Mode: "auto", TTL: "5m"}, all},
		{"auto 1h", &ir.PromptCache{Mode: "auto", TTL: "1h"}, gateway.PromptCache{TTL: gateway.CacheTTL1h, Tools: true, System: true, History: true}},
		{"off", &ir.PromptCache{Mode: "off", TTL: "1h"}, gateway.PromptCache{}},
		{"explicit", &ir.PromptCache{Mode: "explicit", TTL: "1h", At: []string{"system", "history"}}, gateway.PromptCache{TTL: gateway.CacheTTL1h, System: true, History: true}},
	}
	for _, tt := range tests {
		if got := promptCache(tt.in); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}
