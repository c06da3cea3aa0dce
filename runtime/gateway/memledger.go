package gateway

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
)

// MemoryLedger is the default Ledger: budgets held in this process's memory.
// One mutex makes every reservation atomic. Use a shared ledger (the
// pgledger package) when several replicas must share one budget.
type MemoryLedger struct {
	mu       sync.Mutex
	accounts map[Account]*accountState
	holds    map[string]Reservation
	aliases  map[string]*NamedSpend
	models   map[string]*NamedSpend
	total    Amount
	calls    int64
}

type accountState struct {
	spent, reserved Amount
	calls           int64
}

// NewMemoryLedger returns an empty in-memory ledger.
func NewMemoryLedger() *MemoryLedger {
	return &MemoryLedger{
		accounts: make(map[Account]*accountState),
		holds:    make(map[string]Reservation),
		aliases:  make(map[string]*NamedSpend),
		models:   make(map[string]*NamedSpend),
	}
}

// Reserve implements Ledger.
func (l *MemoryLedger) Reserve(ctx context.Context, r Reservation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.ID == "" {
		return fmt.Errorf("reserve: empty reservation id")
	}
	r.Amount.CachedInputTokens = 0 // a hold is the uncached worst case
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.holds[r.ID]; dup {
		return fmt.Errorf("reserve: reservation %q already held", r.ID)
	}
	for _, lim := range r.Limits {
		st := l.accounts[lim.Account]
		if st == nil {
			st = &accountState{}
			l.accounts[lim.Account] = st
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
		st.reserved = st.reserved.Add(r.Amount)
	}
	l.holds[r.ID] = r
	return nil
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
		st.reserved = st.reserved.Sub(r.Amount)
		st.spent = st.spent.Add(actual)
		st.calls++
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
		st := l.accounts[lim.Account]
		st.reserved = st.reserved.Sub(r.Amount)
	}
	return nil
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
