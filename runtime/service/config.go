package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/prometheus/client_golang/prometheus"
)

// AuthKind says how callers authenticate.
type AuthKind string

// The authentication kinds.
const (
	// AuthNone accepts every caller; the service then listens on loopback
	// only.
	AuthNone AuthKind = "none"
	// AuthBearer requires Authorization: Bearer <token> with one of
	// Auth.Tokens.
	AuthBearer AuthKind = "bearer"
)

// Auth configures authentication. It carries token values, not the names of
// environment variables: reading the environment is the caller's job, so that
// the service never learns where secrets live.
type Auth struct {
	// Kind is none or bearer; it must be set, so that an open service is
	// always a decision.
	Kind AuthKind
	// Tokens are the accepted bearer tokens, each an admin key named
	// "admin" (see Key): the shorthand of a service with one key. They are
	// kept hashed and never logged.
	Tokens []string
	// Keys are the declared API keys, with their roles and tenants.
	Keys []Key
	// KeyStore, when set, holds the keys created at run time; a secret no
	// declared key has is looked up there.
	KeyStore KeyStore
	// KeyCacheTTL is how long a replica keeps what KeyStore said of a
	// secret, the bound within which a revocation reaches it; zero means
	// DefaultKeyCacheTTL.
	KeyCacheTTL time.Duration
}

// Limits bounds requests. A zero field takes its default.
type Limits struct {
	// MaxBodyBytes bounds a request body; default 1 MiB.
	MaxBodyBytes int64
	// ReadHeaderTimeout bounds reading a request's headers; default 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request; default 30s.
	ReadTimeout time.Duration
	// RequestTimeout bounds one request's work (a run, a search); default
	// 2 minutes. Streams extend their write deadline event by event within
	// it.
	RequestTimeout time.Duration
	// WriteTimeout bounds writing a response that is not a stream; default
	// RequestTimeout plus 10s.
	WriteTimeout time.Duration
	// StreamKeepAlive is how long a Responses API stream may stay silent
	// (a long tool call) before the service sends a keep-alive comment,
	// so that proxies and clients do not take it for dead; default
	// DefaultStreamKeepAlive.
	StreamKeepAlive time.Duration
	// IdleTimeout bounds a keep-alive connection's wait for the next
	// request; default 120s.
	IdleTimeout time.Duration
	// DrainTimeout bounds the wait for requests in flight at shutdown;
	// default 30s. Runs still going then are cancelled.
	DrainTimeout time.Duration
	// MaxMCPSessions bounds the MCP sessions open at once on /mcp;
	// default DefaultMaxMCPSessions. A new session beyond it closes the
	// one idle longest (with no request in flight); when every session
	// has one, the new one is refused 503.
	MaxMCPSessions int
}

// The defaults of Limits.
const (
	DefaultMaxBodyBytes      = 1 << 20
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultRequestTimeout    = 2 * time.Minute
	DefaultIdleTimeout       = 120 * time.Second
	DefaultDrainTimeout      = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = DefaultReadTimeout
	}
	if l.RequestTimeout <= 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = l.RequestTimeout + 10*time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.DrainTimeout <= 0 {
		l.DrainTimeout = DefaultDrainTimeout
	}
	if l.MaxMCPSessions <= 0 {
		l.MaxMCPSessions = DefaultMaxMCPSessions
	}
	if l.StreamKeepAlive <= 0 {
		l.StreamKeepAlive = DefaultStreamKeepAlive
	}
	return l
}

// ReadyCheck reports whether a dependency (a database, a vector store) can
// serve; /readyz calls every check and fails when one does.
type ReadyCheck struct {
	// Name names the dependency in /readyz's answer.
	Name string
	// Check returns nil when the dependency is ready; it must return when
	// ctx ends.
	Check func(ctx context.Context) error
}

// Config is everything a Service is built from: runtime objects, not the IR.
type Config struct {
	// Gateway is the door to the models; required. /metrics reports its
	// ledger's spend by budget.
	Gateway *gateway.Gateway
	// Agents runs the agents; required.
	Agents *agents.Runtime
	// Retrievers are the searchers /v1/retrievers/{name}/search serves, by
	// name; a *retrieval.Retriever is one.
	Retrievers map[string]agents.Searcher
	// SearchBudget, when set, names the budget a search request's
	// embedding is charged to, keyed by the request's id for a run-scoped
	// budget.
	SearchBudget string
	// Entry is the agent a chat completion with an empty model runs; empty
	// means such a request is refused.
	Entry string
	// Aliases are the gateway aliases served directly at
	// /v1/chat/completions, as an LLM gateway: a request whose model is
	// one goes straight through the gateway (pinned model, fallbacks,
	// budget, pricing, ledger, tracing), with no run and no agent. Each
	// must be a chat alias of Gateway, listed once, and not the name of an
	// agent.
	Aliases []Alias
	// AliasBudget names the budget of Gateway that every direct call
	// charges: a run-scoped budget per request, a thread-scoped one per
	// X-Aid-Thread-Id (a request without one is its own thread), a global
	// one across requests. Empty means direct calls are capped by no
	// budget (they are still priced and recorded).
	AliasBudget string
	// Auth says how callers authenticate; required.
	Auth Auth
	// Listen is the address ListenAndServe listens on, such as
	// "127.0.0.1:8080".
	Listen string
	// AllowedHosts are the names, besides loopback ones (localhost,
	// 127.0.0.0/8, ::1), that a request's Host may give when the service
	// listens on loopback: any other is refused with 403 on every route,
	// so that a page whose name was rebound to 127.0.0.1 (DNS rebinding)
	// cannot reach it from a browser. A service listening elsewhere checks
	// Host only when the list is given. A name may carry a port
	// ("app.internal:8080"); without one, any port matches.
	AllowedHosts []string
	// AllowedOrigins are the origins ("https://app.example.com") whose
	// browser pages may call /mcp, as the MCP streamable HTTP transport
	// requires a server to check Origin. A request with another Origin is
	// refused with 403; a request without one (not a browser's) passes.
	// Without the list, a service on loopback accepts loopback origins
	// only, and any other service refuses every Origin.
	AllowedOrigins []string
	// Limits bounds requests.
	Limits Limits
	// Logger receives one line per request and the service's failures;
	// nil means no logging. Credentials and request bodies are never
	// logged.
	Logger *slog.Logger
	// Registry receives the service's metrics; nil means a new private
	// registry, served at /metrics either way.
	Registry *prometheus.Registry
	// ReadyChecks are called by /readyz, besides the run store.
	ReadyChecks []ReadyCheck
	// Jobs takes the requests that ask for background: a new run, a
	// resume or a continuation is queued and answered 202 at once, and a
	// worker drives it (jobs.Local in this process, pgqueue on
	// PostgreSQL for any replica). The caller starts and stops it; nil
	// refuses background requests.
	Jobs jobs.Queue
}

// Alias is an alias a service serves directly.
type Alias struct {
	// Name is the gateway alias, which requests name as their model.
	Name string
	// Fallbacks are the aliases tried in order when a call on Name fails
	// with an error that may fall back (gateway.WithFallbacks).
	Fallbacks []string
}

// InsecureListenError reports a service without authentication asked to
// listen on an address other than loopback: anyone who can reach it could
// spend its budgets.
type InsecureListenError struct {
	// Addr is the refused address.
	Addr string
}

// Error implements error.
func (e *InsecureListenError) Error() string {
	return fmt.Sprintf("auth kind none refuses to listen on %q: only a loopback address is allowed without authentication", e.Addr)
}

// ConfigError reports a Config that cannot make a service.
type ConfigError struct {
	// Field is the offending field.
	Field string
	// Problem says what is wrong with it.
	Problem string
}

// Error implements error.
func (e *ConfigError) Error() string {
	return fmt.Sprintf("service config: %s: %s", e.Field, e.Problem)
}

// check validates cfg and returns the keys it accepts.
func (cfg *Config) check() (*keyring, error) {
	var errs []error
	if cfg.Gateway == nil {
		errs = append(errs, &ConfigError{Field: "Gateway", Problem: "required"})
	}
	if cfg.Agents == nil {
		errs = append(errs, &ConfigError{Field: "Agents", Problem: "required"})
	} else if cfg.Entry != "" {
		found := false
		for _, a := range cfg.Agents.Agents() {
			found = found || a == cfg.Entry
		}
		if !found {
			errs = append(errs, &ConfigError{Field: "Entry", Problem: fmt.Sprintf("agent %q is not in the runtime %v", cfg.Entry, cfg.Agents.Agents())})
		}
	}
	errs = append(errs, cfg.checkAliases()...)
	for name, s := range cfg.Retrievers {
		if s == nil {
			errs = append(errs, &ConfigError{Field: "Retrievers", Problem: fmt.Sprintf("retriever %q is nil", name)})
		}
	}
	for i, c := range cfg.ReadyChecks {
		if c.Name == "" || c.Check == nil {
			errs = append(errs, &ConfigError{Field: "ReadyChecks", Problem: fmt.Sprintf("check %d needs a name and a function", i)})
		}
	}
	keys, keyErrs := newKeyring(cfg.Auth)
	switch cfg.Auth.Kind {
	case AuthNone:
		if len(cfg.Auth.Tokens) > 0 {
			errs = append(errs, &ConfigError{Field: "Auth.Tokens", Problem: "tokens given with auth kind none"})
		}
		if len(cfg.Auth.Keys) > 0 || cfg.Auth.KeyStore != nil {
			errs = append(errs, &ConfigError{Field: "Auth.Keys", Problem: "keys given with auth kind none"})
		}
		if cfg.Listen != "" && !loopbackAddr(cfg.Listen) {
			errs = append(errs, &InsecureListenError{Addr: cfg.Listen})
		}
	case AuthBearer:
		if len(cfg.Auth.Tokens) == 0 && len(cfg.Auth.Keys) == 0 && cfg.Auth.KeyStore == nil {
			errs = append(errs, &ConfigError{Field: "Auth.Tokens", Problem: "auth kind bearer needs at least one token or key"})
		}
		errs = append(errs, keyErrs...)
	case "":
		errs = append(errs, &ConfigError{Field: "Auth.Kind", Problem: `required: "none" or "bearer"`})
	default:
		errs = append(errs, &ConfigError{Field: "Auth.Kind", Problem: fmt.Sprintf(`unknown kind %q: want "none" or "bearer"`, cfg.Auth.Kind)})
	}
	return keys, errors.Join(errs...)
}

// checkAliases checks the aliases served directly: each a chat alias of
// the gateway, listed once, that no agent's name shadows, with fallbacks
// that are chat aliases other than itself; and the budget they charge.
func (cfg *Config) checkAliases() []error {
	if cfg.Gateway == nil || (len(cfg.Aliases) == 0 && cfg.AliasBudget == "") {
		return nil
	}
	var errs []error
	fail := func(format string, args ...any) {
		errs = append(errs, &ConfigError{Field: "Aliases", Problem: fmt.Sprintf(format, args...)})
	}
	chat := func(alias string) error {
		pm, err := cfg.Gateway.Resolve(alias)
		if err != nil {
			return err
		}
		if k := pm.Spec.Kind; k != "" && k != gateway.KindChat {
			return fmt.Errorf("alias %q names %s model %q, not a chat model", alias, k, pm.Spec.ID)
		}
		return nil
	}
	var agentNames []string
	if cfg.Agents != nil {
		agentNames = cfg.Agents.Agents()
	}
	for i, a := range cfg.Aliases {
		switch {
		case slices.ContainsFunc(cfg.Aliases[:i], func(b Alias) bool { return b.Name == a.Name }):
			fail("alias %q is listed twice", a.Name)
			continue
		case slices.Contains(agentNames, a.Name):
			fail("alias %q has the name of an agent, so a request's model could not say which it means", a.Name)
			continue
		}
		if err := chat(a.Name); err != nil {
			fail("%v", err)
		}
		for j, f := range a.Fallbacks {
			switch {
			case f == a.Name || slices.Index(a.Fallbacks, f) < j:
				fail("alias %q: fallback %q is the alias itself or listed twice", a.Name, f)
			default:
				if err := chat(f); err != nil {
					fail("alias %q: fallback: %v", a.Name, err)
				}
			}
		}
	}
	if cfg.AliasBudget != "" {
		if _, ok := cfg.Gateway.Budget(cfg.AliasBudget); !ok {
			errs = append(errs, &ConfigError{Field: "AliasBudget", Problem: fmt.Sprintf("budget %q is not in the gateway", cfg.AliasBudget)})
		}
	}
	return errs
}

// loopbackAddr reports whether a listen address is certainly loopback: an IP
// literal in 127.0.0.0/8 or ::1, or localhost. An empty host means every
// interface.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
