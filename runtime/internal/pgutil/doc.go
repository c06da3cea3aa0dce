// Package pgutil holds the rules the PostgreSQL stores (runtime/gateway/pgledger,
// runtime/agents/pgstore, runtime/retrieval/pgvector) share, so that each
// lives in one place: when a transaction aborted for another's sake is run
// again, which errors mean the database is unreachable (Unavailable), how a versioned schema is migrated under an advisory lock, and
// which table prefixes and operation timeouts are valid.
//
// It imports pgx and, of the runtime, only the leaf runtime/kind (for the
// *kind.UnavailableError every store gives an outage and the Scope a shared
// pool lives in), so that runtime/gateway/pgledger can use it without
// depending on another runtime package. It is internal to the runtime: a
// program outside it reaches what it needs through the stores' own API
// (pgqueue.PoolConfig, for one).
package pgutil
