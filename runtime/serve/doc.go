// Package serve is the process entry point of a service aidgen generates:
// Main parses the flags and environment, sets up logging and the OpenTelemetry
// environment, assembles the runtime from the application's description
// (with the service's instruments), fills in-memory retrievers, reads the
// bearer tokens, and serves the HTTP API until SIGTERM or an interrupt,
// draining the requests in flight. It returns the process's exit code.
//
// It exists so that the generated main.go is glue: everything every service
// does is written here once and tested here, and the generated file passes
// only what differs per application (Options: the Go tools' code and, when
// the application keeps anything in PostgreSQL, the openers from
// runtime/serve/postgres). This package does not link pgx; a service that
// keeps its state and vectors in memory does not either.
//
// It is not the HTTP service (runtime/service), nor the assembly of the
// runtime (runtime/app); a team that wants its own process around those
// uses them directly. It never reads the IR.
package serve
