package gateway

import (
	"context"
	"fmt"
)

// Embed turns texts into vectors with the embedding model behind alias,
// charged like a chat call: an upper bound of the tokens (one per byte) is
// reserved against the call's budgets first and settled with the real usage
// after. An input the OpenAI API specification forbids (an empty string) is
// refused first, with an *InvalidRequestError; no texts at all make no call.
// Retryable failures are retried; there are no fallbacks, because vectors
// of different models are not comparable. The provider adapter batches
// large inputs.
func (g *Gateway) Embed(ctx context.Context, alias string, texts []string, opts ...CallOption) (EmbedResult, error) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	if len(o.fallbacks) > 0 {
		return EmbedResult{}, fmt.Errorf("embed %q: embeddings take no fallbacks: vectors of different models are not comparable", alias)
	}
	c := call{op: "embed", kind: opEmbeddings, alias: alias, texts: texts}
	if err := g.newCall(ctx, &c, nil, nil, &o, []Capability{CapabilityEmbeddings}); err != nil {
		return EmbedResult{}, err
	}
	spec := c.chain[0].pinned.Spec
	if spec.kind() != KindEmbedding {
		return EmbedResult{}, fmt.Errorf("embed %q: model %s is a %s model, not an embedding model", alias, spec.ID, spec.kind())
	}
	if len(texts) == 0 {
		return EmbedResult{Alias: alias, Model: spec.ID}, nil
	}
	var resp EmbedResponse
	var cost Amount
	_, err := g.run(ctx, &c, nil, func(ctx context.Context, e *entry, n int, _ bool) (bool, error) {
		var err error
		resp, cost, err = g.embedOnce(ctx, e, texts, c.limits, n)
		if err != nil {
			return false, err
		}
		g.settle(ctx, &c.hold, cost)
		return true, nil
	})
	if err != nil {
		return EmbedResult{}, err
	}
	return EmbedResult{Vectors: resp.Vectors, Usage: resp.Usage, CostUSD: cost.USD(), Alias: alias, Model: spec.ID, Attempts: c.attempts}, nil
}

// embedOnce makes one traced embedding call, checks its shape and prices it.
func (g *Gateway) embedOnce(ctx context.Context, e *entry, texts []string, limits []Limit, attempt int) (EmbedResponse, Amount, error) {
	var span attemptSpan
	ctx = g.startSpan(ctx, &span, e, opEmbeddings, attempt, false, limits, nil)
	spec := e.pinned.Spec
	resp, err := e.provider.Embed(ctx, spec, texts)
	if err == nil {
		err = checkVectors(resp.Vectors, len(texts), spec.Dimensions)
	}
	if err != nil {
		err = asProviderError(ctx, e.providerKind, spec.ID, err)
		g.endSpanError(&span, err)
		return EmbedResponse{}, Amount{}, err
	}
	if resp.Usage == (Usage{}) {
		resp.Usage = EstimateEmbedUsage(texts)
	}
	g.checkCached(ctx, e, &resp.Usage)
	cost := Price(spec.Cost, resp.Usage)
	g.endSpanOK(&span, resp.Model, resp.Usage, "", cost)
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
