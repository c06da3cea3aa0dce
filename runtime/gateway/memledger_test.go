package gateway_test

import (
	"fmt"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/ledgertest"
)

func TestMemoryLedgerContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) gateway.Ledger { return gateway.NewMemoryLedger() })
}

// TestMemoryLedgerForgetsClosedAccounts: the in-memory ledger does not keep
// an account per run for ever. A closed account is gone from the summary
// once no call holds on it, while the per-budget totals keep its spend.
func TestMemoryLedgerForgetsClosedAccounts(t *testing.T) {
	ctx := t.Context()
	l := gateway.NewMemoryLedger()
	acct := func(i int) gateway.Account {
		return gateway.Account{Budget: "per-run", Scope: gateway.ScopeRun, Key: fmt.Sprint("run_", i)}
	}
	const runs = 1000
	for i := range runs {
		id := fmt.Sprint("h", i)
		lim := gateway.Limit{Account: acct(i), Max: gateway.Amount{NanoUSD: 1e9}}
		if err := l.Reserve(ctx, gateway.Reservation{ID: id, Alias: "a", Model: "m", Amount: gateway.Amount{NanoUSD: 10}, Limits: []gateway.Limit{lim}}); err != nil {
			t.Fatal(err)
		}
		if i == runs-1 {
			// The last run's account is closed with its call in flight.
			if err := l.CloseAccounts(ctx, []gateway.Account{acct(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Settle(ctx, id, gateway.Amount{NanoUSD: 7}); err != nil {
			t.Fatal(err)
		}
		if i < runs-1 {
			if err := l.CloseAccounts(ctx, []gateway.Account{acct(i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := l.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.ByAccount) != 0 {
		t.Errorf("%d closed accounts still held, e.g. %+v", len(s.ByAccount), s.ByAccount[0])
	}
	by, err := l.SpendByBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(by) != 1 || by[0].Spent.NanoUSD != 7*runs || by[0].Calls != runs {
		t.Errorf("spend by budget %+v, want %d nanodollars over %d calls", by, 7*runs, runs)
	}
}
