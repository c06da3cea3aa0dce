// Package postgres holds the PostgreSQL openers a generated service passes
// to serve.Main when its application keeps its state (runs, checkpoints,
// budget ledger, keys) in PostgreSQL (OpenState, OpenKeys), or agents'
// memory in a pgvector store (OpenMemory, in pgstore's memory tables of
// that store's database: the store kind, a layer below the agents, only
// says where), and that aidgen's commands use alike.
//
// Each DSN gets one pool per application, shared by the run store, the
// ledger and the agents' memory of its pgvector stores on it
// (pgutil.SharedPool), sized by the DSN's pool_max_conns or
// pgutil.DefaultMaxConns, and closed with the application (App.Close).
// The vectors of a pgvector store have a pool of their own on the DSN,
// whose connections register pgvector's types: the store's kind
// (runtime/retrieval/pgvector) opens them.
//
// It is a package of its own so that serve, and every service that keeps
// its state in memory, does not link pgx. It is not a store: the stores
// are runtime/agents/pgstore and runtime/gateway/pgledger.
package postgres
