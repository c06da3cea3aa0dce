// Package oauthtest is an OAuth 2.1 authorization server and an MCP server
// it protects, in process, for the tests of the mcp tool kind's OAuth
// client and of `aidgen mcp login`: RFC 8414 metadata, an authorize
// endpoint that redirects with a code at once (the user always
// consents), a token endpoint for the authorization_code grant (PKCE S256
// checked), client_credentials and refresh_token (rotated), tokens that
// expire quickly, and a switch that revokes every token issued. It keeps
// every token it issued, so that a test can look for them where they must
// not be. It is for tests only.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// AS is the authorization server.
type AS struct {
	// URL is its issuer and the base of its endpoints.
	URL string
	// ClientID and ClientSecret are the one client it knows; a public
	// client (no secret sent) is accepted for the authorization code.
	ClientID, ClientSecret string

	mu       sync.Mutex
	lifetime time.Duration // what expires_in says
	valid    time.Duration // how long a token is accepted
	codes    map[string]grant
	access   map[string]time.Time // access token → end of validity
	refresh  map[string]bool
	issued   []string
	grants   map[string]int
	refused  map[string]int // grant type → refusals
	resource []string       // the resource parameters received
}

// grant is an issued code.
type grant struct {
	challenge, redirect string
}

// NewAS starts an authorization server, closed with the test, whose
// tokens live lifetime.
func NewAS(t testing.TB, lifetime time.Duration) *AS {
	t.Helper()
	as := &AS{
		ClientID: "aid-test", ClientSecret: "client-secret-0123456789",
		lifetime: lifetime, valid: lifetime,
		codes: map[string]grant{}, access: map[string]time.Time{}, refresh: map[string]bool{},
		grants: map[string]int{}, refused: map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", as.metadata)
	mux.HandleFunc("GET /authorize", as.authorize)
	mux.HandleFunc("POST /token", as.token)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	as.URL = ts.URL
	return as
}

// SetValidity makes the tokens issued from now on be accepted for valid,
// whatever their expires_in says: longer, to see that a client replaces a
// token before it expires rather than after a refusal.
func (as *AS) SetValidity(valid time.Duration) {
	as.mu.Lock()
	as.valid = valid
	as.mu.Unlock()
}

// Revoke revokes every access and refresh token issued so far.
func (as *AS) Revoke() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.access)
	clear(as.refresh)
}

// Valid reports whether token is an access token issued, not revoked and
// not expired.
func (as *AS) Valid(token string) bool {
	as.mu.Lock()
	defer as.mu.Unlock()
	end, ok := as.access[token]
	return ok && time.Now().Before(end)
}

// Grants is how many tokens each grant type issued.
func (as *AS) Grants(grantType string) int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.grants[grantType]
}

// Refused is how many requests of the grant type were refused.
func (as *AS) Refused(grantType string) int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.refused[grantType]
}

// Issued is every access and refresh token issued, and the client secret.
func (as *AS) Issued() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return append(slices.Clone(as.issued), as.ClientSecret)
}

// Resources are the RFC 8707 resource parameters received.
func (as *AS) Resources() []string {
	as.mu.Lock()
	defer as.mu.Unlock()
	return slices.Clone(as.resource)
}

func (as *AS) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                as.URL,
		"authorization_endpoint":                as.URL + "/authorize",
		"token_endpoint":                        as.URL + "/token",
		"response_types_supported":              []string{"code"},
		"grant_types_supported":                 []string{"authorization_code", "refresh_token", "client_credentials"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "none"},
	})
}

// authorize consents at once: it redirects to the redirect URI with a code
// bound to the PKCE challenge, and the state as it came.
func (as *AS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect := q.Get("redirect_uri")
	u, err := url.Parse(redirect)
	switch {
	case q.Get("client_id") != as.ClientID:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case err != nil || u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost"):
		http.Error(w, "the redirect URI is not a loopback one", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code":
		http.Error(w, "response_type must be code", http.StatusBadRequest)
		return
	case q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "PKCE with S256 is required", http.StatusBadRequest)
		return
	}
	code := random()
	as.mu.Lock()
	as.codes[code] = grant{challenge: q.Get("code_challenge"), redirect: redirect}
	if res := q.Get("resource"); res != "" {
		as.resource = append(as.resource, res)
	}
	as.mu.Unlock()
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (as *AS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	f := r.PostForm
	gt := f.Get("grant_type")
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = f.Get("client_id"), f.Get("client_secret")
	}
	refuse := func(status int, code string) {
		as.mu.Lock()
		as.refused[gt]++
		as.mu.Unlock()
		oauthError(w, status, code)
	}
	if id != as.ClientID || (secret != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(as.ClientSecret)) != 1) {
		refuse(http.StatusUnauthorized, "invalid_client")
		return
	}
	as.mu.Lock()
	if res := f.Get("resource"); res != "" {
		as.resource = append(as.resource, res)
	}
	as.mu.Unlock()
	switch gt {
	case "authorization_code":
		as.mu.Lock()
		g, ok := as.codes[f.Get("code")]
		delete(as.codes, f.Get("code")) // a code is good once
		as.mu.Unlock()
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || g.redirect != f.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			refuse(http.StatusBadRequest, "invalid_grant")
			return
		}
		as.issue(w, gt, true)
	case "refresh_token":
		as.mu.Lock()
		ok := as.refresh[f.Get("refresh_token")]
		delete(as.refresh, f.Get("refresh_token")) // rotated: good once
		as.mu.Unlock()
		if !ok {
			refuse(http.StatusBadRequest, "invalid_grant")
			return
		}
		as.issue(w, gt, true)
	case "client_credentials":
		if secret == "" {
			refuse(http.StatusUnauthorized, "invalid_client")
			return
		}
		as.issue(w, gt, false)
	default:
		refuse(http.StatusBadRequest, "unsupported_grant_type")
	}
}

// issue answers a new access token, with a new refresh token when
// withRefresh.
func (as *AS) issue(w http.ResponseWriter, grantType string, withRefresh bool) {
	access := "at-" + random()
	out := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(as.lifetime / time.Second)}
	as.mu.Lock()
	as.access[access] = time.Now().Add(as.valid)
	as.issued = append(as.issued, access)
	if withRefresh {
		rt := "rt-" + random()
		as.refresh[rt] = true
		as.issued = append(as.issued, rt)
		out["refresh_token"] = rt
	}
	as.grants[grantType]++
	as.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func oauthError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": "refused by the test server"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Resource is an MCP server behind as: its endpoint at URL answers a
// request without a valid token 401 with the WWW-Authenticate challenge
// the MCP specification defines, naming its protected-resource metadata.
type Resource struct {
	// URL is the MCP endpoint, the resource's identifier.
	URL string

	mu          sync.Mutex
	refusals    int
	discoveries int
	seen        []string
}

// Discoveries is how many times the protected-resource metadata was read.
func (r *Resource) Discoveries() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.discoveries
}

// Protect serves the MCP server that server returns for a new session's
// request over streamable HTTP at /mcp behind as, with its
// protected-resource metadata at /.well-known/oauth-protected-resource/mcp,
// closed with the test.
func Protect(t testing.TB, as *AS, server func(*http.Request) *sdk.Server) *Resource {
	t.Helper()
	res := &Resource{}
	h := sdk.NewStreamableHTTPHandler(server, nil)
	mux := http.NewServeMux()
	var metadataURL string
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		res.mu.Lock()
		res.discoveries++
		res.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"resource": res.URL, "authorization_servers": []string{as.URL}, "bearer_methods_supported": []string{"header"}})
	})
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !as.Valid(tok) {
			res.mu.Lock()
			res.refusals++
			res.mu.Unlock()
			challenge := fmt.Sprintf(`Bearer resource_metadata=%q`, metadataURL)
			if ok {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		res.mu.Lock()
		if len(res.seen) == 0 || res.seen[len(res.seen)-1] != tok {
			res.seen = append(res.seen, tok)
		}
		res.mu.Unlock()
		h.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	res.URL = ts.URL + "/mcp"
	metadataURL = ts.URL + "/.well-known/oauth-protected-resource/mcp"
	return res
}

// Refusals is how many requests the resource answered 401.
func (r *Resource) Refusals() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusals
}

// Seen are the distinct tokens the resource accepted, in order.
func (r *Resource) Seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// Follow opens an authorization URL as a browser would, following its
// redirects to the loopback listener, and returns the last response's
// status and body.
func Follow(ctx context.Context, authURL string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b), err
}

// Redirect opens an authorization URL without following the redirect, and
// returns where the authorization server sends the browser.
func Redirect(ctx context.Context, authURL string) (*url.URL, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("authorize answered %s", resp.Status)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// URLWriter is the writer a login prints to: it passes the authorization
// URL, the first line that starts one, to URLs.
type URLWriter struct {
	mu   sync.Mutex
	buf  strings.Builder
	sent bool
	// URLs receives the authorization URL once.
	URLs chan string
}

// NewURLWriter returns a URLWriter.
func NewURLWriter() *URLWriter { return &URLWriter{URLs: make(chan string, 1)} }

func (w *URLWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.sent {
		for line := range strings.Lines(w.buf.String()) {
			if u := strings.TrimSpace(line); strings.HasPrefix(u, "http") && strings.Contains(u, "/authorize?") && strings.HasSuffix(line, "\n") {
				w.sent = true
				w.URLs <- u
				break
			}
		}
	}
	return len(p), nil
}

// String is everything written.
func (w *URLWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
