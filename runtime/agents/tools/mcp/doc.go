// Package mcp is the mcp tool kind: tools an application declares that a
// Model Context Protocol server implements, over stdio or streamable HTTP,
// through the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// Two configurations, plain data that a description holds and a generated
// service spells as literals, make the kind:
//
//   - Server, an entry of the IR section mcpServers (a kind.ResourceKind):
//     a stdio server is a command the service starts, with its arguments,
//     working directory and an explicit environment (the child gets only
//     the variables Env names, never the service's secrets by
//     inheritance); an http server is a URL, with a bearer token and
//     headers read from named environment variables, or OAuth 2.1 (OAuth:
//     client credentials, or an authorization code with PKCE that
//     Server.Login, `aidgen mcp login NAME`, obtains once and stores
//     encrypted in TokenDir).
//   - Kind, a tool's implementation {kind: "mcp", server, tool, import}
//     (an agents.ToolKind): one tool of the server, or its tools imported
//     whole (an allowlist, a name prefix).
//
// At start-up (app.Assemble: a service, aidgen run, aidgen eval) each
// server is connected once per application, its tools/list read, and a
// declared tool the server does not offer stops start-up with a
// *NotOfferedError naming the server, the tool and the tools offered. Each
// tool takes the server's input schema (the runtime validates arguments
// against it before every call), the server's description unless the IR
// gives one, the IR's approval and timeout, and the IR's effects, or,
// when the IR states none, read only for a tool annotated readOnlyHint.
//
// A call is tools/call. Structured content becomes the observation as
// JSON; otherwise text content does, with images, audio and resources
// described, not inlined (Observation). A result flagged isError is a
// *ToolError observation. The tool's timeout ends the call with the
// protocol's notifications/cancelled. A server that exits or drops the
// connection fails the calls in flight as error observations, never
// hangs them, and is reconnected by the next call after a backoff that
// doubles from 250ms to 30s; a server that says its tools changed is
// listed again before the next call, which fails when the tool is gone.
// Progress notifications reach the run's events (agents.ReportProgress)
// while the call lasts: the SDK handles notifications apart from results,
// so one a server sends just before its result may be handled after the
// call returned, and is then dropped.
// An OAuth token is replaced before it expires, by one refresh however
// many calls find it stale, and once more when the server answers 401; a
// grant that cannot be renewed is a *LoginRequiredError (authorization
// code) or an *AuthError naming the server. The OAuth client itself
// (discovery, the token cache, the login, the encrypted store) is
// internal/oauth.
// The credentials sent to an http server (its bearer token, its headers'
// values of 8 characters or more, its OAuth tokens and client secret) are
// redacted from what it answers,
// tool descriptions, results and errors alike, so that a server that echoes
// them shows them neither to the model nor in the run. A message larger
// than MaxResponseBytes fails the call; the observation
// is bounded as every tool's is, by the agents runtime. Each call's
// execute_tool span carries the server, its transport and the
// semantic conventions' MCP attributes.
//
// Server.Describe prints a server's tools, with their schemas and
// annotations, for `aidgen describe FILE mcpServers NAME`. The package is
// not an MCP server: runtime/service serves an application's agents as MCP
// tools.
package mcp
