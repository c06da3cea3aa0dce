package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/prometheus/client_golang/prometheus"
)

// Service is the HTTP service. It is an http.Handler, so that tests and
// teams can mount it anywhere; ListenAndServe runs it with timeouts and
// graceful shutdown.
type Service struct {
	cfg    Config
	limits Limits
	keys   *keyring
	guard  hostGuard
	// loopback is set when Config.Listen is loopback, for a request that
	// does not say which address it came in on (onLoopback).
	loopback atomic.Bool
	logger   *slog.Logger
	mux      *http.ServeMux
	metrics  *metrics
	// direct are the exposed aliases by name, and aliasScope the scope of
	// the budget their calls charge.
	direct     map[string]*directAlias
	aliasScope gateway.Scope
	// base is the parent of every request's context; cancelled with the
	// cause agents.ErrInterrupted when the drain timeout expires, so that
	// runs still going stop and stay recoverable rather than fail.
	base     context.Context
	cancel   context.CancelCauseFunc
	draining atomic.Bool
	inflight sync.WaitGroup
}

// New checks cfg and builds a Service. A service whose Auth.Kind is none
// and whose Listen is not loopback is refused with an *InsecureListenError.
func New(cfg Config) (*Service, error) {
	keys, err := cfg.check()
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, limits: cfg.Limits.withDefaults(), keys: keys, guard: newHostGuard(&cfg), logger: cfg.Logger}
	s.loopback.Store(cfg.Listen != "" && loopbackAddr(cfg.Listen))
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if s.metrics, err = newMetrics(reg, cfg.Gateway); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	s.direct = newDirect(&cfg)
	if b, ok := cfg.Gateway.Budget(cfg.AliasBudget); ok {
		s.aliasScope = b.Scope
	}
	s.base, s.cancel = context.WithCancelCause(context.Background())
	s.mux = http.NewServeMux()
	for _, rt := range apiRoutes {
		s.route(rt.pattern, rt.roles, rt.handler(s))
	}
	s.mux.Handle(MCPPath, s.observe(0, s.checkOrigin(s.authenticate(rolesOf(RoleCaller), s.mcpIdentity(s.newMCP())))))
	s.mux.Handle("GET /metrics", s.observe(0, s.authenticate(rolesOf(RoleOperator), metricsHandler(reg))))
	s.mux.Handle("GET /healthz", s.observe(0, http.HandlerFunc(s.healthz)))
	s.mux.Handle("GET /readyz", s.observe(0, http.HandlerFunc(s.readyz)))
	s.mux.Handle("/", s.observe(0, http.HandlerFunc(s.notFound)))
	return s, nil
}

// apiRoute is an API route, the roles that may use it, and its handler.
type apiRoute struct {
	pattern string
	roles   roleSet
	handler func(*Service) func(w http.ResponseWriter, r *http.Request) error
}

// apiRoutes are the API's routes. A caller runs agents and reads (and
// cancels) the runs it started; an approver reads its tenant's runs and
// decides them; an operator reads, cancels and continues its tenant's
// runs. Which runs a key sees is the handlers' (visible).
var apiRoutes = []apiRoute{
	{"POST /v1/chat/completions", rolesOf(RoleCaller), func(s *Service) handlerFunc { return s.chatCompletions }},
	{"POST /v1/responses", rolesOf(RoleCaller), func(s *Service) handlerFunc { return s.createResponse }},
	{"GET /v1/responses/{id}", rolesOf(RoleCaller, RoleApprover, RoleOperator), func(s *Service) handlerFunc { return s.getResponse }},
	{"DELETE /v1/responses/{id}", rolesOf(RoleCaller, RoleOperator), func(s *Service) handlerFunc { return s.deleteResponse }},
	{"POST /v1/responses/{id}/cancel", rolesOf(RoleCaller, RoleOperator), func(s *Service) handlerFunc { return s.cancelResponse }},
	{"GET /v1/models", rolesOf(RoleCaller, RoleApprover, RoleOperator), func(s *Service) handlerFunc { return s.listModels }},
	{"GET /v1/models/{model}", rolesOf(RoleCaller, RoleApprover, RoleOperator), func(s *Service) handlerFunc { return s.getModel }},
	{"POST /v1/agents/{agent}/runs", rolesOf(RoleCaller), func(s *Service) handlerFunc { return s.startRun }},
	{"POST /v1/runs", rolesOf(RoleCaller), func(s *Service) handlerFunc { return s.startRun }},
	{"GET /v1/runs", rolesOf(RoleCaller, RoleApprover, RoleOperator), func(s *Service) handlerFunc { return s.listRuns }},
	{"POST /v1/runs/{id}/resume", rolesOf(RoleApprover), func(s *Service) handlerFunc { return s.resumeRun }},
	{"POST /v1/runs/{id}/continue", rolesOf(RoleOperator), func(s *Service) handlerFunc { return s.continueRun }},
	{"POST /v1/runs/{id}/cancel", rolesOf(RoleCaller, RoleOperator), func(s *Service) handlerFunc { return s.cancelRun }},
	{"GET /v1/runs/{id}/events", rolesOf(RoleCaller, RoleApprover, RoleOperator), func(s *Service) handlerFunc { return s.runEvents }},
	{"GET /v1/runs/{id}", rolesOf(RoleCaller, RoleApprover, RoleOperator), func(s *Service) handlerFunc { return s.getRun }},
	{"POST /v1/retrievers/{name}/search", rolesOf(RoleCaller), func(s *Service) handlerFunc { return s.search }},
}

type handlerFunc = func(w http.ResponseWriter, r *http.Request) error

// route mounts an API handler behind authentication (a key with one of
// roles), the body limit and the request timeout.
func (s *Service) route(pattern string, roles roleSet, h handlerFunc) {
	s.mux.Handle(pattern, s.observe(s.limits.RequestTimeout, s.authenticate(roles, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.limits.MaxBodyBytes)
		if err := h(w, r); err != nil {
			info(r).err = writeError(w, err, nil)
		}
	}))))
}

// ServeHTTP implements http.Handler. A request whose Host the service
// does not answer to is refused before any route (checkHost).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.checkHost(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// reqInfo is what the handlers tell the access log and the metrics.
type reqInfo struct {
	id    string
	agent string // the agent asked for, or the run's entry agent
	final string // the agent the run ended on, after handoffs
	alias string // the exposed alias a chat completion named
	// key is the API key that authenticated the request, keyName its
	// name for the log (also of a key refused for its role).
	key     *principal
	keyName string
	runID   string
	err     *apiError
	clock   waitClock
}

type infoKey struct{}

func info(r *http.Request) *reqInfo {
	if i, ok := r.Context().Value(infoKey{}).(*reqInfo); ok {
		return i
	}
	return &reqInfo{}
}

// statusWriter records the status written. It forwards Flush and the
// deadline controls through Unwrap, for streams.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// observe logs and measures every request; the route label is the pattern
// that matched, never the raw path, so that ids do not explode the series.
// A timeout other than zero bounds the request's work (Limits.RequestTimeout
// of the API routes); the request's information and its deadline share one
// copy of the request.
func (s *Service) observe(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Done()
		start := time.Now()
		ri := &reqInfo{id: newRequestID()}
		ctx := context.WithValue(r.Context(), infoKey{}, ri)
		if timeout > 0 {
			var cancel context.CancelFunc
			// A run cut by the request timeout ends timed_out, with its
			// partial result, and can be continued; the cause says so to
			// the runtime.
			ctx, cancel = context.WithTimeoutCause(ctx, timeout, &agents.TimeoutError{Scope: agents.TimeoutDeadline, Timeout: timeout})
			defer cancel()
		}
		sw := &statusWriter{ResponseWriter: w}
		sw.Header().Set("X-Request-Id", ri.id)
		r = r.WithContext(ctx)
		next.ServeHTTP(sw, r)
		total := time.Since(start)
		route := r.Pattern
		if route == "" || route == "/" {
			route = "unmatched"
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		waited := ri.clock.total()
		s.metrics.request(route, ri.agent, ri.final, status, total, total-waited)
		if ri.key != nil {
			s.metrics.tenantRequest(ri.key, route, status)
		}
		if ri.alias != "" {
			s.metrics.aliasRequest(ri.alias, status)
		}
		attrs := []slog.Attr{
			slog.String("request_id", ri.id), slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.Duration("duration", total), slog.Duration("waited", waited),
		}
		if ri.agent != "" {
			attrs = append(attrs, slog.String("agent", ri.agent))
		}
		if ri.final != "" {
			attrs = append(attrs, slog.String("final_agent", ri.final))
		}
		if ri.alias != "" {
			attrs = append(attrs, slog.String("alias", ri.alias))
		}
		if ri.keyName != "" {
			attrs = append(attrs, slog.String("key", ri.keyName))
		}
		if ri.runID != "" {
			attrs = append(attrs, slog.String("run_id", ri.runID))
		}
		level := slog.LevelInfo
		if ri.err != nil {
			attrs = append(attrs, slog.String("code", ri.err.Code))
			if status >= 500 {
				// The log has what the answer leaves out: the error itself,
				// connection details and all, under the request id the
				// answer names.
				level = slog.LevelError
				detail := ri.err.Message
				if ri.err.cause != nil {
					detail = ri.err.cause.Error()
				}
				attrs = append(attrs, slog.String("error", detail))
			}
		}
		s.logger.LogAttrs(ctx, level, "request", attrs...)
	})
}

// authenticate refuses a request without an accepted key that has one of
// roles (checkBearer), and puts the key on the request's context.
func (s *Service) authenticate(roles roleSet, next http.Handler) http.Handler {
	if s.cfg.Auth.Kind != AuthBearer {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, ok := s.checkBearer(w, r, roles)
		if ok {
			next.ServeHTTP(w, r)
		}
	})
}

// notFound answers a request no route took: 405 with Allow when the path
// is a route's under another method, 404 otherwise. The catch-all pattern
// "/" takes every unmatched request, so the mux's own 405 never fires.
func (s *Service) notFound(w http.ResponseWriter, r *http.Request) {
	if allow := s.allowed(r); len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		info(r).err = writeError(w, newError(http.StatusMethodNotAllowed, TypeInvalidRequest, CodeMethodNotAllowed,
			fmt.Sprintf("%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))), nil)
		return
	}
	info(r).err = writeError(w, newError(http.StatusNotFound, TypeNotFound, CodeRouteNotFound,
		fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)), nil)
}

// routeMethods are the methods the service's routes use, and HEAD, which
// the mux serves wherever GET is.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete}

// allowed returns the methods for which a route other than the catch-all
// matches r's path.
func (s *Service) allowed(r *http.Request) []string {
	var out []string
	for _, m := range routeMethods {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			out = append(out, m)
		}
	}
	return out
}

func (s *Service) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz checks the run store, by loading a run id that cannot exist (a
// *RunNotFoundError is the healthy answer), and every ReadyCheck.
func (s *Service) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if s.draining.Load() {
		info(r).err = writeError(w, newError(http.StatusServiceUnavailable, TypeUnavailable, CodeShuttingDown, "the service is shutting down"), nil)
		return
	}
	// The answer says which check failed, not why: /readyz needs no token,
	// and a dependency's error can name hosts and users. The log has it.
	checks := map[string]string{}
	var failed []string
	fail := func(name string, err error) {
		checks[name] = "failing"
		failed = append(failed, name)
		s.logger.WarnContext(ctx, "readiness check failed", "check", name, "err", err)
	}
	_, err := s.cfg.Agents.Store().LoadRun(ctx, "readyz-probe")
	var nf *agents.RunNotFoundError
	if err == nil || errors.As(err, &nf) {
		checks["run_store"] = "ok"
	} else {
		fail("run_store", err)
	}
	for _, c := range s.cfg.ReadyChecks {
		if err := c.Check(ctx); err != nil {
			fail(c.Name, err)
		} else {
			checks[c.Name] = "ok"
		}
	}
	if len(failed) > 0 {
		ae := newError(http.StatusServiceUnavailable, TypeUnavailable, CodeNotReady, "not ready: "+strings.Join(failed, ", "))
		info(r).err = ae
		writeJSON(w, ae.Status, map[string]any{"error": ae, "checks": checks})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
}

// ListenAndServe listens on Config.Listen and serves until ctx ends, then
// shuts down gracefully (see Serve).
func (s *Service) ListenAndServe(ctx context.Context) error {
	if s.cfg.Listen == "" {
		return &ConfigError{Field: "Listen", Problem: "required to listen"}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends. Then it stops accepting connections,
// answers /readyz with 503, and waits up to Limits.DrainTimeout for the
// requests in flight; runs still going after that are interrupted and left
// recoverable (see the package documentation) and Serve returns once every
// handler has. A service without authentication refuses a
// listener that is not on loopback.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	if ta, ok := ln.Addr().(*net.TCPAddr); s.cfg.Auth.Kind == AuthNone && (!ok || !ta.IP.IsLoopback()) {
		_ = ln.Close()
		return &InsecureListenError{Addr: ln.Addr().String()}
	}

	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.limits.ReadHeaderTimeout,
		ReadTimeout:       s.limits.ReadTimeout,
		WriteTimeout:      s.limits.WriteTimeout,
		IdleTimeout:       s.limits.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return s.base },
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	return s.shutdown(srv, served)
}

// interruptGrace bounds the wait, after the drain timeout interrupted the
// runs in flight, for their handlers to answer before the connections are
// closed under them.
const interruptGrace = 5 * time.Second

// shutdown drains srv and returns once its handlers and Serve have.
func (s *Service) shutdown(srv *http.Server, served <-chan error) error {
	s.draining.Store(true)
	dctx, cancel := context.WithTimeout(context.Background(), s.limits.DrainTimeout)
	defer cancel()
	err := srv.Shutdown(dctx)
	handled := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(handled)
	}()
	if err != nil {
		s.logger.Warn("drain timeout expired: interrupting requests in flight", "drain_timeout", s.limits.DrainTimeout)
		// Before Close: a request whose connection closes first would see
		// a plain cancellation, the one of a client that went away.
		s.cancel(agents.ErrInterrupted)
		// The interrupted runs save their checkpoints and their handlers
		// answer 503 naming them. A handler returning is not its answer
		// on the wire (net/http finishes the response after ServeHTTP), so
		// a second Shutdown waits for the connections to go idle; Close
		// cuts what is left after interruptGrace.
		grace, cancelGrace := context.WithTimeout(context.Background(), interruptGrace)
		select {
		case <-handled:
			if srv.Shutdown(grace) != nil {
				_ = srv.Close()
			}
		case <-grace.Done():
			_ = srv.Close()
		}
		cancelGrace()
	}
	<-handled
	s.cancel(nil)
	<-served // http.ErrServerClosed
	if err != nil {
		return fmt.Errorf("shutdown: requests cancelled after the drain timeout: %w", err)
	}
	return nil
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "req_" + hex.EncodeToString(b[:])
}
