package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aidgen/aid/runtime/kind"
)

// Config is everything a Gateway is built from. The IR layer fills it from an
// app file; a team using the gateway directly fills it by hand.
type Config struct {
	// Models is the catalog: every alias callers may use and the exact
	// model it is pinned to. Aliases must be unique.
	Models []PinnedModel
	// Providers maps the provider names that ModelSpec.Provider refers to
	// onto their adapters.
	Providers map[string]Provider
	// Budgets are the spending limits calls may name with WithBudget or
	// ContextWithBudget.
	Budgets []Budget
	// Ledger holds spend; nil means a new MemoryLedger.
	Ledger Ledger
	// Tracer receives one span per attempt; nil means no tracing.
	Tracer trace.Tracer
	// Logger receives retries, fallbacks and ledger failures; nil means
	// no logging. The gateway never logs request content or credentials.
	Logger *slog.Logger
	// Retry bounds retries of one alias; the zero value means
	// DefaultRetryPolicy.
	Retry RetryPolicy
	// ProviderRetry overrides Retry for the aliases of the named
	// providers, whose endpoints may deserve more or less patience.
	ProviderRetry map[string]RetryPolicy
	// Clock tells the time budget windows, rate limits and cool-downs are
	// read from; nil means time.Now. Tests inject one to roll windows over.
	Clock func() time.Time
	// RateLimits cap the requests and tokens per minute of every call, per
	// key, tenant or model deployment.
	RateLimits []RateLimit
	// Limiter counts rate limits; nil means the Ledger when it implements
	// Limiter (the PostgreSQL ledger does, so replicas share their
	// limits), and a new MemoryLimiter otherwise.
	Limiter Limiter
}

// Gateway is the only door to a model: it resolves pinned aliases, checks
// capabilities, reserves and settles budgets, retries, falls back and traces.
// It is safe for concurrent use.
type Gateway struct {
	entries   map[string]*entry
	aliases   []string
	providers map[string]Provider
	budgets   map[string]budgetEntry
	scoped    map[Scope][]string // the budgets of each keyed scope, sorted
	all       []string           // the budgets that apply to every call, sorted
	clock     func() time.Time
	sleep     func(context.Context, time.Duration) error
	// rateLimits are the configured rate limits, sorted by name.
	rateLimits []RateLimit
	limiter    Limiter
	ledger     Ledger
	tracer     trace.Tracer
	tracing    bool
	logger     *slog.Logger
	retry      RetryPolicy
	idPrefix   string
	seq        atomic.Uint64
	attrs      attrBuffers
	tenants    tenantSpend
}

// entry is one resolved alias with everything precomputed that a call needs.
type entry struct {
	retry        RetryPolicy
	pinned       PinnedModel
	provider     Provider
	providerName string
	providerKind string
	providerCaps []Capability
	chatSpan     string
	embedSpan    string
	starts       spanStarts
	// route is the alias's deployments; nil when the provider alone
	// serves it, with no cool-down.
	route *route
}

// budgetEntry is one configured budget with its span attributes, built once.
type budgetEntry struct {
	Budget
	window              kind.Window
	nameAttr, scopeAttr attribute.KeyValue
}

// New checks cfg and builds a Gateway. Every alias must resolve to a valid
// model served by a configured provider; nothing is left to resolve at call
// time.
func New(cfg Config) (*Gateway, error) {
	g := &Gateway{
		entries:   make(map[string]*entry, len(cfg.Models)),
		providers: cfg.Providers,
		budgets:   make(map[string]budgetEntry, len(cfg.Budgets)),
		scoped:    make(map[Scope][]string),
		ledger:    cfg.Ledger,
		tracer:    cfg.Tracer,
		logger:    cfg.Logger,
		retry:     cfg.Retry.withDefaults(),
		clock:     cfg.Clock,
		sleep:     sleep,
		limiter:   cfg.Limiter,
	}
	if g.clock == nil {
		g.clock = time.Now
	}
	if err := g.retry.validate(); err != nil {
		return nil, err
	}
	var errs []error
	for _, pm := range cfg.Models {
		if pm.Alias == "" {
			errs = append(errs, fmt.Errorf("model %q has an empty alias", pm.Spec.ID))
			continue
		}
		if _, dup := g.entries[pm.Alias]; dup {
			errs = append(errs, fmt.Errorf("alias %q is pinned twice", pm.Alias))
			continue
		}
		if err := pm.Spec.validate(); err != nil {
			errs = append(errs, fmt.Errorf("alias %q: %w", pm.Alias, err))
			continue
		}
		p, ok := cfg.Providers[pm.Spec.Provider]
		if !ok || p == nil {
			errs = append(errs, fmt.Errorf("alias %q: model %q names provider %q, which is not configured", pm.Alias, pm.Spec.ID, pm.Spec.Provider))
			continue
		}
		retry := g.retry
		if r, ok := cfg.ProviderRetry[pm.Spec.Provider]; ok {
			retry = r.withDefaults()
			if err := retry.validate(); err != nil {
				errs = append(errs, fmt.Errorf("provider %q: %w", pm.Spec.Provider, err))
				continue
			}
		}
		e := &entry{
			retry:        retry,
			pinned:       pm,
			provider:     p,
			providerName: pm.Spec.Provider,
			providerKind: p.Kind(),
			providerCaps: slices.Clone(p.Capabilities()),
			chatSpan:     "chat " + pm.Spec.ID,
			embedSpan:    "embeddings " + pm.Spec.ID,
			starts:       newSpanStarts(pm.Alias, pm.Spec.ID, p.Kind()),
		}
		var err error
		if e.route, err = g.newRoute(e, pm, cfg.Providers); err != nil {
			errs = append(errs, err)
			continue
		}
		g.entries[pm.Alias] = e
		g.aliases = append(g.aliases, pm.Alias)
	}
	for _, b := range cfg.Budgets {
		if err := b.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if _, dup := g.budgets[b.Name]; dup {
			errs = append(errs, fmt.Errorf("budget %q is defined twice", b.Name))
			continue
		}
		if b.Scope != ScopeGlobal {
			g.scoped[b.Scope] = append(g.scoped[b.Scope], b.Name)
		}
		if b.AppliesToAll {
			g.all = append(g.all, b.Name)
		}
		w, _ := kind.ParseWindow(b.Window, b.TimeZone) // validate read it
		g.budgets[b.Name] = budgetEntry{
			Budget:    b,
			window:    w,
			nameAttr:  AttrBudgetName.StringSlice([]string{b.Name}),
			scopeAttr: AttrBudgetScope.StringSlice([]string{string(b.Scope)}),
		}
	}
	for _, r := range cfg.RateLimits {
		if err := r.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.ContainsFunc(g.rateLimits, func(o RateLimit) bool { return o.Name == r.Name }) {
			errs = append(errs, fmt.Errorf("rate limit %q is defined twice", r.Name))
			continue
		}
		g.rateLimits = append(g.rateLimits, r)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	slices.SortFunc(g.rateLimits, func(a, b RateLimit) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(g.aliases)
	slices.Sort(g.all)
	for _, names := range g.scoped {
		slices.Sort(names)
	}
	if g.ledger == nil {
		g.ledger = NewMemoryLedger()
	}
	if g.limiter == nil {
		if l, ok := g.ledger.(Limiter); ok {
			g.limiter = l
		} else {
			g.limiter = NewMemoryLimiter()
		}
	}
	if g.tracer == nil {
		g.tracer = noop.NewTracerProvider().Tracer("")
	}
	_, isNoop := g.tracer.(noop.Tracer)
	g.tracing = !isNoop
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	var id [6]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("gateway: reservation id prefix: %w", err)
	}
	g.idPrefix = hex.EncodeToString(id[:]) + "-"
	return g, nil
}

// Aliases returns the catalog's aliases, sorted.
func (g *Gateway) Aliases() []string { return slices.Clone(g.aliases) }

// Resolve returns the model an alias is pinned to, or an
// *UnknownModelAliasError.
func (g *Gateway) Resolve(alias string) (PinnedModel, error) {
	e, err := g.lookup(alias)
	if err != nil {
		return PinnedModel{}, err
	}
	return e.pinned, nil
}

// ProviderFor returns the adapter serving an alias, or an
// *UnknownModelAliasError.
func (g *Gateway) ProviderFor(alias string) (Provider, error) {
	e, err := g.lookup(alias)
	if err != nil {
		return nil, err
	}
	return e.provider, nil
}

// Require checks that an alias can do every capability in caps, on the
// model's side and on the provider adapter's side, and returns a
// *CapabilityMismatchError naming what is missing where.
func (g *Gateway) Require(alias string, caps ...Capability) error {
	e, err := g.lookup(alias)
	if err != nil {
		return err
	}
	return e.check(caps)
}

// Ledger returns the ledger the gateway charges.
func (g *Gateway) Ledger() Ledger { return g.ledger }

// Spend returns the ledger's spend summary.
func (g *Gateway) Spend(ctx context.Context) (SpendSummary, error) {
	return g.ledger.Summary(ctx)
}

// Budget returns the configured budget of that name.
func (g *Gateway) Budget(name string) (Budget, bool) {
	b, ok := g.budgets[name]
	return b.Budget, ok
}

// SpendByBudget returns the ledger's settled spend by budget and scope,
// summed over scope keys: what a metrics scrape reads.
func (g *Gateway) SpendByBudget(ctx context.Context) ([]BudgetSpend, error) {
	return g.ledger.SpendByBudget(ctx)
}

// EndScope tells the ledger that no call will be charged again under key
// by the budgets of scope (ScopeRun or ScopeThread): a run that ended, or
// a request that was its own scope. Their accounts are closed (see
// Ledger.CloseAccounts), so that an in-memory ledger does not keep one per
// run for ever. It does nothing for the global scope, or when no budget
// has scope.
func (g *Gateway) EndScope(ctx context.Context, scope Scope, key string) error {
	names := g.scoped[scope]
	if len(names) == 0 || key == "" {
		return nil
	}
	var buf [4]Account
	accts := buf[:0]
	for _, n := range names {
		accts = append(accts, Account{Budget: n, Scope: scope, Key: key})
	}
	if err := g.ledger.CloseAccounts(closeCtx(ctx), accts); err != nil {
		return fmt.Errorf("close %s accounts of %q: %w", scope, key, err)
	}
	return nil
}

// EstimateUsage returns what a call of req on alias reserves against its
// budgets before it is made (the package's EstimateUsage), or the error the
// call would be refused with before reserving: an unknown alias, an
// *InvalidRequestError, or a *ContextWindowExceededError. A budget with
// exactly this much left admits the call.
func (g *Gateway) EstimateUsage(alias string, req Request) (Usage, error) {
	e, err := g.lookup(alias)
	if err != nil {
		return Usage{}, err
	}
	if err := req.validate(); err != nil {
		return Usage{}, err
	}
	if err := boundRequest(e, &req); err != nil {
		return Usage{}, err
	}
	return EstimateUsage(e.pinned.Spec, req), nil
}

// EstimateCost returns the price in US dollars of what a call of req on alias
// reserves, so that a caller can price a request before spending, or the
// error the call would be refused with before reserving (see
// Gateway.EstimateUsage). A budget with exactly this much left admits the
// call.
func (g *Gateway) EstimateCost(alias string, req Request) (float64, error) {
	u, err := g.EstimateUsage(alias, req)
	if err != nil {
		return 0, err
	}
	return Price(g.entries[alias].pinned.Spec.Cost, u).USD(), nil
}

func (g *Gateway) lookup(alias string) (*entry, error) {
	if e, ok := g.entries[alias]; ok {
		return e, nil
	}
	return nil, &UnknownModelAliasError{Alias: alias, Known: slices.Clone(g.aliases)}
}

// check returns a *CapabilityMismatchError when the model or the adapter
// lacks one of caps.
func (e *entry) check(caps []Capability) error {
	var inModel, inProvider []Capability
	for _, c := range caps {
		if !e.pinned.Spec.Has(c) {
			inModel = append(inModel, c)
		}
		if !slices.Contains(e.providerCaps, c) {
			inProvider = append(inProvider, c)
		}
	}
	if inModel == nil && inProvider == nil {
		return nil
	}
	return &CapabilityMismatchError{
		Alias: e.pinned.Alias, Model: e.pinned.Spec.ID, Provider: e.providerName,
		MissingInModel: inModel, MissingInProvider: inProvider,
	}
}

// CallOption adjusts one call of Generate, Stream or Embed.
type CallOption func(*callOptions)

type callOptions struct {
	fallbacks []string
	budgets   []BudgetRef
}

// WithFallbacks gives the aliases to try, in order, when the asked-for alias
// fails with an error IsFallbackEligible accepts. Embed takes no fallbacks,
// because vectors of different models are not comparable.
func WithFallbacks(aliases ...string) CallOption {
	return func(o *callOptions) { o.fallbacks = append(o.fallbacks, aliases...) }
}

// WithBudget charges the call to the named budget, counted under key: the
// run id for a run-scoped budget, the thread id for a thread-scoped one;
// the key is ignored for a global budget. It may be given several times to
// charge several budgets; the call runs only if it fits in all of them.
// Budgets given this way replace those put on the context with
// ContextWithBudget.
func WithBudget(name, key string) CallOption {
	return func(o *callOptions) { o.budgets = append(o.budgets, BudgetRef{Name: name, Key: key}) }
}

// limits resolves the budgets a call is charged to: those it names, and
// those that apply to every call.
func (g *Gateway) limits(ctx context.Context, o *callOptions) ([]Limit, error) {
	refs := o.budgets
	if refs == nil {
		refs = BudgetsFromContext(ctx)
	}
	if len(refs) == 0 && len(g.all) == 0 {
		return nil, nil
	}
	out := make([]Limit, 0, len(refs)+len(g.all))
	var now time.Time
	for i := range len(refs) + len(g.all) {
		var ref BudgetRef
		if i < len(refs) {
			ref = refs[i]
		} else {
			ref.Name = g.all[i-len(refs)]
		}
		b, ok := g.budgets[ref.Name]
		if !ok {
			known := make([]string, 0, len(g.budgets))
			for n := range g.budgets {
				known = append(known, n)
			}
			slices.Sort(known)
			return nil, fmt.Errorf("unknown budget %q (known: %s)", ref.Name, strings.Join(known, ", "))
		}
		lim := Limit{Account: Account{Budget: b.Name, Scope: b.Scope}, Max: b.limit()}
		switch b.Scope {
		case ScopeGlobal:
		case ScopeKey, ScopeTenant:
			// A call with no caller counts under the empty key or tenant.
			c, _ := kind.CallerFrom(ctx)
			lim.Account.Key = c.Key
			if b.Scope == ScopeTenant {
				lim.Account.Key = c.Tenant
			}
		default:
			if ref.Key == "" {
				return nil, fmt.Errorf("budget %q is %s-scoped: the call must give the %s id as the scope key", b.Name, b.Scope, b.Scope)
			}
			lim.Account.Key = ref.Key
		}
		if !b.window.IsZero() {
			if now.IsZero() {
				now = g.clock()
			}
			var start time.Time
			start, lim.Until = b.window.Bounds(now)
			lim.Account.Key += "@" + start.UTC().Format(time.RFC3339)
		}
		if slices.ContainsFunc(out, func(l Limit) bool { return l.Account == lim.Account }) {
			continue
		}
		out = append(out, lim)
	}
	return out, nil
}

func (g *Gateway) newReservationID() string {
	return g.idPrefix + strconv.FormatUint(g.seq.Add(1), 36)
}

// reserve holds the upper bound of a call on e against its budgets and
// opens h on it.
func (g *Gateway) reserve(ctx context.Context, e *entry, bound Amount, limits []Limit, h *hold) error {
	id := g.newReservationID()
	err := g.ledger.Reserve(ctx, Reservation{
		ID: id, Alias: e.pinned.Alias, Model: e.pinned.Spec.ID, Amount: bound, Limits: limits,
	})
	if err != nil {
		var be *BudgetExceededError
		if errors.As(err, &be) {
			return err
		}
		return fmt.Errorf("reserve budget: %w", err)
	}
	*h = hold{id: id, open: true}
	return nil
}

// closeCtx returns a context that outlives the caller's cancellation, so that
// a reservation is settled or released even when the caller gives up at that
// very moment. Ledgers bound their own operations. A context that can never
// be cancelled is returned as it is.
func closeCtx(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// closeRetries are the waits before a settlement or a release is tried
// again after the ledger answered that it is unavailable (its pool busy,
// its database restarting). A hold left open keeps its upper bound
// reserved, so a transient failure is worth a few more tries; the call's
// answer waits for them only when the ledger is failing.
var closeRetries = [...]time.Duration{50 * time.Millisecond, 250 * time.Millisecond, time.Second}

// closeHold runs op, a settlement or a release, on a context that outlives
// the caller's (closeCtx), again after each of closeRetries while the
// ledger is unavailable. Ledger operations are idempotent on a closed
// hold: when an attempt that failed had in fact committed, the retry finds
// the hold closed (ErrUnknownReservation), which is then success.
func closeHold(ctx context.Context, op func(context.Context) error) error {
	ctx = closeCtx(ctx)
	err := op(ctx)
	for _, wait := range closeRetries {
		var ue *kind.UnavailableError
		if err == nil || !errors.As(err, &ue) {
			return err
		}
		time.Sleep(wait)
		if err = op(ctx); errors.Is(err, ErrUnknownReservation) {
			return nil
		}
	}
	return err
}

// settle closes h with the real spend of a call, unless it is closed
// already. A ledger failure here (after closeHold's retries) leaves the
// upper bound held, which errs on the side of never overspending; it is
// logged rather than returned, because the call itself succeeded and its
// answer is already paid for.
func (g *Gateway) settle(ctx context.Context, h *hold, actual Amount) {
	if !h.open {
		return
	}
	h.open = false
	g.tenants.add(ctx, actual)
	if err := closeHold(ctx, func(ctx context.Context) error { return g.ledger.Settle(ctx, h.id, actual) }); err != nil {
		g.logger.LogAttrs(ctx, slog.LevelError, "gateway: settle reservation", slog.String("reservation", h.id), slog.String("error", err.Error()))
	}
}

// release closes h without a charge, unless it is closed already: the call
// failed before anything was charged, or it ended without settling, as a
// panic does.
func (g *Gateway) release(ctx context.Context, h *hold) {
	if !h.open {
		return
	}
	h.open = false
	if err := closeHold(ctx, func(ctx context.Context) error { return g.ledger.Release(ctx, h.id) }); err != nil {
		g.logger.LogAttrs(ctx, slog.LevelError, "gateway: release reservation", slog.String("reservation", h.id), slog.String("error", err.Error()))
	}
}

// chain resolves the asked-for alias and its fallbacks and checks that each
// can serve a request needing caps. Checking all of them before any call
// means a misconfigured fallback fails loudly, not only on the day it is
// needed.
func (g *Gateway) chain(alias string, fallbacks []string, caps []Capability) ([]*entry, error) {
	out := make([]*entry, 0, 1+len(fallbacks))
	for i := -1; i < len(fallbacks); i++ {
		a := alias
		if i >= 0 {
			a = fallbacks[i]
		}
		e, err := g.lookup(a)
		if err != nil {
			return nil, err
		}
		if err := e.check(caps); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Generate makes one chat call on alias, retrying retryable failures and then
// trying each fallback in order (see IsFallbackEligible). A request the
// OpenAI API specification forbids is refused first, with an
// *InvalidRequestError; an alias whose context window the request does not
// fit is skipped with a *ContextWindowExceededError (see the package
// documentation). Before each alias it reserves the request's upper bound
// (EstimateUsage) against the call's budgets; after the call it settles the
// real usage priced from the pinned cost profile, or releases the hold when
// nothing was charged. When every attempt fails the error is a *CallError
// listing them.
func (g *Gateway) Generate(ctx context.Context, alias string, req Request, opts ...CallOption) (res Result, err error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	c := call{op: "generate", kind: opChat, alias: alias}
	var capBuf [2]Capability
	if err := g.newCall(ctx, &c, &req, o.fallbacks, &o, req.requiredCapabilities(capBuf[:0])); err != nil {
		return Result{}, err
	}
	var resp Response
	var cost Amount
	i, err := g.run(ctx, &c, &req, func(ctx context.Context, e *entry, n int, fellBack bool) (bool, error) {
		var err error
		cost, err = g.generateOnce(ctx, e, &req, &resp, c.limits, n, fellBack)
		if err != nil {
			return false, err
		}
		g.settle(ctx, &c.hold, cost)
		return true, nil
	})
	if err != nil {
		return Result{}, err
	}
	c.chain[i].result(&res, &resp, cost, c.attempts, i > 0)
	return res, nil
}

// result sets res to what a successful call on e returns, for Generate and
// Stream. It writes to the caller's result rather than returning one, and
// is not inlined, so that Generate's frame, on the stack while the call
// waits, holds no copy.
//
//go:noinline
func (e *entry) result(res *Result, resp *Response, cost Amount, attempts []Attempt, fellBack bool) {
	*res = Result{
		Text: resp.Text, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason,
		Usage: resp.Usage, CostUSD: cost.USD(), Alias: e.pinned.Alias, Model: e.pinned.Spec.ID,
		Attempts: attempts, FellBack: fellBack, Reasoning: resp.Reasoning,
	}
}

// logFallback logs that the call moves from one alias to the next.
func (g *Gateway) logFallback(ctx context.Context, from, to *entry, err error) {
	g.logger.LogAttrs(ctx, slog.LevelWarn, "gateway: falling back",
		slog.String("from", from.pinned.Alias), slog.String("to", to.pinned.Alias), slog.String("error", err.Error()))
}

func (g *Gateway) callError(op, alias string, attempts []Attempt, err error) error {
	if len(attempts) == 0 {
		return err
	}
	return &CallError{Op: op, Alias: alias, Attempts: attempts, Err: err}
}

// generateOnce makes one traced provider call and prices it. The answer
// is written to resp, which the caller holds, and what is done after the
// call is in answered: this frame is on the stack while the call waits on
// the provider, and stays small.
func (g *Gateway) generateOnce(ctx context.Context, e *entry, req *Request, resp *Response, limits []Limit, attempt int, fellBack bool) (Amount, error) {
	var span attemptSpan
	ctx = g.startSpan(ctx, &span, e, opChat, attempt, fellBack, limits, req)
	err := callGenerate(ctx, e, req, resp)
	return g.answered(ctx, e, &span, req, resp, err)
}

// callGenerate is the provider's chat call. It is not inlined, so that the
// copies of the model and the request it passes are not on the stack while
// a tracer starts the attempt's span, which goes deep.
//
//go:noinline
func callGenerate(ctx context.Context, e *entry, req *Request, resp *Response) (err error) {
	*resp, err = e.provider.Generate(ctx, e.pinned.Spec, *req)
	return err
}

// answered ends the span of a provider call that returned resp or err,
// and prices the answer.
//
//go:noinline
func (g *Gateway) answered(ctx context.Context, e *entry, span *attemptSpan, req *Request, resp *Response, err error) (Amount, error) {
	if err != nil {
		*resp = Response{}
		err = asProviderError(ctx, e.providerKind, e.pinned.Spec.ID, err)
		g.endSpanError(span, err)
		return Amount{}, err
	}
	if resp.Usage == (Usage{}) {
		resp.Usage = estimateActual(*req, resp.Text, resp.ToolCalls)
	}
	g.checkCached(ctx, e, &resp.Usage)
	cost := Price(e.pinned.Spec.Cost, resp.Usage)
	g.endSpanOK(span, resp.Model, resp.Usage, resp.FinishReason, cost)
	return cost, nil
}

// checkCached replaces cache counts that are not parts of the input with
// the ones Price bills, with a warning, so that the usage a caller, the span
// and the ledger see is the usage Price billed (see Usage.cacheParts).
func (g *Gateway) checkCached(ctx context.Context, e *entry, u *Usage) {
	r, w5, w1 := u.cacheParts()
	if r == u.CachedInputTokens && w5 == u.CacheWrite5mInputTokens && w1 == u.CacheWrite1hInputTokens {
		return
	}
	g.logger.LogAttrs(ctx, slog.LevelWarn, "gateway: provider reported cache reads or writes that are not parts of the input; billing them the dearer way",
		slog.String("alias", e.pinned.Alias), slog.String("model", e.pinned.Spec.ID),
		slog.Int64("input_tokens", u.InputTokens), slog.Int64("cached_input_tokens", u.CachedInputTokens),
		slog.Int64("cache_write_5m_input_tokens", u.CacheWrite5mInputTokens), slog.Int64("cache_write_1h_input_tokens", u.CacheWrite1hInputTokens))
	u.CachedInputTokens, u.CacheWrite5mInputTokens, u.CacheWrite1hInputTokens = r, w5, w1
}

// estimateActual estimates the usage of an answer whose provider reported
// none: the input estimate plus the answer's own length.
func estimateActual(req Request, text string, calls []ToolCall) Usage {
	in := EstimateInputTokens(req)
	out := EstimateTokens(text)
	for _, c := range calls {
		out += perToolCallTokens + EstimateTokens(c.Name) + EstimateTokens(string(c.Arguments))
	}
	return Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out, Estimated: true}
}

// shouldRetry decides whether to try the same alias again and, if so, waits
// for the backoff. It returns false when the error is not retryable, the
// attempts are used up, the wait is longer than the policy or the context
// allows, or the context ends while waiting.
func (g *Gateway) shouldRetry(ctx context.Context, e *entry, retry int, err error) bool {
	if ctx.Err() != nil || !IsRetryable(err) || retry+1 >= e.retry.MaxAttempts {
		return false
	}
	var pe *ProviderError
	errors.As(err, &pe)
	wait, ok := e.retry.delay(retry, pe.RetryAfter)
	if !ok {
		return false
	}
	if dl, has := ctx.Deadline(); has && time.Until(dl) < wait {
		return false
	}
	g.logger.LogAttrs(ctx, slog.LevelWarn, "gateway: retrying",
		slog.String("alias", e.pinned.Alias), slog.Int("retry", retry+1), slog.Duration("wait", wait), slog.String("error", err.Error()))
	return sleep(ctx, wait) == nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
