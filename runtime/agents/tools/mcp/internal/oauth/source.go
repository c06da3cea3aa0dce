package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// DefaultMargin is how long before its expiry a token is replaced: a
// request sent with it then reaches the server before it expires. A token
// that lives less than three margins is replaced when a third of its life
// is left.
const DefaultMargin = time.Minute

// Fetch obtains a new token: by a refresh of current's refresh token, or
// a new client-credentials grant. current is the token being replaced,
// nil the first time.
type Fetch func(ctx context.Context, current *oauth2.Token) (*oauth2.Token, error)

// Source is a token cache in front of a Fetch: the token is kept until a
// margin before its expiry (DefaultMargin, or a third of its life), and
// callers that find it stale at once share one fetch, so that a burst of
// calls sends the token endpoint one request, and a rotated refresh token
// is used once. It is safe for concurrent use.
type Source struct {
	fetch   Fetch
	issued  func(*oauth2.Token, time.Time) // told of each new token, and when it came, before it is used
	now     func() time.Time
	timeout time.Duration

	sem chan struct{} // one fetch at a time

	mu       sync.Mutex
	tok      *oauth2.Token
	lifetime time.Duration
}

// SourceOptions configure a Source.
type SourceOptions struct {
	// Initial is the token to start from (one read from a store); nil
	// fetches one on first use.
	Initial *oauth2.Token
	// InitialLifetime is how long Initial lived when it was issued; zero
	// when unknown, and DefaultMargin applies.
	InitialLifetime time.Duration
	// Issued, when set, is told of each token fetched, before any caller
	// gets it: to keep it (a rotated refresh token), and to hide it from
	// what the server answers.
	Issued func(t *oauth2.Token, at time.Time)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Timeout bounds one fetch; zero means 30 seconds.
	Timeout time.Duration
}

// NewSource returns a Source over fetch.
func NewSource(fetch Fetch, o SourceOptions) *Source {
	s := &Source{fetch: fetch, issued: o.Issued, now: o.Now, timeout: o.Timeout, sem: make(chan struct{}, 1), tok: o.Initial, lifetime: o.InitialLifetime}
	if s.now == nil {
		s.now = time.Now
	}
	if s.timeout <= 0 {
		s.timeout = 30 * time.Second
	}
	return s
}

// fresh reports whether t may still be sent: it has an access token that
// does not expire within the margin. The caller holds mu.
func (s *Source) fresh(t *oauth2.Token) bool {
	if t == nil || t.AccessToken == "" {
		return false
	}
	if t.Expiry.IsZero() {
		return true
	}
	margin := DefaultMargin
	if s.lifetime > 0 {
		margin = min(margin, s.lifetime/3)
	}
	return s.now().Add(margin).Before(t.Expiry)
}

// Token returns a token that does not expire within the margin, fetching
// one when the current one does (one fetch for every caller waiting).
func (s *Source) Token(ctx context.Context) (*oauth2.Token, error) {
	s.mu.Lock()
	if s.fresh(s.tok) {
		t := s.tok
		s.mu.Unlock()
		return t, nil
	}
	s.mu.Unlock()
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	cur := s.tok
	if s.fresh(cur) { // another caller fetched it meanwhile
		s.mu.Unlock()
		return cur, nil
	}
	s.mu.Unlock()
	fctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	t, err := s.fetch(fctx, cur)
	if err != nil {
		return nil, err
	}
	if t == nil || t.AccessToken == "" {
		return nil, errors.New("the token endpoint answered no access token")
	}
	t = copyToken(t)
	if t.RefreshToken == "" && cur != nil {
		t.RefreshToken = cur.RefreshToken // a server that does not rotate it
	}
	var lifetime time.Duration
	if !t.Expiry.IsZero() {
		lifetime = t.Expiry.Sub(s.now())
	}
	if s.issued != nil {
		s.issued(t, s.now())
	}
	s.mu.Lock()
	s.tok, s.lifetime = t, lifetime
	s.mu.Unlock()
	return t, nil
}

// Invalidate forgets the access token the server refused, when it is
// still the current one, so that the next Token fetches another; the
// refresh token is kept.
func (s *Source) Invalidate(access string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != nil && s.tok.AccessToken == access {
		t := copyToken(s.tok)
		t.AccessToken = ""
		s.tok = t
	}
}

// copyToken is a copy of t's fields that matter here, without its raw
// response.
func copyToken(t *oauth2.Token) *oauth2.Token {
	return &oauth2.Token{AccessToken: t.AccessToken, TokenType: t.TokenType, RefreshToken: t.RefreshToken, Expiry: t.Expiry}
}

// ClientCredentials is a Fetch of client-credentials grants (RFC 6749,
// section 4.4) at tokenURL, with the RFC 8707 resource parameter when
// resource is set; hc sends the requests.
func ClientCredentials(hc *http.Client, ep Endpoints, clientID, secret string, scopes []string) Fetch {
	cfg := clientcredentials.Config{ClientID: clientID, ClientSecret: secret, TokenURL: ep.TokenURL, Scopes: scopes, AuthStyle: ep.AuthStyle(secret)}
	resource := ep.Resource
	if resource != "" {
		cfg.EndpointParams = url.Values{"resource": {resource}}
	}
	return func(ctx context.Context, _ *oauth2.Token) (*oauth2.Token, error) {
		t, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, hc))
		if err != nil {
			return nil, Explain(err)
		}
		return t, nil
	}
}

// ErrNoRefreshToken is the error of a refresh with no refresh token: the
// authorization server gave none, and the user must sign in again.
var ErrNoRefreshToken = errors.New("no refresh token")

// Refresh is a Fetch of refresh-token grants (RFC 6749, section 6) with
// cfg's client and token URL; hc sends the requests.
func Refresh(hc *http.Client, cfg *oauth2.Config) Fetch {
	return func(ctx context.Context, cur *oauth2.Token) (*oauth2.Token, error) {
		if cur == nil || cur.RefreshToken == "" {
			return nil, ErrNoRefreshToken
		}
		ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
		t, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: cur.RefreshToken}).Token()
		if err != nil {
			return nil, Explain(err)
		}
		return t, nil
	}
}

// GrantError is a token endpoint's refusal (RFC 6749, section 5.2),
// without the response's body, which may echo what was sent.
type GrantError struct {
	// Status is the HTTP status.
	Status int
	// Code is the error code, such as invalid_grant.
	Code string
	// Description is the server's error_description.
	Description string
}

func (e *GrantError) Error() string {
	msg := fmt.Sprintf("the token endpoint refused (HTTP %d", e.Status)
	if e.Code != "" {
		msg += ", " + e.Code
	}
	msg += ")"
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}

// Revoked reports whether the grant itself is no longer good (the refresh
// token or code was revoked, expired or used): signing in again is the
// way out, not retrying.
func (e *GrantError) Revoked() bool { return e.Code == "invalid_grant" }

// Explain is err, a *GrantError when the token endpoint refused, with
// nothing of its response body.
func Explain(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return err
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	return &GrantError{Status: status, Code: re.ErrorCode, Description: re.ErrorDescription}
}
