package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Endpoints are where a client obtains tokens for one resource.
type Endpoints struct {
	// Resource is the protected resource's identifier, sent as the RFC 8707
	// resource parameter: the MCP server's URL, or the resource its
	// metadata names.
	Resource string
	// Issuer is the authorization server's issuer; empty when the
	// endpoints were given rather than discovered.
	Issuer string
	// AuthURL is the authorization endpoint; empty when only client
	// credentials were asked for and none was given.
	AuthURL string
	// TokenURL is the token endpoint.
	TokenURL string
	// PKCE reports whether the authorization server advertises S256.
	PKCE bool
	// SecretInBody reports whether the authorization server takes a
	// client's secret in the request body only (client_secret_post), not
	// in an Authorization header (client_secret_basic, the default).
	SecretInBody bool
}

// AuthStyle is how a client with the secret authenticates at the token
// endpoint: a public client (no secret) sends its id in the body, a
// confidential one its id and secret in the Authorization header unless
// the server takes them in the body only. It is never auto-detected: a
// second attempt would spend a code or a rotated refresh token twice.
func (e Endpoints) AuthStyle(secret string) oauth2.AuthStyle {
	if secret == "" || e.SecretInBody {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}

// Discover finds the endpoints of the MCP server at serverURL, as the MCP
// authorization specification defines: the protected-resource metadata
// named by the resource_metadata parameter of the WWW-Authenticate
// challenges (from a 401 already received, or, when challenges is empty,
// from one an unauthenticated probe draws), else at the well-known
// locations under the server's URL, path-inserted then at the root; then
// the metadata of its first authorization server (RFC 8414, then OpenID
// Connect discovery). hc sends every request.
func Discover(ctx context.Context, hc *http.Client, serverURL string, challenges []string) (Endpoints, error) {
	if len(challenges) == 0 {
		challenges = probe(ctx, hc, serverURL)
	}
	var metadataURL string
	if cs, err := oauthex.ParseWWWAuthenticate(challenges); err == nil {
		for _, c := range cs {
			if c.Scheme == "bearer" && c.Params["resource_metadata"] != "" {
				metadataURL = c.Params["resource_metadata"]
				break
			}
		}
	}
	var prm *oauthex.ProtectedResourceMetadata
	var tried []string
	for _, u := range metadataURLs(metadataURL, serverURL) {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, u.url, u.resource, hc)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s (%v)", u.url, plain(err)))
			continue
		}
		prm = m
		break
	}
	if prm == nil {
		return Endpoints{}, fmt.Errorf("no protected-resource metadata found: tried %s; give the token URL in the app file to skip discovery", strings.Join(tried, ", "))
	}
	if len(prm.AuthorizationServers) == 0 {
		return Endpoints{}, errors.New("the protected-resource metadata names no authorization server")
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		return Endpoints{}, fmt.Errorf("reading the metadata of authorization server %s: %v", issuer, plain(err))
	}
	if asm == nil {
		return Endpoints{}, fmt.Errorf("authorization server %s publishes no metadata (RFC 8414 or OpenID Connect discovery)", issuer)
	}
	if asm.TokenEndpoint == "" {
		return Endpoints{}, fmt.Errorf("authorization server %s names no token endpoint", issuer)
	}
	return Endpoints{
		Resource: prm.Resource,
		Issuer:   asm.Issuer,
		AuthURL:  asm.AuthorizationEndpoint,
		TokenURL: asm.TokenEndpoint,
		PKCE:     slices.Contains(asm.CodeChallengeMethodsSupported, "S256"),
		SecretInBody: slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_post") &&
			!slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_basic"),
	}, nil
}

// probe sends the server an unauthenticated ping and returns the
// WWW-Authenticate challenges of its answer when it is a 401; none
// otherwise, and discovery goes on at the well-known locations.
func probe(ctx context.Context, hc *http.Client, serverURL string) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, serverURL, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusUnauthorized {
		return nil
	}
	return resp.Header.Values("WWW-Authenticate")
}

// metadataURL is a location of protected-resource metadata and the
// resource the document found there must name (RFC 9728, section 3.3).
type metadataURL struct{ url, resource string }

// metadataURLs are the locations of a server's protected-resource
// metadata, in the order the MCP specification gives: the challenge's,
// then the well-known location with the endpoint's path inserted, then
// the one at the root, whose resource is the server's origin.
func metadataURLs(fromChallenge, serverURL string) []metadataURL {
	var out []metadataURL
	if fromChallenge != "" {
		out = append(out, metadataURL{fromChallenge, serverURL})
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return out
	}
	m := *u
	m.RawQuery, m.Fragment = "", ""
	if p := strings.Trim(u.Path, "/"); p != "" {
		m.Path = "/.well-known/oauth-protected-resource/" + p
		out = append(out, metadataURL{m.String(), serverURL})
	}
	m.Path = "/.well-known/oauth-protected-resource"
	root := *u
	root.Path, root.RawQuery, root.Fragment = "", "", ""
	out = append(out, metadataURL{m.String(), root.String()})
	return out
}

// plain is err's message without the Go wrapping the SDK adds (its
// function names), for a message a user reads.
func plain(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, "): "); i >= 0 && strings.HasPrefix(msg, "Get") {
		msg = msg[i+3:]
	}
	return msg
}
