// Package pgutil holds the rules the PostgreSQL stores (runtime/gateway/pgledger,
// runtime/agents/pgstore, runtime/retrieval/pgvector) share, so that each
// lives in one place: when a transaction aborted for another's sake is run
// again, which errors mean the database is unreachable (Unavailable), how a versioned schema is migrated under an advisory lock, and
// which table prefixes and operation timeouts are valid.
//
// It imports pgx and, of the runtime, only runtime/gateway (for the
// *gateway.UnavailableError every store gives an outage), so that
// runtime/gateway/pgledger can use it without depending on another runtime
// package.
package pgutil
