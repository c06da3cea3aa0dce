package app

import (
	"errors"
	"fmt"

	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// newGateway builds the gateway of an application: every alias pinned to
// its model, every provider, every budget.
func newGateway(desc *Description, opts *Options) (*gateway.Gateway, error) {
	var errs []error
	providers := make(map[string]gateway.Provider, len(desc.Providers))
	retries := make(map[string]gateway.RetryPolicy, len(desc.Providers))
	for _, p := range desc.Providers {
		if _, dup := providers[p.Name]; dup {
			errs = append(errs, fmt.Errorf("provider %q is declared twice", p.Name))
			continue
		}
		prov, err := newProvider(desc, p, opts)
		if err != nil {
			errs = append(errs, fmt.Errorf("provider %q: %w", p.Name, err))
			continue
		}
		if opts.WrapProvider != nil {
			prov = opts.WrapProvider(prov)
		}
		providers[p.Name] = prov
		retries[p.Name] = retryPolicy(p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	g, err := gateway.New(gateway.Config{
		Models:        desc.Models,
		Providers:     providers,
		Budgets:       desc.Budgets,
		Ledger:        opts.Ledger,
		Tracer:        opts.Tracer,
		Logger:        opts.Logger,
		ProviderRetry: retries,
	})
	if err != nil {
		return nil, fmt.Errorf("building the gateway: %w", err)
	}
	return g, nil
}

// retryPolicy is the retry policy of a provider's aliases: MaxRetries
// retries after the first attempt for an openai-compatible endpoint, and a
// single attempt for the fake, which never fails transiently (a scripted
// error is meant to be seen, not retried away).
func retryPolicy(p Provider) gateway.RetryPolicy {
	if p.Kind == ProviderOpenAICompatible {
		return gateway.RetryPolicy{MaxAttempts: p.MaxRetries + 1}
	}
	return gateway.RetryPolicy{MaxAttempts: 1}
}

func newProvider(desc *Description, p Provider, opts *Options) (gateway.Provider, error) {
	switch p.Kind {
	case ProviderOpenAICompatible:
		return openaicompat.New(openaicompat.Config{
			BaseURL:    p.BaseURL,
			APIKeyEnv:  p.APIKeyEnv,
			Timeout:    p.Timeout,
			HTTPClient: opts.HTTPClient,
			LookupEnv:  opts.LookupEnv,
		})
	case ProviderFake:
		seed := p.Seed
		if opts.Seed != nil {
			seed = *opts.Seed
		}
		cfg := fake.Config{Seed: uint64(seed), Latency: p.Latency}
		var errs []error
		if k := p.AnswerKey; k != nil {
			ds, err := eval.LoadDataset(desc.path(k.Dataset))
			if err != nil {
				errs = append(errs, fmt.Errorf("loading the answer key: %w", err))
			} else {
				key := &fake.AnswerKey{Accuracy: k.Accuracy}
				for _, c := range ds.Cases {
					key.Cases = append(key.Cases, fake.Case{ID: c.ID, Input: c.Input, Answer: c.Expected})
				}
				cfg.AnswerKey = key
			}
		}
		if p.Script != "" {
			sc, err := fake.LoadScript(desc.path(p.Script))
			if err != nil {
				errs = append(errs, fmt.Errorf("loading the agent script: %w", err))
			} else {
				cfg.Agents = sc.Agents
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return fake.New(cfg)
	}
	if err := gateway.ProviderKindDeferred(p.Kind); err != nil {
		return nil, fmt.Errorf("provider %q: %w", p.Name, err)
	}
	return nil, fmt.Errorf("unknown provider kind %q; known kinds: %s, %s", p.Kind, ProviderOpenAICompatible, ProviderFake)
}
