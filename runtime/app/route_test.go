package app_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// TestDeadPrimaryIsCooledDownAcrossRuns is the routing check on an
// assembled application: the agent's model is served by a deployment on
// an OpenAI-compatible endpoint that answers 503 to everything (with
// retries allowed, maxRetries 2), with a cool-down of a minute, and falls
// back to a second alias. The first run meets the failure once and
// completes on the fallback; the next 100 runs make no call to the dead
// endpoint; once the cool-down has passed (on the gateway's clock,
// app.Options.Clock) the next run tries it again.
func TestDeadPrimaryIsCooledDownAcrossRuns(t *testing.T) {
	var hits atomic.Int64
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`))
	}))
	defer dead.Close()
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	chat := func(alias, id, provider string) gateway.PinnedModel {
		return gateway.PinnedModel{Alias: alias, Spec: gateway.ModelSpec{ID: id, Provider: provider, Kind: gateway.KindChat,
			ContextWindow: 8192, MaxOutputTokens: 64, Capabilities: []gateway.Capability{gateway.CapabilityTools},
			Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}}
	}
	primary := chat("primary", "gpt-x-2026-01-01", "main")
	primary.Deployments = []gateway.Deployment{{Provider: "main", Name: "us"}}
	primary.CoolDown = time.Minute
	desc := app.Description{
		Name: "routing", Version: "0.1.0", Dir: t.TempDir(),
		Providers: []app.Provider{
			{Name: "main", Kind: openaicompat.Kind{BaseURL: dead.URL, APIKeyEnv: "MAIN_KEY", MaxRetries: 2}},
			{Name: "spare", Kind: fake.Kind{Seed: 1}},
		},
		Models: []gateway.PinnedModel{primary, chat("backup", "fake-1", "spare")},
		Agents: []agents.Agent{{Name: "desk", Model: "primary", Fallbacks: []string{"backup"}, Instructions: "Answer.", MaxSteps: 2}},
	}
	a, err := app.Assemble(t.Context(), desc, app.Options{
		Clock: clock,
		LookupEnv: func(k string) (string, bool) {
			if k == "MAIN_KEY" {
				return "sk-test", true
			}
			return "", false
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	run := func(i int) {
		t.Helper()
		res, err := a.Agents.Run(t.Context(), "desk", "Where is my order?", agents.RunOptions{})
		if err != nil || res.Status != agents.StatusCompleted || res.Answer == "" {
			t.Fatalf("run %d: %v, status %q answer %q", i, err, res.Status, res.Answer)
		}
	}
	run(0)
	if n := hits.Load(); n != 1 {
		t.Fatalf("the first run called the dead primary %d times, want once: a deployment that fails is cooled down, not retried", n)
	}
	for i := 1; i <= 100; i++ {
		run(i)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the dead primary was called %d times in 101 runs, want once", n)
	}
	st := a.Gateway.Deployments()
	if len(st) != 1 || st[0].Name != "us" || st[0].Calls != 1 || st[0].Failures != 1 || st[0].CoolDowns != 1 || st[0].CoolingUntil.IsZero() {
		t.Errorf("deployment stats %+v", st)
	}
	mu.Lock()
	now = now.Add(61 * time.Second)
	mu.Unlock()
	run(101)
	if n := hits.Load(); n != 2 {
		t.Errorf("after its cool-down the primary was called %d times in all, want it tried again once", n)
	}
}
