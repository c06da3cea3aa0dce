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
	model gateway.PinnedModel
	opts  []gateway.CallOption

	// BatchSize is how many texts one gateway call carries; zero means
	// DefaultEmbedBatch. Smaller batches reserve less of a budget at once
	// and keep what was embedded before a failure.
	BatchSize int
	// Cache, when set, is asked for every text first; only the texts it
	// does not hold are embedded (and charged), and their vectors are
	// given to it. Nil embeds everything.
	Cache EmbeddingCache
}

// EmbeddingCache keeps vectors that a pinned embedding model gave for
// texts, so that a process embedding the same texts again (every CLI
// command over a memory store) makes no model call for them. Its keys must
// cover everything that decides a vector: the model's provider and its
// configuration, the model id, the width and the text. It is best effort:
// a vector it cannot read or write is a miss, never an error, because the
// model can always be asked again. Implementations must be safe for
// concurrent use.
type EmbeddingCache interface {
	// Lookup returns the cached vector of each text, nil where it holds
	// none.
	Lookup(ctx context.Context, model gateway.PinnedModel, texts []string) [][]float32
	// Store keeps the vectors of texts.
	Store(ctx context.Context, model gateway.PinnedModel, texts []string, vecs [][]float32)
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
	return &GatewayEmbedder{gw: gw, alias: alias, model: pm, opts: opts}, nil
}

// Dimensions implements Embedder.
func (e *GatewayEmbedder) Dimensions() int { return e.model.Spec.Dimensions }

// Model implements Embedder.
func (e *GatewayEmbedder) Model() string { return e.model.Spec.ID }

// Embed implements Embedder, in batches of BatchSize, asking the Cache
// first when there is one.
func (e *GatewayEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if e.Cache == nil {
		return e.embed(ctx, texts)
	}
	out := e.Cache.Lookup(ctx, e.model, texts)
	if len(out) != len(texts) {
		out = make([][]float32, len(texts))
	}
	var missing []string
	var at []int
	for i, v := range out {
		if len(v) != e.Dimensions() {
			missing = append(missing, texts[i])
			at = append(at, i)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	vecs, err := e.embed(ctx, missing)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = vecs[j]
	}
	e.Cache.Store(ctx, e.model, missing, vecs)
	return out, nil
}

// embed embeds texts through the gateway.
func (e *GatewayEmbedder) embed(ctx context.Context, texts []string) ([][]float32, error) {
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
