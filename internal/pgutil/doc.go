// Package pgutil holds the rules the PostgreSQL stores (runtime/gateway/pgledger,
// runtime/agents/pgstore, runtime/retrieval/pgvector) share, so that each
// lives in one place: when a transaction aborted for another's sake is run
// again, how a versioned schema is migrated under an advisory lock, and
// which table prefixes and operation timeouts are valid.
//
// It imports pgx but no runtime package, so runtime/gateway/pgledger can use
// it without depending on another runtime package.
package pgutil
