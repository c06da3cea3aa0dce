// Package postgres holds the PostgreSQL opener a generated service passes
// to serve.Main when its application keeps its state (runs, checkpoints,
// budget ledger) in PostgreSQL.
//
// It is a package of its own so that serve, and every service that keeps
// its state in memory, does not link pgx. It is not a store: the stores
// are runtime/agents/pgstore and runtime/gateway/pgledger. Stores of kind
// pgvector (retrievers' vectors and agents' memory) open themselves: their
// kind is runtime/retrieval/pgvector, which a description names.
package postgres
