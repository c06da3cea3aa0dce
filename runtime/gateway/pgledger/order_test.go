package pgledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
)

// TestOppositeOrdersDoNotDeadlock runs two gateways, each on its own pool
// over one database, as two replicas would. Every round both charge a call
// to the same two budgets under a fresh key, so both create the accounts at
// once, and name them in opposite orders: [a, b] on one replica, [b, a] on
// the other. Locking (and creating) in the caller's order deadlocks; the
// database then aborts one call after its deadlock_timeout.
//
// Inserting two rows takes microseconds, so two bare replicas rarely
// interleave inside one INSERT (300 rounds of the old code passed without
// help). A trigger that makes each account insert sleep half a millisecond keeps
// both INSERTs running at once every round, so the lock orders always meet;
// the locking itself is the database's own.
func TestOppositeOrdersDoNotDeadlock(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	newGateway := func() *gateway.Gateway {
		l, err := pgledger.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		pgledger.NoRetry(l) // a deadlock must not happen at all, not merely be retried
		p, err := fake.New(fake.Config{Script: []fake.Step{{Text: "ok"}}, Loop: true})
		if err != nil {
			t.Fatal(err)
		}
		g, err := gateway.New(gateway.Config{
			Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
				ID: "fake-small-2024-01-01", Provider: "fake", MaxOutputTokens: 4,
				Cost: gateway.CostProfile{InputPer1kUSD: 0.01, OutputPer1kUSD: 0.01},
			}}},
			Providers: map[string]gateway.Provider{"fake": p},
			Budgets: []gateway.Budget{
				{Name: "a", MaxUSD: 100, Scope: gateway.ScopeRun},
				{Name: "b", MaxUSD: 100, Scope: gateway.ScopeThread},
			},
			Ledger: l,
		})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g1, g2 := newGateway(), newGateway()
	slowAccountInserts(t, dsn)
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "hi"}}}
	const rounds = 200
	for i := range rounds {
		key := fmt.Sprintf("k%d", i)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		call := func(n int, g *gateway.Gateway, first, second string) {
			<-start
			_, errs[n] = g.Generate(t.Context(), "small", req, gateway.WithBudget(first, key), gateway.WithBudget(second, key))
		}
		wg.Go(func() { call(0, g1, "a", "b") })
		wg.Go(func() { call(1, g2, "b", "a") })
		close(start)
		wg.Wait()
		for n, err := range errs {
			if err != nil {
				t.Fatalf("round %d, replica %d: %v", i, n+1, err)
			}
		}
	}
	s, err := g1.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls != 2*rounds || len(s.ByAccount) != 2*rounds {
		t.Errorf("%d calls on %d accounts, want %d on %d", s.Calls, len(s.ByAccount), 2*rounds, 2*rounds)
	}
	for _, a := range s.ByAccount {
		if a.Calls != 2 || a.Reserved != (gateway.Amount{}) {
			t.Errorf("account %+v: want 2 calls and nothing held", a)
		}
	}
}

// slowAccountInserts makes every proposed insert into the accounts table
// sleep for half a millisecond before it is made, so that concurrent inserts
// overlap.
func slowAccountInserts(t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, stmt := range []string{
		`CREATE FUNCTION test_slow_insert() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(0.0005); RETURN NEW; END $$`,
		`CREATE TRIGGER test_slow_insert BEFORE INSERT ON aid_budget_accounts
		FOR EACH ROW EXECUTE FUNCTION test_slow_insert()`,
	} {
		if _, err := conn.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
}
