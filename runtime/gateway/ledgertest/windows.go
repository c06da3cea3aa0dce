package ledgertest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// clock is a settable time for a gateway's Config.Clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// newGateway returns a gateway over ledger l, one fake chat alias "small"
// answering "fine" for ever, the budgets and the clock.
func newGateway(t testing.TB, l gateway.Ledger, c *clock, budgets ...gateway.Budget) *gateway.Gateway {
	t.Helper()
	return newGatewayConfig(t, l, c, budgets, nil)
}

// newGatewayLimits is newGateway with rate limits and no budget.
func newGatewayLimits(t testing.TB, l gateway.Ledger, c *clock, limits ...gateway.RateLimit) *gateway.Gateway {
	t.Helper()
	return newGatewayConfig(t, l, c, nil, limits)
}

func newGatewayConfig(t testing.TB, l gateway.Ledger, c *clock, budgets []gateway.Budget, limits []gateway.RateLimit) *gateway.Gateway {
	t.Helper()
	p, err := fake.New(fake.Config{Script: []fake.Step{{Text: "fine"}}, Loop: true})
	if err != nil {
		t.Fatal(err)
	}
	cfg := gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{
			ID: "fake-small-2024-01-01", Provider: "fake", MaxOutputTokens: 16,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.05, OutputPer1kUSD: 0.15},
		}}},
		Providers:  map[string]gateway.Provider{"fake": p},
		Budgets:    budgets,
		RateLimits: limits,
		Ledger:     l,
	}
	if c != nil {
		cfg.Clock = c.Now
	}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

var hello = gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: "How much is this going to cost me?"}}}

// testWindowRollsOver checks that a tenant budget of a calendar day in a
// time zone refuses once the day's spend is used, counts each tenant apart,
// and starts from zero at midnight in that zone, not in UTC; the past day's
// spend stays recorded under its own account.
func testWindowRollsOver(t *testing.T, l gateway.Ledger) {
	berlin, err := kind.LoadTimeZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Date(2026, 3, 28, 23, 30, 0, 0, berlin)}
	g := newGateway(t, l, c, gateway.Budget{Name: "acme_daily", MaxUSD: 0.01, Scope: gateway.ScopeTenant,
		Window: "day", TimeZone: "Europe/Berlin", AppliesToAll: true})
	acme := kind.WithCaller(t.Context(), kind.Caller{Key: "frontend", Tenant: "acme"})
	globex := kind.WithCaller(t.Context(), kind.Caller{Key: "other", Tenant: "globex"})
	fill := func() int {
		t.Helper()
		for n := 0; ; n++ {
			_, err := g.Generate(acme, "small", hello)
			if err == nil {
				continue
			}
			var be *gateway.BudgetExceededError
			if !errors.As(err, &be) || be.Budget != "acme_daily" || be.Scope != gateway.ScopeTenant {
				t.Fatalf("call %d: %v, want the acme_daily budget to refuse", n, err)
			}
			return n
		}
	}
	first := fill()
	if first == 0 {
		t.Fatal("the budget admitted no call")
	}
	if _, err := g.Generate(globex, "small", hello); err != nil {
		t.Fatalf("another tenant was refused by acme's spend: %v", err)
	}
	// 00:10 in Berlin is still the 28th in UTC: a UTC day would not reset.
	c.Set(time.Date(2026, 3, 29, 0, 10, 0, 0, berlin))
	if second := fill(); second != first {
		t.Errorf("the new day admitted %d calls, the first %d", second, first)
	}
	// A ledger may forget the accounts of past windows (see
	// Limit.Until); the current one it keeps, and the totals count all.
	allowed := map[string]bool{"acme@2026-03-27T23:00:00Z": true, "acme@2026-03-28T23:00:00Z": true, "globex@2026-03-27T23:00:00Z": true}
	current := false
	for _, a := range summary(t, l).ByAccount {
		if a.Account.Budget != "acme_daily" {
			continue
		}
		current = current || a.Account.Key == "acme@2026-03-28T23:00:00Z"
		if !allowed[a.Account.Key] || a.Spent.NanoUSD > 1e7 || a.Reserved != (gateway.Amount{}) {
			t.Errorf("account %+v: unknown key, spent over the limit or holds", a)
		}
	}
	if !current {
		t.Errorf("no account of the current window")
	}
	by, err := l.SpendByBudget(t.Context())
	must(t, err)
	if len(by) != 1 || by[0].Calls != int64(2*first+1) {
		t.Errorf("spend by budget %+v, want %d calls", by, 2*first+1)
	}
}

// testStackedAllOrNothing checks that a call is charged to its own budget
// and to every budget that applies to all calls, and that when one of them
// refuses, none holds anything: the refusal names that budget.
func testStackedAllOrNothing(t *testing.T, l gateway.Ledger) {
	c := &clock{now: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)}
	g := newGateway(t, l, c,
		gateway.Budget{Name: "per_run", MaxUSD: 1, Scope: gateway.ScopeRun},
		gateway.Budget{Name: "per_key", MaxUSD: 0.02, Scope: gateway.ScopeKey, Window: "1h", AppliesToAll: true},
		gateway.Budget{Name: "month", MaxUSD: 1, Scope: gateway.ScopeGlobal, Window: "month", AppliesToAll: true},
	)
	ctx := kind.WithCaller(t.Context(), kind.Caller{Key: "frontend", Tenant: "acme"})
	var n int
	for ; ; n++ {
		_, err := g.Generate(ctx, "small", hello, gateway.WithBudget("per_run", "run-1"))
		if err == nil {
			continue
		}
		var be *gateway.BudgetExceededError
		if !errors.As(err, &be) || be.Budget != "per_key" || be.Key != "frontend@2026-06-01T12:00:00Z" {
			t.Fatalf("call %d: %v, want the per_key budget to refuse", n, err)
		}
		break
	}
	spent := map[string]gateway.AccountSpend{}
	for _, a := range summary(t, l).ByAccount {
		spent[a.Account.Budget] = a
	}
	for _, b := range []string{"per_run", "per_key", "month"} {
		a, ok := spent[b]
		switch {
		case !ok:
			t.Errorf("budget %s was not charged", b)
		case a.Calls != int64(n) || a.Reserved != (gateway.Amount{}):
			t.Errorf("budget %s: %d calls, %+v held; want %d calls and nothing held after the refusal", b, a.Calls, a.Reserved, n)
		}
	}
	if spent["month"].Account.Key != "@2026-06-01T00:00:00Z" {
		t.Errorf("global monthly account key %q", spent["month"].Account.Key)
	}
	// The next hour's window admits the key again.
	c.Set(c.Now().Add(time.Hour))
	if _, err := g.Generate(ctx, "small", hello, gateway.WithBudget("per_run", "run-1")); err != nil {
		t.Errorf("a call in the next hour: %v", err)
	}
}

// testStackedConcurrent has reservers charge three overlapping accounts in
// every order at once: none may deadlock (the ledger locks in one order
// whatever the caller's), and none of the accounts may be overdrawn.
func testStackedConcurrent(t *testing.T, l gateway.Ledger) {
	ctx := t.Context()
	accts := []gateway.Limit{
		limit(gateway.Account{Budget: "a", Scope: gateway.ScopeTenant, Key: "acme@2026-01-01T00:00:00Z"}, 40_000, 0),
		limit(gateway.Account{Budget: "b", Scope: gateway.ScopeKey, Key: "frontend"}, 60_000, 0),
		limit(gateway.Account{Budget: "c", Scope: gateway.ScopeGlobal}, 50_000, 0),
	}
	orders := [][]int{{0, 1, 2}, {2, 1, 0}, {1, 0, 2}, {2, 0, 1}, {0, 2}, {2, 0}, {1, 2}, {2, 1}}
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			id := fmt.Sprintf("s%d", i)
			var lims []gateway.Limit
			for _, j := range orders[i%len(orders)] {
				lims = append(lims, accts[j])
			}
			err := l.Reserve(ctx, res(id, 300, 1, lims...))
			var be *gateway.BudgetExceededError
			if errors.As(err, &be) {
				if be.Spent.NanoUSD+be.Reserved.NanoUSD > be.Limit.NanoUSD {
					errs <- fmt.Errorf("refusal saw budget %s overdrawn: %+v", be.Budget, be)
				}
				return
			}
			if err != nil {
				errs <- err
				return
			}
			if i%2 == 0 {
				err = l.Release(ctx, id)
			} else {
				err = l.Settle(ctx, id, gateway.Amount{NanoUSD: 300, Tokens: 1})
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
	for _, lim := range accts {
		got := account(t, l, lim.Account)
		if got.Spent.NanoUSD > lim.Max.NanoUSD || got.Reserved != (gateway.Amount{}) {
			t.Errorf("account %s: spent %d of %d, holds %+v", lim.Account.Budget, got.Spent.NanoUSD, lim.Max.NanoUSD, got.Reserved)
		}
		if got.Spent.NanoUSD == 0 {
			t.Errorf("account %s: no call settled", lim.Account.Budget)
		}
	}
}

// RunShared runs the checks that need several ledgers over one store, as
// replicas of a service have: newLedgers returns n ledgers sharing one
// fresh, empty store.
func RunShared(t *testing.T, newLedgers func(t *testing.T, n int) []gateway.Ledger) {
	t.Run("TenantDayAcrossReplicas", func(t *testing.T) { testTenantDayAcrossReplicas(t, newLedgers(t, 3)) })
	t.Run("RateLimitAcrossReplicas", func(t *testing.T) { testRateLimitAcrossReplicas(t, newLedgers(t, 3)) })
}

// testRateLimitAcrossReplicas is the rate limit figure the README quotes:
// three gateways, each with its own ledger (and so limiter, when the
// ledger is one) over one store, share a limit of 10,000 tokens per minute
// per key. Calls arrive in bursts every 5 seconds of an injected clock for
// three minutes; the tokens admitted in any 60 seconds never pass 10,000,
// and every refusal is a *RateLimitedError naming the limit with a wait.
func testRateLimitAcrossReplicas(t *testing.T, ls []gateway.Ledger) {
	const tpm = 10_000
	c := &clock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	gws := make([]*gateway.Gateway, len(ls))
	for i, l := range ls {
		gws[i] = newGatewayLimits(t, l, c, gateway.RateLimit{Name: "per_key_tpm", Scope: gateway.RateScopeKey, TokensPerMinute: tpm})
	}
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: strings.Repeat("How much is this going to cost me? ", 40)}}, MaxOutputTokens: 16}
	u, err := gws[0].EstimateUsage("small", req)
	must(t, err)
	per := u.TotalTokens
	ctx := kind.WithCaller(t.Context(), kind.Caller{Key: "frontend", Tenant: "acme"})
	const step, steps, burst = 5 * time.Second, 36, 12
	admitted := make([]int64, steps)
	start := c.Now()
	for s := range steps {
		c.Set(start.Add(time.Duration(s) * step))
		var ok atomic.Int64
		errs := make(chan error, burst)
		var wg sync.WaitGroup
		for i := range burst {
			wg.Go(func() {
				_, err := gws[i%len(gws)].Generate(ctx, "small", req)
				if err == nil {
					ok.Add(1)
					return
				}
				rl, isRate := errors.AsType[*gateway.RateLimitedError](err)
				if !isRate || rl.Limit != "per_key_tpm" || rl.RetryAfter <= 0 || rl.Tokens.Limit != tpm {
					errs <- fmt.Errorf("refusal is not the limit's: %w", err)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		admitted[s] = ok.Load()
	}
	var total, worst int64
	for s := range steps {
		var sum int64
		for j := s; j < steps && time.Duration(j-s)*step < time.Minute; j++ {
			sum += admitted[j] * per
		}
		worst = max(worst, sum)
		total += admitted[s] * per
	}
	t.Logf("%d calls of %d tokens over %s on %d replicas: %d tokens admitted, at most %d in any 60 s (limit %d)", steps*burst, per, time.Duration(steps)*step, len(ls), total, worst, tpm)
	if worst > tpm {
		t.Errorf("%d tokens admitted within 60 s, over the %d per minute", worst, tpm)
	}
	if total <= 2*tpm {
		t.Errorf("only %d tokens admitted in three minutes: the window does not slide", total)
	}
}

// TenantDayCalls is how many calls TenantDayAcrossReplicas makes at once:
// 2,000, or 300 with -short.
func TenantDayCalls() int {
	if testing.Short() {
		return 300
	}
	return 2000
}

// testTenantDayAcrossReplicas is the figure the README quotes: three
// gateways, each with its own ledger over one store, take TenantDayCalls
// concurrent calls of one tenant against a budget of $1 per day. The
// settled spend is at most $1 to the nanodollar, and every refused call's
// error names the budget.
func testTenantDayAcrossReplicas(t *testing.T, ls []gateway.Ledger) {
	c := &clock{now: time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}
	budget := gateway.Budget{Name: "acme_daily", MaxUSD: 1, Scope: gateway.ScopeTenant, Window: "day", TimeZone: "Europe/Berlin", AppliesToAll: true}
	gws := make([]*gateway.Gateway, len(ls))
	for i, l := range ls {
		gws[i] = newGateway(t, l, c, budget)
	}
	ctx := kind.WithCaller(t.Context(), kind.Caller{Key: "frontend", Tenant: "acme"})
	req := gateway.Request{Messages: []gateway.Message{{Role: gateway.RoleUser, Content: strings.Repeat("How much is this going to cost me? ", 40)}}, MaxOutputTokens: 16}
	calls := TenantDayCalls()
	var ok, refused atomic.Int64
	errs := make(chan error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			_, err := gws[i%len(gws)].Generate(ctx, "small", req)
			if err == nil {
				ok.Add(1)
				return
			}
			refused.Add(1)
			var be *gateway.BudgetExceededError
			if !errors.As(err, &be) || be.Budget != "acme_daily" || !strings.Contains(err.Error(), `"acme_daily"`) {
				errs <- fmt.Errorf("a refused call does not name the budget: %w", err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var spent gateway.Amount
	for _, a := range summary(t, ls[0]).ByAccount {
		if a.Account.Budget == "acme_daily" {
			spent = spent.Add(a.Spent)
			if a.Reserved != (gateway.Amount{}) {
				t.Errorf("holds left: %+v", a.Reserved)
			}
		}
	}
	t.Logf("%d calls on %d replicas: %d admitted, %d refused, settled %d of 1000000000 nanodollars", calls, len(ls), ok.Load(), refused.Load(), spent.NanoUSD)
	if spent.NanoUSD > 1e9 {
		t.Errorf("settled %d nanodollars, over the $1 budget", spent.NanoUSD)
	}
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d admitted, %d refused: the budget should admit some calls and refuse the rest", ok.Load(), refused.Load())
	}
}
