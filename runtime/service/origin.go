package service

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// hostGuard holds what the service checks Host and Origin against.
type hostGuard struct {
	hosts   []string // lower-cased Config.AllowedHosts
	origins []string // lower-cased Config.AllowedOrigins
}

func newHostGuard(cfg *Config) hostGuard {
	var g hostGuard
	for _, h := range cfg.AllowedHosts {
		g.hosts = append(g.hosts, strings.ToLower(h))
	}
	for _, o := range cfg.AllowedOrigins {
		g.origins = append(g.origins, strings.ToLower(strings.TrimSuffix(o, "/")))
	}
	return g
}

// loopbackHost reports whether a host name (no port) is loopback:
// localhost, or an IP literal in 127.0.0.0/8 or ::1.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// splitHost splits a Host header or an origin's host into its name and
// port ("" when none).
func splitHost(hostport string) (string, string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return hostport, ""
}

// hostAllowed reports whether a request's Host may reach a service on
// loopback (or one that declares its hosts): a loopback name, or one of
// the allowed hosts, with its port when the entry names one.
func (g *hostGuard) hostAllowed(hostport string, loopback bool) bool {
	hostport = strings.ToLower(hostport)
	name, _ := splitHost(hostport)
	if loopback && loopbackHost(name) {
		return true
	}
	for _, h := range g.hosts {
		if h == hostport || h == name {
			return true
		}
	}
	return false
}

// originAllowed reports whether a browser page of origin may call /mcp:
// an allowed origin, or, on a service listening on loopback, a page
// served from loopback.
func (g *hostGuard) originAllowed(origin string, loopback bool) bool {
	origin = strings.ToLower(strings.TrimSuffix(origin, "/"))
	for _, o := range g.origins {
		if o == origin {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false // "null" and the like
	}
	name, _ := splitHost(u.Host)
	return loopback && loopbackHost(name)
}

// onLoopback reports whether r came in on a loopback address: the
// connection's local address, which net/http gives every request it
// serves, or else Config.Listen.
func (s *Service) onLoopback(r *http.Request) bool {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		return la.IP.IsLoopback()
	}
	return s.loopback.Load()
}

// checkHost refuses, with 403, a request whose Host the service does not
// answer to (see Config.AllowedHosts), before any route sees it.
func (s *Service) checkHost(w http.ResponseWriter, r *http.Request) bool {
	loopback := s.onLoopback(r)
	if !loopback && len(s.guard.hosts) == 0 {
		return true
	}
	if s.guard.hostAllowed(r.Host, loopback) {
		return true
	}
	writeError(w, newError(http.StatusForbidden, TypePermission, CodeHostNotAllowed,
		fmt.Sprintf("host %.100q is not a name this service answers to: it listens on loopback, and answers loopback names and its allowed hosts only (a page whose name was rebound to this address cannot reach it)", r.Host)), nil)
	return false
}

// checkOrigin refuses, with 403, an MCP request from a browser page of an
// origin the service does not allow (Config.AllowedOrigins), as the MCP
// streamable HTTP transport requires; a request without Origin, which a
// browser always sends on such a request, is not a page's.
func (s *Service) checkOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || s.guard.originAllowed(origin, s.onLoopback(r)) {
			next.ServeHTTP(w, r)
			return
		}
		info(r).err = writeError(w, newError(http.StatusForbidden, TypePermission, CodeOriginNotAllowed,
			fmt.Sprintf("origin %.100q may not call %s: only the service's allowed origins may (and, on loopback, pages served from loopback)", origin, MCPPath)), nil)
	})
}
