package rules_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/rules"
)

// TestCompactionBounds checks the default trigger: the smallest input room
// among the agent's model, ladder and fallbacks (window less output
// bound), less a tenth; a declared trigger is taken as is.
func TestCompactionBounds(t *testing.T) {
	models := map[string]rules.Model{
		"big":   {ID: "m-big", ContextWindow: 128000, MaxOutputTokens: 4096},
		"small": {ID: "m-small", ContextWindow: 8192, MaxOutputTokens: 512},
		"mid":   {ID: "m-mid", ContextWindow: 32000, MaxOutputTokens: 30000},
	}
	k := rules.Known{Model: func(a string) (rules.Model, bool) { m, ok := models[a]; return m, ok }}
	for _, tc := range []struct {
		name           string
		a              rules.Agent
		trigger, limit int
		ok             bool
	}{
		{"model alone", rules.Agent{Model: "big", Compaction: &rules.Compaction{}}, 123904 - 12390, 123904, true},
		{"a smaller rung", rules.Agent{Model: "big", Ladder: []string{"big", "small"}, Compaction: &rules.Compaction{}}, 7680 - 768, 7680, true},
		{"a fallback with a large output bound", rules.Agent{Model: "big", Fallbacks: []string{"mid"}, Compaction: &rules.Compaction{}}, 2000 - 200, 2000, true},
		{"declared", rules.Agent{Model: "small", Compaction: &rules.Compaction{Trigger: 5000}}, 5000, 7680, true},
		{"no policy", rules.Agent{Model: "small"}, 0, 0, false},
		{"unknown aliases", rules.Agent{Model: "nope", Compaction: &rules.Compaction{}}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trigger, limit, ok := rules.CompactionBounds(tc.a, k)
			if trigger != tc.trigger || limit != tc.limit || ok != tc.ok {
				t.Fatalf("CompactionBounds = %d, %d, %v; want %d, %d, %v", trigger, limit, ok, tc.trigger, tc.limit, tc.ok)
			}
		})
	}
	if got := rules.SummaryTokens(&rules.Compaction{}, models["small"]); got != 512 {
		t.Fatalf("default summary bound on a 512-token model: %d", got)
	}
	if got := rules.SummaryTokens(&rules.Compaction{}, models["big"]); got != rules.DefaultSummaryTokens {
		t.Fatalf("default summary bound on a 4096-token model: %d", got)
	}
}
