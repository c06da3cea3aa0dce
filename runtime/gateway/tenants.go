package gateway

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aidgen/aid/runtime/kind"
)

// TenantSpend is what the calls of one tenant settled through this
// gateway since it was built: the figures a service reports per tenant.
// They are this process's, as Prometheus counters are; replicas' sum in
// the monitoring, and the ledger's budgets stay the record.
type TenantSpend struct {
	// Tenant is the caller's tenant (kind.Caller.Tenant), "" for calls of
	// no tenant.
	Tenant string
	// Calls counts the settled calls.
	Calls int64
	// Spent is their settled cost and tokens.
	Spent Amount
}

// tenantCounters are the running sums of one tenant.
type tenantCounters struct {
	calls, nanoUSD, tokens, cached atomic.Int64
}

// tenantSpend keeps TenantSpend per tenant. A tenant comes from the
// caller the service authenticated (a declared key's, or one an admin
// created), never from a request's body, so there are as many entries as
// tenants of keys.
type tenantSpend struct{ m sync.Map } // string → *tenantCounters

// add counts a settled call of the caller on ctx.
func (t *tenantSpend) add(ctx context.Context, a Amount) {
	c, _ := kind.CallerFrom(ctx)
	v, ok := t.m.Load(c.Tenant)
	if !ok {
		v, _ = t.m.LoadOrStore(c.Tenant, new(tenantCounters))
	}
	tc := v.(*tenantCounters)
	tc.calls.Add(1)
	tc.nanoUSD.Add(a.NanoUSD)
	tc.tokens.Add(a.Tokens)
	tc.cached.Add(a.CachedInputTokens)
}

// SpendByTenant returns what each tenant's calls settled through this
// gateway, sorted by tenant.
func (g *Gateway) SpendByTenant() []TenantSpend {
	var out []TenantSpend
	g.tenants.m.Range(func(k, v any) bool {
		tc := v.(*tenantCounters)
		out = append(out, TenantSpend{Tenant: k.(string), Calls: tc.calls.Load(),
			Spent: Amount{NanoUSD: tc.nanoUSD.Load(), Tokens: tc.tokens.Load(), CachedInputTokens: tc.cached.Load()}})
		return true
	})
	slices.SortFunc(out, func(a, b TenantSpend) int { return cmp.Compare(a.Tenant, b.Tenant) })
	return out
}
