package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// MemoryLedger is the default Ledger: budgets held in this process's memory.
// One mutex makes every reservation atomic. Use a shared ledger (the
// pgledger package) when several replicas must share one budget.
//
// Its memory is bounded by what is live: accounts closed with
// CloseAccounts (the runtime closes a run's accounts when the run ends), and
// those of a budget's past windows, are forgotten, their spend kept in per-budget totals; aliases and models are
// as many as the catalog has.
type MemoryLedger struct {
	mu       sync.Mutex
	accounts map[Account]*accountState
	holds    map[string]Reservation
	budgets  map[budgetScope]*BudgetSpend
	aliases  map[string]*NamedSpend
	models   map[string]*NamedSpend
	windows  map[string]*windowAccounts // by budget, for budgets with a window
	limiter  *MemoryLimiter
	total    Amount
	calls    int64
}

type accountState struct {
	spent, reserved Amount
	calls           int64
	holds           int  // reservations open on the account
	closed          bool // forget the account when its last hold closes
}

// windowAccounts are the accounts of a budget's current window.
type windowAccounts struct {
	until    time.Time
	accounts []Account
}

type budgetScope struct {
	budget string
	scope  Scope
}

// NewMemoryLedger returns an empty in-memory ledger.
func NewMemoryLedger() *MemoryLedger {
	return &MemoryLedger{
		accounts: make(map[Account]*accountState),
		holds:    make(map[string]Reservation),
		budgets:  make(map[budgetScope]*BudgetSpend),
		aliases:  make(map[string]*NamedSpend),
		models:   make(map[string]*NamedSpend),
		windows:  make(map[string]*windowAccounts),
		limiter:  NewMemoryLimiter(),
	}
}

// Admit implements Limiter with a MemoryLimiter of the ledger's own, so
// that gateways sharing a ledger share their rate limits too.
func (l *MemoryLedger) Admit(ctx context.Context, now time.Time, counters []RateCounter, tokens int64) error {
	return l.limiter.Admit(ctx, now, counters, tokens)
}

// Reserve implements Ledger.
func (l *MemoryLedger) Reserve(ctx context.Context, r Reservation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.ID == "" {
		return fmt.Errorf("reserve: empty reservation id")
	}
	r.Amount.CachedInputTokens, r.Amount.CacheWriteInputTokens = 0, 0 // a hold counts money and tokens only
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.holds[r.ID]; dup {
		return fmt.Errorf("reserve: reservation %q already held", r.ID)
	}
	for _, lim := range r.Limits {
		var st accountState
		if p := l.accounts[lim.Account]; p != nil {
			st = *p
		}
		if dim, over := Exceeds(lim.Max, st.spent, st.reserved, r.Amount); over {
			return &BudgetExceededError{
				Budget: lim.Account.Budget, Scope: lim.Account.Scope, Key: lim.Account.Key,
				Dimension: dim, Limit: lim.Max, Spent: st.spent, Reserved: st.reserved, Requested: r.Amount,
			}
		}
	}
	for _, lim := range r.Limits {
		st := l.accounts[lim.Account]
		if st == nil {
			st = &accountState{}
			l.accounts[lim.Account] = st
			if !lim.Until.IsZero() {
				l.window(lim, st)
			}
		}
		st.reserved = st.reserved.Add(r.Amount)
		st.holds++
	}
	l.holds[r.ID] = r
	return nil
}

// window files a new account of a budget with a window under its window,
// and forgets the accounts of the budget's past windows: every account of
// one budget shares its window boundaries, so an account that ends later
// than the others means their windows are over. An account of a past
// window (a call whose clock lagged) is forgotten when its hold closes.
func (l *MemoryLedger) window(lim Limit, st *accountState) {
	w := l.windows[lim.Account.Budget]
	switch {
	case w == nil:
		l.windows[lim.Account.Budget] = &windowAccounts{until: lim.Until, accounts: []Account{lim.Account}}
	case lim.Until.After(w.until):
		l.closeLocked(w.accounts)
		w.until, w.accounts = lim.Until, append(w.accounts[:0], lim.Account)
	case lim.Until.Before(w.until):
		st.closed = true
	default:
		w.accounts = append(w.accounts, lim.Account)
	}
}

// unhold closes one reservation's hold on an account, and forgets the
// account when it was closed and this was its last hold.
func (l *MemoryLedger) unhold(a Account, st *accountState, amount Amount) {
	st.reserved = st.reserved.Sub(amount)
	st.holds--
	if st.closed && st.holds == 0 {
		delete(l.accounts, a)
	}
}

// Settle implements Ledger.
func (l *MemoryLedger) Settle(ctx context.Context, id string, actual Amount) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.holds[id]
	if !ok {
		return fmt.Errorf("settle %q: %w", id, ErrUnknownReservation)
	}
	delete(l.holds, id)
	for _, lim := range r.Limits {
		st := l.accounts[lim.Account]
		st.spent = st.spent.Add(actual)
		st.calls++
		l.unhold(lim.Account, st, r.Amount)
		k := budgetScope{lim.Account.Budget, lim.Account.Scope}
		b := l.budgets[k]
		if b == nil {
			b = &BudgetSpend{Budget: k.budget, Scope: k.scope}
			l.budgets[k] = b
		}
		b.Spent = b.Spent.Add(actual)
		b.Calls++
	}
	l.total = l.total.Add(actual)
	l.calls++
	addNamed(l.aliases, r.Alias, actual)
	addNamed(l.models, r.Model, actual)
	return nil
}

func addNamed(m map[string]*NamedSpend, name string, a Amount) {
	n := m[name]
	if n == nil {
		n = &NamedSpend{Name: name}
		m[name] = n
	}
	n.Spent = n.Spent.Add(a)
	n.Calls++
}

// Release implements Ledger.
func (l *MemoryLedger) Release(ctx context.Context, id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.holds[id]
	if !ok {
		return fmt.Errorf("release %q: %w", id, ErrUnknownReservation)
	}
	delete(l.holds, id)
	for _, lim := range r.Limits {
		l.unhold(lim.Account, l.accounts[lim.Account], r.Amount)
	}
	return nil
}

// SpendByBudget implements Ledger. It costs the number of budgets.
func (l *MemoryLedger) SpendByBudget(ctx context.Context) ([]BudgetSpend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	out := make([]BudgetSpend, 0, len(l.budgets))
	for _, b := range l.budgets {
		out = append(out, *b)
	}
	l.mu.Unlock()
	SortBudgetSpend(out)
	return out, nil
}

// CloseAccounts implements Ledger: the accounts are forgotten now, or when
// the last reservation holding on one closes.
func (l *MemoryLedger) CloseAccounts(ctx context.Context, accounts []Account) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closeLocked(accounts)
	return nil
}

// closeLocked closes accounts; l.mu is held.
func (l *MemoryLedger) closeLocked(accounts []Account) {
	for _, a := range accounts {
		st, ok := l.accounts[a]
		switch {
		case !ok:
		case st.holds == 0:
			delete(l.accounts, a)
		default:
			st.closed = true
		}
	}
}

// Summary implements Ledger.
func (l *MemoryLedger) Summary(ctx context.Context) (SpendSummary, error) {
	if err := ctx.Err(); err != nil {
		return SpendSummary{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	s := SpendSummary{Total: l.total, Calls: l.calls}
	for a, st := range l.accounts {
		s.ByAccount = append(s.ByAccount, AccountSpend{Account: a, Spent: st.spent, Reserved: st.reserved, Calls: st.calls})
	}
	for _, n := range l.aliases {
		s.ByAlias = append(s.ByAlias, *n)
	}
	for _, n := range l.models {
		s.ByModel = append(s.ByModel, *n)
	}
	SortSummary(&s)
	return s, nil
}

// SortSummary puts a summary's lists in their canonical order: accounts by
// budget, scope and key; aliases and models by name. Ledger implementations
// call it so that every ledger reports the same summary the same way.
func SortSummary(s *SpendSummary) {
	slices.SortFunc(s.ByAccount, func(a, b AccountSpend) int {
		return cmp.Or(cmp.Compare(a.Account.Budget, b.Account.Budget),
			cmp.Compare(a.Account.Scope, b.Account.Scope),
			cmp.Compare(a.Account.Key, b.Account.Key))
	})
	byName := func(a, b NamedSpend) int { return cmp.Compare(a.Name, b.Name) }
	slices.SortFunc(s.ByAlias, byName)
	slices.SortFunc(s.ByModel, byName)
}
