package serve

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	runtrace "runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/service"
	"github.com/aidgen/aid/runtime/telemetry"
)

// Environment variables and flags a service reads, besides the ones its
// application names (API keys, the bearer tokens' variable, the state's
// DSN variable) and the standard OTEL_* ones.
const (
	// EnvListen is the address to listen on; the -listen flag wins.
	EnvListen = "AID_LISTEN"
	// EnvAppDir is a directory to read the application's files from instead
	// of the copies built into the service; the -app-dir flag wins.
	EnvAppDir = "AID_APP_DIR"
	// EnvRetainFinished is how long a memory-state service keeps a run
	// that ended (agents.Retention.Finished), as a Go duration; the
	// -retain-finished flag wins, and it wins over the app file.
	EnvRetainFinished = "AID_RETAIN_FINISHED"
	// EnvMaxFinished is the most ended runs a memory-state service keeps
	// (agents.Retention.MaxFinished); the -max-finished flag wins.
	EnvMaxFinished = "AID_MAX_FINISHED"
	// EnvRetainPaused is how long a memory-state service keeps a run
	// waiting for a decision (agents.Retention.Paused); the -retain-paused
	// flag wins.
	EnvRetainPaused = "AID_RETAIN_PAUSED"
	// EnvWorkers is how many background runs this replica drives at once
	// (jobs.Config.Workers); the -workers flag wins.
	EnvWorkers = "AID_WORKERS"
	// EnvAgentConcurrency bounds, per agent, the background runs this
	// replica drives at once ("billing=2,researcher=4"); the
	// -agent-concurrency flag wins.
	EnvAgentConcurrency = "AID_AGENT_CONCURRENCY"
	// EnvMaxQueued bounds the background runs waiting for a worker; the
	// -max-queued flag wins.
	EnvMaxQueued = "AID_MAX_QUEUED"
	// EnvJobRunTimeout bounds one drive of a background run; the
	// -job-run-timeout flag wins.
	EnvJobRunTimeout = "AID_JOB_RUN_TIMEOUT"
	// EnvJobRescueAfter is how long after a background run's job started
	// its worker is presumed dead (PostgreSQL state); the
	// -job-rescue-after flag wins.
	EnvJobRescueAfter = "AID_JOB_RESCUE_AFTER"
	// EnvReplicaDeadAfter is how long a replica may write no heartbeat
	// before its background runs go to another (PostgreSQL state); the
	// -replica-dead-after flag wins.
	EnvReplicaDeadAfter = "AID_REPLICA_DEAD_AFTER"
	// EnvReplica names this replica in the runs it drives and the logs;
	// the -replica flag wins.
	EnvReplica = "AID_REPLICA"
	// EnvDebugListen is a loopback address serving Go's runtime profiles
	// (net/http/pprof, under /debug/pprof/); the -debug-listen flag wins.
	// Empty, the default, serves none.
	EnvDebugListen = "AID_DEBUG_LISTEN"
)

// Exit codes Main returns.
const (
	// ExitOK is a clean stop: SIGTERM or an interrupt, then the drain.
	ExitOK = 0
	// ExitFailed is a service that could not start or stopped on an error.
	ExitFailed = 1
	// ExitUsage is a flag that does not parse.
	ExitUsage = 2
)

// Options is what differs between generated services and so must come
// from the generated code. The zero value serves an application whose
// tools are not Go code and which keeps everything in memory.
type Options struct {
	// Implementations holds the Go code behind each tool of kind go, by
	// tool name (business.Implementations() in a generated service).
	Implementations map[string]agents.Implementation
	// GuardrailFuncs holds the Go code behind each guardrail of kind go,
	// by the name the guardrail gives its function
	// (business.GuardrailFuncs() in a generated service).
	GuardrailFuncs map[string]guard.Func
	// OpenState opens the durable state of an application whose service
	// state is postgres (postgres.OpenState); nil otherwise, so that pgx is
	// not linked. What it opens closes with the application once the
	// service has stopped.
	OpenState func(ctx context.Context, env kind.Env, dsn string) (agents.Store, gateway.Ledger, error)
	// OpenMemory opens agents' memory in the PostgreSQL database of a
	// store whose kind keeps it there, pgvector (postgres.OpenMemory); nil
	// when no agent's memory is in such a store, so that pgx is not linked
	// for it.
	OpenMemory func(ctx context.Context, env kind.Env, dsn, store string) (agents.MemoryStore, error)
	// Files holds copies of the files the application reads (agent
	// scripts, fixtures, answer keys, documents), which a generated service
	// embeds, with the description's Dir their directory inside it, so that
	// the service runs from any directory; nil means the files are on disk,
	// in the description's Dir. -app-dir (AID_APP_DIR) reads them from a
	// directory instead.
	Files fs.FS
	// Jobs opens the queue of background runs of an application whose
	// state is in PostgreSQL (pgqueue.OpenQueue: River on the state's
	// database, worked by every replica). nil, or memory state, runs them
	// in this process (jobs.Local), so that River is linked only by the
	// services that use it.
	Jobs func(ctx context.Context, rt *agents.Runtime, cfg jobs.Config, reg prometheus.Registerer) (jobs.Queue, error)
	// OpenKeys opens the keys created at run time (aidgen keys create) in
	// the state's database (postgres.OpenKeys), for a service whose state
	// is in PostgreSQL and which authenticates (a token, or a declared key
	// enabled): they are accepted beside the declared ones, and a revoked
	// one is refused within service.DefaultKeyCacheTTL. nil, or memory
	// state, accepts the declared keys only.
	OpenKeys func(ctx context.Context, env kind.Env, dsn string) (service.KeyStore, error)
}

// Process is what Run takes from the process it runs in. Main fills it
// from os; tests fill it by hand.
type Process struct {
	// Args are the command-line arguments, without the program name.
	Args []string
	// LookupEnv reads the environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Stderr receives the JSON logs and the flags' usage; nil means
	// os.Stderr.
	Stderr io.Writer
}

// Main serves the application desc until SIGTERM or an interrupt and
// returns the exit code: ExitOK after a clean stop and drain, ExitFailed
// when the service could not start or failed, ExitUsage for bad flags. A
// generated main calls it as os.Exit(serve.Main(description(), opts)).
func Main(desc app.Description, opts Options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, desc, opts, Process{Args: os.Args[1:], LookupEnv: os.LookupEnv, Stderr: os.Stderr})
}

// Run is Main with the stop signal as ctx and the process's arguments,
// environment and stderr given: the service stops accepting requests when
// ctx ends and returns once those in flight have finished (or the drain
// timeout has cancelled them).
//
// Flags, each over an environment variable that is over the app file:
// -listen (AID_LISTEN), -app-dir (AID_APP_DIR), -log-level; when the
// service keeps its state in memory, -retain-finished
// (AID_RETAIN_FINISHED), -max-finished (AID_MAX_FINISHED) and
// -retain-paused (AID_RETAIN_PAUSED), over the app file's
// service.state.retention; and when it keeps it in PostgreSQL, -state-dsn
// (over the variable the app file's state names). -app-dir reads the
// application's files from a directory instead of opts.Files, the copies
// built into a generated service: to serve documents or fixtures edited
// since the build without rebuilding, or to mount them from a volume.
func Run(ctx context.Context, desc app.Description, opts Options, p Process) int {
	if p.LookupEnv == nil {
		p.LookupEnv = os.LookupEnv
	}
	if p.Stderr == nil {
		p.Stderr = os.Stderr
	}
	lookupEnv := p.LookupEnv
	flags := flag.NewFlagSet(desc.Name, flag.ContinueOnError)
	flags.SetOutput(p.Stderr)
	listen := flags.String("listen", envOr(lookupEnv, EnvListen, desc.Service.Listen), "`address` to listen on (env "+EnvListen+")")
	dirUsage := "`directory` the application's files (fixtures, datasets, documents) are read from (env " + EnvAppDir + ")"
	dirDefault := desc.Dir
	jf := jobFlags(flags, lookupEnv)
	if opts.Files != nil {
		dirUsage = "`directory` to read the application's files (fixtures, datasets, documents) from instead of the copies built into the service (env " + EnvAppDir + ")"
		dirDefault = ""
	}
	dir := flags.String("app-dir", envOr(lookupEnv, EnvAppDir, dirDefault), dirUsage)
	debug := flags.String("debug-listen", envOr(lookupEnv, EnvDebugListen, ""), "loopback `address` serving Go's profiles at /debug/pprof/ (net/http/pprof), for go tool pprof through a tunnel; empty means none (env "+EnvDebugListen+")")
	level := slog.LevelInfo
	flags.TextVar(&level, "log-level", level, "least `level` logged: debug, info, warn or error")
	var dsn *string
	memory := desc.Service.State.Kind == "" || desc.Service.State.Kind == app.StateMemory
	keep := &desc.Service.State.Retention
	switch {
	case desc.Service.State.Kind == app.StatePostgres:
		dsn = flags.String("state-dsn", "", "PostgreSQL `DSN` of the service's state; empty means $"+desc.Service.State.DSNEnv)
	case memory:
		if err := retentionFromEnv(keep, lookupEnv); err != nil {
			fmt.Fprintln(p.Stderr, err)
			return ExitUsage
		}
		flags.DurationVar(&keep.Finished, "retain-finished", keep.Finished, "how long a run that ended is kept in memory, as a Go `duration`; 0 means "+agents.DefaultRetainFinished.String()+" (env "+EnvRetainFinished+")")
		flags.IntVar(&keep.MaxFinished, "max-finished", keep.MaxFinished, "the most ended runs kept in memory; 0 means "+strconv.Itoa(agents.DefaultMaxFinished)+" (env "+EnvMaxFinished+")")
		flags.DurationVar(&keep.Paused, "retain-paused", keep.Paused, "how long a run waiting for a decision is kept in memory, as a Go `duration`; 0 means "+agents.DefaultRetainPaused.String()+" (env "+EnvRetainPaused+")")
	}
	mcpSessions := flags.Int("max-mcp-sessions", 0, "MCP sessions open at once on /mcp; a new one past the bound closes the one idle longest; 0 means "+strconv.Itoa(service.DefaultMaxMCPSessions)+" (env "+EnvMaxMCPSessions+")")
	if err := envInt(lookupEnv, EnvMaxMCPSessions, mcpSessions); err != nil {
		fmt.Fprintln(p.Stderr, err)
		return ExitUsage
	}
	if err := flags.Parse(p.Args); err != nil {
		return ExitUsage
	}
	if *mcpSessions < 0 {
		fmt.Fprintf(p.Stderr, "-max-mcp-sessions: %d is negative; 0 means the default, %d\n", *mcpSessions, service.DefaultMaxMCPSessions)
		return ExitUsage
	}
	limits := service.Limits{MaxMCPSessions: *mcpSessions}
	jcfg, err := jf.config()
	if err != nil {
		fmt.Fprintf(p.Stderr, "%s: %v\n", desc.Name, err)
		return ExitUsage
	}
	if memory {
		if err := keep.Validate(); err != nil {
			fmt.Fprintf(p.Stderr, "run retention: %v\n", err)
			return ExitUsage
		}
	}
	if opts.Files == nil || *dir != "" {
		// The files are on disk: in the directory given, or the
		// description's own.
		desc.Dir, opts.Files = *dir, nil
	}
	logger := slog.New(slog.NewJSONHandler(p.Stderr, &slog.HandlerOptions{Level: level}))
	if stateEnv := desc.Service.State.DSNEnv; dsn != nil && *dsn != "" && stateEnv != "" {
		lookupEnv = overrideEnv(lookupEnv, stateEnv, *dsn)
	}
	jcfg.Logger = logger
	if *debug != "" {
		stop, err := serveDebug(ctx, *debug, logger)
		if err != nil {
			logger.Error("service stopped", "app", desc.Name, "error", err)
			return ExitFailed
		}
		defer stop()
	}
	if err := serve(ctx, desc, opts, *listen, limits, jcfg, lookupEnv, logger, p.Stderr); err != nil {
		logger.Error("service stopped", "app", desc.Name, "error", err)
		return ExitFailed
	}
	return ExitOK
}

// serveDebug serves Go's runtime profiles (net/http/pprof) on addr, which
// must be a loopback address: profiles show the process's internals (its
// command line, its goroutines' stacks) to whoever asks, with no
// authentication. The returned function stops the listener.
func serveDebug(ctx context.Context, addr string, logger *slog.Logger) (func(), error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("debug listener: listen on %s: %w", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		_ = ln.Close()
		return nil, fmt.Errorf("debug listener: %s is not a loopback address: profiles show the process's internals to anyone who asks; listen on 127.0.0.1 and reach it through a tunnel (ssh -L, kubectl port-forward)", addr)
	}
	srv := &http.Server{Handler: profiles(), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("debug listener stopped", "error", err)
		}
	}()
	logger.Info("debug listener", "addr", ln.Addr().String(), "profiles", "/debug/pprof/")
	return func() {
		_ = srv.Close() // a profile being taken ends with the process's work
		<-done
	}, nil
}

// profiles serves the runtime's profiles in the format go tool pprof reads:
// /debug/pprof/profile?seconds=N, the CPU for N seconds (30 by default, at
// most 300); /debug/pprof/NAME for the profiles runtime/pprof keeps (heap,
// allocs, goroutine, block, mutex, threadcreate; ?debug=1 or 2 for text);
// /debug/pprof/trace?seconds=N, an execution trace; and an index. It is
// written here rather than imported from net/http/pprof, whose init
// registers the same handlers on http.DefaultServeMux for any program
// that links it.
func profiles() http.Handler {
	seconds := func(r *http.Request) (time.Duration, error) {
		s := r.URL.Query().Get("seconds")
		if s == "" {
			return 30 * time.Second, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 300 {
			return 0, fmt.Errorf("seconds=%q: want a whole number of seconds from 1 to 300", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	// timed runs a profile that lasts while the request waits, the
	// client's going away ending it early.
	timed := func(start func(io.Writer) error, stop func()) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			d, err := seconds(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/octet-stream")
			if err := start(w); err != nil {
				// Another profile of the kind is being taken.
				http.Error(w, err.Error(), http.StatusConflict)
				return
			}
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
			}
			stop()
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /debug/pprof/profile", timed(pprof.StartCPUProfile, pprof.StopCPUProfile))
	mux.Handle("GET /debug/pprof/trace", timed(runtrace.Start, runtrace.Stop))
	mux.HandleFunc("GET /debug/pprof/{name}", func(w http.ResponseWriter, r *http.Request) {
		p := pprof.Lookup(r.PathValue("name"))
		if p == nil {
			http.Error(w, fmt.Sprintf("no profile %q; see /debug/pprof/", r.PathValue("name")), http.StatusNotFound)
			return
		}
		debug, _ := strconv.Atoi(r.URL.Query().Get("debug"))
		if debug > 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		_ = p.WriteTo(w, debug)
	})
	mux.HandleFunc("GET /debug/pprof/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "profile?seconds=N\ttrace?seconds=N")
		for _, p := range pprof.Profiles() {
			fmt.Fprintf(w, "%s\t%d\n", p.Name(), p.Count())
		}
	})
	return mux
}

// overrideEnv returns lookupEnv with name set to value: the -state-dsn flag
// wins over the variable the app file names, for app.Assemble, which reads
// the DSN through the environment.
func overrideEnv(lookupEnv func(string) (string, bool), name, value string) func(string) (string, bool) {
	return func(n string) (string, bool) {
		if n == name {
			return value, true
		}
		return lookupEnv(n)
	}
}

// serve assembles the runtime from the description and serves it until ctx
// ends; the service then drains the requests in flight.
func serve(ctx context.Context, desc app.Description, opts Options, listen string, limits service.Limits, jcfg jobs.Config, lookupEnv func(string) (string, bool), logger *slog.Logger, stderr io.Writer) error {
	tracer, shutdown, err := otelTracer(ctx, desc, lookupEnv, stderr)
	if err != nil {
		return err
	}
	defer func() {
		// The drain is over: flush the spans still batched, within bounds.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			logger.Error("flushing traces", "error", err)
		}
	}()
	// The service measures its own added latency by subtracting the time
	// spent waiting on providers, tools and searches: Assemble wraps every
	// one of them with the service's instruments.
	ao := app.Options{
		Files:           opts.Files,
		Implementations: opts.Implementations,
		GuardrailFuncs:  opts.GuardrailFuncs,
		Logger:          logger,
		LookupEnv:       lookupEnv,
		OpenState:       opts.OpenState,
		OpenMemory:      opts.OpenMemory,
		Tracer:          tracer,
		WrapProvider:    service.InstrumentProvider,
		WrapSearcher:    service.InstrumentSearcher,
		WrapTool:        service.InstrumentTool,
	}
	// The key store shares the state's database and scope: OpenState
	// says which.
	var stateEnv kind.Env
	var stateDSN string
	if open := opts.OpenState; open != nil && opts.OpenKeys != nil {
		ao.OpenState = func(ctx context.Context, env kind.Env, dsn string) (agents.Store, gateway.Ledger, error) {
			stateEnv, stateDSN = env, dsn
			return open(ctx, env, dsn)
		}
	}
	a, err := app.Assemble(ctx, desc, ao)
	if err != nil {
		return err // Assemble's error names the application
	}
	// The pools and sessions the kinds opened close once the drain is
	// over.
	defer func() {
		if err := a.Close(); err != nil {
			logger.Error("closing the application", "error", err)
		}
	}()
	if err := ingestInMemory(ctx, desc, a, logger); err != nil {
		return err
	}
	searchers := map[string]agents.Searcher{}
	for name, r := range a.Retrievers {
		searchers[name] = service.InstrumentSearcher(r)
	}
	auth, disabled, err := Auth(desc.Service.Auth, lookupEnv)
	if err != nil {
		return err
	}
	for _, d := range disabled {
		logger.Warn(d)
	}
	if stateDSN != "" && auth.Kind == service.AuthBearer {
		if auth.KeyStore, err = opts.OpenKeys(ctx, stateEnv, stateDSN); err != nil {
			return fmt.Errorf("opening the keys created at run time: %w", err)
		}
	}
	reg := prometheus.NewRegistry()
	var queue jobs.Queue
	if a.Agents != nil {
		if queue, err = openJobs(ctx, desc, opts, a.Agents, jcfg, reg); err != nil {
			return err
		}
		if err := queue.Start(ctx); err != nil {
			return err
		}
		logger.Info("background runs", queue.Describe()...)
		defer func() {
			// After the HTTP drain: the runs the workers drive get as long
			// again, then are interrupted and left for another replica.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), service.DefaultDrainTimeout)
			defer cancel()
			if err := queue.Stop(sctx); err != nil {
				logger.Warn("background runs interrupted at shutdown", "error", err)
			}
		}()
	}
	var ready []service.ReadyCheck
	for _, c := range a.ReadyChecks() {
		ready = append(ready, service.ReadyCheck{Name: c.Name, Check: c.Check})
	}
	var aliases []service.Alias
	for _, x := range desc.Service.Expose.Aliases {
		aliases = append(aliases, service.Alias{Name: x.Alias, Fallbacks: x.Fallbacks})
	}
	svc, err := service.New(service.Config{
		Agents:      a.Agents,
		Aliases:     aliases,
		AliasBudget: desc.Service.Expose.Budget,
		Auth:        auth,
		Entry:       desc.Service.Entry,

		AllowedHosts:   desc.Service.AllowedHosts,
		AllowedOrigins: desc.Service.AllowedOrigins,
		Gateway:        a.Gateway,
		Listen:         listen,
		Logger:         logger,
		Retrievers:     searchers,
		Registry:       reg,
		Jobs:           queue,
		ReadyChecks:    ready,
		Limits:         limits,
	})
	if err != nil {
		return err
	}
	if listen == "" {
		// The service owns the rule that an address is required.
		return svc.ListenAndServe(ctx)
	}
	// Listen here rather than in ListenAndServe, so that "serving" is
	// logged once the port is open, with the address bound (the port the
	// system chose for -listen 127.0.0.1:0).
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	attrs := []any{"app", desc.Name, "version", desc.Version, "listen", listen, "addr", ln.Addr().String(),
		"max_mcp_sessions", cmp.Or(limits.MaxMCPSessions, service.DefaultMaxMCPSessions)}
	if k := desc.Service.State.Kind; k == "" || k == app.StateMemory {
		keep := desc.Service.State.Retention.WithDefaults()
		attrs = append(attrs, slog.Group("retention", "finished", keep.Finished.String(), "max_finished", keep.MaxFinished, "paused", keep.Paused.String()))
	}
	logger.Info("serving", attrs...)
	return svc.Serve(ctx, ln)
}

// openJobs opens the queue of background runs: River on the state's
// database when the state is in PostgreSQL and the service links it
// (Options.Jobs), in this process otherwise.
func openJobs(ctx context.Context, desc app.Description, opts Options, rt *agents.Runtime, cfg jobs.Config, reg prometheus.Registerer) (jobs.Queue, error) {
	if desc.Service.State.Kind == app.StatePostgres && opts.Jobs != nil {
		q, err := opts.Jobs(ctx, rt, cfg, reg)
		if err != nil {
			return nil, fmt.Errorf("opening the queue of background runs: %w", err)
		}
		return q, nil
	}
	if desc.Service.State.Kind == app.StatePostgres {
		cfg.Logger.Warn("background runs are driven in this process: the service was built without a job queue (serve.Options.Jobs), so a replica's death leaves its runs for a recovery (aidgen run --recover, agents.Runtime.Drive)")
	}
	q, err := jobs.NewLocal(rt, cfg)
	if err != nil {
		return nil, fmt.Errorf("background runs: %w", err)
	}
	if err := q.Register(reg); err != nil {
		return nil, fmt.Errorf("background runs: metrics: %w", err)
	}
	return q, nil
}

// EnvMaxMCPSessions bounds the MCP sessions open at once on /mcp
// (service.Limits.MaxMCPSessions); the -max-mcp-sessions flag wins.
const EnvMaxMCPSessions = "AID_MAX_MCP_SESSIONS"

// jobFlagValues are the flags of the background runs' queue.
type jobFlagValues struct {
	workers, maxQueued *int
	concurrency        *string
	runTimeout, rescue *time.Duration
	deadAfter          *time.Duration
	replica            *string
	envErr             error
}

// jobFlags declares the queue's flags, each defaulting to its environment
// variable.
func jobFlags(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) *jobFlagValues {
	v := &jobFlagValues{
		workers:     fs.Int("workers", 0, "background runs this replica drives at once; 0 means "+fmt.Sprint(jobs.DefaultWorkers)+", -1 none (env "+EnvWorkers+")"),
		maxQueued:   fs.Int("max-queued", 0, "background runs waiting for a worker before a submission is answered 429; 0 means "+fmt.Sprint(jobs.DefaultMaxQueued)+" (env "+EnvMaxQueued+")"),
		concurrency: fs.String("agent-concurrency", envOr(lookupEnv, EnvAgentConcurrency, ""), "per-agent bounds of the background runs this replica drives at once, such as `billing=2,researcher=4` (env "+EnvAgentConcurrency+")"),
		runTimeout:  fs.Duration("job-run-timeout", 0, "bound of one drive of a background run; 0 means "+jobs.DefaultRunTimeout.String()+" (env "+EnvJobRunTimeout+")"),
		rescue:      fs.Duration("job-rescue-after", 0, "with PostgreSQL state, how long after a background run's job started it is presumed stuck and given to another replica, even when its replica is alive; 0 means the run timeout plus 15s (env "+EnvJobRescueAfter+")"),
		deadAfter:   fs.Duration("replica-dead-after", 0, "with PostgreSQL state, how long a replica may write no heartbeat before it is presumed dead and its background runs go on elsewhere; 0 means "+jobs.DefaultDeadAfter.String()+" (env "+EnvReplicaDeadAfter+")"),
		replica:     fs.String("replica", envOr(lookupEnv, EnvReplica, ""), "this replica's name in the runs it drives (driven_by) and the logs; empty means host-pid (env "+EnvReplica+")"),
	}
	v.envErr = errors.Join(
		envInt(lookupEnv, EnvWorkers, v.workers), envInt(lookupEnv, EnvMaxQueued, v.maxQueued),
		envDuration(lookupEnv, EnvJobRunTimeout, v.runTimeout), envDuration(lookupEnv, EnvJobRescueAfter, v.rescue),
		envDuration(lookupEnv, EnvReplicaDeadAfter, v.deadAfter))
	return v
}

// config reads the parsed flags into a checked jobs.Config.
func (v *jobFlagValues) config() (jobs.Config, error) {
	if v.envErr != nil {
		return jobs.Config{}, v.envErr
	}
	cfg := jobs.Config{Workers: *v.workers, MaxQueued: *v.maxQueued, RunTimeout: *v.runTimeout, RescueAfter: *v.rescue,
		DeadAfter: *v.deadAfter, Replica: *v.replica}
	if *v.concurrency != "" {
		m, err := jobs.ParseAgentConcurrency(*v.concurrency)
		if err != nil {
			return cfg, fmt.Errorf("-agent-concurrency: %w", err)
		}
		cfg.AgentConcurrency = m
	}
	if _, err := cfg.WithDefaults(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// envInt sets *dst from the environment variable name, when set; the
// flag, parsed later, wins.
func envInt(lookupEnv func(string) (string, bool), name string, dst *int) error {
	s, ok := lookupEnv(name)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%s=%q: want an integer", name, s)
	}
	*dst = n
	return nil
}

// envDuration sets *dst from the environment variable name, when set, as
// a Go duration ("90s").
func envDuration(lookupEnv func(string) (string, bool), name string, dst *time.Duration) error {
	s, ok := lookupEnv(name)
	if !ok {
		return nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%s=%q: want a Go duration such as 90s", name, s)
	}
	*dst = d
	return nil
}

// ingestInMemory fills the retrievers whose store is in memory: such a
// store starts empty in every process. A PostgreSQL store is filled by
// aidgen index, not at every start.
func ingestInMemory(ctx context.Context, desc app.Description, a *app.App, logger *slog.Logger) error {
	inMemory := map[string]bool{}
	for _, s := range desc.Stores {
		inMemory[s.Name] = s.InMemory()
	}
	for _, r := range desc.Retrievers {
		if !inMemory[r.Store] {
			continue
		}
		ret, ok := a.Retrievers[r.Name]
		if !ok {
			return fmt.Errorf("ingesting retriever %s: not assembled", r.Name)
		}
		stats, err := ret.Ingest(ctx)
		if err != nil {
			return fmt.Errorf("ingesting retriever %s: %w", r.Name, err)
		}
		logger.Info("ingested", "retriever", r.Name, "stats", fmt.Sprintf("%+v", stats))
	}
	return nil
}

// Auth reads the bearer tokens the app file's auth names from the
// environment: a comma-separated list, blanks around each token ignored,
// so that a token can be rotated without downtime (serve the old and the
// new, then drop the old). Auth kind none needs nothing.
//
// It reads the declared keys' secrets too. A key whose secretEnv is unset
// or empty is disabled, and named in disabled for a warning, rather than
// stopping the service: the README's first command runs support-desk,
// whose keys are declared, with none of them set. Any key enabled turns
// authentication on, whatever auth's kind; with kind none and none
// enabled, the service stays open on loopback.
func Auth(auth app.Auth, lookupEnv func(string) (string, bool)) (out service.Auth, disabled []string, err error) {
	out = service.Auth{Kind: service.AuthKind(auth.Kind)}
	for _, k := range auth.Keys {
		sk := service.Key{Name: k.Name, Tenant: k.Tenant, SecretSHA256: k.SecretSHA256}
		for _, r := range k.Roles {
			sk.Roles = append(sk.Roles, service.Role(r))
		}
		if k.SecretEnv != "" {
			sk.Secret, _ = lookupEnv(k.SecretEnv)
			if sk.Secret = strings.TrimSpace(sk.Secret); sk.Secret == "" {
				disabled = append(disabled, fmt.Sprintf("key %q is disabled: %s is not set", k.Name, k.SecretEnv))
				continue
			}
		}
		out.Keys = append(out.Keys, sk)
	}
	if len(out.Keys) > 0 {
		out.Kind = service.AuthBearer
	}
	if auth.Kind != string(service.AuthBearer) {
		return out, disabled, nil
	}
	v, _ := lookupEnv(auth.TokenEnv)
	for _, t := range strings.Split(v, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out.Tokens = append(out.Tokens, t)
		}
	}
	if len(out.Tokens) == 0 {
		return out, disabled, fmt.Errorf("bearer auth: set %s to the accepted token (or a comma-separated list)", auth.TokenEnv)
	}
	return out, disabled, nil
}

// otelTracer follows the standard OpenTelemetry environment
// (runtime/telemetry): a nil tracer when it asks for none
// (OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, or no exporter or
// endpoint set), otherwise one that exports over OTLP/HTTP or to the
// console (stderr), with the shutdown that flushes it.
func otelTracer(ctx context.Context, desc app.Description, lookupEnv func(string) (string, bool), stderr io.Writer) (trace.Tracer, func(context.Context) error, error) {
	tp, shutdown, err := telemetry.TracerProvider(ctx, lookupEnv, desc.Name, desc.Version, telemetry.WithConsoleWriter(stderr))
	if err != nil {
		return nil, nil, fmt.Errorf("configuring tracing: %w", err)
	}
	if _, off := tp.(noop.TracerProvider); off {
		return nil, shutdown, nil
	}
	return tp.Tracer("github.com/aidgen/aid/runtime/serve"), shutdown, nil
}

// retentionFromEnv overrides keep with the retention variables that are
// set.
func retentionFromEnv(keep *agents.Retention, lookupEnv func(string) (string, bool)) error {
	for _, d := range []struct {
		env string
		to  *time.Duration
	}{{EnvRetainFinished, &keep.Finished}, {EnvRetainPaused, &keep.Paused}} {
		if v, ok := lookupEnv(d.env); ok {
			dur, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%s: %q is not a duration such as 30m or 168h", d.env, v)
			}
			*d.to = dur
		}
	}
	if v, ok := lookupEnv(EnvMaxFinished); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", EnvMaxFinished, v)
		}
		keep.MaxFinished = n
	}
	return nil
}

// envOr returns the environment variable name, or def when it is unset.
func envOr(lookupEnv func(string) (string, bool), name, def string) string {
	if v, ok := lookupEnv(name); ok {
		return v
	}
	return def
}
