package gateway

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aidgen/aid/runtime/rules"
)

// Deployment is one place an alias's model is served: a provider of
// Config.Providers (another account, key or region of the same model) with
// a weight.
type Deployment struct {
	// Name identifies the deployment in attempts, errors and metrics;
	// empty means the provider's name.
	Name string
	// Provider is the key in Config.Providers that serves it.
	Provider string
	// Weight is its share of the calls when all are equally busy; zero
	// means 1.
	Weight int
}

// route is an alias's deployments and their health.
type route struct {
	deps     []*deployment
	coolDown time.Duration
}

// deployment is one deployment of an alias: an entry of its own (the same
// pinned model on its provider) with its load and health.
type deployment struct {
	*entry
	name     string
	weight   int64
	inFlight atomic.Int64
	// coolUntil is the Unix nanosecond time until which the deployment is
	// skipped after a failure; zero when healthy.
	coolUntil atomic.Int64
	calls     atomic.Int64
	failures  atomic.Int64
	coolings  atomic.Int64
}

// DeploymentStats is one deployment's figures, for metrics.
type DeploymentStats struct {
	// Alias and Model are the alias and the pinned model id served.
	Alias, Model string
	// Name is the deployment's name and Provider its provider.
	Name, Provider string
	// Weight is its configured weight.
	Weight int64
	// InFlight counts the calls it serves now.
	InFlight int64
	// Calls counts the calls sent to it; Failures those that failed in a
	// way that cools it down (5xx, 429, timeouts, broken connections).
	Calls, Failures int64
	// CoolDowns counts the times it was cooled down.
	CoolDowns int64
	// CoolingUntil is when it takes calls again; zero when it does now.
	CoolingUntil time.Time
}

// DeploymentsCoolingError reports that every deployment of an alias is
// cooling down after failures: the call was not sent to any, and falls back
// to the next alias.
type DeploymentsCoolingError struct {
	// Alias is the alias whose deployments are all cooling.
	Alias string
	// Until is when the first of them takes calls again.
	Until time.Time
}

// Error implements error.
func (e *DeploymentsCoolingError) Error() string {
	return fmt.Sprintf("alias %q: every deployment is cooling down after failures until %s", e.Alias, e.Until.UTC().Format(time.RFC3339))
}

// newRoute builds the deployments of alias entry e, whose model is pinned
// as pm; for a model without deployments it is nil (e serves every call)
// unless pm declares a cool-down, which its one deployment then keeps.
func (g *Gateway) newRoute(e *entry, pm PinnedModel, providers map[string]Provider) (*route, error) {
	if pm.CoolDown < 0 {
		return nil, fmt.Errorf("alias %q has a negative cool-down %s", pm.Alias, pm.CoolDown)
	}
	deps := pm.Deployments
	if len(deps) == 0 {
		if pm.CoolDown == 0 {
			return nil, nil
		}
		deps = []Deployment{{Provider: pm.Spec.Provider}}
	} else if deps[0].Provider != pm.Spec.Provider {
		return nil, fmt.Errorf("alias %q: model %q names provider %q, and its first deployment %q; they must be the same", pm.Alias, pm.Spec.ID, pm.Spec.Provider, deps[0].Provider)
	}
	names := make([]rules.Deployment, len(deps))
	for i, d := range deps {
		names[i] = rules.Deployment{Name: d.Name, Provider: d.Provider}
	}
	if twice := rules.Deployments(names); len(twice) > 0 {
		return nil, fmt.Errorf("alias %q: %s", pm.Alias, twice[0].Msg)
	}
	r := &route{coolDown: pm.CoolDown}
	for i, d := range deps {
		name := rules.DeploymentName(names[i])
		p, ok := providers[d.Provider]
		switch {
		case !ok || p == nil:
			return nil, fmt.Errorf("alias %q: deployment %q names provider %q, which is not configured", pm.Alias, name, d.Provider)
		case d.Weight < 0:
			return nil, fmt.Errorf("alias %q: deployment %q has a negative weight", pm.Alias, name)
		}
		de := *e
		de.provider, de.providerName, de.providerKind = p, d.Provider, p.Kind()
		de.providerCaps = slices.Clone(p.Capabilities())
		de.starts = newSpanStarts(pm.Alias, pm.Spec.ID, p.Kind())
		// The alias can do what every deployment can.
		e.providerCaps = slices.DeleteFunc(e.providerCaps, func(c Capability) bool { return !slices.Contains(de.providerCaps, c) })
		r.deps = append(r.deps, &deployment{entry: &de, name: name, weight: int64(max(d.Weight, 1))})
	}
	return r, nil
}

// pick returns the deployment of e the next try goes to: of those not
// cooling down, the least busy for its weight (in flight / weight), ties
// drawn by weight; nil when all are cooling. An alias without deployments
// is its own.
func (g *Gateway) pick(e *entry) *deployment {
	r := e.route
	now := g.clock().UnixNano()
	var best []*deployment
	var total int64
	for _, d := range r.deps {
		if d.coolUntil.Load() > now {
			continue
		}
		if len(best) > 0 {
			// Compare inFlight/weight without dividing.
			a, b := d.inFlight.Load()*best[0].weight, best[0].inFlight.Load()*d.weight
			if a > b {
				continue
			}
			if a < b {
				best, total = best[:0], 0
			}
		}
		best = append(best, d)
		total += d.weight
	}
	switch len(best) {
	case 0:
		return nil
	case 1:
		return best[0]
	}
	n := rand.Int64N(total)
	for _, d := range best {
		if n -= d.weight; n < 0 {
			return d
		}
	}
	return best[len(best)-1]
}

// coolingError is the refusal of an alias whose deployments all cool.
func (g *Gateway) coolingError(e *entry) error {
	var first int64
	for _, d := range e.route.deps {
		if u := d.coolUntil.Load(); first == 0 || u < first {
			first = u
		}
	}
	return &DeploymentsCoolingError{Alias: e.pinned.Alias, Until: time.Unix(0, first)}
}

// failed records a try of d that ended with err, and cools d down when err
// is a failure of the deployment rather than of the request: one a retry
// could fix (5xx, 429, a timeout, a broken connection).
func (g *Gateway) failed(d *deployment, coolDown time.Duration, err error) bool {
	if err == nil || !IsRetryable(err) {
		return false
	}
	d.failures.Add(1)
	if coolDown <= 0 {
		return false
	}
	d.coolUntil.Store(g.clock().Add(coolDown).UnixNano())
	d.coolings.Add(1)
	return true
}

// Deployments returns the figures of every deployment of every alias that
// has a route (deployments, or a cool-down), sorted by alias then
// deployment order.
func (g *Gateway) Deployments() []DeploymentStats {
	var out []DeploymentStats
	now := g.clock().UnixNano()
	for _, a := range g.aliases {
		e := g.entries[a]
		if e.route == nil {
			continue
		}
		for _, d := range e.route.deps {
			s := DeploymentStats{
				Alias: a, Model: e.pinned.Spec.ID, Name: d.name, Provider: d.providerName, Weight: d.weight,
				InFlight: d.inFlight.Load(), Calls: d.calls.Load(), Failures: d.failures.Load(), CoolDowns: d.coolings.Load(),
			}
			if u := d.coolUntil.Load(); u > now {
				s.CoolingUntil = time.Unix(0, u)
			}
			out = append(out, s)
		}
	}
	return out
}
