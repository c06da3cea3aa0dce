package rules_test

import (
	"maps"
	"testing"

	"github.com/aidgen/aid/runtime/rules"
)

// TestReachableTools: an agent reaches its own tools and those of the
// agents it hands off or delegates to, at any depth, each through the
// first agent found breadth first; a cycle ends, and an unknown agent
// reaches nothing.
func TestReachableTools(t *testing.T) {
	agents := map[string]rules.Agent{
		"triage":   {Tools: []string{"lookup"}, Handoffs: []string{"billing"}, Delegates: []string{"research"}},
		"billing":  {Tools: []string{"refund", "lookup"}, Handoffs: []string{"triage"}},
		"research": {Tools: []string{"search"}, Delegates: []string{"deep", "ghost"}},
		"deep":     {Tools: []string{"refund", "crawl"}},
		"alone":    {},
	}
	find := func(name string) (rules.Agent, bool) { a, ok := agents[name]; return a, ok }
	for _, tc := range []struct {
		agent string
		want  map[string]string
	}{
		{"triage", map[string]string{"lookup": "triage", "refund": "billing", "search": "research", "crawl": "deep"}},
		{"research", map[string]string{"search": "research", "refund": "deep", "crawl": "deep"}},
		{"alone", map[string]string{}},
		{"ghost", map[string]string{}},
	} {
		if got := rules.ReachableTools(tc.agent, find); !maps.Equal(got, tc.want) {
			t.Errorf("ReachableTools(%q) = %v, want %v", tc.agent, got, tc.want)
		}
	}
}
