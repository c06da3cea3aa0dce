package agents_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/agentstoretest"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

func TestInMemoryStoreContract(t *testing.T) {
	agentstoretest.Run(t, func(*testing.T) agents.Store { return agents.NewInMemoryStore() })
}

func TestInMemoryMemoryContract(t *testing.T) {
	agentstoretest.RunMemory(t, func(*testing.T) agents.MemoryStore { return agents.NewInMemoryMemory() })
}

func TestInMemoryStoreReplicasContract(t *testing.T) {
	agentstoretest.RunReplicas(t, func(*testing.T) (agents.Store, agents.Store) {
		s := agents.NewInMemoryStore()
		return s, s
	})
}

// TestEndedRunsCloseTheirBudgetAccounts: a run that ends closes its
// accounts of run-scoped budgets, and of thread-scoped ones when it was its
// own thread, so that an in-memory ledger does not keep one per run; a
// paused run keeps them until it ends, and a named thread keeps its own.
func TestEndedRunsCloseTheirBudgetAccounts(t *testing.T) {
	budgets := []gateway.Budget{
		{Name: "per-run", MaxUSD: 1, Scope: gateway.ScopeRun},
		{Name: "per-thread", MaxUSD: 1, Scope: gateway.ScopeThread},
	}
	fx := newFixture(t, fake.Config{Agents: map[string][]fake.Step{
		"a": {answer("done")},
		"b": {calls(call("c1", "refund", `{}`)), answer("refunded")},
	}, Loop: true}, budgets...)
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw, Budgets: budgets,
		Agents: []agents.Agent{
			{Name: "a", Model: "small", Budget: "per-run"},
			{Name: "b", Model: "small", Budget: "per-thread", Tools: []string{"refund"}},
		},
		Tools:           []agents.Tool{{Name: "refund", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		Implementations: map[string]agents.Implementation{"refund": echoTool},
	})
	ctx := t.Context()
	accounts := func() []gateway.Account {
		s, err := fx.gw.Spend(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []gateway.Account
		for _, a := range s.ByAccount {
			out = append(out, a.Account)
		}
		return out
	}
	for range 20 {
		mustRun(t, r, "a", "q", agents.RunOptions{})
	}
	paused := mustRun(t, r, "b", "refund it", agents.RunOptions{})
	mustRun(t, r, "b", "refund it", agents.RunOptions{ThreadID: "t1"}) // paused too, in thread t1
	want := []gateway.Account{
		{Budget: "per-thread", Scope: gateway.ScopeThread, Key: paused.RunID},
		{Budget: "per-thread", Scope: gateway.ScopeThread, Key: "t1"},
	}
	if diff := cmp.Diff(want, accounts(), cmpopts.SortSlices(func(a, b gateway.Account) bool { return a.Key < b.Key })); diff != "" {
		t.Errorf("accounts after 20 ended runs and 2 paused ones (-want +got):\n%s", diff)
	}
	if _, err := r.Resume(ctx, paused.RunID, agents.Decision{Action: agents.Approve}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[1:], accounts()); diff != "" {
		t.Errorf("accounts after the run that was its own thread ended (-want +got):\n%s", diff)
	}
	by, err := fx.gw.SpendByBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(by) != 2 || by[0].Budget != "per-run" || by[0].Calls != 20 || by[1].Calls != 3 {
		t.Errorf("spend by budget: %+v, want 20 calls on per-run and 3 on per-thread", by)
	}
}
