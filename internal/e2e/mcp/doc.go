// Package mcp holds the end-to-end tests of aid's Model Context Protocol
// support against the official implementations from npm, pinned in
// package.json and package-lock.json here and installed by the tests with
// npm ci: the reference servers @modelcontextprotocol/server-filesystem
// and @modelcontextprotocol/server-everything driven over stdio by the mcp
// tool kind, and the TypeScript SDK's client (@modelcontextprotocol/sdk)
// calling a service's /mcp endpoint. The tests skip, saying why, when
// node is not installed, and fail instead when CI is set.
package mcp
