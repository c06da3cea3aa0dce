package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// newGateway builds the gateway of an application: every alias pinned to
// its model, every provider built by its kind, every budget.
func newGateway(ctx context.Context, desc *Description, opts *Options, env kind.Env) (*gateway.Gateway, error) {
	var errs []error
	providers := make(map[string]gateway.Provider, len(desc.Providers))
	retries := make(map[string]gateway.RetryPolicy, len(desc.Providers))
	for _, p := range desc.Providers {
		if _, dup := providers[p.Name]; dup {
			errs = append(errs, fmt.Errorf("provider %q is declared twice", p.Name))
			continue
		}
		if p.Kind == nil {
			errs = append(errs, fmt.Errorf("provider %q has no kind", p.Name))
			continue
		}
		prov, err := p.Kind.NewProvider(ctx, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("provider %q: %w", p.Name, err))
			continue
		}
		if opts.WrapProvider != nil {
			prov = opts.WrapProvider(prov)
		}
		providers[p.Name] = prov
		retries[p.Name] = p.Kind.RetryPolicy()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g, err := gateway.New(gateway.Config{
		Models:        desc.Models,
		Providers:     providers,
		Budgets:       desc.Budgets,
		RateLimits:    desc.RateLimits,
		Ledger:        opts.Ledger,
		Tracer:        opts.Tracer,
		Logger:        opts.Logger,
		ProviderRetry: retries,
		Clock:         opts.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("building the gateway: %w", err)
	}
	return g, nil
}
