// Package pgledger is a gateway.Ledger in PostgreSQL, so that any number of
// replicas of a service share one budget. It lives apart from the gateway so
// that a program that keeps its ledger in memory does not link pgx.
//
// A reservation is one transaction: the budget accounts it counts against
// are created if missing and locked in one global order, whatever order the
// call named them in (INSERT ... ORDER BY ... ON CONFLICT DO NOTHING, then
// SELECT ... ORDER BY ... FOR UPDATE), so that replicas naming the same
// budgets never deadlock; a transaction the database aborts anyway (a
// deadlock or a serialization failure) is run again once. The worst
// case is checked against each limit with the spend just read, and only if
// all fit is it added to their holds and the reservation recorded. Two
// replicas racing for the last dollar are therefore serialised by the
// database: one fits, the other is refused with the figures it saw.
//
// Settled reservations are kept as the record of spend (by alias and model);
// released ones are deleted.
//
// Settled spend carries the input tokens the provider served from its
// prompt cache (gateway.Amount.CachedInputTokens), per account and per call.
//
// It is not a billing system or an analytics store: it keeps what budgets
// and SpendSummary need, and the schema is brought up to date by Migrate
// (or Open), in numbered steps recorded in <prefix>_migrations, not by an
// external migration tool. A database that a newer release migrated is
// refused with a *SchemaTooNewError.
package pgledger
