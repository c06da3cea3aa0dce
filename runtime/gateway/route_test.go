package gateway_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// routeEnv is a gateway whose alias "primary" is served by the providers
// named in deps (each a fake answering its script for ever), cooled down
// for a minute after a failure, with the alias "backup" on its own fake;
// the clock is the returned counter of seconds.
func routeEnv(t *testing.T, scripts map[string][]fake.Step, deps []gateway.Deployment) (*gateway.Gateway, map[string]*fake.Provider, *atomic.Int64) {
	t.Helper()
	providers := map[string]gateway.Provider{}
	fakes := map[string]*fake.Provider{}
	for name, script := range scripts {
		p, err := fake.New(fake.Config{Script: script, Loop: true, Record: true})
		if err != nil {
			t.Fatal(err)
		}
		providers[name], fakes[name] = p, p
	}
	spec := func(id, provider string) gateway.ModelSpec {
		return gateway.ModelSpec{ID: id, Provider: provider, MaxOutputTokens: 16, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}
	}
	var secs atomic.Int64
	start := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{
			{Alias: "primary", Spec: spec("m-1", deps[0].Provider), Deployments: deps, CoolDown: time.Minute},
			{Alias: "backup", Spec: spec("m-2", "backup")},
		},
		Providers: providers,
		Retry:     gateway.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Clock:     func() time.Time { return start.Add(time.Duration(secs.Load()) * time.Second) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return g, fakes, &secs
}

var routeReq = gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}}

// TestDeadPrimaryIsCooledDown is the figure the README quotes: a primary
// answering 503 is called once; the next 100 calls go straight to the
// fallback without calling it, until its cool-down ends.
func TestDeadPrimaryIsCooledDown(t *testing.T) {
	g, fakes, secs := routeEnv(t, map[string][]fake.Step{
		"main":   {{Err: fake.StatusError(503)}},
		"backup": {{Text: "from backup"}},
	}, []gateway.Deployment{{Provider: "main"}})
	ctx := t.Context()
	for i := range 101 {
		res, err := g.Generate(ctx, "primary", routeReq, gateway.WithFallbacks("backup"))
		if err != nil || res.Alias != "backup" {
			t.Fatalf("call %d: %v %+v, want the backup's answer", i, err, res)
		}
		if i > 0 {
			var cool *gateway.DeploymentsCoolingError
			if len(res.Attempts) != 2 || !errors.As(res.Attempts[0].Err, &cool) {
				t.Fatalf("call %d attempts %+v, want the cooling primary skipped", i, res.Attempts)
			}
		}
	}
	if n := len(fakes["main"].Requests()); n != 1 {
		t.Errorf("the dead primary was called %d times over 101 calls, want once (no retries, then skipped)", n)
	}
	stats := g.Deployments()
	if len(stats) != 1 || stats[0].Calls != 1 || stats[0].Failures != 1 || stats[0].CoolDowns != 1 || stats[0].CoolingUntil.IsZero() {
		t.Errorf("deployment stats %+v", stats)
	}
	secs.Store(61)
	if _, err := g.Generate(ctx, "primary", routeReq, gateway.WithFallbacks("backup")); err != nil {
		t.Fatal(err)
	}
	if n := len(fakes["main"].Requests()); n != 2 {
		t.Errorf("after the cool-down the primary was called %d times in all, want it tried again", n)
	}
}

// TestDeploymentsShareByWeightAndSkipTheDead: calls spread over two
// healthy deployments by weight; when one fails, the same call moves at
// once to the other, and later calls skip the failed one.
func TestDeploymentsShareByWeightAndSkipTheDead(t *testing.T) {
	g, fakes, _ := routeEnv(t, map[string][]fake.Step{
		"east": {{Text: "east"}}, "west": {{Text: "west"}}, "backup": {{Text: "backup"}},
	}, []gateway.Deployment{{Name: "east", Provider: "east", Weight: 3}, {Name: "west", Provider: "west", Weight: 1}})
	ctx := t.Context()
	for range 400 {
		if _, err := g.Generate(ctx, "primary", routeReq); err != nil {
			t.Fatal(err)
		}
	}
	east, west := len(fakes["east"].Requests()), len(fakes["west"].Requests())
	if east < 240 || east > 360 || east+west != 400 {
		t.Errorf("east %d, west %d of 400 calls; want about 3 to 1", east, west)
	}

	g, fakes, _ = routeEnv(t, map[string][]fake.Step{
		"east": {{Err: fake.StatusError(429)}}, "west": {{Text: "west"}}, "backup": {{Text: "backup"}},
	}, []gateway.Deployment{{Name: "east", Provider: "east", Weight: 1000}, {Name: "west", Provider: "west", Weight: 1}})
	for i := range 50 {
		res, err := g.Generate(ctx, "primary", routeReq)
		if err != nil || res.Text != "west" {
			t.Fatalf("call %d: %v %q", i, err, res.Text)
		}
	}
	if n := len(fakes["east"].Requests()); n != 1 {
		t.Errorf("the failing deployment was called %d times, want once", n)
	}
}

// TestScriptErrorSteps: a script file's steps fail with an HTTP status, a
// delay or a dropped stream, so that routing is tried with no key.
func TestScriptErrorSteps(t *testing.T) {
	s, err := fake.ParseScript("s.json", []byte(`{"agents": {"a": [{"status": 503}, {"text": "late", "delay": "20ms"}, {"text": "par", "drop": true}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	var pe *gateway.ProviderError
	if st := s.Agents["a"][0]; !errors.As(st.Err, &pe) || pe.StatusCode != 503 || !pe.Retryable {
		t.Errorf("status step: %+v", st)
	}
	if st := s.Agents["a"][1]; st.Delay != 20*time.Millisecond || st.Err != nil {
		t.Errorf("delay step: %+v", st)
	}
	if st := s.Agents["a"][2]; st.Text != "par" || !errors.As(st.Err, &pe) || !pe.Retryable {
		t.Errorf("drop step: %+v", st)
	}
	for _, bad := range []string{`{"status": 200}`, `{"status": 503, "drop": true}`, `{"delay": "soon", "text": "x"}`, `{"status": 500, "answer": true}`} {
		if _, err := fake.ParseScript("s.json", []byte(`{"agents": {"a": [`+bad+`]}}`)); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
