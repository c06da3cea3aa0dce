// Package postgres holds the PostgreSQL openers a generated service passes
// to serve.Main when its application keeps its state (runs, checkpoints,
// budget ledger) or its vectors in PostgreSQL.
//
// It is a package of its own so that serve, and every service that keeps
// everything in memory, does not link pgx. It is not a store: the stores
// are runtime/agents/pgstore, runtime/gateway/pgledger and
// runtime/retrieval/pgvector.
package postgres
