package retrieval

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/rules"
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
	// *kind.DeferredError naming it.
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
	// fails Build with a *kind.DeferredError naming it.
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
	// Distance is the similarity measure; empty means DistanceCosine.
	Distance Distance
	// Kind is the configuration of the store's kind, a package under
	// runtime/retrieval: memory.Kind (the store in the process) or
	// pgvector.Kind. A store without one cannot be opened.
	Kind StoreKind
}

// StoreKind is the typed configuration of a store kind: where a store's
// vectors live and how to reach them. Each kind is a package under
// runtime/retrieval (memory.Kind, pgvector.Kind), linked by a program
// only when it names it, whose configuration, plain data with the IR's JSON field names, implements it;
// an application description holds it as a store's Kind. A kind that can
// also hold agents' user and global memory implements
// agents.MemoryStoreKind, or, when it keeps its stores in a PostgreSQL
// database (as pgvector does), DatabaseKind.
type StoreKind interface {
	// StoreKind returns the kind's name, as the IR spells it
	// (kind.StorePGVector).
	StoreKind() string
	// OpenVectorStore opens the store called name, searching by distance
	// d, for vectors of width dims. What it opens for the application's
	// lifetime (a connection pool) goes into env.Scope, which closes it.
	OpenVectorStore(ctx context.Context, env kind.Env, name string, d Distance, dims int) (VectorStore, error)
	// InMemory reports whether the store keeps its vectors in this process
	// only, so that it starts empty in every process and must be ingested
	// before it is searched.
	InMemory() bool
}

// DatabaseKind is implemented by a store kind whose stores live in a
// PostgreSQL database. Such a store holds agents' user and global memory
// too, in the agents' tables of that database, which the application
// opens (app.Options.OpenMemory: serve/postgres.OpenMemory), so that the
// kind's package, a layer below the agents, need not import them.
type DatabaseKind interface {
	StoreKind
	// DatabaseDSN returns the DSN of the database of the store called
	// store, as the application's environment (env) holds it.
	DatabaseDSN(env kind.Env, store string) (string, error)
}

// KindName is the name of the store's kind; "" when it names none.
func (c StoreConfig) KindName() string {
	if c.Kind == nil {
		return ""
	}
	return c.Kind.StoreKind()
}

// InMemory reports whether the store keeps its vectors in this process
// only (its kind's InMemory), so that it starts empty in every process and
// must be ingested before it is searched; false when it names no kind.
func (c StoreConfig) InMemory() bool { return c.Kind != nil && c.Kind.InMemory() }

// BuildOptions adjusts Build.
type BuildOptions struct {
	// Env is what the stores' kinds are lent (kind.Env): the
	// environment, where connections are kept; and the application's files,
	// which the retrievers' sources are read from, relative to the
	// application's directory.
	Env kind.Env
	// EmbedOptions are passed to every embedding call (budgets).
	EmbedOptions []gateway.CallOption
	// EmbeddingCache, when set, is the Cache of every embedder Build
	// makes (see GatewayEmbedder.Cache).
	EmbeddingCache EmbeddingCache
}

// Build assembles retrievers from their configuration: each embedding alias
// becomes a GatewayEmbedder, each store is opened once, by its kind, with
// the width of the embedding models of the retrievers that use it (they
// must agree), and each retriever is bound, reading its source through
// opts.Env.Files. Every problem is reported, joined.
func Build(ctx context.Context, gw *gateway.Gateway, stores []StoreConfig, retrievers []Config, opts BuildOptions) (map[string]*Retriever, error) {
	var errs []error
	embedders := make(map[string]*GatewayEmbedder)
	var writes []rules.StoreWrite
	byName := make(map[string]StoreConfig)
	for _, s := range stores {
		if _, dup := byName[s.Name]; dup {
			errs = append(errs, fmt.Errorf("store %q is declared twice", s.Name))
		}
		byName[s.Name] = s
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
		writes = append(writes, rules.StoreWrite{Retriever: c.Name, Store: c.Store, Model: c.EmbedModel, Width: e.Dimensions()})
	}
	widths, refused := rules.StoreWidths(writes)
	for i := range writes {
		if msg, ok := refused[i]; ok {
			errs = append(errs, errors.New(msg))
		}
	}
	opened := make(map[string]VectorStore)
	names := make([]string, 0, len(widths))
	for n := range widths {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s, err := OpenStore(ctx, opts.Env, byName[n], widths[n])
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
		r, err := New(Binding{Name: c.Name, Source: c.Source, Files: opts.Env.Files, Chunker: chunker, Embedder: e, Store: s, Reranker: rr, TopK: c.TopK, Ranking: c.Ranking})
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

// OpenStore opens one store of the given width through its kind,
// searching by its distance (DistanceCosine when it names none). A store
// that names no kind is refused.
func OpenStore(ctx context.Context, env kind.Env, cfg StoreConfig, dims int) (VectorStore, error) {
	if cfg.Kind == nil {
		return nil, fmt.Errorf("opening store %q: it names no kind (memory.Kind or pgvector.Kind, under runtime/retrieval)", cfg.Name)
	}
	d := cfg.Distance
	if d == "" {
		d = DistanceCosine
	}
	s, err := cfg.Kind.OpenVectorStore(ctx, env, cfg.Name, d, dims)
	if err != nil {
		return nil, fmt.Errorf("opening store %q: %w", cfg.Name, err)
	}
	return s, nil
}
