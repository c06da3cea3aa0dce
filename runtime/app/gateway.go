package app

import (
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/gateway/openaicompat"
)

// Options are the parts of the runtime that the IR does not describe: where
// spend is kept, where traces and logs go, and the process environment.
type Options struct {
	// Ledger keeps spend; nil means an in-memory ledger.
	Ledger gateway.Ledger
	// Tracer receives the gateway's spans; nil means no tracing.
	Tracer trace.Tracer
	// Logger receives retries, fallbacks and ledger failures; nil means no
	// logging.
	Logger *slog.Logger
	// LookupEnv reads the environment (API keys); nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient sends openai-compatible requests; nil means the default.
	HTTPClient *http.Client
	// Seed, when set, replaces the seed of every fake provider, to draw a
	// fresh sample from an answer key without editing the IR.
	Seed *int64
}

// NewGateway builds the gateway of an application: every alias pinned to
// its model, every provider the models use, every budget.
func NewGateway(doc *ir.Document, opts Options) (*gateway.Gateway, error) {
	providers := make(map[string]gateway.Provider, len(doc.Providers))
	retries := map[string]gateway.RetryPolicy{}
	for _, p := range doc.Providers {
		prov, err := newProvider(doc, p, opts)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", p.Name, err)
		}
		providers[p.Name] = prov
		attempts := 1 // the fake never fails transiently
		if p.Kind == ir.ProviderOpenAICompatible {
			attempts = p.MaxRetries + 1
		}
		retries[p.Name] = gateway.RetryPolicy{MaxAttempts: attempts}
	}
	cfg := gateway.Config{
		Providers:     providers,
		Ledger:        opts.Ledger,
		Tracer:        opts.Tracer,
		Logger:        opts.Logger,
		ProviderRetry: retries,
	}
	for _, a := range doc.Aliases {
		m, ok := doc.Model(a.Model)
		if !ok {
			return nil, fmt.Errorf("alias %q names unknown model %q", a.Name, a.Model)
		}
		cfg.Models = append(cfg.Models, gateway.PinnedModel{Alias: a.Name, Spec: ModelSpec(m)})
	}
	for _, b := range doc.Budgets {
		cfg.Budgets = append(cfg.Budgets, gateway.Budget{
			Name:           b.Name,
			MaxUSD:         b.MaxUSD,
			MaxTotalTokens: b.MaxTotalTokens,
			Scope:          gateway.Scope(b.Scope),
		})
	}
	g, err := gateway.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the gateway of %s: %w", doc.Name, err)
	}
	return g, nil
}

// ModelSpec translates a pinned IR model into the gateway's description.
func ModelSpec(m *ir.Model) gateway.ModelSpec {
	s := gateway.ModelSpec{
		ID:              m.ID,
		Provider:        m.Provider,
		Kind:            gateway.ModelKind(m.Kind),
		ContextWindow:   m.ContextWindow,
		MaxOutputTokens: m.MaxOutputTokens,
		Dimensions:      m.Dimensions,
		Cost:            gateway.CostProfile{InputPer1kUSD: m.Cost.InputPer1kUSD, OutputPer1kUSD: m.Cost.OutputPer1kUSD},
	}
	if p := m.Cost.CachedInputPer1kUSD; p != nil {
		v := *p // the spec owns its price, apart from the document
		s.Cost.CachedInputPer1kUSD = &v
	}
	for _, c := range m.Capabilities {
		s.Capabilities = append(s.Capabilities, gateway.Capability(c))
	}
	return s
}

func newProvider(doc *ir.Document, p *ir.Provider, opts Options) (gateway.Provider, error) {
	switch p.Kind {
	case ir.ProviderOpenAICompatible:
		return openaicompat.New(openaicompat.Config{
			BaseURL:    p.BaseURL,
			APIKeyEnv:  p.APIKeyEnv,
			Timeout:    p.Timeout.Std(),
			HTTPClient: opts.HTTPClient,
			LookupEnv:  opts.LookupEnv,
		})
	case ir.ProviderFake:
		seed := p.Seed
		if opts.Seed != nil {
			seed = *opts.Seed
		}
		cfg := fake.Config{Seed: uint64(seed), Latency: p.Latency.Std()}
		if k := p.AnswerKey; k != nil {
			ds, err := eval.LoadDataset(filepath.Join(doc.Dir, filepath.FromSlash(k.Dataset)))
			if err != nil {
				return nil, fmt.Errorf("loading the answer key: %w", err)
			}
			key := &fake.AnswerKey{Accuracy: k.Accuracy}
			for _, c := range ds.Cases {
				key.Cases = append(key.Cases, fake.Case{ID: c.ID, Input: c.Input, Answer: c.Expected})
			}
			cfg.AnswerKey = key
		}
		return fake.New(cfg)
	}
	return nil, fmt.Errorf("unknown provider kind %q", p.Kind)
}
