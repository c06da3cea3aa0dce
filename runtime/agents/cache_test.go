package agents_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// TestPromptCachePolicyReachesEveryStep checks that an agent's caching
// policy is on every step's request, with one key per agent and thread:
// the same for the steps of two runs of one thread, another for another
// thread; an agent without a policy asks for nothing.
func TestPromptCachePolicyReachesEveryStep(t *testing.T) {
	fx := newFixture(t, fake.Config{Script: []fake.Step{
		calls(call("c1", "echo", `{}`)), answer("one"),
		answer("two"),
		answer("three"),
		answer("plain"),
	}})
	policy := gateway.PromptCache{TTL: gateway.CacheTTL1h, Tools: true, System: true, History: true}
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw,
		Agents: []agents.Agent{
			{Name: "triage", Model: "small", Instructions: "be brief", Tools: []string{"echo"}, PromptCache: policy},
			{Name: "plain", Model: "small", Instructions: "be brief"},
		},
		Tools:           []agents.Tool{{Name: "echo", Description: "echo"}},
		Implementations: map[string]agents.Implementation{"echo": echoTool},
	})
	mustRun(t, r, "triage", "hi", agents.RunOptions{ThreadID: "t1"})
	mustRun(t, r, "triage", "again", agents.RunOptions{ThreadID: "t1"})
	mustRun(t, r, "triage", "hi", agents.RunOptions{ThreadID: "t2"})
	mustRun(t, r, "plain", "hi", agents.RunOptions{ThreadID: "t1"})
	reqs := fx.fake.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5", len(reqs))
	}
	key := reqs[0].Cache.Key
	if !strings.HasPrefix(key, "aid-") || strings.Contains(key, "t1") || strings.Contains(key, "triage") {
		t.Fatalf("key %q: want an opaque hash", key)
	}
	for i, want := range []string{key, key, key} {
		c := reqs[i].Cache
		if c.Key != want || c.TTL != gateway.CacheTTL1h || !c.Tools || !c.System || !c.History {
			t.Errorf("request %d: cache %+v, want the policy with key %q", i, c, want)
		}
	}
	if k := reqs[3].Cache.Key; k == key || k == "" {
		t.Errorf("thread t2 has key %q, thread t1 %q: want another", k, key)
	}
	if c := reqs[4].Cache; c != (gateway.PromptCache{}) {
		t.Errorf("an agent without a policy asked for %+v", c)
	}
}

// TestPromptCachePolicyIsChecked refuses a lifetime no provider offers and
// a key the runtime would overwrite.
func TestPromptCachePolicyIsChecked(t *testing.T) {
	fx := newFixture(t, fake.Config{})
	for _, c := range []gateway.PromptCache{{TTL: "24h", System: true}, {System: true, Key: "mine"}} {
		_, err := agents.New(agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", PromptCache: c}}})
		if err == nil || !strings.Contains(err.Error(), "prompt cache") {
			t.Errorf("policy %+v: New = %v, want a prompt cache error", c, err)
		}
	}
}
