// Package oauth is the OAuth 2.1 client of the mcp tool kind: the
// discovery the MCP authorization specification defines (a 401's
// WWW-Authenticate resource_metadata, or the server's
// /.well-known/oauth-protected-resource, then its authorization server's
// RFC 8414 or OpenID Connect metadata), a token source that refreshes
// before expiry and lets concurrent callers share one refresh, the
// authorization-code flow with PKCE (S256) on a loopback redirect that
// `aidgen mcp login` runs once, and the encrypted file that keeps what it
// obtained.
//
// The token endpoint's wire format is golang.org/x/oauth2's; the metadata
// documents are the go-sdk's oauthex. The package holds no configuration
// of its own that an application declares: the mcp package translates its
// Server into the values here. It is not an authorization server, and it
// never writes a token into an error, a log line or a file in clear.
package oauth
