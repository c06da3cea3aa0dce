package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
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
	// GuardrailFuncs holds the Go code behind each guardrail of kind go, by
	// the name the guardrail gives; one missing fails Assemble naming it.
	GuardrailFuncs map[string]guard.Func
	// Ledger keeps spend; nil means an in-memory ledger, or the ledger of
	// OpenState when the service keeps its state in PostgreSQL.
	Ledger gateway.Ledger
	// RunStore keeps runs, checkpoints and tool calls; nil means an
	// in-memory store, or the store of OpenState when the service keeps its
	// state in PostgreSQL.
	RunStore agents.Store
	// OpenState opens the durable state of a service whose State.Kind is
	// postgres, from the DSN its DSNEnv names, for whichever of RunStore
	// and Ledger is nil, with what the application's kinds are lent (env:
	// its scope, where a pool shared with the memory of its pgvector stores
	// is kept and closed with the App). It is an option
	// (serve/postgres.OpenState in a generated service) so that this
	// package does not link pgx.
	OpenState func(ctx context.Context, env kind.Env, dsn string) (agents.Store, gateway.Ledger, error)
	// OpenMemory opens the agents' memory named store in the PostgreSQL
	// database at dsn, for a memory store whose kind keeps its stores
	// there (retrieval.DatabaseKind: pgvector), with what the
	// application's kinds are lent (env: its scope, where the pool it
	// shares with OpenState's state on the DSN is kept). It is an option
	// (serve/postgres.OpenMemory in a generated service) for the same
	// reason as OpenState.
	OpenMemory func(ctx context.Context, env kind.Env, dsn, store string) (agents.MemoryStore, error)
	// EmbeddingCache, when set, keeps the retrievers' embeddings so that
	// texts embedded before are not embedded (nor charged) again; aidgen's
	// commands use an embedcache.Cache in the user cache directory.
	EmbeddingCache retrieval.EmbeddingCache
	// Tracer receives the gateway's and the agents' spans; nil means no
	// tracing.
	Tracer trace.Tracer
	// Logger receives retries, fallbacks, pauses and store failures; nil
	// means no logging.
	Logger *slog.Logger
	// Files holds the files the application names (agent scripts,
	// fixtures, datasets, documents), with the description's Dir a
	// slash-separated directory inside it: a generated service's embedded
	// copies. Nil means the files are on disk, Dir an ordinary directory.
	Files fs.FS
	// LookupEnv reads the environment (API keys, DSNs, http tool
	// headers); nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient sends openai-compatible requests and http tool calls; nil
	// means the default.
	HTTPClient *http.Client
	// Seed, when set, replaces the seed of every fake provider, to draw a
	// fresh sample from an answer key without editing the application.
	Seed *int64
	// Clock, when set, tells the gateway the time its budget windows, rate
	// limits and deployments' cool-downs are read from (gateway.Config's
	// Clock); nil means time.Now. Tests inject one to roll a window over
	// or end a cool-down without waiting for it.
	Clock func() time.Time
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

	desc  Description
	files kind.Files
	scope *kind.Scope
	tools []agents.Tool // the declared tools as the kinds built them
}

// Description returns the description the application was assembled from.
func (a *App) Description() Description { return a.desc }

// Files returns the application's files, as its kinds read them.
func (a *App) Files() kind.Files { return a.files }

// Scope returns the scope App.Close closes, for what is opened to serve
// the application after it was assembled (the stubs of an eval's tools).
func (a *App) Scope() *kind.Scope { return a.scope }

// Tools returns the declared tools as the agents runtime has them, with
// those a kind built in a declaration's place (a server's tools) listed
// each; nil when the application has no agents.
func (a *App) Tools() []agents.Tool { return slices.Clone(a.tools) }

// ReadyChecks returns the readiness checks the application's kinds
// registered for what they opened (a connection to each MCP server), by
// name, for a service's /readyz.
func (a *App) ReadyChecks() []kind.Check { return a.scope.Checks() }

// Close closes what the application's kinds opened to serve it (database
// pools, server sessions), the last opened first. The application must
// not be used afterwards.
func (a *App) Close() error { return a.scope.Close() }

// Assemble builds the runtime an application describes: the gateway with
// its pinned catalog, providers (with their answer keys and agent scripts)
// and budgets; the tools (Go code from opts, http and fixture kinds built
// here); the memory stores; the retrievers (built, not ingested); the
// agents runtime (package appeval assembles an application with its evals
// around it). Every problem found is reported, joined; a stage that fails
// stops the stages that depend on it.
func Assemble(ctx context.Context, desc Description, opts Options) (_ *App, err error) {
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	env := newEnv(desc, opts)
	a := &App{desc: desc, files: env.Files, scope: env.Scope}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.Close())
		}
	}()
	var errs []error
	// The state comes first: in PostgreSQL, it holds the gateway's ledger.
	runs, err := runStore(ctx, &desc, &opts, env)
	if err != nil {
		errs = append(errs, err)
	}
	g, err := newGateway(ctx, &desc, &opts, env)
	if err != nil {
		errs = append(errs, err)
		return nil, fmt.Errorf("assembling %s: %w", desc.Name, errors.Join(errs...))
	}
	a.Gateway = g

	var ended []func(string)
	tools, impls, expand, err := buildTools(ctx, &desc, &opts, env, &ended)
	if err != nil {
		errs = append(errs, err)
	}
	skills, err := skills(&desc, env.Files)
	if err != nil {
		errs = append(errs, err)
	}
	a.MemoryStores, err = memoryStores(ctx, &desc, &opts, env)
	if err != nil {
		errs = append(errs, err)
	}
	// A source's directory is relative to the description's, which the
	// application's files are.
	a.Retrievers, err = retrieval.Build(ctx, g, desc.Stores, desc.Retrievers, retrieval.BuildOptions{Env: env, EmbeddingCache: opts.EmbeddingCache})
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 && len(desc.Agents) > 0 {
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
		a.tools = tools
		a.Agents, err = agents.New(agents.Config{
			Retrievers:        searchers,
			Gateway:           g,
			Agents:            expandTools(desc.Agents, expand),
			Tools:             tools,
			Implementations:   impls,
			Budgets:           desc.Budgets,
			MemoryStores:      a.MemoryStores,
			Store:             runs,
			Tracer:            opts.Tracer,
			Logger:            opts.Logger,
			Timeouts:          desc.Service.Timeouts,
			Approvals:         desc.Approvals,
			Conditions:        desc.Conditions,
			Guardrails:        desc.Guardrails,
			GuardrailFuncs:    opts.GuardrailFuncs,
			DefaultGuardrails: desc.Service.Guardrails,
			App:               desc.Name,
			AppVersion:        desc.Version,
			Skills:            skills,
			RunEnded:          ended,
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("building the agents: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("assembling %s: %w", desc.Name, err)
	}
	return a, nil
}

// newEnv is what the kinds of desc are lent: its files (on disk, or in
// opts.Files), the process's environment, HTTP client and logger, a new
// scope, and its resources.
func newEnv(desc Description, opts Options) kind.Env {
	files := kind.DirFiles(desc.Dir)
	if opts.Files != nil {
		files = kind.FSFiles(opts.Files, desc.Dir)
	}
	skills := make(map[string]string, len(desc.Skills))
	for _, s := range desc.Skills {
		skills[s.Name] = s.Dir
	}
	return kind.Env{
		Skills:     skills,
		Files:      files,
		LookupEnv:  opts.LookupEnv,
		HTTPClient: opts.HTTPClient,
		Logger:     opts.Logger,
		Seed:       opts.Seed,
		Scope:      &kind.Scope{},
		Resources:  desc.Resources,
	}
}

// Describe writes what the resource of kind k (its section, such as
// "mcpServers") and name offers, as its kind describes it
// (kind.Describer), reaching it as the application would; nothing else of
// the application is assembled.
func Describe(ctx context.Context, desc Description, opts Options, k, name string, w io.Writer) error {
	env := newEnv(desc, opts)
	defer env.Scope.Close()
	var names, kinds []string
	for _, r := range desc.Resources {
		switch {
		case r.Kind == nil:
			continue
		case r.Kind.ResourceKind() != k:
			kinds = append(kinds, r.Kind.ResourceKind())
			continue
		case r.Name != name:
			names = append(names, r.Name)
			continue
		}
		d, ok := r.Kind.(kind.Describer)
		if !ok {
			return fmt.Errorf("a resource of kind %s cannot describe what it offers", k)
		}
		return d.Describe(ctx, env, name, w)
	}
	if len(names) > 0 {
		return fmt.Errorf("no %s resource %q; %s has %s", k, name, desc.Name, strings.Join(names, ", "))
	}
	slices.Sort(kinds)
	if kinds = slices.Compact(kinds); len(kinds) > 0 {
		return fmt.Errorf("%s declares no %s; its resources are of kind %s", desc.Name, k, strings.Join(kinds, ", "))
	}
	return fmt.Errorf("%s declares no resources", desc.Name)
}

// buildTools builds every declared tool: the Go code Options registers for
// a tool without a kind, and what its kind builds otherwise. It returns the
// tools the agents runtime is configured with, their implementations, and,
// for a declaration whose kind built tools of other names (a server's tools
// imported whole), the names it stands for in the agents' lists.
func buildTools(ctx context.Context, desc *Description, opts *Options, env kind.Env, ended *[]func(string)) ([]agents.Tool, map[string]agents.Implementation, map[string][]string, error) {
	var errs []error
	var tools []agents.Tool
	impls := make(map[string]agents.Implementation, len(desc.Tools))
	expand := map[string][]string{}
	declared := make(map[string]bool, len(desc.Tools))
	for _, t := range desc.Tools {
		name := t.Decl.Name
		declared[name] = true
		if t.Kind == nil {
			tools = append(tools, t.Decl)
			if code, ok := opts.Implementations[name]; ok {
				impls[name] = code
			} // a missing one is the agents runtime's to report, naming the agents that offer it
			continue
		}
		if _, ok := opts.Implementations[name]; ok {
			errs = append(errs, fmt.Errorf("tool %q is implemented by its %s kind, and Options.Implementations registers Go code for it too; keep one", name, t.Kind.ToolKind()))
			continue
		}
		built, err := t.Kind.NewTools(ctx, t.Decl, env)
		if err != nil {
			errs = append(errs, fmt.Errorf("tool %q: %w", name, err))
			continue
		}
		if len(built) == 0 {
			errs = append(errs, fmt.Errorf("tool %q: its %s kind provides no tool", name, t.Kind.ToolKind()))
			continue
		}
		decls := make([]agents.Tool, len(built))
		for i, b := range built {
			decls[i] = b.Tool
			impls[b.Tool.Name] = b.Implementation
			if e, ok := b.Implementation.(RunEnder); ok {
				*ended = append(*ended, e.EndRun)
			}
		}
		tools = appendBuilt(tools, expand, name, decls)
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Implementations)) {
		if !declared[name] {
			errs = append(errs, fmt.Errorf("Options.Implementations registers %q, which the application does not declare", name))
		}
	}
	return tools, impls, expand, errors.Join(errs...)
}

// RunEnder is implemented by a tool kind's implementation that keeps
// something per run (a sandbox's workspace): EndRun is called when a run
// ends for good (agents.Config.RunEnded), before any wrapper hides it.
type RunEnder interface {
	EndRun(runID string)
}

// appendBuilt appends to tools the tools a kind built for the declaration
// name; when they are not the one tool of that name (a server's tools
// imported whole), each says it came from name, and expand records the
// names name stands for in the agents' lists.
func appendBuilt(tools []agents.Tool, expand map[string][]string, name string, built []agents.Tool) []agents.Tool {
	imported := len(built) != 1 || built[0].Name != name
	var names []string
	for _, t := range built {
		if imported {
			t.From = name
		}
		tools = append(tools, t)
		names = append(names, t.Name)
	}
	if imported {
		expand[name] = names
	}
	return tools
}

// expandTools returns the agents with every tool their lists name that
// stands for several (expand) replaced by those, in order.
func expandTools(list []agents.Agent, expand map[string][]string) []agents.Agent {
	if len(expand) == 0 {
		return list
	}
	out := slices.Clone(list)
	for i, a := range out {
		var tools []string
		for _, t := range a.Tools {
			if names, ok := expand[t]; ok {
				tools = append(tools, names...)
			} else {
				tools = append(tools, t)
			}
		}
		out[i].Tools = tools
	}
	return out
}

// memoryStores opens every store an agent's user or global memory names,
// once per store: through its kind when the kind can hold memory
// (agents.MemoryStoreKind), with Options.OpenMemory in the database of a
// store whose kind keeps it in PostgreSQL (retrieval.DatabaseKind), in the
// process when the store is.
func memoryStores(ctx context.Context, desc *Description, opts *Options, env kind.Env) (map[string]agents.MemoryStore, error) {
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
		k, canHold := cfg.Kind.(agents.MemoryStoreKind)
		db, inDatabase := cfg.Kind.(retrieval.DatabaseKind)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("memory store %q is not declared", name))
		case canHold:
			m, err := k.OpenMemoryStore(ctx, env, name)
			if err != nil {
				errs = append(errs, fmt.Errorf("opening memory store %q: %w", name, err))
				continue
			}
			out[name] = m
		case inDatabase:
			m, err := openDatabaseMemory(ctx, opts, env, db, name)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[name] = m
		case cfg.InMemory():
			out[name] = agents.NewInMemoryMemory()
		default:
			errs = append(errs, fmt.Errorf("memory store %q: %w", name, &kind.DeferredError{Feature: "memory in a " + cfg.KindName() + " store"}))
		}
	}
	return out, errors.Join(errs...)
}

// openDatabaseMemory opens the memory named store in the PostgreSQL
// database of its store kind db, with Options.OpenMemory.
func openDatabaseMemory(ctx context.Context, opts *Options, env kind.Env, db retrieval.DatabaseKind, store string) (agents.MemoryStore, error) {
	if opts.OpenMemory == nil {
		return nil, fmt.Errorf("memory store %q is a %s store, in PostgreSQL: set Options.OpenMemory to open it", store, db.StoreKind())
	}
	dsn, err := db.DatabaseDSN(env, store)
	if err != nil {
		return nil, fmt.Errorf("memory store %q: %w", store, err)
	}
	m, err := opts.OpenMemory(ctx, env, dsn, store)
	if err != nil {
		return nil, fmt.Errorf("opening memory store %q: %w", store, err)
	}
	return m, nil
}

// runStore picks where runs are kept, and fills opts.Ledger too when the
// service keeps its state in PostgreSQL.
func runStore(ctx context.Context, desc *Description, opts *Options, env kind.Env) (agents.Store, error) {
	switch desc.Service.State.Kind {
	case "", StateMemory:
		if opts.RunStore != nil {
			return opts.RunStore, nil
		}
		store, err := agents.NewInMemoryStoreWith(desc.Service.State.Retention)
		if err != nil {
			return nil, fmt.Errorf("service state: %w", err)
		}
		return store, nil
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
		store, ledger, err := opts.OpenState(ctx, env, dsn)
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
