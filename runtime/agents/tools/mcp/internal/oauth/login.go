package oauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// ErrStateMismatch is the error of a redirect whose state is not the one
// the login sent: a forged or stale redirect, which the login refuses
// without exchanging its code.
var ErrStateMismatch = errors.New("the redirect's state is not the one this login sent (a forged or stale redirect); nothing was exchanged")

// CallbackPath is the path of the loopback redirect when no redirect URL
// is given.
const CallbackPath = "/callback"

// LoginConfig is one authorization-code login.
type LoginConfig struct {
	// Client is the client and its endpoints; its RedirectURL is set by
	// Login.
	Client oauth2.Config
	// Resource is sent as the RFC 8707 resource parameter, when set.
	Resource string
	// RedirectURL is the loopback URL the authorization server redirects
	// to; empty means http://127.0.0.1:RedirectPort/callback.
	RedirectURL string
	// RedirectPort is the port of the default redirect URL; 0 means any
	// free port (RFC 8252, section 7.3).
	RedirectPort int
	// HTTPClient sends the token request.
	HTTPClient *http.Client
	// Out is where the URL to open is printed.
	Out io.Writer
	// Prompt is printed before the URL.
	Prompt string
}

// Login runs the authorization-code flow with PKCE (S256) once: it
// listens on the loopback redirect, prints the authorization URL for the
// user to open, and, when the redirect arrives with the state it sent,
// exchanges the code with the verifier. It ends with ctx.
func Login(ctx context.Context, lc LoginConfig) (*oauth2.Token, error) {
	redirect := lc.RedirectURL
	if redirect == "" {
		redirect = fmt.Sprintf("http://127.0.0.1:%d%s", lc.RedirectPort, CallbackPath)
	}
	u, err := url.Parse(redirect)
	if err != nil || u.Scheme != "http" || !loopback(u.Hostname()) {
		return nil, fmt.Errorf("redirect URL %q is not an http URL on a loopback address", redirect)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	var lcfg net.ListenConfig
	ln, err := lcfg.Listen(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("listening for the redirect on %s: %w", host, err)
	}
	if u.Port() == "0" {
		u.Host = net.JoinHostPort(u.Hostname(), fmt.Sprint(ln.Addr().(*net.TCPAddr).Port))
	}
	path := u.Path
	if path == "" {
		path = "/"
	}
	cfg := lc.Client
	cfg.RedirectURL = u.String()
	state, err := random()
	if err != nil {
		ln.Close()
		return nil, err
	}
	verifier := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	exchangeOpts := []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	if lc.Resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", lc.Resource))
		exchangeOpts = append(exchangeOpts, oauth2.SetAuthURLParam("resource", lc.Resource))
	}
	authURL := cfg.AuthCodeURL(state, opts...)

	type result struct {
		tok *oauth2.Token
		err error
	}
	done := make(chan result, 1)
	var once sync.Once
	finish := func(r result) { once.Do(func() { done <- r }) }
	hctx := context.WithValue(ctx, oauth2.HTTPClient, lc.HTTPClient)
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		page := func(status int, msg string) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(status)
			fmt.Fprintf(w, "<!doctype html><title>aid</title><p>%s</p>\n", html.EscapeString(msg))
		}
		if q.Get("state") == "" && q.Get("code") == "" && q.Get("error") == "" {
			page(http.StatusNotFound, "This address waits for an OAuth redirect.")
			return
		}
		if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(state)) != 1 {
			page(http.StatusBadRequest, "Sign-in refused: the state does not match this login.")
			finish(result{err: ErrStateMismatch})
			return
		}
		if e := q.Get("error"); e != "" {
			msg := "the authorization server refused: " + e
			if d := q.Get("error_description"); d != "" {
				msg += ": " + d
			}
			page(http.StatusBadRequest, "Sign-in failed: "+msg)
			finish(result{err: errors.New(msg)})
			return
		}
		code := q.Get("code")
		if code == "" {
			page(http.StatusBadRequest, "Sign-in failed: the redirect carries no code.")
			finish(result{err: errors.New("the redirect carries no code")})
			return
		}
		tok, err := cfg.Exchange(hctx, code, exchangeOpts...)
		if err != nil {
			err = fmt.Errorf("exchanging the code: %w", Explain(err))
			page(http.StatusBadGateway, "Sign-in failed: "+err.Error())
			finish(result{err: err})
			return
		}
		page(http.StatusOK, "Signed in. You can close this window.")
		finish(result{tok: tok})
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if lc.Out != nil {
		fmt.Fprintf(lc.Out, "%s\n\n  %s\n\nWaiting for the redirect to %s ...\n", lc.Prompt, authURL, cfg.RedirectURL)
	}
	select {
	case r := <-done:
		return r.tok, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("no redirect arrived: %w", ctx.Err())
	}
}

// loopback reports whether host is a loopback name or address.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// random is 32 random bytes in URL base64.
func random() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
