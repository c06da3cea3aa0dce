// Package postgres opens what an application keeps in PostgreSQL (its runs,
// checkpoints and budget ledger, agents' memory, retrievers' vectors) for a
// generated service (serve.Options.Postgres) and for aidgen run and index:
// Open is the one place a process does, with one pool per DSN for the
// state and memory and one for the vectors.
//
// It is a package of its own so that serve, and every service that keeps
// everything in memory, does not link pgx. It is not a store: the stores
// are runtime/agents/pgstore, runtime/gateway/pgledger and
// runtime/retrieval/pgvector.
package postgres
