package gateway

import (
	"context"
	"fmt"
	"time"
)

// Embed turns texts into vectors with the embedding model behind alias,
// charged like a chat call: the estimated tokens are reserved against the
// call's budgets first and settled with the real usage after. Retryable
// failures are retried; there are no fallbacks, because vectors of
// different models are not comparable. The provider adapter batches large
// inputs.
func (g *Gateway) Embed(ctx context.Context, alias string, texts []string, opts ...CallOption) (EmbedResult, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.fallbacks) > 0 {
		return EmbedResult{}, fmt.Errorf("embed %q: embeddings take no fallbacks: vectors of different models are not comparable", alias)
	}
	chain, err := g.chain(alias, nil, []Capability{CapabilityEmbeddings})
	if err != nil {
		return EmbedResult{}, err
	}
	e := chain[0]
	spec := e.pinned.Spec
	if spec.kind() != KindEmbedding {
		return EmbedResult{}, fmt.Errorf("embed %q: model %s is a %s model, not an embedding model", alias, spec.ID, spec.kind())
	}
	if len(texts) == 0 {
		return EmbedResult{Alias: alias, Model: spec.ID}, nil
	}
	limits, err := g.limits(ctx, &o)
	if err != nil {
		return EmbedResult{}, err
	}
	id, err := g.reserve(ctx, e, Price(spec.Cost, worstCaseEmbedUsage(texts)), limits)
	if err != nil {
		return EmbedResult{}, err
	}
	var attempts []Attempt
	for retry := 0; ; retry++ {
		start := time.Now()
		resp, cost, err := g.embedOnce(ctx, e, texts, limits, len(attempts))
		attempts = append(attempts, Attempt{Alias: alias, Model: spec.ID, Retry: retry, Duration: time.Since(start), Err: err})
		if err == nil {
			g.settle(ctx, id, cost)
			return EmbedResult{Vectors: resp.Vectors, Usage: resp.Usage, CostUSD: cost.USD(), Alias: alias, Model: spec.ID, Attempts: attempts}, nil
		}
		if !g.shouldRetry(ctx, e, retry, err) {
			g.release(ctx, id)
			return EmbedResult{}, g.callError("embed", alias, attempts, err)
		}
	}
}

// embedOnce makes one traced embedding call, checks its shape and prices it.
func (g *Gateway) embedOnce(ctx context.Context, e *entry, texts []string, limits []Limit, attempt int) (EmbedResponse, Amount, error) {
	ctx, span := g.startSpan(ctx, e, opEmbeddings, attempt, false, limits, nil)
	spec := e.pinned.Spec
	resp, err := e.provider.Embed(ctx, spec, texts)
	if err == nil {
		err = checkVectors(resp.Vectors, len(texts), spec.Dimensions)
	}
	if err != nil {
		err = asProviderError(ctx, e.providerKind, spec.ID, err)
		g.endSpanError(span, err)
		return EmbedResponse{}, Amount{}, err
	}
	if resp.Usage == (Usage{}) {
		resp.Usage = EstimateEmbedUsage(texts)
	}
	cost := Price(spec.Cost, resp.Usage)
	g.endSpanOK(span, resp.Model, resp.Usage, "", cost)
	return resp, cost, nil
}

// checkVectors rejects an answer with the wrong number or width of vectors:
// a pinned model's width never changes, so a different one is a fault.
func checkVectors(vs [][]float32, n, width int) error {
	if len(vs) != n {
		return fmt.Errorf("provider returned %d vectors for %d texts", len(vs), n)
	}
	for i, v := range vs {
		if len(v) != width {
			return fmt.Errorf("vector %d has width %d, want the pinned %d", i, len(v), width)
		}
	}
	return nil
}
