package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aidgen/aid/runtime/gateway"
)

// ModelRole says what a model did in an eval: answer the cases or grade the answers.
type ModelRole string

// The roles a pinned model can play in an eval.
const (
	// RoleTarget is a model that answered the cases.
	RoleTarget ModelRole = "target"
	// RoleJudge is a model that graded the answers (an LLM judge).
	RoleJudge ModelRole = "judge"
)

// roleRank orders roles for display: the target first, then the judge.
func roleRank(r ModelRole) int {
	switch r {
	case RoleTarget:
		return 0
	case RoleJudge:
		return 1
	}
	return 2
}

// ModelPin is one model an eval sampled: the alias that was called, the exact pinned
// model id it resolved to and the provider that served it. A baseline records the pins
// it was sampled with, so that a later run against other models (an alias re-pointed to
// a newer version, a model moved to another provider) is reported, never silent.
type ModelPin struct {
	// Role says whether the model answered the cases or graded them.
	Role ModelRole `json:"role"`
	// Alias is the alias the eval called.
	Alias string `json:"alias"`
	// Model is the exact pinned model id that answered.
	Model string `json:"model"`
	// Provider names the provider that served the model.
	Provider string `json:"provider"`
}

// String formats the pin as "alias: model (provider)", with the role when it is not the
// target.
func (p ModelPin) String() string {
	return fmt.Sprintf("%s: %s (%s)", roleAlias(p.Role, p.Alias), p.Model, p.Provider)
}

// roleAlias names an alias in a role: the target's alias alone, any other with its role.
func roleAlias(role ModelRole, alias string) string {
	if role == RoleTarget {
		return alias
	}
	return fmt.Sprintf("%s (%s)", alias, role)
}

// comparePins orders pins by role (target first), alias, model and provider.
func comparePins(a, b ModelPin) int {
	return cmp.Or(
		cmp.Compare(roleRank(a.Role), roleRank(b.Role)), cmp.Compare(a.Role, b.Role),
		cmp.Compare(a.Alias, b.Alias), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Provider, b.Provider))
}

// sortPins returns the pins sorted and without repeats, in a new slice; nil for none.
func sortPins(pins []ModelPin) []ModelPin {
	if len(pins) == 0 {
		return nil
	}
	out := slices.SortedFunc(slices.Values(pins), comparePins)
	return slices.Compact(out)
}

// check rejects a pin that names no model, alias or provider, or an unknown role.
func (p ModelPin) check() error {
	var errs []error
	if p.Role != RoleTarget && p.Role != RoleJudge {
		errs = append(errs, fmt.Errorf("role %q is not %q or %q", p.Role, RoleTarget, RoleJudge))
	}
	for _, f := range []struct{ name, v string }{{"alias", p.Alias}, {"model", p.Model}, {"provider", p.Provider}} {
		if strings.TrimSpace(f.v) == "" {
			errs = append(errs, fmt.Errorf("%s is empty", f.name))
		}
	}
	return errors.Join(errs...)
}

// checkPins applies check to every pin and refuses one listed twice; it is the one
// validation of recorded pins, used by [RecordPin], [NewBaseline], [MarshalBaseline]
// and [ParseBaseline].
func checkPins(pins []ModelPin) error {
	var errs []error
	seen := make(map[ModelPin]bool, len(pins))
	for i, p := range pins {
		if err := p.check(); err != nil {
			errs = append(errs, fmt.Errorf("pinned model %d: %w", i, err))
			continue
		}
		if seen[p] {
			errs = append(errs, fmt.Errorf("pinned model %d: %s is listed twice", i, p))
		}
		seen[p] = true
	}
	return errors.Join(errs...)
}

// pinRecorder collects the pins reported during a run. Runners may call models from
// several goroutines, so it is guarded.
type pinRecorder struct {
	mu   sync.Mutex
	pins map[ModelPin]bool
}

func (r *pinRecorder) add(p ModelPin) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pins[p] = true
}

// sorted returns every recorded pin, sorted; nil for none.
func (r *pinRecorder) sorted() []ModelPin {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pins) == 0 {
		return nil
	}
	out := make([]ModelPin, 0, len(r.pins))
	for p := range r.pins {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePins)
	return out
}

type pinRecorderKey struct{}

func withPinRecorder(ctx context.Context, r *pinRecorder) context.Context {
	return context.WithValue(ctx, pinRecorderKey{}, r)
}

// RecordPin reports that the pinned model of pin answered a call made for a sample under
// ctx. [Run] puts a recorder on the context of every runner and metric call and collects
// the pins into [Result.Pins], so a baseline records what it was actually sampled with,
// fallbacks included. [ModelRunner] and [GatewayJudge] call it; a custom runner or judge
// that calls a model itself should too. Outside [Run] it does nothing. A pin with an
// unknown role or an empty alias, model or provider is refused with an error.
func RecordPin(ctx context.Context, pin ModelPin) error {
	if err := pin.check(); err != nil {
		return fmt.Errorf("record pinned model: %w", err)
	}
	if r, ok := ctx.Value(pinRecorderKey{}).(*pinRecorder); ok {
		r.add(pin)
	}
	return nil
}

// recordGatewayPin records the model that answered a gateway call: the answering alias
// (a fallback's, if the gateway fell back), the model id the gateway reports and the
// provider the alias is pinned to.
func recordGatewayPin(ctx context.Context, g *gateway.Gateway, role ModelRole, res gateway.Result) error {
	pm, err := g.Resolve(res.Alias)
	if err != nil {
		return fmt.Errorf("record pinned model of alias %q: %w", res.Alias, err)
	}
	return RecordPin(ctx, ModelPin{Role: role, Alias: res.Alias, Model: res.Model, Provider: pm.Spec.Provider})
}

// ModelChangeKind says how a pinned model differs between a baseline and a run.
type ModelChangeKind string

// The kinds of [ModelChange].
const (
	// ModelChanged means the alias answered with another model or provider.
	ModelChanged ModelChangeKind = "changed"
	// ModelAdded means the run used an alias in a role the baseline does not record.
	ModelAdded ModelChangeKind = "added"
	// ModelRemoved means the baseline records an alias in a role the run did not use.
	ModelRemoved ModelChangeKind = "removed"
)

// ModelChange is one difference between the models a baseline was sampled with and the
// models of a current run. It never changes a verdict: the gate compares scores, and the
// change is reported beside them so that nobody reads a model upgrade as noise.
type ModelChange struct {
	// Kind says whether the model changed, was added or was removed.
	Kind ModelChangeKind `json:"kind"`
	// Role is the role of the alias.
	Role ModelRole `json:"role"`
	// Alias is the alias whose model changed.
	Alias string `json:"alias"`
	// OldModel is the baseline's model id; empty when added.
	OldModel string `json:"oldModel,omitempty"`
	// OldProvider is the baseline's provider; empty when added.
	OldProvider string `json:"oldProvider,omitempty"`
	// NewModel is the current run's model id; empty when removed.
	NewModel string `json:"newModel,omitempty"`
	// NewProvider is the current run's provider; empty when removed.
	NewProvider string `json:"newProvider,omitempty"`
}

// String formats the change as "alias: old → new", such as
// "small: fake-chat-2024-06-01 → fake-chat-2024-09-01". Providers are shown when they
// differ or when one side is missing; a role other than the target is named.
func (c ModelChange) String() string {
	name := roleAlias(c.Role, c.Alias)
	switch c.Kind {
	case ModelAdded:
		return fmt.Sprintf("%s: (not in the baseline) → %s (%s)", name, c.NewModel, c.NewProvider)
	case ModelRemoved:
		return fmt.Sprintf("%s: %s (%s) → (not in this run)", name, c.OldModel, c.OldProvider)
	}
	if c.OldProvider != c.NewProvider {
		return fmt.Sprintf("%s: %s (%s) → %s (%s)", name, c.OldModel, c.OldProvider, c.NewModel, c.NewProvider)
	}
	return fmt.Sprintf("%s: %s → %s", name, c.OldModel, c.NewModel)
}

// CompareModels lists how the models of a current run (its [Result.Pins]) differ from
// those the baseline records, per role and alias, target first. An alias whose single
// model or provider differs is changed; otherwise every model only on one side is added
// or removed. It returns nil when nothing differs, and also when the baseline is nil or
// records no models (a baseline written before models were recorded): the caller says
// that once rather than listing every model as added.
func CompareModels(baseline *Baseline, current []ModelPin) []ModelChange {
	if baseline == nil || len(baseline.Pins) == 0 {
		return nil
	}
	type key struct {
		role  ModelRole
		alias string
	}
	group := func(pins []ModelPin) map[key][]ModelPin {
		m := map[key][]ModelPin{}
		for _, p := range sortPins(pins) {
			k := key{p.Role, p.Alias}
			m[k] = append(m[k], p)
		}
		return m
	}
	olds, news := group(baseline.Pins), group(current)
	var keys []key
	for k := range olds {
		keys = append(keys, k)
	}
	for k := range news {
		if _, ok := olds[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(roleRank(a.role), roleRank(b.role)), cmp.Compare(a.role, b.role), cmp.Compare(a.alias, b.alias))
	})
	var out []ModelChange
	for _, k := range keys {
		o, n := olds[k], news[k]
		if slices.Equal(o, n) {
			continue
		}
		if len(o) == 1 && len(n) == 1 {
			out = append(out, ModelChange{Kind: ModelChanged, Role: k.role, Alias: k.alias,
				OldModel: o[0].Model, OldProvider: o[0].Provider, NewModel: n[0].Model, NewProvider: n[0].Provider})
			continue
		}
		for _, p := range o {
			if !slices.Contains(n, p) {
				out = append(out, ModelChange{Kind: ModelRemoved, Role: k.role, Alias: k.alias, OldModel: p.Model, OldProvider: p.Provider})
			}
		}
		for _, p := range n {
			if !slices.Contains(o, p) {
				out = append(out, ModelChange{Kind: ModelAdded, Role: k.role, Alias: k.alias, NewModel: p.Model, NewProvider: p.Provider})
			}
		}
	}
	return out
}
