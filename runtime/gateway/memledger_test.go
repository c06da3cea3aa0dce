package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/ledgertest"
)

func TestMemoryLedgerContract(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T) gateway.Ledger { return gateway.NewMemoryLedger() })
	// Replicas of one process share its one memory ledger.
	ledgertest.RunShared(t, func(t *testing.T, n int) []gateway.Ledger {
		l := gateway.NewMemoryLedger()
		ls := make([]gateway.Ledger, n)
		for i := range ls {
			ls[i] = l
		}
		return ls
	})
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

// TestMemoryLedgerForgetsPastWindows: the in-memory ledger keeps the
// accounts of a budget's current window only, so that a 30-second window
// over months does not keep an account per window; a past window's account
// with a call in flight is kept until the call closes.
func TestMemoryLedgerForgetsPastWindows(t *testing.T) {
	ctx := t.Context()
	l := gateway.NewMemoryLedger()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := func(w int, key string) gateway.Limit {
		s := start.Add(time.Duration(w) * 30 * time.Second)
		return gateway.Limit{
			Account: gateway.Account{Budget: "burst", Scope: gateway.ScopeKey, Key: key + "@" + s.Format(time.RFC3339)},
			Max:     gateway.Amount{NanoUSD: 1e9}, Until: s.Add(30 * time.Second),
		}
	}
	reserve := func(id string, lims ...gateway.Limit) {
		t.Helper()
		if err := l.Reserve(ctx, gateway.Reservation{ID: id, Alias: "a", Model: "m", Amount: gateway.Amount{NanoUSD: 10}, Limits: lims}); err != nil {
			t.Fatal(err)
		}
	}
	reserve("inflight", lim(0, "k1"))
	const windows = 500
	for w := range windows {
		id := fmt.Sprint("h", w)
		reserve(id, lim(w, "k1"), lim(w, "k2"))
		if err := l.Settle(ctx, id, gateway.Amount{NanoUSD: 7}); err != nil {
			t.Fatal(err)
		}
	}
	accounts := func() []gateway.AccountSpend {
		s, err := l.Summary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.ByAccount
	}
	if got := accounts(); len(got) != 3 || got[0].Account != lim(0, "k1").Account {
		t.Errorf("accounts %+v, want the window in flight and the current window's two", got)
	}
	if err := l.Settle(ctx, "inflight", gateway.Amount{NanoUSD: 7}); err != nil {
		t.Fatal(err)
	}
	if got := accounts(); len(got) != 2 {
		t.Errorf("accounts %+v, want the current window's two", got)
	}
	by, err := l.SpendByBudget(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(by) != 1 || by[0].Spent.NanoUSD != 7*(2*windows+1) {
		t.Errorf("spend by budget %+v, want every window's spend", by)
	}
}
