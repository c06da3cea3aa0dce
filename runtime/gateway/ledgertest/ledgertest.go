package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// Run runs the contract against ledgers made by newLedger, which must return
// a fresh, empty ledger each time it is called.
func Run(t *testing.T, newLedger func(t *testing.T) gateway.Ledger) {
	t.Run("UnbudgetedCallsAreRecorded", func(t *testing.T) { testUnbudgeted(t, newLedger(t)) })
	t.Run("ReserveSettleRelease", func(t *testing.T) { testLifecycle(t, newLedger(t)) })
	t.Run("Refusals", func(t *testing.T) { testRefusals(t, newLedger(t)) })
	t.Run("AllOrNothing", func(t *testing.T) { testAllOrNothing(t, newLedger(t)) })
	t.Run("ClosedReservations", func(t *testing.T) { testClosed(t, newLedger(t)) })
	t.Run("OverrunIsRecorded", func(t *testing.T) { testOverrun(t, newLedger(t)) })
	t.Run("CachedInputTokens", func(t *testing.T) { testCachedInput(t, newLedger(t)) })
	t.Run("ConcurrentExactFill", func(t *testing.T) { testConcurrentExact(t, newLedger(t)) })
	t.Run("ConcurrentMixed", func(t *testing.T) { testConcurrentMixed(t, newLedger(t)) })
	t.Run("GatewayConcurrency", func(t *testing.T) { testGateway(t, newLedger(t)) })
	t.Run("ClosedAccountsKeepTheTotals", func(t *testing.T) { testCloseAccounts(t, newLedger(t)) })
	t.Run("WindowRollsOver", func(t *testing.T) { testWindowRollsOver(t, newLedger(t)) })
	t.Run("StackedAllOrNothing", func(t *testing.T) { testStackedAllOrNothing(t, newLedger(t)) })
	t.Run("StackedConcurrent", func(t *testing.T) { testStackedConcurrent(t, newLedger(t)) })
}

// testCloseAccounts checks that spend by budget sums every key of a budget
// and scope, and that closing accounts (a run that ended), even one with a
// call in flight, changes no total: the call settles and is counted.
func testCloseAccounts(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	org := gateway.Account{Budget: "org", Scope: gateway.ScopeGlobal}
	for i, key := range []string{"r1", "r2", "r3"} {
		id := fmt.Sprint("k", i)
		must(t, l.Reserve(ctx, res(id, 4000, 10, limit(run(key), 10_000, 0), limit(org, 1_000_000, 0))))
		if key != "r3" {
			must(t, l.Settle(ctx, id, gateway.Amount{NanoUSD: 1000, Tokens: 5, CachedInputTokens: 1}))
		}
	}
	must(t, l.CloseAccounts(ctx, []gateway.Account{run("r1"), run("r3"), run("never-charged")}))
	must(t, l.Settle(ctx, "k2", gateway.Amount{NanoUSD: 1000, Tokens: 5, CachedInputTokens: 1}))
	must(t, l.CloseAccounts(ctx, []gateway.Account{run("r2")}))
	got, err := l.SpendByBudget(ctx)
	must(t, err)
	spent := gateway.Amount{NanoUSD: 3000, Tokens: 15, CachedInputTokens: 3}
	want := []gateway.BudgetSpend{
		{Budget: "nightly", Scope: gateway.ScopeRun, Spent: spent, Calls: 3},
		{Budget: "org", Scope: gateway.ScopeGlobal, Spent: spent, Calls: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spend by budget (-want +got):\n%s", diff)
	}
	s := summary(t, l)
	if s.Total != spent || s.Calls != 3 {
		t.Errorf("summary total %+v over %d calls, want %+v over 3", s.Total, s.Calls, spent)
	}
	if got := account(t, l, org); got.Spent != spent || got.Calls != 3 {
		t.Errorf("the global account changed when run accounts closed: %+v", got)
	}
}

func run(key string) gateway.Account {
	return gateway.Account{Budget: "nightly", Scope: gateway.ScopeRun, Key: key}
}

func limit(acct gateway.Account, nano, tokens int64) gateway.Limit {
	return gateway.Limit{Account: acct, Max: gateway.Amount{NanoUSD: nano, Tokens: tokens}}
}

func res(id string, nano, tokens int64, limits ...gateway.Limit) gateway.Reservation {
	return gateway.Reservation{ID: id, Alias: "small", Model: "m-small-1", Amount: gateway.Amount{NanoUSD: nano, Tokens: tokens}, Limits: limits}
}

func summary(t *testing.T, l gateway.Ledger) gateway.SpendSummary {
	t.Helper()
	s, err := l.Summary(t.Context())
	if err != nil {
		t.Fatalf("Summary: %v", err)
	}
	return s
}

func account(t *testing.T, l gateway.Ledger, a gateway.Account) gateway.AccountSpend {
	t.Helper()
	for _, as := range summary(t, l).ByAccount {
		if as.Account == a {
			return as
		}
	}
	return gateway.AccountSpend{Account: a}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testUnbudgeted(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	must(t, l.Reserve(ctx, res("u1", 1000, 100)))
	must(t, l.Settle(ctx, "u1", gateway.Amount{NanoUSD: 400, Tokens: 40}))
	r := res("u2", 1000, 100)
	r.Alias, r.Model = "large", "m-large-1"
	must(t, l.Reserve(ctx, r))
	must(t, l.Settle(ctx, "u2", gateway.Amount{NanoUSD: 900, Tokens: 90}))
	must(t, l.Reserve(ctx, res("u3", 1000, 100)))
	must(t, l.Release(ctx, "u3"))

	want := gateway.SpendSummary{
		Total: gateway.Amount{NanoUSD: 1300, Tokens: 130},
		Calls: 2,
		ByAlias: []gateway.NamedSpend{
			{Name: "large", Spent: gateway.Amount{NanoUSD: 900, Tokens: 90}, Calls: 1},
			{Name: "small", Spent: gateway.Amount{NanoUSD: 400, Tokens: 40}, Calls: 1},
		},
		ByModel: []gateway.NamedSpend{
			{Name: "m-large-1", Spent: gateway.Amount{NanoUSD: 900, Tokens: 90}, Calls: 1},
			{Name: "m-small-1", Spent: gateway.Amount{NanoUSD: 400, Tokens: 40}, Calls: 1},
		},
	}
	if diff := cmp.Diff(want, summary(t, l)); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// testCachedInput checks that the cache reads and writes of settled spend
// are recorded apart, summed per account, alias and model, and never held:
// a reservation's cache counts are ignored, since a hold counts money and
// tokens only.
func testCachedInput(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	a := run("r1")
	lim := limit(a, 10_000, 0)
	hold := res("c1", 4000, 100, lim)
	hold.Amount.CachedInputTokens = 60
	hold.Amount.CacheWriteInputTokens = 70
	must(t, l.Reserve(ctx, hold))
	if got := account(t, l, a).Reserved; got != (gateway.Amount{NanoUSD: 4000, Tokens: 100}) {
		t.Errorf("held %+v, want the amount without cache counts", got)
	}
	must(t, l.Settle(ctx, "c1", gateway.Amount{NanoUSD: 1500, Tokens: 90, CachedInputTokens: 64, CacheWriteInputTokens: 5}))
	must(t, l.Reserve(ctx, res("c2", 4000, 100, lim)))
	must(t, l.Settle(ctx, "c2", gateway.Amount{NanoUSD: 700, Tokens: 30}))
	must(t, l.Reserve(ctx, res("c3", 4000, 100)))
	must(t, l.Settle(ctx, "c3", gateway.Amount{NanoUSD: 10, Tokens: 20, CachedInputTokens: 8, CacheWriteInputTokens: 11}))

	spent := gateway.Amount{NanoUSD: 2200, Tokens: 120, CachedInputTokens: 64, CacheWriteInputTokens: 5}
	total := gateway.Amount{NanoUSD: 2210, Tokens: 140, CachedInputTokens: 72, CacheWriteInputTokens: 16}
	want := gateway.SpendSummary{
		Total:     total,
		Calls:     3,
		ByAccount: []gateway.AccountSpend{{Account: a, Spent: spent, Calls: 2}},
		ByAlias:   []gateway.NamedSpend{{Name: "small", Spent: total, Calls: 3}},
		ByModel:   []gateway.NamedSpend{{Name: "m-small-1", Spent: total, Calls: 3}},
	}
	if diff := cmp.Diff(want, summary(t, l)); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func testLifecycle(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	a := run("r1")
	lim := limit(a, 10_000, 0)
	must(t, l.Reserve(ctx, res("a", 4000, 10, lim)))
	must(t, l.Reserve(ctx, res("b", 4000, 10, lim)))
	if got := account(t, l, a); got.Reserved != (gateway.Amount{NanoUSD: 8000, Tokens: 20}) || got.Spent != (gateway.Amount{}) {
		t.Fatalf("after two holds: %+v", got)
	}
	must(t, l.Settle(ctx, "a", gateway.Amount{NanoUSD: 1500, Tokens: 7}))
	must(t, l.Release(ctx, "b"))
	want := gateway.AccountSpend{Account: a, Spent: gateway.Amount{NanoUSD: 1500, Tokens: 7}, Calls: 1}
	if diff := cmp.Diff(want, account(t, l, a)); diff != "" {
		t.Errorf("account (-want +got):\n%s", diff)
	}
}

func testRefusals(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	usd := run("usd")
	tok := run("tok")
	must(t, l.Reserve(ctx, res("held", 600, 1, limit(usd, 1000, 0))))
	must(t, l.Reserve(ctx, res("spent", 300, 1, limit(usd, 1000, 0))))
	must(t, l.Settle(ctx, "spent", gateway.Amount{NanoUSD: 300, Tokens: 1}))
	must(t, l.Reserve(ctx, res("t1", 1, 90, limit(tok, 0, 100))))

	tests := []struct {
		name string
		r    gateway.Reservation
		want *gateway.BudgetExceededError // nil: fits
	}{
		{"exactly fits usd", res("fit", 100, 1, limit(usd, 1000, 0)), nil},
		{"one nano over", res("over", 1, 1, limit(usd, 1000, 0)), &gateway.BudgetExceededError{
			Budget: "nightly", Scope: gateway.ScopeRun, Key: "usd", Dimension: gateway.DimensionUSD,
			Limit: gateway.Amount{NanoUSD: 1000}, Spent: gateway.Amount{NanoUSD: 300, Tokens: 1},
			Reserved: gateway.Amount{NanoUSD: 700, Tokens: 2}, Requested: gateway.Amount{NanoUSD: 1, Tokens: 1},
		}},
		{"tokens over", res("tover", 1, 11, limit(tok, 0, 100)), &gateway.BudgetExceededError{
			Budget: "nightly", Scope: gateway.ScopeRun, Key: "tok", Dimension: gateway.DimensionTokens,
			Limit: gateway.Amount{Tokens: 100}, Reserved: gateway.Amount{NanoUSD: 1, Tokens: 90},
			Requested: gateway.Amount{NanoUSD: 1, Tokens: 11},
		}},
		{"tokens fit", res("tfit", 1, 10, limit(tok, 0, 100)), nil},
		{"other key is independent", res("other", 1000, 1, limit(run("r2"), 1000, 0)), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.Reserve(ctx, tt.r)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Reserve: %v, want it to fit", err)
				}
				return
			}
			var be *gateway.BudgetExceededError
			if !errors.As(err, &be) {
				t.Fatalf("Reserve: %v, want *BudgetExceededError", err)
			}
			if diff := cmp.Diff(tt.want, be); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
		})
	}
}

func testAllOrNothing(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	thread := gateway.Account{Budget: "per-thread", Scope: gateway.ScopeThread, Key: "t1"}
	global := gateway.Account{Budget: "org", Scope: gateway.ScopeGlobal}
	must(t, l.Reserve(ctx, res("g", 900, 1, limit(global, 1000, 0))))
	err := l.Reserve(ctx, res("both", 200, 1, limit(thread, 1000, 0), limit(global, 1000, 0)))
	var be *gateway.BudgetExceededError
	if !errors.As(err, &be) || be.Budget != "org" {
		t.Fatalf("Reserve: %v, want the org budget to refuse", err)
	}
	if got := account(t, l, thread); got.Reserved != (gateway.Amount{}) {
		t.Errorf("thread account holds %+v after a refused reservation, want nothing", got.Reserved)
	}
	must(t, l.Reserve(ctx, res("both2", 100, 1, limit(thread, 1000, 0), limit(global, 1000, 0))))
	must(t, l.Settle(ctx, "both2", gateway.Amount{NanoUSD: 50, Tokens: 1}))
	for _, a := range []gateway.Account{thread, global} {
		if got := account(t, l, a); got.Spent != (gateway.Amount{NanoUSD: 50, Tokens: 1}) {
			t.Errorf("account %v spent %+v, want 50 nano", a, got.Spent)
		}
	}
	if s := summary(t, l); s.Total != (gateway.Amount{NanoUSD: 50, Tokens: 1}) || s.Calls != 1 {
		t.Errorf("a call charged to two budgets counts once in the total: got %+v over %d calls", s.Total, s.Calls)
	}
}

func testClosed(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	must(t, l.Reserve(ctx, res("s", 10, 1, limit(run("c"), 100, 0))))
	must(t, l.Settle(ctx, "s", gateway.Amount{NanoUSD: 10, Tokens: 1}))
	must(t, l.Reserve(ctx, res("r", 10, 1)))
	must(t, l.Release(ctx, "r"))
	tests := []struct {
		name string
		op   func() error
	}{
		{"settle unknown", func() error { return l.Settle(ctx, "nope", gateway.Amount{}) }},
		{"release unknown", func() error { return l.Release(ctx, "nope") }},
		{"settle twice", func() error { return l.Settle(ctx, "s", gateway.Amount{NanoUSD: 10}) }},
		{"release after settle", func() error { return l.Release(ctx, "s") }},
		{"settle after release", func() error { return l.Settle(ctx, "r", gateway.Amount{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(); !errors.Is(err, gateway.ErrUnknownReservation) {
				t.Errorf("got %v, want ErrUnknownReservation", err)
			}
		})
	}
	if got := account(t, l, run("c")); got.Spent.NanoUSD != 10 || got.Reserved != (gateway.Amount{}) {
		t.Errorf("closed reservations changed the account: %+v", got)
	}
	if err := l.Reserve(ctx, res("dup", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Reserve(ctx, res("dup", 1, 1)); err == nil {
		t.Errorf("a second reservation with the same id was accepted")
	}
}

func testOverrun(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	a := run("o")
	must(t, l.Reserve(ctx, res("o", 100, 10, limit(a, 150, 0))))
	must(t, l.Settle(ctx, "o", gateway.Amount{NanoUSD: 170, Tokens: 17}))
	if got := account(t, l, a); got.Spent.NanoUSD != 170 {
		t.Errorf("spent %d, want the real 170 even over the limit", got.Spent.NanoUSD)
	}
	var be *gateway.BudgetExceededError
	if err := l.Reserve(ctx, res("o2", 1, 1, limit(a, 150, 0))); !errors.As(err, &be) {
		t.Errorf("Reserve on an overrun budget: %v, want a refusal", err)
	}
}

// checkRefusal verifies that a refusal was true when it was made: the
// figures the ledger observed, atomically with its check, did not leave room
// for the request, and never showed the budget already overdrawn.
func checkRefusal(err error, max gateway.Amount) error {
	var be *gateway.BudgetExceededError
	if !errors.As(err, &be) {
		return fmt.Errorf("unexpected error: %w", err)
	}
	if be.Limit != max {
		return fmt.Errorf("refusal names limit %+v, want %+v", be.Limit, max)
	}
	if be.Spent.NanoUSD+be.Reserved.NanoUSD > max.NanoUSD {
		return fmt.Errorf("refusal observed spent %d + reserved %d over the limit %d: the ledger let calls overspend", be.Spent.NanoUSD, be.Reserved.NanoUSD, max.NanoUSD)
	}
	if be.Spent.NanoUSD+be.Reserved.NanoUSD+be.Requested.NanoUSD <= max.NanoUSD {
		return fmt.Errorf("refused although spent %d + reserved %d + requested %d fits in %d", be.Spent.NanoUSD, be.Reserved.NanoUSD, be.Requested.NanoUSD, max.NanoUSD)
	}
	return nil
}

const goroutines = 1000

// testConcurrentExact: every call settles its full hold, so exactly
// limit/amount calls may run, however they interleave.
func testConcurrentExact(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	a := run("exact")
	const amount, fits = 1000, 37
	lim := limit(a, amount*fits, 0)
	var ok, refused atomic.Int64
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			id := fmt.Sprintf("x%d", i)
			err := l.Reserve(ctx, res(id, amount, 1, lim))
			if err != nil {
				refused.Add(1)
				if cerr := checkRefusal(err, lim.Max); cerr != nil {
					errs <- cerr
				}
				return
			}
			ok.Add(1)
			if err := l.Settle(ctx, id, gateway.Amount{NanoUSD: amount, Tokens: 1}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if ok.Load() != fits || refused.Load() != goroutines-fits {
		t.Errorf("%d calls ran and %d were refused, want exactly %d and %d", ok.Load(), refused.Load(), fits, goroutines-fits)
	}
	if got := account(t, l, a); got.Spent.NanoUSD != amount*fits || got.Reserved != (gateway.Amount{}) {
		t.Errorf("account after the race: %+v", got)
	}
}

// testConcurrentMixed: calls settle less than they held or release it, so
// freed room is reused; settled spend must still never pass the limit.
func testConcurrentMixed(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	a := run("mixed")
	lim := limit(a, 50_000, 0)
	errs := make(chan error, goroutines)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			id := fmt.Sprintf("m%d", i)
			hold := int64(500 + i%7*100)
			err := l.Reserve(ctx, res(id, hold, 1, lim))
			if err != nil {
				if cerr := checkRefusal(err, lim.Max); cerr != nil {
					errs <- cerr
				}
				return
			}
			ok.Add(1)
			if i%3 == 0 {
				err = l.Release(ctx, id)
			} else {
				err = l.Settle(ctx, id, gateway.Amount{NanoUSD: hold * int64(1+i%4) / 4, Tokens: 1})
			}
			if err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := account(t, l, a)
	if got.Spent.NanoUSD > lim.Max.NanoUSD {
		t.Errorf("settled %d nano, over the limit %d", got.Spent.NanoUSD, lim.Max.NanoUSD)
	}
	if got.Reserved != (gateway.Amount{}) {
		t.Errorf("holds left after every call closed: %+v", got.Reserved)
	}
	if ok.Load() == 0 {
		t.Errorf("no call ran")
	}
}

// testGateway drives the whole gateway: 1,000 goroutines calling Generate
// through a fake provider against one small run budget.
func testGateway(t *testing.T, l gateway.Ledger) {
	p, err := fake.New(fake.Config{Script: []fake.Step{{Text: "fine"}}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	const maxUSD = 0.05
	g, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "fake-small-2024-01-01", Provider: "fake", MaxOutputTokens: 16,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.05, OutputPer1kUSD: 0.15},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
		Budgets:   []gateway.Budget{{Name: "nightly", MaxUSD: maxUSD, Scope: gateway.ScopeRun}},
		Ledger:    l,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "How much is this going to cost me?"}}}
	ctx := t.Context()
	var ok atomic.Int64
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			_, err := g.Generate(ctx, "small", req, gateway.WithBudget("nightly", "run-1"))
			if err == nil {
				ok.Add(1)
				return
			}
			if cerr := checkRefusal(err, gateway.Amount{NanoUSD: maxUSD * 1e9}); cerr != nil {
				errs <- cerr
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	s := summary(t, l)
	if len(s.ByAccount) != 1 {
		t.Fatalf("accounts: %+v", s.ByAccount)
	}
	acct := s.ByAccount[0]
	if acct.Spent.USD() > maxUSD {
		t.Errorf("settled $%v, over the $%v budget", acct.Spent.USD(), maxUSD)
	}
	if acct.Reserved != (gateway.Amount{}) {
		t.Errorf("holds left: %+v", acct.Reserved)
	}
	if ok.Load() == 0 || ok.Load() == goroutines {
		t.Errorf("%d of %d calls ran; the budget should admit some and refuse the rest", ok.Load(), goroutines)
	}
	if acct.Calls != ok.Load() {
		t.Errorf("ledger counts %d calls, %d succeeded", acct.Calls, ok.Load())
	}
}
