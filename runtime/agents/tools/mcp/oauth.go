package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/aidgen/aid/runtime/agents/tools/mcp/internal/oauth"
	"github.com/aidgen/aid/runtime/kind"
)

// OAuth is how an http server's requests are authorized with OAuth 2.1,
// as the MCP authorization specification defines: exactly one of its
// grants. The endpoints are discovered from the server (its 401's
// WWW-Authenticate resource_metadata, or its
// /.well-known/oauth-protected-resource, then the authorization server's
// RFC 8414 or OpenID Connect metadata) unless the grant gives them.
type OAuth struct {
	// ClientCredentials authorizes the service as itself (RFC 6749,
	// section 4.4): a token is obtained at start-up, replaced before it
	// expires, and obtained again when the server refuses it.
	ClientCredentials *ClientCredentials `json:"clientCredentials,omitempty"`
	// AuthorizationCode authorizes the service as a user who signed in
	// once with `aidgen mcp login NAME` (the authorization-code flow with
	// PKCE S256); the tokens obtained are kept encrypted in the state
	// directory and refreshed before they expire.
	AuthorizationCode *AuthorizationCode `json:"authorizationCode,omitempty"`
}

// ClientCredentials is the client-credentials grant.
type ClientCredentials struct {
	// ClientID is the client's id at the authorization server.
	ClientID string `json:"clientId"`
	// ClientSecretEnv names the variable holding the client's secret.
	ClientSecretEnv string `json:"clientSecretEnv"`
	// Scopes are the scopes asked for.
	Scopes []string `json:"scopes,omitempty"`
	// TokenURL is the token endpoint; when set, nothing is discovered.
	TokenURL string `json:"tokenURL,omitempty"`
}

// AuthorizationCode is the authorization-code grant with PKCE.
type AuthorizationCode struct {
	// ClientID is the client's id at the authorization server.
	ClientID string `json:"clientId"`
	// ClientSecretEnv names the variable holding the client's secret; a
	// public client has none.
	ClientSecretEnv string `json:"clientSecretEnv,omitempty"`
	// Scopes are the scopes asked for.
	Scopes []string `json:"scopes,omitempty"`
	// AuthorizationURL is the authorization endpoint; with TokenURL,
	// nothing is discovered.
	AuthorizationURL string `json:"authorizationURL,omitempty"`
	// TokenURL is the token endpoint; with AuthorizationURL, nothing is
	// discovered.
	TokenURL string `json:"tokenURL,omitempty"`
	// RedirectPort is the loopback port the login listens on for the
	// redirect, http://127.0.0.1:PORT/callback; 0 means any free port,
	// which RFC 8252 lets an authorization server accept.
	RedirectPort int `json:"redirectPort,omitempty"`
	// RedirectURL is the loopback redirect URL registered with the
	// authorization server, instead of RedirectPort's.
	RedirectURL string `json:"redirectURL,omitempty"`
	// TokenKeyEnv names the variable holding the key that encrypts the
	// stored tokens (32 bytes in base64); empty means a key file created,
	// mode 0600, in the token directory.
	TokenKeyEnv string `json:"tokenKeyEnv,omitempty"`
}

// TokenDirName is the folder of the state directory that holds the tokens
// `aidgen mcp login` obtains.
const TokenDirName = "mcp-oauth"

// TokenDir is where the OAuth tokens of MCP servers are kept:
// $AID_STATE_DIR/mcp-oauth when kind.EnvStateDir is set, else
// aid/mcp-oauth in the user's state directory (kind.StateHome). The login
// and the service must agree on it: a service run elsewhere is given the
// same AID_STATE_DIR (and the key) as the login.
func TokenDir(env kind.Env) (string, error) {
	if d, ok := env.Lookup(kind.EnvStateDir); ok && d != "" {
		return filepath.Join(d, TokenDirName), nil
	}
	home, err := kind.StateHome(env.Lookup)
	if err != nil {
		return "", fmt.Errorf("%v; set %s", err, kind.EnvStateDir)
	}
	return filepath.Join(home, "aid", TokenDirName), nil
}

// LoginRequiredError is the error of a server whose authorization-code
// tokens are missing or no longer good (revoked, expired, refused after a
// refresh): only a user signing in again can fix it.
type LoginRequiredError struct {
	// Server is the server's name in mcpServers.
	Server string
	// Reason says what is wrong.
	Reason string
}

func (e *LoginRequiredError) Error() string {
	return fmt.Sprintf("MCP server %q needs an OAuth sign-in (%s): run `aidgen mcp login %s`", e.Server, e.Reason, e.Server)
}

// AuthError is the error of a server whose OAuth authorization failed for
// another reason than a missing sign-in: a token endpoint that refuses the
// client's credentials, discovery that finds no authorization server, a
// server that refuses a token just issued.
type AuthError struct {
	// Server is the server's name in mcpServers.
	Server string
	// Err is what failed.
	Err error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("MCP server %q: OAuth authorization failed: %v", e.Server, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

// authorizer is the OAuth handler of one server's transport (the SDK's
// auth.OAuthHandler): it sends the source's token with every request, and
// when the server answers 401, replaces it once, by a new
// client-credentials grant or a refresh.
type authorizer struct {
	server string
	login  bool // authorization code: what cannot be refreshed needs a sign-in
	src    *oauth.Source

	mu        sync.Mutex
	retried   string // the access token obtained after the server refused the one before
	retriedOK bool   // the server has accepted retried since
}

// answered learns from the server's status for a request whether it
// accepted the token the request carried: a replacement it accepted once
// is as good as any token, and is replaced again when it is refused later
// (revoked), rather than taken for a grant that no longer works.
func (a *authorizer) answered(req *http.Request, status int) {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return
	}
	used, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	if used != "" && used == a.retried {
		a.retriedOK = true
	}
	a.mu.Unlock()
}

// tokenSource is the source the SDK's transport asks for a token before
// each request, within the connection's context.
type tokenSource struct {
	ctx context.Context
	a   *authorizer
}

func (t tokenSource) Token() (*oauth2.Token, error) {
	tok, err := t.a.src.Token(t.ctx)
	if err != nil {
		return nil, t.a.explain(err)
	}
	return tok, nil
}

// TokenSource implements auth.OAuthHandler.
func (a *authorizer) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	return tokenSource{ctx: ctx, a: a}, nil
}

// Authorize implements auth.OAuthHandler: the server refused the request
// the token was sent with. The token is replaced, unless it was itself
// the replacement of a token the server refused: then the grant is no
// good, and the error says what to do.
func (a *authorizer) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	used, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if resp.StatusCode == http.StatusForbidden {
		return a.explain(fmt.Errorf("the server refused the token's scope (HTTP 403 %s)", challengeError(resp)))
	}
	a.mu.Lock()
	again := used != "" && used == a.retried && !a.retriedOK
	a.mu.Unlock()
	if again {
		return a.explain(errors.New("the server refused a token issued after it refused the one before"))
	}
	a.src.Invalidate(used)
	tok, err := a.src.Token(ctx)
	if err != nil {
		return a.explain(err)
	}
	a.mu.Lock()
	a.retried, a.retriedOK = tok.AccessToken, false
	a.mu.Unlock()
	return nil
}

// challengeError is the error parameter of a response's Bearer challenge.
func challengeError(resp *http.Response) string {
	for _, h := range resp.Header.Values("WWW-Authenticate") {
		if _, after, ok := strings.Cut(h, `error="`); ok {
			if v, _, ok := strings.Cut(after, `"`); ok {
				return v
			}
		}
	}
	return ""
}

// explain is err as the typed error of the server: a sign-in to run again
// when the tokens of an authorization-code grant are gone or refused, an
// *AuthError otherwise.
func (a *authorizer) explain(err error) error {
	if err == nil {
		return nil
	}
	var lr *LoginRequiredError
	var ae *AuthError
	if errors.As(err, &lr) || errors.As(err, &ae) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if a.login {
		var ge *oauth.GrantError
		switch {
		case errors.Is(err, oauth.ErrNoRefreshToken):
			return &LoginRequiredError{Server: a.server, Reason: "the token expired, and the authorization server gave no refresh token"}
		case errors.As(err, &ge) && (ge.Revoked() || ge.Status == http.StatusUnauthorized):
			return &LoginRequiredError{Server: a.server, Reason: "the authorization server refused the refresh: " + ge.Error()}
		case strings.HasPrefix(err.Error(), "the server refused"):
			return &LoginRequiredError{Server: a.server, Reason: err.Error()}
		}
	}
	return &AuthError{Server: a.server, Err: err}
}

// authError is the OAuth error err carries, when it carries one.
func authError(err error) error {
	var lr *LoginRequiredError
	if errors.As(err, &lr) {
		return lr
	}
	var ae *AuthError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// newAuthorizer builds the OAuth handler of server name's transport: hc
// sends the token requests, addSecret hides each token and secret from
// what the server answers.
func (c *conn) newAuthorizer(s Server, env kind.Env, hc *http.Client) (*authorizer, error) {
	o := s.OAuth
	switch {
	case o.ClientCredentials != nil && o.AuthorizationCode == nil:
		cc := o.ClientCredentials
		if cc.ClientID == "" || cc.ClientSecretEnv == "" {
			return nil, errors.New("oauth.clientCredentials needs a clientId and a clientSecretEnv")
		}
		secret, ok := env.Lookup(cc.ClientSecretEnv)
		if !ok || secret == "" {
			return nil, fmt.Errorf("oauth.clientCredentials.clientSecretEnv: environment variable %s is not set", cc.ClientSecretEnv)
		}
		c.addSecret(secret)
		a := &authorizer{server: c.name}
		var grant oauth.Fetch
		fetch := func(ctx context.Context, cur *oauth2.Token) (*oauth2.Token, error) {
			if grant == nil { // discovered once, on the first fetch (fetches are serialized)
				ep := oauth.Endpoints{TokenURL: cc.TokenURL, Resource: s.URL}
				if ep.TokenURL == "" {
					var err error
					if ep, err = oauth.Discover(ctx, hc, s.URL, nil); err != nil {
						return nil, fmt.Errorf("discovering the token endpoint: %w", err)
					}
				}
				grant = oauth.ClientCredentials(hc, ep, cc.ClientID, secret, cc.Scopes)
			}
			return grant(ctx, cur)
		}
		a.src = oauth.NewSource(fetch, oauth.SourceOptions{Timeout: c.timeout, Issued: func(t *oauth2.Token, _ time.Time) {
			c.addToken(t.AccessToken)
			c.log.Debug("MCP server OAuth token obtained", "grant", "client_credentials", "expiry", t.Expiry)
		}})
		return a, nil
	case o.AuthorizationCode != nil && o.ClientCredentials == nil:
		ac := o.AuthorizationCode
		store, err := openStore(env, c.name, s)
		if err != nil {
			return nil, err
		}
		rec, err := store.Load()
		switch {
		case errors.Is(err, oauth.ErrNoTokens):
			return nil, &LoginRequiredError{Server: c.name, Reason: "no tokens are stored in " + filepath.Dir(store.Path())}
		case errors.Is(err, oauth.ErrUnreadable):
			return nil, &LoginRequiredError{Server: c.name, Reason: err.Error()}
		case err != nil:
			return nil, &AuthError{Server: c.name, Err: err}
		}
		secret, err := clientSecret(env, ac.ClientSecretEnv)
		if err != nil {
			return nil, err
		}
		c.addSecret(secret)
		c.addToken(rec.AccessToken)
		c.addToken(rec.RefreshToken)
		tokenURL := rec.TokenURL
		if ac.TokenURL != "" {
			tokenURL = ac.TokenURL
		}
		style := oauth.Endpoints{SecretInBody: rec.SecretInBody}.AuthStyle(secret)
		cfg := &oauth2.Config{ClientID: ac.ClientID, ClientSecret: secret, Scopes: ac.Scopes, Endpoint: oauth2.Endpoint{TokenURL: tokenURL, AuthStyle: style}}
		a := &authorizer{server: c.name, login: true}
		opts := oauth.SourceOptions{Initial: rec.Token(), InitialLifetime: rec.Lifetime(), Timeout: c.timeout}
		opts.Issued = func(t *oauth2.Token, at time.Time) {
			c.addToken(t.AccessToken)
			c.addToken(t.RefreshToken)
			r := *rec
			r.AccessToken, r.TokenType, r.RefreshToken, r.Expiry, r.Issued, r.TokenURL = t.AccessToken, t.TokenType, t.RefreshToken, t.Expiry, at, tokenURL
			if err := store.Save(r); err != nil {
				// The process goes on with the new tokens; another one
				// started later reads the old refresh token, which a
				// server that rotates them refuses: it then asks for a
				// sign-in.
				c.log.Warn("MCP server OAuth tokens not stored", "error", err)
				return
			}
			c.log.Debug("MCP server OAuth tokens refreshed and stored", "expiry", t.Expiry)
		}
		a.src = oauth.NewSource(oauth.Refresh(hc, cfg), opts)
		return a, nil
	}
	return nil, errors.New("oauth needs exactly one of clientCredentials and authorizationCode")
}

// clientSecret reads the client secret a grant names, none when it names
// no variable.
func clientSecret(env kind.Env, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	v, ok := env.Lookup(name)
	if !ok || v == "" {
		return "", fmt.Errorf("oauth.authorizationCode.clientSecretEnv: environment variable %s is not set", name)
	}
	return v, nil
}

// openStore opens the token store of server name: in TokenDir, keyed by
// the variable the grant names or the key file, bound to the server's URL
// and client id.
func openStore(env kind.Env, name string, s Server) (*oauth.Store, error) {
	ac := s.OAuth.AuthorizationCode
	dir, err := TokenDir(env)
	if err != nil {
		return nil, err
	}
	var key string
	if ac.TokenKeyEnv != "" {
		v, ok := env.Lookup(ac.TokenKeyEnv)
		if !ok || v == "" {
			return nil, fmt.Errorf("oauth.authorizationCode.tokenKeyEnv: environment variable %s is not set", ac.TokenKeyEnv)
		}
		key = v
	}
	st, err := oauth.OpenStore(dir, name, s.URL+"\x00"+ac.ClientID, key)
	if err != nil {
		return nil, fmt.Errorf("oauth.authorizationCode.tokenKeyEnv: %s: %w", ac.TokenKeyEnv, err)
	}
	return st, nil
}

// Login signs in to the server called name once, with the
// authorization-code flow and PKCE (S256): it discovers the endpoints
// (unless the grant gives them), prints the authorization URL to out,
// waits on the loopback redirect for the code, checks the redirect's
// state, exchanges the code with the verifier, and stores the tokens
// encrypted in TokenDir. It returns the token file's path. It is what
// `aidgen mcp login NAME` runs.
func (s Server) Login(ctx context.Context, env kind.Env, name string, out io.Writer) (string, error) {
	if s.Transport != TransportHTTP || s.OAuth == nil || s.OAuth.AuthorizationCode == nil {
		return "", fmt.Errorf("MCP server %q declares no oauth.authorizationCode: nothing to sign in to", name)
	}
	ac := s.OAuth.AuthorizationCode
	hc := kind.HTTPClient(env.HTTPClient)
	ep := oauth.Endpoints{Resource: s.URL, AuthURL: ac.AuthorizationURL, TokenURL: ac.TokenURL, PKCE: true}
	if ac.AuthorizationURL == "" || ac.TokenURL == "" {
		var err error
		if ep, err = oauth.Discover(ctx, hc, s.URL, nil); err != nil {
			return "", &AuthError{Server: name, Err: fmt.Errorf("discovering the authorization server: %w", err)}
		}
		if ep.AuthURL == "" {
			return "", &AuthError{Server: name, Err: fmt.Errorf("authorization server %s names no authorization endpoint", ep.Issuer)}
		}
		if !ep.PKCE {
			return "", &AuthError{Server: name, Err: fmt.Errorf("authorization server %s does not advertise PKCE with S256, which OAuth 2.1 requires", ep.Issuer)}
		}
	}
	secret, err := clientSecret(env, ac.ClientSecretEnv)
	if err != nil {
		return "", err
	}
	store, err := openStore(env, name, s)
	if err != nil {
		return "", err
	}
	issued := time.Now()
	tok, err := oauth.Login(ctx, oauth.LoginConfig{
		Client: oauth2.Config{
			ClientID: ac.ClientID, ClientSecret: secret, Scopes: ac.Scopes,
			Endpoint: oauth2.Endpoint{AuthURL: ep.AuthURL, TokenURL: ep.TokenURL, AuthStyle: ep.AuthStyle(secret)},
		},
		Resource:     ep.Resource,
		RedirectURL:  ac.RedirectURL,
		RedirectPort: ac.RedirectPort,
		HTTPClient:   hc,
		Out:          out,
		Prompt:       fmt.Sprintf("Open this URL in a browser to let aid use MCP server %s:", name),
	})
	if err != nil {
		return "", &AuthError{Server: name, Err: fmt.Errorf("signing in: %w", err)}
	}
	rec := oauth.Record{
		AccessToken: tok.AccessToken, TokenType: tok.TokenType, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry, Issued: issued,
		TokenURL: ep.TokenURL, Resource: ep.Resource, SecretInBody: ep.SecretInBody,
	}
	if err := store.Save(rec); err != nil {
		return "", err
	}
	return store.Path(), nil
}
