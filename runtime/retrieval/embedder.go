package retrieval

import (
	"context"
	"fmt"

	"github.com/aidgen/aid/runtime/gateway"
)

// DefaultEmbedBatch is how many texts one embedding call carries when
// GatewayEmbedder.BatchSize is zero.
const DefaultEmbedBatch = 64

// GatewayEmbedder is the Embedder of aid: it embeds through the gateway, so
// every call is checked against the pinned model, retried, priced from its
// cost profile, written to the ledger and charged to the budgets of its
// options or its context (gateway.ContextWithBudget), like any model call.
type GatewayEmbedder struct {
	gw    *gateway.Gateway
	alias string
	model string
	dims  int
	opts  []gateway.CallOption

	// BatchSize is how many texts one gateway call carries; zero means
	// DefaultEmbedBatch. Smaller batches reserve less of a budget at once
	// and keep what was embedded before a failure.
	BatchSize int
}

// NewGatewayEmbedder returns an embedder for an embedding alias. It fails
// when the alias is unknown or is not an embedding model with a width.
// opts are passed to every call (budgets).
func NewGatewayEmbedder(gw *gateway.Gateway, alias string, opts ...gateway.CallOption) (*GatewayEmbedder, error) {
	if gw == nil {
		return nil, fmt.Errorf("embedder %q: no gateway", alias)
	}
	pm, err := gw.Resolve(alias)
	if err != nil {
		return nil, fmt.Errorf("embedder: %w", err)
	}
	if pm.Spec.Kind != gateway.KindEmbedding {
		return nil, fmt.Errorf("embedder %q: model %s is not an embedding model", alias, pm.Spec.ID)
	}
	if pm.Spec.Dimensions <= 0 {
		return nil, fmt.Errorf("embedder %q: model %s declares no width", alias, pm.Spec.ID)
	}
	return &GatewayEmbedder{gw: gw, alias: alias, model: pm.Spec.ID, dims: pm.Spec.Dimensions, opts: opts}, nil
}

// Dimensions implements Embedder.
func (e *GatewayEmbedder) Dimensions() int { return e.dims }

// Model implements Embedder.
func (e *GatewayEmbedder) Model() string { return e.model }

// Embed implements Embedder, in batches of BatchSize.
func (e *GatewayEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	batch := e.BatchSize
	if batch <= 0 {
		batch = DefaultEmbedBatch
	}
	out := make([][]float32, 0, len(texts))
	for start := 0; start < len(texts); start += batch {
		part := texts[start:min(start+batch, len(texts))]
		res, err := e.gw.Embed(ctx, e.alias, part, e.opts...)
		if err != nil {
			return nil, fmt.Errorf("embedding texts %d to %d of %d: %w", start, start+len(part), len(texts), err)
		}
		out = append(out, res.Vectors...)
	}
	return out, nil
}
