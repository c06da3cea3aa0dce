// Package tools is where the tool kinds live: each subdirectory is one
// kind, a tool an application declares and no Go code implements, so that
// this folder is the list of them. The package itself holds no code; it
// documents the extension point.
//
// The kinds:
//
//   - go (no package): Go code registered under the tool's name
//     (app.Options.Implementations, a generated service's business
//     package); the default.
//   - http: POST the call's arguments to a URL (package http).
//   - fixture: answer from argument → result rows in a file, for demos and
//     evals (package fixture).
//   - mcp: call the tools of a Model Context Protocol server, declared in
//     the IR section mcpServers (package mcp).
//
// # The contract
//
// A tool kind is one package under this directory. It owns:
//
//   - its configuration, a struct of plain data (no func, channel or
//     interface field) whose JSON field names are the IR's, conventionally
//     named Kind (http.Kind{URL, HeadersFromEnv}). Lowering decodes the IR's
//     implementation block into it (internal/lower), and a generated
//     service holds it as a literal (gen.Literal), importing the package;
//   - its constructor, as methods of that struct implementing
//     agents.ToolKind: ToolKind() returns the kind's name, and
//     NewTools(ctx, decl, env) returns the tools the declaration decl
//     provides, each an agents.BuiltTool (the tool as the model sees it,
//     and the agents.Implementation behind it). env (kind.Env) lends the
//     application's files, the environment, an HTTP client, a logger, the
//     application's resources and a kind.Scope for what must be opened
//     once and closed with the application.
//
// app.Assemble calls NewTools for every tool whose description names a
// kind, offers what it returns to the agents that list the declaration,
// and, when the kind returns tools of other names than decl.Name (a
// server imported whole), offers them all in that name's place. Nothing
// else in the runtime names a kind, so a program links only the kinds its
// description holds.
//
// # Adding a kind
//
// Besides its package, a kind touches four files: its name (and what
// ir needs to check it: the fields naming files, the fields naming a
// resource) in runtime/kind's list; its configuration's zero value in
// internal/lower's ToolKinds table; its fields in schema.cue's
// #ToolImplementation; and the README. Tests in the module root and in
// internal/lower hold the schema's kinds and fields equal to the lists
// and to the configuration's JSON fields.
//
// # How MCP plugs in
//
// The mcp kind (tools from Model Context Protocol servers) is the first
// kind built on this contract after http and fixture. It needed one thing
// more from the runtime: a way for a call to report progress to the run's
// events (agents.ReportProgress). Otherwise:
//
//   - Its package, runtime/agents/tools/mcp, declares two configurations.
//     Server (transport stdio with command, args, dir and the environment
//     variables the child may see; or http with a URL and headers read
//     from the environment) implements kind.ResourceKind: it is a resource,
//     declared once in the top-level IR section mcpServers and shared by
//     every tool that names it; ResourceKind() returns "mcpServers". Kind
//     (server, tool, or an import of the server's tools with an allowlist
//     and a name prefix) implements agents.ToolKind.
//   - Kind.NewTools finds its server with env.Resource("mcpServers", name)
//     and connects once per application with kind.Shared(env.Scope, key,
//     connect), keyed by the server's name, so that thirty tools share one
//     session and App.Close ends it. It reads tools/list, fails start-up
//     naming the server, the tool and the tools offered when a declared
//     tool is missing, and returns one BuiltTool per tool: the server's
//     description and input schema, the IR's effects and approval (effects
//     from the server's readOnlyHint when the IR leaves them out), and an
//     Implementation that validates and calls tools/call. An import returns
//     one BuiltTool per allowed tool, named with the prefix.
//   - Server also implements kind.Describer: `aidgen describe app.cue
//     mcpServers NAME` then prints the server's tools with their schemas
//     and annotations (issue 17's "mcp tools"), through the generic
//     command, with no CLI code of its own.
//   - Outside its package it touches four files: runtime/kind/kinds.go
//     (an Info for the resource kind "mcpServers" and one for the tool
//     kind "mcp", whose Refs say that its field "server" names an entry of
//     mcpServers, so that vet resolves it with a position),
//     internal/lower/kinds.go (mcp.Server{} in ResourceKinds, mcp.Kind{} in
//     ToolKinds), schema.cue (#App.mcpServers and the mcp fields of
//     #ToolImplementation) and the README. ir decodes the mcpServers
//     section and checks the references from the lists alone; gen embeds
//     nothing new; a generated service imports the mcp package because its
//     description literal names mcp.Server and mcp.Kind.
package tools
