// Package pgstore keeps the agent runtime's state in PostgreSQL: runs with
// their checkpoints and tool-call records (an agents.Store), and user and
// global memory (agents.MemoryStore, one per store name), so that any number
// of replicas of a service share them. A run paused in one replica is
// resumed by run id in another; a run whose replica died is continued by
// Runtime.Drive in any other. It lives apart from package agents so that
// a program that keeps its state in memory does not link pgx.
//
// The store passes the same contract as the in-memory one (package
// agentstoretest), and the guarantees that matter across replicas are the
// database's, not the process's:
//
//   - UpdateRun is one UPDATE ... WHERE version = $expected, so of two
//     replicas resuming the same pause exactly one proceeds; the other is
//     refused (*agents.ConflictError, or *agents.WrongStatusError when it
//     looks after the first moved on) and runs nothing.
//   - A tool call is recorded (INSERT, unique per run and call key) before
//     it runs, and its result is written by UPDATE ... WHERE finished_at IS
//     NULL, so a call has at most one result whoever writes it. After a
//     crash between the two, Drive finds the call without a result: a read
//     is run again, a write pauses the run for a decision.
//   - A cancel request (RequestCancel) is recorded on the run's row and sent
//     with pg_notify on the channel <prefix>_cancel in the same statement;
//     each Store keeps one connection of its own LISTENing on it while it
//     has runs to watch (application_name aid-pgstore-cancel-listener), so
//     the replica driving a run stops it as soon as PostgreSQL delivers the
//     notification: the time from Cancel on one replica to the run saved
//     cancelled by another is a few milliseconds (BenchmarkCancelAcrossReplicas).
//     After losing that connection the listener connects again and looks
//     for the requests it may have missed; a run whose replica is gone keeps
//     its request and stops when it is recovered.
//   - Every write is a single statement on one row, so the store's own
//     statements cannot deadlock; one the database aborts anyway (a
//     serialization failure under a serializable default isolation) is run
//     once more, which is safe because an aborted statement changed nothing.
//
// Strings a model or a tool wrote (call ids, tool names, arguments,
// observations, memory texts) are kept as bytea and round-trip exactly,
// NUL bytes and invalid UTF-8 included; a checkpoint is kept as json, as
// MarshalCheckpoint writes it. Identifiers (run ids, call keys, agents,
// user ids, store names) are text: one with a NUL byte or invalid UTF-8 is
// refused with *InvalidTextError when written and found nowhere when read.
//
// New creates or upgrades the tables (<prefix>_runs, <prefix>_calls,
// <prefix>_memory, and <prefix>_migrations recording the schema version)
// in one transaction under an advisory lock, so replicas may all call it at
// start-up. A database migrated by a newer release is refused
// (*SchemaTooNewError) rather than misread.
//
// It is not a queue or a scheduler: it does not notice that a replica died
// (call Drive once the run's process is known to be gone), it does not
// expire or delete finished runs, and it does not search memory (memory is
// read whole, newest entries kept within the agent's token budget). The
// budget ledger is package gateway/pgledger.
package pgstore
