package retrieval

import (
	"errors"
	"fmt"
	"slices"

	"github.com/aidgen/aid/runtime/gateway"
)

// Store kinds, as the IR spells them.
const (
	StoreMemory   = "memory"
	StorePGVector = "pgvector"
)

// Config is the IR-free description of one retriever: the IR's retriever
// entry with its references left as names. The IR lowering fills it; Build
// resolves the names against a gateway and the stores.
type Config struct {
	// Name is the retriever's name.
	Name string
	// Source says which files are ingested.
	Source Source
	// Chunking is the chunking strategy: ChunkFixed, or "" for it. A
	// strategy of DeferredChunkingStrategies fails Build with a
	// *gateway.DeferredError naming it.
	Chunking string
	// ChunkSize is the most characters of one chunk.
	ChunkSize int
	// ChunkOverlap is how many characters consecutive chunks share.
	ChunkOverlap int
	// EmbedModel is the gateway alias of the embedding model.
	EmbedModel string
	// Store names the entry of the stores that holds the chunks.
	Store string
	// TopK is how many chunks one search returns.
	TopK int
	// Rerank is RerankNone or RerankLexical; a kind of DeferredRerankKinds
	// fails Build with a *gateway.DeferredError naming it.
	Rerank string
	// Ranking says how searches rank: mode, fusion, the depth of each
	// stage, collapsing to documents, BM25. The zero value is the default,
	// a hybrid search fused by reciprocal rank.
	Ranking Ranking
}

// StoreConfig is the IR-free description of one store.
type StoreConfig struct {
	// Name is the store's name, as retrievers refer to it.
	Name string
	// Kind is StoreMemory, StorePGVector, or a kind with an opener in
	// BuildOptions.Openers; a kind of DeferredStoreKinds without one fails
	// with a *gateway.DeferredError naming it.
	Kind string
	// Distance is the similarity measure.
	Distance Distance
	// DSNEnv names the environment variable with the PostgreSQL DSN.
	DSNEnv string
	// Table is the PostgreSQL table.
	Table string
}

// InMemory reports whether the store keeps its vectors in this process
// only (kind StoreMemory, or no kind), so that it starts empty in every
// process and must be ingested before it is searched.
func (c StoreConfig) InMemory() bool { return c.Kind == "" || c.Kind == StoreMemory }

// StoreOpener opens a store of a kind with the width its retrievers embed
// with. A program that uses the pgvector store passes the opener of that
// package to Build, so that programs that do not use it do not link pgx.
type StoreOpener func(cfg StoreConfig, dims int) (VectorStore, error)

// BuildOptions adjusts Build.
type BuildOptions struct {
	// Openers maps store kinds to openers; StoreMemory is built in.
	Openers map[string]StoreOpener
	// EmbedOptions are passed to every embedding call (budgets).
	EmbedOptions []gateway.CallOption
	// EmbeddingCache, when set, is the Cache of every embedder Build
	// makes (see GatewayEmbedder.Cache).
	EmbeddingCache EmbeddingCache
}

// Build assembles retrievers from their configuration: each embedding alias
// becomes a GatewayEmbedder, each store is opened once with the width of
// the embedding models of the retrievers that use it (they must agree),
// and each retriever is bound. A store kind without an opener fails with a
// *gateway.DeferredError naming it. Every problem is reported, joined.
func Build(gw *gateway.Gateway, stores []StoreConfig, retrievers []Config, opts BuildOptions) (map[string]*Retriever, error) {
	var errs []error
	embedders := make(map[string]*GatewayEmbedder)
	widths := make(map[string]int)       // store → width
	widthFrom := make(map[string]string) // store → retriever that set the width
	byName := make(map[string]StoreConfig)
	unbuilt := make(map[string]bool) // stores of a deferred kind, reported once here
	for _, s := range stores {
		if _, dup := byName[s.Name]; dup {
			errs = append(errs, fmt.Errorf("store %q is declared twice", s.Name))
		}
		byName[s.Name] = s
		// A store of a kind that is not built fails even when no retriever
		// uses it yet: the application declared it.
		if _, ok := opts.Openers[s.Kind]; !ok {
			if err := deferredKind(DeferredStoreKinds(), "store kind", s.Kind); err != nil {
				errs = append(errs, fmt.Errorf("opening store %q: %w", s.Name, err))
				unbuilt[s.Name] = true
			}
		}
	}
	for _, c := range retrievers {
		if _, ok := byName[c.Store]; !ok {
			errs = append(errs, fmt.Errorf("retriever %q: unknown store %q", c.Name, c.Store))
			continue
		}
		e, ok := embedders[c.EmbedModel]
		if !ok {
			var err error
			if e, err = NewGatewayEmbedder(gw, c.EmbedModel, opts.EmbedOptions...); err != nil {
				errs = append(errs, fmt.Errorf("retriever %q: %w", c.Name, err))
				continue
			}
			e.Cache = opts.EmbeddingCache
			embedders[c.EmbedModel] = e
		}
		if w, ok := widths[c.Store]; ok && w != e.Dimensions() {
			errs = append(errs, fmt.Errorf("retriever %q embeds with width %d but retriever %q, sharing store %q, with width %d", c.Name, e.Dimensions(), widthFrom[c.Store], c.Store, w))
			continue
		}
		widths[c.Store], widthFrom[c.Store] = e.Dimensions(), c.Name
	}
	opened := make(map[string]VectorStore)
	names := make([]string, 0, len(widths))
	for n := range widths {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if unbuilt[n] {
			continue // reported above
		}
		s, err := OpenStore(byName[n], widths[n], opts.Openers)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		opened[n] = s
	}
	out := make(map[string]*Retriever, len(retrievers))
	for _, c := range retrievers {
		// What the retriever itself asks for is checked whatever happened
		// to its embedder and store, so that every kind that is not built
		// is reported in one round.
		chunker, cerr := NewChunker(c.Chunking, c.ChunkSize, c.ChunkOverlap)
		rr, rerr := NewReranker(c.Rerank)
		serr := c.Source.checkKind()
		for _, err := range []error{cerr, rerr, serr} {
			if err != nil {
				errs = append(errs, fmt.Errorf("retriever %q: %w", c.Name, err))
			}
		}
		e, s := embedders[c.EmbedModel], opened[c.Store]
		if e == nil || s == nil || cerr != nil || rerr != nil || serr != nil {
			continue // reported above
		}
		if _, dup := out[c.Name]; dup {
			errs = append(errs, fmt.Errorf("retriever %q is declared twice", c.Name))
			continue
		}
		r, err := New(Binding{Name: c.Name, Source: c.Source, Chunker: chunker, Embedder: e, Store: s, Reranker: rr, TopK: c.TopK, Ranking: c.Ranking})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[c.Name] = r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("building retrievers: %w", err)
	}
	return out, nil
}

// OpenStore opens one store of the given width: a MemoryStore for
// StoreMemory, or the opener registered for its kind. A kind with no
// opener, such as StorePGVector when its package is not linked, fails with
// a *gateway.DeferredError naming it.
func OpenStore(cfg StoreConfig, dims int, openers map[string]StoreOpener) (VectorStore, error) {
	d := cfg.Distance
	if d == "" {
		d = DistanceCosine
	}
	cfg.Distance = d
	if open, ok := openers[cfg.Kind]; ok {
		s, err := open(cfg, dims)
		if err != nil {
			return nil, fmt.Errorf("opening store %q: %w", cfg.Name, err)
		}
		return s, nil
	}
	switch cfg.Kind {
	case "", StoreMemory:
		s, err := NewMemoryStore(dims, d)
		if err != nil {
			return nil, fmt.Errorf("opening store %q: %w", cfg.Name, err)
		}
		return s, nil
	case StorePGVector:
		return nil, fmt.Errorf("opening store %q: %w", cfg.Name, &gateway.DeferredError{Feature: "pgvector store (no opener for it in BuildOptions.Openers)"})
	}
	if err := deferredKind(DeferredStoreKinds(), "store kind", cfg.Kind); err != nil {
		return nil, fmt.Errorf("opening store %q: %w", cfg.Name, err)
	}
	return nil, fmt.Errorf("opening store %q: unknown kind %q; use %q or %q", cfg.Name, cfg.Kind, StoreMemory, StorePGVector)
}
