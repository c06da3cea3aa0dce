package agents_test

import (
	"errors"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// TestLongLivedMemoryStateIsBounded: a runtime built with no store of its
// own (the in-memory one, as a memory-state service runs) and a memory
// ledger serves more runs than the store keeps, through a run-scoped
// budget. What it holds stays at the bound: the oldest ended run is gone,
// the newest is found, and the ledger holds no account of an ended run,
// while the budget's total still counts every call. A runtime that kept
// every run and every run's account grew by both with each request.
func TestLongLivedMemoryStateIsBounded(t *testing.T) {
	budgets := []gateway.Budget{{Name: "per-run", MaxUSD: 1, Scope: gateway.ScopeRun}}
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"a": {answer("Paris")}}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Models: catalog(), Providers: map[string]gateway.Provider{"fake": p}, Budgets: budgets})
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, agents.Config{Gateway: gw, Budgets: budgets,
		Agents: []agents.Agent{{Name: "a", Model: "tiny", Instructions: "Answer.", Budget: "per-run"}}})
	const runs = agents.DefaultMaxFinished + 10
	var first, last string
	for i := range runs {
		res, err := r.Run(t.Context(), "a", "capital of France?", agents.RunOptions{})
		if err != nil || res.Status != agents.StatusCompleted {
			t.Fatalf("run %d: %v %v", i, res.Status, err)
		}
		if i == 0 {
			first = res.RunID
		}
		last = res.RunID
	}
	var nf *agents.RunNotFoundError
	if _, err := r.Store().LoadRun(t.Context(), first); !errors.As(err, &nf) {
		t.Errorf("the oldest of %d ended runs is still held (err %v); the store keeps %d", runs, err, agents.DefaultMaxFinished)
	}
	if _, err := r.Store().LoadRun(t.Context(), last); err != nil {
		t.Errorf("the newest run: %v", err)
	}
	s, err := gw.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ByAccount) != 0 {
		t.Errorf("the ledger holds %d accounts of ended runs, e.g. %+v", len(s.ByAccount), s.ByAccount[0])
	}
	if s.Calls != runs {
		t.Errorf("the ledger counts %d calls, want %d", s.Calls, runs)
	}
}
