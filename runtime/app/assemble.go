package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Options are what a Description cannot hold because they are code or
// process state: tool implementations, where spend and runs are kept, the
// openers of stores whose drivers a program may not want to link, traces,
// logs and the environment.
type Options struct {
	// Implementations holds the Go code behind each tool of kind go, by
	// tool name. A go tool an agent offers without one fails Assemble with
	// an *agents.MissingToolImplementationError naming it.
	Implementations map[string]agents.Implementation
	// Ledger keeps spend; nil means an in-memory ledger, or the ledger of
	// OpenState when the service keeps its state in PostgreSQL.
	Ledger gateway.Ledger
	// RunStore keeps runs, checkpoints and tool calls; nil means an
	// in-memory store, or the store of OpenState when the service keeps its
	// state in PostgreSQL.
	RunStore agents.Store
	// OpenState opens the durable state of a service whose State.Kind is
	// postgres, from the DSN its DSNEnv names, for whichever of RunStore
	// and Ledger is nil. It is an option (pgstore.Open and pgledger.New in
	// a generated service) so that this package does not link pgx.
	OpenState func(ctx context.Context, dsn string) (agents.Store, gateway.Ledger, error)
	// VectorStoreOpeners opens retrievers' stores by kind; the memory kind
	// is built in. A kind without an opener fails Assemble with a
	// *gateway.DeferredError naming it.
	VectorStoreOpeners map[string]retrieval.StoreOpener
	// EmbeddingCache, when set, keeps the retrievers' embeddings so that
	// texts embedded before are not embedded (nor charged) again; aidgen's
	// commands use an embedcache.Cache in the user cache directory.
	EmbeddingCache retrieval.EmbeddingCache
	// MemoryStoreOpeners opens the stores holding agents' user and global
	// memory, by kind; the memory kind is built in.
	MemoryStoreOpeners map[string]MemoryStoreOpener
	// Tracer receives the gateway's and the agents' spans; nil means no
	// tracing.
	Tracer trace.Tracer
	// Logger receives retries, fallbacks, pauses and store failures; nil
	// means no logging.
	Logger *slog.Logger
	// LookupEnv reads the environment (API keys, DSNs, http tool
	// headers); nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient sends openai-compatible requests and http tool calls; nil
	// means the default.
	HTTPClient *http.Client
	// Seed, when set, replaces the seed of every fake provider, to draw a
	// fresh sample from an answer key without editing the application.
	Seed *int64
	// WrapProvider, WrapTool and WrapSearcher, when set, wrap every
	// provider adapter, tool implementation and retriever search the
	// runtime calls: the seam a service uses to measure the time it waits
	// on them (runtime/service's Instrument functions), without this
	// package knowing the service.
	WrapProvider func(gateway.Provider) gateway.Provider
	// WrapTool wraps the implementation of the named tool; see WrapProvider.
	WrapTool func(name string, impl agents.Implementation) agents.Implementation
	// WrapSearcher wraps a retriever as the agents search it; see
	// WrapProvider.
	WrapSearcher func(agents.Searcher) agents.Searcher
}

// MemoryStoreOpener opens the memory store an agent's user or global
// memory names, with the DSN its DSNEnv holds (empty when it names none).
type MemoryStoreOpener func(ctx context.Context, cfg retrieval.StoreConfig, dsn string) (agents.MemoryStore, error)

// App is an application's assembled runtime.
type App struct {
	// Gateway is the door to the models.
	Gateway *gateway.Gateway
	// Agents runs the agents; nil when the application has none.
	Agents *agents.Runtime
	// Retrievers are the retrievers, by name, built but not ingested.
	Retrievers map[string]*retrieval.Retriever
	// MemoryStores hold agents' user and global memory, by store name.
	MemoryStores map[string]agents.MemoryStore

	desc Description
}

// Description returns the description the application was assembled from.
func (a *App) Description() Description { return a.desc }

// Assemble builds the runtime an application describes: the gateway with
// its pinned catalog, providers (with their answer keys and agent scripts)
// and budgets; the tools (Go code from opts, http and fixture kinds built
// here); the memory stores; the retrievers (built, not ingested); the
// agents runtime; and every eval's target, metrics, judge, budget and
// thresholds, so that App.Eval fails only on reading its dataset (read
// there, so that a service that runs no eval needs no dataset file). Every
// problem found is reported, joined; a stage that fails stops the stages
// that depend on it.
func Assemble(ctx context.Context, desc Description, opts Options) (*App, error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	a := &App{desc: desc}
	var errs []error
	// The state comes first: in PostgreSQL, it holds the gateway's ledger.
	runs, err := runStore(ctx, &desc, &opts)
	if err != nil {
		errs = append(errs, err)
	}
	g, err := newGateway(&desc, &opts)
	if err != nil {
		errs = append(errs, err)
		return nil, fmt.Errorf("assembling %s: %w", desc.Name, errors.Join(errs...))
	}
	a.Gateway = g

	impls, err := toolImplementations(&desc, &opts)
	if err != nil {
		errs = append(errs, err)
	}
	a.MemoryStores, err = memoryStores(ctx, &desc, &opts)
	if err != nil {
		errs = append(errs, err)
	}
	retrievers := slices.Clone(desc.Retrievers)
	for i := range retrievers {
		// An empty source directory is the description's own: the IR's
		// patterns are relative to the app file.
		retrievers[i].Source.Dir = desc.sourceDir(retrievers[i].Source)
	}
	a.Retrievers, err = retrieval.Build(g, desc.Stores, retrievers, retrieval.BuildOptions{Openers: opts.VectorStoreOpeners, EmbeddingCache: opts.EmbeddingCache})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && len(desc.Agents) > 0 {
		tools := make([]agents.Tool, len(desc.Tools))
		for i, t := range desc.Tools {
			tools[i] = t.Decl
		}
		searchers := make(map[string]agents.Searcher, len(a.Retrievers))
		for name, r := range a.Retrievers {
			searchers[name] = r
			if opts.WrapSearcher != nil {
				searchers[name] = opts.WrapSearcher(r)
			}
		}
		if opts.WrapTool != nil {
			for name, impl := range impls {
				impls[name] = opts.WrapTool(name, impl)
			}
		}
		a.Agents, err = agents.New(agents.Config{
			Retrievers:      searchers,
			Gateway:         g,
			Agents:          desc.Agents,
			Tools:           tools,
			Implementations: impls,
			Budgets:         desc.Budgets,
			MemoryStores:    a.MemoryStores,
			Store:           runs,
			Tracer:          opts.Tracer,
			Logger:          opts.Logger,
			Timeouts:        desc.Service.Timeouts,
			Approvals:       desc.Approvals,
			App:             desc.Name,
			AppVersion:      desc.Version,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("building the agents: %w", err))
		}
	}
	if len(errs) == 0 {
		for _, e := range desc.Evals {
			if _, err := a.newEval(e, "check"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("assembling %s: %w", desc.Name, err)
	}
	return a, nil
}

// path resolves a file name of the description against its directory.
func (d *Description) path(name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(d.Dir, filepath.FromSlash(name))
}

// sourceDir is the directory a retriever's source patterns are relative
// to: its Dir resolved against the description's, which an empty Dir is.
func (d *Description) sourceDir(s retrieval.Source) string {
	if s.Dir == "" {
		return d.path(".")
	}
	return d.path(s.Dir)
}

// toolImplementations builds the implementation of every tool: the
// registered Go code for kind go, an HTTPTool or a FixtureTool otherwise.
func toolImplementations(desc *Description, opts *Options) (map[string]agents.Implementation, error) {
	var errs []error
	impls := make(map[string]agents.Implementation, len(desc.Tools))
	declared := make(map[string]bool, len(desc.Tools))
	for _, t := range desc.Tools {
		name := t.Decl.Name
		declared[name] = true
		impl := t.Implementation
		if impl.Kind != "" && impl.Kind != ToolGo {
			if _, ok := opts.Implementations[name]; ok {
				errs = append(errs, fmt.Errorf("tool %q is implemented by its %s kind, and Options.Implementations registers Go code for it too; keep one", name, impl.Kind))
				continue
			}
		}
		switch impl.Kind {
		case "", ToolGo:
			if code, ok := opts.Implementations[name]; ok {
				impls[name] = code
			} // a missing one is the agents runtime's to report, naming the agents that offer it
		case ToolHTTP:
			headers := make(map[string]string, len(impl.HeadersFromEnv))
			for _, h := range slices.Sorted(maps.Keys(impl.HeadersFromEnv)) {
				env := impl.HeadersFromEnv[h]
				v, ok := opts.LookupEnv(env)
				if !ok {
					errs = append(errs, fmt.Errorf("tool %q: header %s: environment variable %s is not set", name, h, env))
					continue
				}
				headers[h] = v
			}
			code, err := agents.HTTPTool(impl.URL, agents.HTTPOptions{Client: opts.HTTPClient, Headers: headers})
			if err != nil {
				errs = append(errs, fmt.Errorf("tool %q: %w", name, err))
				continue
			}
			impls[name] = code
		case ToolFixture:
			rows, err := agents.LoadFixture(desc.path(impl.File))
			if err != nil {
				errs = append(errs, fmt.Errorf("tool %q: %w", name, err))
				continue
			}
			code, err := agents.FixtureTool(rows)
			if err != nil {
				errs = append(errs, fmt.Errorf("tool %q: %w", name, err))
				continue
			}
			impls[name] = code
		default:
			errs = append(errs, fmt.Errorf("tool %q: unknown implementation kind %q; known kinds: %s, %s, %s", name, impl.Kind, ToolGo, ToolHTTP, ToolFixture))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Implementations)) {
		if !declared[name] {
			errs = append(errs, fmt.Errorf("Options.Implementations registers %q, which the application does not declare", name))
		}
	}
	return impls, errors.Join(errs...)
}

// memoryStores opens every store an agent's user or global memory names,
// once per store.
func memoryStores(ctx context.Context, desc *Description, opts *Options) (map[string]agents.MemoryStore, error) {
	names := map[string]bool{}
	for _, a := range desc.Agents {
		if a.Memory == nil {
			continue
		}
		for _, m := range []*agents.StoredMemory{a.Memory.User, a.Memory.Global} {
			if m != nil {
				names[m.Store] = true
			}
		}
	}
	stores := make(map[string]retrieval.StoreConfig, len(desc.Stores))
	for _, s := range desc.Stores {
		stores[s.Name] = s
	}
	var errs []error
	out := make(map[string]agents.MemoryStore, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		cfg, ok := stores[name]
		if !ok {
			errs = append(errs, fmt.Errorf("memory store %q is not declared", name))
			continue
		}
		if open, ok := opts.MemoryStoreOpeners[cfg.Kind]; ok {
			dsn := ""
			if cfg.DSNEnv != "" {
				v, ok := opts.LookupEnv(cfg.DSNEnv)
				if !ok {
					errs = append(errs, fmt.Errorf("memory store %q: environment variable %s is not set", name, cfg.DSNEnv))
					continue
				}
				dsn = v
			}
			m, err := open(ctx, cfg, dsn)
			if err != nil {
				errs = append(errs, fmt.Errorf("opening memory store %q: %w", name, err))
				continue
			}
			out[name] = m
			continue
		}
		if cfg.Kind != "" && cfg.Kind != retrieval.StoreMemory {
			errs = append(errs, fmt.Errorf("memory store %q: %w", name, &gateway.DeferredError{Feature: "memory in a " + cfg.Kind + " store (no opener for it in Options.MemoryStoreOpeners)"}))
			continue
		}
		out[name] = agents.NewInMemoryMemory()
	}
	return out, errors.Join(errs...)
}

// runStore picks where runs are kept, and fills opts.Ledger too when the
// service keeps its state in PostgreSQL.
func runStore(ctx context.Context, desc *Description, opts *Options) (agents.Store, error) {
	switch desc.Service.State.Kind {
	case "", StateMemory:
		return opts.RunStore, nil // nil is the agents runtime's in-memory default
	case StatePostgres:
		if opts.RunStore != nil && opts.Ledger != nil {
			return opts.RunStore, nil
		}
		if opts.OpenState == nil {
			return nil, fmt.Errorf("service state is %s: set Options.RunStore and Options.Ledger, or Options.OpenState to open them", StatePostgres)
		}
		dsn, ok := opts.LookupEnv(desc.Service.State.DSNEnv)
		if !ok {
			return nil, fmt.Errorf("service state: environment variable %s is not set", desc.Service.State.DSNEnv)
		}
		store, ledger, err := opts.OpenState(ctx, dsn)
		if err != nil {
			return nil, fmt.Errorf("opening the service state: %w", err)
		}
		if opts.RunStore == nil {
			opts.RunStore = store
		}
		if opts.Ledger == nil {
			opts.Ledger = ledger
		}
		return opts.RunStore, nil
	}
	return nil, fmt.Errorf("unknown service state kind %q; known kinds: %s, %s", desc.Service.State.Kind, StateMemory, StatePostgres)
}
