package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/kind"
)

// Scope says what a budget is counted per. The scope key of a call (which
// run, which thread) is passed with WithBudget or ContextWithBudget; that of
// a key or tenant scope is the caller's (kind.CallerFrom).
type Scope string

// The budget scopes.
const (
	// ScopeRun counts spend per run: the key is a run id.
	ScopeRun Scope = "run"
	// ScopeThread counts spend per conversation thread: the key is a thread
	// id.
	ScopeThread Scope = "thread"
	// ScopeGlobal counts all spend against one account: there is no key.
	ScopeGlobal Scope = "global"
	// ScopeKey counts spend per API key: the key is the name of the
	// caller's key (kind.Caller.Key) that the service put on the context.
	// A call with no caller (a CLI run, a test) counts under the empty key,
	// all such calls together.
	ScopeKey Scope = "key"
	// ScopeTenant counts spend per tenant: the key is the caller's tenant
	// (kind.Caller.Tenant). A call with no caller, or a caller of no
	// tenant, counts under the empty tenant.
	ScopeTenant Scope = "tenant"
)

// Budget is a spending limit. A zero limit leaves that dimension unlimited;
// at least one must be set.
type Budget struct {
	// Name identifies the budget in calls, errors and summaries.
	Name string
	// MaxUSD is the most a scope key may spend, in US dollars.
	MaxUSD float64
	// MaxTotalTokens is the most tokens (input plus output) a scope key may
	// spend.
	MaxTotalTokens int64
	// Scope is what the budget is counted per.
	Scope Scope
	// Window is the budget's reset window, as kind.ParseWindow reads it: a
	// fixed length ("1h", "7d") or a calendar "day" or "month"; empty means
	// the budget never resets. Spend is counted per window: the window's
	// start is part of the account (Account.Key ends in "@" and the start
	// in UTC, RFC 3339), so a new window starts from zero.
	Window string
	// TimeZone is the IANA time zone of a calendar window; empty means
	// UTC.
	TimeZone string
	// AppliesToAll charges every call the gateway makes to the budget,
	// beside the budgets the call names. Its scope must be key, tenant or
	// global, since a call need not belong to a run or a thread.
	AppliesToAll bool
}

// limit returns the budget's limits as an Amount.
func (b Budget) limit() Amount {
	return Amount{NanoUSD: nanosFloor(b.MaxUSD), Tokens: b.MaxTotalTokens}
}

// nanosFloor converts a money limit in dollars to whole nanodollars. It reads
// the decimal the float stands for (its shortest representation) rather
// than multiplying, so that a limit written as a price the gateway reported
// (Amount.USD, EstimateCost) is that price to the nanodollar, however
// large; a fraction of a nanodollar is dropped, so that rounding never lets
// a call through. A limit beyond what int64 nanodollars hold is the largest
// they hold.
func nanosFloor(usd float64) int64 {
	if !(usd > 0) {
		return 0
	}
	if usd >= math.MaxInt64/1e9 {
		return math.MaxInt64
	}
	whole, frac, _ := strings.Cut(strconv.FormatFloat(usd, 'f', -1, 64), ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return int64(math.Floor(usd * 1e9))
	}
	frac = (frac + "000000000")[:9]
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return int64(math.Floor(usd * 1e9))
	}
	return w*1e9 + f
}

func (b Budget) validate() error {
	switch {
	case b.Name == "":
		return errors.New("budget has no name")
	case b.MaxUSD < 0 || b.MaxTotalTokens < 0:
		return fmt.Errorf("budget %q has a negative limit", b.Name)
	case math.IsNaN(b.MaxUSD) || math.IsInf(b.MaxUSD, 0):
		return fmt.Errorf("budget %q has an invalid limit of %v US dollars", b.Name, b.MaxUSD)
	case b.MaxUSD == 0 && b.MaxTotalTokens == 0:
		return fmt.Errorf("budget %q sets neither max USD nor max total tokens", b.Name)
	}
	if _, err := kind.ParseWindow(b.Window, b.TimeZone); err != nil {
		return fmt.Errorf("budget %q: %w", b.Name, err)
	}
	switch b.Scope {
	case ScopeRun, ScopeThread:
		if b.AppliesToAll {
			return fmt.Errorf("budget %q applies to all calls, so it cannot be %s-scoped: a call need not belong to a %s (use key, tenant or global)", b.Name, b.Scope, b.Scope)
		}
		return nil
	case ScopeGlobal, ScopeKey, ScopeTenant:
		return nil
	default:
		return fmt.Errorf("budget %q has unknown scope %q (want run, thread, key, tenant or global)", b.Name, b.Scope)
	}
}

// Amount is a quantity of spend. Money is counted in integer billionths of a
// US dollar, so that sums over many concurrent calls are exact and the
// ledger's comparisons cannot be fooled by floating-point rounding.
type Amount struct {
	// NanoUSD is the money, in billionths of a US dollar.
	NanoUSD int64
	// Tokens is the number of tokens, input plus output.
	Tokens int64
	// CachedInputTokens is the part of Tokens that was input served from a
	// provider's prompt cache and priced at the cached-input price. It is
	// recorded, not limited: a budget counts Tokens, cached or not, and a
	// reservation holds none, since it assumes the uncached worst case.
	CachedInputTokens int64
	// CacheWriteInputTokens is the part of Tokens that was input written to
	// a provider's prompt cache, of either lifetime, and priced at its
	// cache-write price. Like CachedInputTokens it is recorded, not
	// limited, and a reservation holds none.
	CacheWriteInputTokens int64
}

// USD returns the money in US dollars.
func (a Amount) USD() float64 { return float64(a.NanoUSD) / 1e9 }

// Add returns a+b.
func (a Amount) Add(b Amount) Amount {
	return Amount{NanoUSD: a.NanoUSD + b.NanoUSD, Tokens: a.Tokens + b.Tokens, CachedInputTokens: a.CachedInputTokens + b.CachedInputTokens, CacheWriteInputTokens: a.CacheWriteInputTokens + b.CacheWriteInputTokens}
}

// Sub returns a-b.
func (a Amount) Sub(b Amount) Amount {
	return Amount{NanoUSD: a.NanoUSD - b.NanoUSD, Tokens: a.Tokens - b.Tokens, CachedInputTokens: a.CachedInputTokens - b.CachedInputTokens, CacheWriteInputTokens: a.CacheWriteInputTokens - b.CacheWriteInputTokens}
}

func (a Amount) usdString() string { return strconv.FormatFloat(a.USD(), 'f', -1, 64) }

// Account is the unit a budget is counted on: one budget, one scope key and,
// for a budget with a window, one window.
type Account struct {
	// Budget is the budget's name.
	Budget string
	// Scope is the budget's scope.
	Scope Scope
	// Key is the scope key; empty for a global budget. A budget with a
	// window appends "@" and the window's start in UTC (RFC 3339), so
	// that each window is an account of its own.
	Key string
}

// Limit is a budget account and its limits, as handed to a Ledger.
type Limit struct {
	// Account is what the spend is counted on.
	Account Account
	// Max is the limit; a zero dimension is unlimited.
	Max Amount
	// Until is the end of the account's window; zero for a budget without
	// one. All accounts of one budget share window boundaries, so a
	// reservation on a budget whose Until is later than an account's says
	// that account's window is over: a ledger that keeps accounts in
	// memory forgets it then, as if CloseAccounts had named it.
	Until time.Time
}

// Reservation is the worst case of one call, held against its budgets while
// the call runs.
type Reservation struct {
	// ID identifies the reservation in Settle and Release. The gateway makes
	// ids unique across processes.
	ID string
	// Alias is the alias called.
	Alias string
	// Model is the pinned model id called.
	Model string
	// Amount is the worst case held.
	Amount Amount
	// Limits are the budgets the call counts against. Empty means the call
	// is unbudgeted: it is only recorded.
	Limits []Limit
}

// Exceeds reports whether adding requested to spent and reserved breaks max,
// and which dimension breaks. It is the one comparison every Ledger makes.
func Exceeds(max, spent, reserved, requested Amount) (BudgetDimension, bool) {
	if max.NanoUSD > 0 && spent.NanoUSD+reserved.NanoUSD+requested.NanoUSD > max.NanoUSD {
		return DimensionUSD, true
	}
	if max.Tokens > 0 && spent.Tokens+reserved.Tokens+requested.Tokens > max.Tokens {
		return DimensionTokens, true
	}
	return "", false
}

// ErrUnknownReservation is returned by Settle and Release for a reservation
// id the ledger does not hold, including one already settled or released.
var ErrUnknownReservation = errors.New("unknown or already closed reservation")

// Ledger holds budgets' spend. Implementations must make Reserve atomic:
// the check that the worst case fits in every limit and the hold of it
// happen as one step, so that concurrent callers, in one process or many,
// can never jointly overspend.
type Ledger interface {
	// Reserve holds r.Amount against every limit in r.Limits, or against
	// none: when one does not fit it returns a *BudgetExceededError with
	// the spend observed at that moment. A hold is a worst case in money
	// and tokens: its CachedInputTokens and CacheWriteInputTokens are not
	// held, and Reserved never reports any.
	Reserve(ctx context.Context, r Reservation) error
	// Settle replaces a reservation's hold with the real spend. The real
	// spend is recorded even when it exceeds the hold, because money spent
	// is spent; only an input estimate far below the truth can make it so.
	// Its CachedInputTokens and CacheWriteInputTokens are recorded with
	// it, and Summary reports their sums apart from Tokens, by account,
	// alias and model.
	Settle(ctx context.Context, id string, actual Amount) error
	// Release drops a reservation whose call was not charged.
	Release(ctx context.Context, id string) error
	// Summary reports settled spend by budget account, alias and model.
	// Accounts closed with CloseAccounts may be left out of ByAccount;
	// their spend stays in every total.
	Summary(ctx context.Context) (SpendSummary, error)
	// SpendByBudget reports settled spend by budget and scope, summed over
	// scope keys, closed accounts included, sorted by budget then scope. It
	// is what a metrics scrape reads, so it should cost the number of
	// budgets, not the number of accounts ever charged.
	SpendByBudget(ctx context.Context) ([]BudgetSpend, error)
	// CloseAccounts says that the accounts will never be charged again:
	// their scope ended (a run that completed or failed). A ledger that
	// keeps accounts in memory forgets them, once no reservation holds on
	// them, so that a long-lived process does not grow with every run; a
	// durable ledger may keep them as the record of spend. Accounts that do
	// not exist are ignored. Charging a closed account again is a caller's
	// bug: a ledger that forgot it counts it from zero.
	CloseAccounts(ctx context.Context, accounts []Account) error
}

// BudgetSpend is the settled spend of one budget and scope, summed over its
// scope keys.
type BudgetSpend struct {
	// Budget is the budget's name.
	Budget string
	// Scope is the budget's scope.
	Scope Scope
	// Spent is its settled spend.
	Spent Amount
	// Calls counts its settled calls.
	Calls int64
}

// SortBudgetSpend puts spend by budget in its canonical order: by budget,
// then scope. Ledger implementations call it, as they call SortSummary.
func SortBudgetSpend(s []BudgetSpend) {
	slices.SortFunc(s, func(a, b BudgetSpend) int {
		return cmp.Or(cmp.Compare(a.Budget, b.Budget), cmp.Compare(a.Scope, b.Scope))
	})
}

// SpendSummary reports settled spend, sorted for stable output.
type SpendSummary struct {
	// Total is all settled spend.
	Total Amount
	// Calls counts settled calls.
	Calls int64
	// ByAccount reports each budget account (budget, scope, key).
	ByAccount []AccountSpend
	// ByAlias reports each alias.
	ByAlias []NamedSpend
	// ByModel reports each pinned model id.
	ByModel []NamedSpend
}

// AccountSpend is the spend of one budget account.
type AccountSpend struct {
	// Account is the budget account.
	Account Account
	// Spent is its settled spend.
	Spent Amount
	// Reserved is what calls in flight hold on it.
	Reserved Amount
	// Calls counts its settled calls.
	Calls int64
}

// NamedSpend is the settled spend of one alias or model.
type NamedSpend struct {
	// Name is the alias or model id.
	Name string
	// Spent is its settled spend.
	Spent Amount
	// Calls counts its settled calls.
	Calls int64
}

// BudgetRef names a budget and the scope key a call is counted on.
type BudgetRef struct {
	// Name is the budget's name in Config.Budgets.
	Name string
	// Key is the run or thread id; ignored for a global, key or tenant
	// budget, whose key is the caller's (kind.CallerFrom).
	Key string
}

type budgetCtxKey struct{}

// ContextWithBudget returns a context whose calls are charged to the named
// budget under the scope key (a run or thread id; ignored for a global
// budget), in addition to budgets already on ctx. It lets a layer that calls
// the gateway on someone else's behalf (an embedder inside retrieval, a tool)
// be charged to the caller's budget without passing options down. Budgets
// given to a call with WithBudget replace those on the context.
func ContextWithBudget(ctx context.Context, name, key string) context.Context {
	prev, _ := ctx.Value(budgetCtxKey{}).([]BudgetRef)
	refs := make([]BudgetRef, len(prev), len(prev)+1)
	copy(refs, prev)
	refs = append(refs, BudgetRef{Name: name, Key: key})
	return context.WithValue(ctx, budgetCtxKey{}, refs)
}

// BudgetsFromContext returns the budgets put on ctx by ContextWithBudget.
func BudgetsFromContext(ctx context.Context) []BudgetRef {
	refs, _ := ctx.Value(budgetCtxKey{}).([]BudgetRef)
	return refs
}

// SampleKey identifies one evaluation sample: a dataset case and the index
// of the repeated run of it.
type SampleKey struct {
	// Case is the dataset case id.
	Case string
	// Index counts the runs of the case, from zero.
	Index int
}

type sampleCtxKey struct{}

// WithSample returns a context that carries the evaluation sample being
// run. Deterministic providers (the fake's answer-key mode) use it to seed
// their answer, so that a committed baseline reproduces exactly.
func WithSample(ctx context.Context, s SampleKey) context.Context {
	return context.WithValue(ctx, sampleCtxKey{}, s)
}

// SampleFrom returns the sample put on ctx by WithSample.
func SampleFrom(ctx context.Context) (SampleKey, bool) {
	s, ok := ctx.Value(sampleCtxKey{}).(SampleKey)
	return s, ok
}
