package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/kind"
)

// Store is an agents.Store in PostgreSQL: runs with their checkpoints, and
// tool-call records. It is safe for concurrent use, in one process and
// across processes sharing the database. Memory returns the MemoryStores
// kept in the same database.
type Store struct {
	pool     *pgxpool.Pool
	db       querier // the pool, or the transaction of a Tx view
	timeout  time.Duration
	ownsPool bool
	prefix   string
	noRetry  bool // tests only: give up at the first abort

	// Quoted table names.
	migrations, runs, calls, memory, grants string
	// channel is the notification channel of cancel requests, unquoted
	// (pg_notify takes it as text) and quoted (for LISTEN).
	channel, quotedChannel string

	// Shared with the Tx views of the store.
	cancels *agents.Cancels
	listen  *listener
}

// querier is what the store's statements run on: a pool, or one
// transaction (Tx).
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Option adjusts a Store.
type Option func(*Store) error

// WithTablePrefix names the store's tables <prefix>_runs, <prefix>_calls,
// <prefix>_memory and <prefix>_migrations; the default prefix is
// "aid_agent". The prefix is lower-case letters, digits and underscores, so
// that it needs no quoting in an operator's SQL.
func WithTablePrefix(prefix string) Option {
	return func(s *Store) error {
		if err := pgutil.CheckTablePrefix(prefix); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		s.prefix = prefix
		return nil
	}
}

// WithOpTimeout bounds each store operation; the default is 10 seconds. The
// runtime records a tool call's result and a run's end with a context that
// ignores the caller's cancellation, so that work done is never lost
// because a client went away; this bound keeps a hung database from holding
// such a write forever.
func WithOpTimeout(d time.Duration) Option {
	return func(s *Store) error {
		if err := pgutil.CheckOpTimeout(d); err != nil {
			return fmt.Errorf("pgstore: %w", err)
		}
		s.timeout = d
		return nil
	}
}

// New returns a store on pool, which the caller keeps and closes, after
// bringing the store's tables to the schema this code reads (Migrate).
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: pool is nil")
	}
	s := &Store{pool: pool, db: pool, prefix: "aid_agent", timeout: pgutil.DefaultOpTimeout, cancels: &agents.Cancels{}, listen: &listener{}}
	for _, o := range opts {
		if err := o(s); err != nil {
			return nil, err
		}
	}
	s.migrations = pgx.Identifier{s.prefix + "_migrations"}.Sanitize()
	s.runs = pgx.Identifier{s.prefix + "_runs"}.Sanitize()
	s.calls = pgx.Identifier{s.prefix + "_calls"}.Sanitize()
	s.memory = pgx.Identifier{s.prefix + "_memory"}.Sanitize()
	s.grants = pgx.Identifier{s.prefix + "_grants"}.Sanitize()
	s.channel = s.prefix + "_cancel"
	s.quotedChannel = pgx.Identifier{s.channel}.Sanitize()
	if err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Open connects to dsn and returns a store that owns its pool; Close closes
// it. The pool has the DSN's pool_max_conns connections at most, or
// pgutil.DefaultMaxConns.
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	return pgutil.OpenOwned(ctx, "pgstore", dsn, nil, func(pool *pgxpool.Pool) (*Store, error) {
		s, err := New(ctx, pool, opts...)
		if err != nil {
			return nil, err
		}
		s.ownsPool = true
		return s, nil
	})
}

// sharedKey keeps an application's store of one DSN in its scope.
type sharedKey struct{ dsn string }

// Shared returns the application's store on dsn, opened on first use with
// default options on the pool its run store, budget ledger and memory on
// that DSN share (pgutil.SharedPool), and kept in scope, which closes the
// pool: the service state's run store and the memory of its pgvector
// stores are this one store. ctx bounds connecting and migrating.
func Shared(ctx context.Context, scope *kind.Scope, dsn string) (*Store, error) {
	return kind.Shared(scope, sharedKey{dsn}, func() (*Store, func() error, error) {
		pool, err := pgutil.SharedPool(ctx, scope, dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("pgstore: %w", err)
		}
		s, err := New(ctx, pool)
		if err != nil {
			return nil, nil, err
		}
		// Closing stops the cancel listener; the pool is the scope's.
		return s, func() error { s.Close(); return nil }, nil
	})
}

// Close stops the store's listener for cancel requests and closes the
// pool if the store opened it.
func (s *Store) Close() {
	s.listen.close()
	if s.ownsPool {
		s.pool.Close()
	}
}

// Tx returns a view of the store whose reads and writes are statements of
// tx, so that a run is written in the same transaction as something else:
// the job that will drive it (a job queue's insert), say. It shares the
// store's tables and cancel watchers; the caller commits or rolls back tx,
// and a statement the database aborts is not tried again (the transaction
// is over). Close on the view does nothing.
func (s *Store) Tx(tx pgx.Tx) *Store {
	v := *s
	v.db, v.noRetry, v.ownsPool = tx, true, false
	v.listen = &listener{closed: true}
	return &v
}

// Pool returns the pool the store's statements run on, for a job queue
// that keeps its jobs in the same database and writes them in the same
// transactions as the runs (Tx).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// migrationSteps are the schema's versions, in order: step i brings the
// schema from version i to version i+1. A step is never edited once
// released; a change is a new step, so that every database, whatever
// version it is at, reaches the same schema.
//
// Strings the runtime does not make itself (the model's call ids, tool
// names and arguments, tools' observations, memory texts) are bytea, so that
// any Go string round-trips exactly: text refuses NUL bytes and invalid
// UTF-8, and a tool answering with either must not fail the run. The
// checkpoint is json, not jsonb: json keeps the runtime's encoding as
// written and accepts \u0000, which jsonb refuses.
//
// The runs table has no index but its key: the runtime rewrites a run's
// row after every step, and an index on a column that changes (status,
// updated_at) would make every such write update it too, where PostgreSQL
// can otherwise update the row in place (a HOT update). A run's calls are
// read through the primary key, (run_id, key), and sorted by seq; a run has
// few.
var migrationSteps = []string{
	// 1: runs, calls, memory.
	`CREATE TABLE {runs} (
		run_id     text        PRIMARY KEY,
		agent      text        NOT NULL,
		status     text        NOT NULL,
		version    bigint      NOT NULL CHECK (version > 0),
		checkpoint json        NOT NULL,
		created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
		updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
	);
	CREATE TABLE {calls} (
		run_id      text        NOT NULL,
		key         text        NOT NULL,
		seq         bigint      GENERATED ALWAYS AS IDENTITY,
		call_id     bytea       NOT NULL,
		tool        bytea       NOT NULL,
		effects     text        NOT NULL,
		arguments   bytea       NOT NULL,
		observation bytea,
		error_kind  text,
		recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
		finished_at timestamptz,
		PRIMARY KEY (run_id, key),
		CHECK ((finished_at IS NULL) = (observation IS NULL) AND (finished_at IS NULL) = (error_kind IS NULL))
	);
	CREATE TABLE {memory} (
		id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		store      text        NOT NULL,
		scope      text        NOT NULL CHECK (scope IN ('user', 'global')),
		subject    text        NOT NULL,
		text       bytea       NOT NULL,
		created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
		CHECK ((scope = 'user') = (subject <> ''))
	);
	CREATE INDEX ON {memory} (store, scope, subject, id);`,
	// 2: a run's pending cancel request (RequestCancel), kept apart from
	// what UpdateRun writes.
	`ALTER TABLE {runs} ADD COLUMN cancel_by text, ADD COLUMN cancel_at timestamptz;`,
	// 3: the grants people gave for a thread (AddGrant), read by the
	// thread's later runs when the policy asks about a call.
	`CREATE TABLE {grants} (
		id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		thread_id  text        NOT NULL,
		tool       text        NOT NULL,
		scope      text        NOT NULL,
		granted_by text        NOT NULL,
		granted_at timestamptz NOT NULL,
		run_id     text        NOT NULL
	);
	CREATE INDEX ON {grants} (thread_id, id);`,
	// 4: whom a run is for (Checkpoint.Key, Tenant), written once at
	// CreateRun, and the index ListRuns pages through: neither column
	// changes after the insert, so the index leaves a step's UPDATE a HOT
	// one.
	`ALTER TABLE {runs} ADD COLUMN caller_key text NOT NULL DEFAULT '', ADD COLUMN tenant text NOT NULL DEFAULT '';
	CREATE INDEX ON {runs} (tenant, created_at DESC, run_id DESC);`,
	// 5: global memory is a tenant's, its subject the tenant ('' for the
	// runs of no tenant): step 1's check that a global entry has no
	// subject (named by PostgreSQL after the table) gives way to one that
	// only a user entry needs one.
	`DO $$
	DECLARE c text;
	BEGIN
		FOR c IN SELECT conname FROM pg_constraint
			WHERE conrelid = '{memory}'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%subject%'
		LOOP
			EXECUTE format('ALTER TABLE {memory} DROP CONSTRAINT %I', c);
		END LOOP;
	END $$;
	ALTER TABLE {memory} ADD CHECK (scope <> 'user' OR subject <> '');`,
}

// SchemaVersion is the schema version this code reads and writes: the
// number of migration steps.
const SchemaVersion = 5

// SchemaTooNewError reports a database migrated by a newer release of this
// package: this code does not know what the later steps changed, so it
// refuses to read or write rather than misread. In a rolling upgrade that
// adds a step, an old replica that restarts after a new one migrated stops
// here: finish the rollout rather than roll back past a migration.
type SchemaTooNewError struct {
	// Database is the version the database is at.
	Database int
	// Known is the newest version this code knows.
	Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("pgstore: the database schema is at version %d, newer than this code's %d; upgrade the program", e.Database, e.Known)
}

// Migrate brings the store's tables to SchemaVersion. It runs in one
// transaction under an advisory lock keyed by the table prefix, so that
// replicas starting together apply each step once, one after another, and
// a failed step leaves the database as it was. It is idempotent.
func (s *Store) Migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	schema := pgutil.Schema{
		// Keyed by the prefix: stores with different prefixes in one
		// database do not wait for each other.
		LockKey:  pgutil.LockKey("aid/pgstore:" + s.prefix),
		Steps:    migrationSteps,
		Names:    strings.NewReplacer("{runs}", s.runs, "{calls}", s.calls, "{memory}", s.memory, "{grants}", s.grants),
		Versions: pgutil.MigrationsTable{Name: s.migrations, Clock: "clock_timestamp()"},
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return pgutil.Migrate(ctx, tx, schema) })
	var tooNew *pgutil.SchemaTooNewError
	if errors.As(err, &tooNew) {
		return &SchemaTooNewError{Database: tooNew.Database, Known: tooNew.Known}
	}
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}

// do runs one operation, bounded by the store's timeout, and runs it once
// more if the database aborted it for a deadlock or a serialization
// failure (pgutil.Retry). Every write is one statement on one row, so the
// store's own statements never deadlock; a database whose default isolation
// is serializable can still abort one, and an aborted statement changed
// nothing, so running it again is safe.
//
// A database that cannot be reached, or does not answer within the
// timeout, gives a *kind.UnavailableError (pgutil.Unavailable) naming
// dependency, the store's part in a client's words.
func (s *Store) do(ctx context.Context, fn func(context.Context) error) error {
	return s.doAs(ctx, "run store", fn)
}

func (s *Store) doAs(ctx context.Context, dependency string, fn func(context.Context) error) error {
	ctx, cancel := pgutil.WithOpTimeout(ctx, s.timeout)
	defer cancel()
	return pgutil.Unavailable(ctx, dependency, pgutil.Retry(ctx, s.noRetry, func() error { return fn(ctx) }))
}

// codeUnique is the SQLSTATE code of a unique violation.
const codeUnique = "23505"

func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeUnique
}

// storable reports whether a string can be a text value: PostgreSQL text
// holds no NUL byte and only valid UTF-8.
func storable(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsRune(v, 0)
}

// InvalidTextError reports an identifier (a run id, a call key, an agent, a
// user id or a memory store name) that PostgreSQL text cannot hold: it has
// a NUL byte or is not UTF-8. The in-memory stores accept such ids, but no
// id the runtime makes has either, so it is refused here rather than
// mangled. A lookup of such an id finds nothing.
type InvalidTextError struct {
	// Field names the identifier.
	Field string
	// Value is the identifier.
	Value string
}

// Error implements error.
func (e *InvalidTextError) Error() string {
	return fmt.Sprintf("pgstore: %s %q has a NUL byte or is not UTF-8", e.Field, e.Value)
}

func checkText(field, v string) error {
	if !storable(v) {
		return &InvalidTextError{Field: field, Value: v}
	}
	return nil
}

// CreateRun implements agents.Store.
func (s *Store) CreateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	if err := errors.Join(checkText("run id", rec.RunID), checkText("agent", rec.Agent), checkText("status", string(rec.Status)),
		checkText("key", rec.Checkpoint.Key), checkText("tenant", rec.Checkpoint.Tenant)); err != nil {
		return agents.RunRecord{}, err
	}
	rec.Cancel = nil
	cp, err := agents.MarshalCheckpoint(rec.Checkpoint)
	if err != nil {
		return agents.RunRecord{}, fmt.Errorf("pgstore: create run %s: encode checkpoint: %w", rec.RunID, err)
	}
	err = s.do(ctx, func(ctx context.Context) error {
		return s.db.QueryRow(ctx, `INSERT INTO `+s.runs+` (run_id, agent, status, version, checkpoint, caller_key, tenant)
			VALUES ($1, $2, $3, 1, $4, $5, $6) RETURNING version, updated_at, created_at`,
			rec.RunID, rec.Agent, string(rec.Status), string(cp), rec.Checkpoint.Key, rec.Checkpoint.Tenant).Scan(&rec.Version, &rec.UpdatedAt, &rec.CreatedAt)
	})
	if isUnique(err) {
		return agents.RunRecord{}, &agents.RunExistsError{RunID: rec.RunID}
	}
	if err != nil {
		return agents.RunRecord{}, fmt.Errorf("pgstore: create run %s: %w", rec.RunID, err)
	}
	return rec, nil
}

// UpdateRun implements agents.Store. The write is one conditional UPDATE
// (WHERE version = the caller's), so of two writers holding the same
// version the database lets exactly one through.
func (s *Store) UpdateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	return s.UpdateRunRecordCalls(ctx, rec, nil)
}

// UpdateRunRecordCalls implements agents.StepStore: UpdateRun's
// conditional UPDATE and the calls' INSERT are one statement, one round
// trip, and the INSERT inserts only when the UPDATE wrote, so that a lost
// claim records nothing; a call already recorded fails the statement, and
// with it the update.
func (s *Store) UpdateRunRecordCalls(ctx context.Context, rec agents.RunRecord, calls []agents.CallRecord) (agents.RunRecord, error) {
	if !storable(rec.RunID) {
		return agents.RunRecord{}, &agents.RunNotFoundError{RunID: rec.RunID}
	}
	if err := errors.Join(checkText("agent", rec.Agent), checkText("status", string(rec.Status))); err != nil {
		return agents.RunRecord{}, err
	}
	keys := make([]string, len(calls))
	ids := make([][]byte, len(calls))
	tools := make([][]byte, len(calls))
	effects := make([]string, len(calls))
	args := make([][]byte, len(calls))
	for i, c := range calls {
		if c.RunID != rec.RunID {
			return agents.RunRecord{}, fmt.Errorf("pgstore: update run %s: call %s is of run %s", rec.RunID, c.Key, c.RunID)
		}
		if err := errors.Join(checkText("call key", c.Key), checkText("effects", string(c.Effects))); err != nil {
			return agents.RunRecord{}, err
		}
		keys[i], ids[i], tools[i], effects[i], args[i] = c.Key, []byte(c.CallID), []byte(c.Tool), string(c.Effects), []byte(c.Arguments)
	}
	cp, err := agents.MarshalCheckpoint(rec.Checkpoint)
	if err != nil {
		return agents.RunRecord{}, fmt.Errorf("pgstore: update run %s: encode checkpoint: %w", rec.RunID, err)
	}
	// A cancel request outlives the run's steps, not the run: it is kept
	// while the status stays running.
	update := `UPDATE ` + s.runs + `
		SET agent = $3, status = $4, checkpoint = $5, version = version + 1, updated_at = clock_timestamp(),
			cancel_by = CASE WHEN $4 = 'running' THEN cancel_by END,
			cancel_at = CASE WHEN $4 = 'running' THEN cancel_at END
		WHERE run_id = $1 AND version = $2
		RETURNING version, updated_at, cancel_by, cancel_at`
	sql, params := update, []any{rec.RunID, rec.Version, rec.Agent, string(rec.Status), string(cp)}
	if len(calls) > 0 {
		sql = `WITH u AS (` + update + `), c AS (
				INSERT INTO ` + s.calls + ` (run_id, key, call_id, tool, effects, arguments)
				SELECT $1, k.key, k.call_id, k.tool, k.effects, k.arguments
				FROM unnest($6::text[], $7::bytea[], $8::bytea[], $9::text[], $10::bytea[]) WITH ORDINALITY AS k(key, call_id, tool, effects, arguments, n)
				WHERE EXISTS (SELECT 1 FROM u)
				ORDER BY k.n
			)
			SELECT version, updated_at, cancel_by, cancel_at FROM u`
		params = append(params, keys, ids, tools, effects, args)
	}
	var stored int64
	var found bool
	err = s.do(ctx, func(ctx context.Context) error {
		stored, found = 0, false
		var by *string
		var at *time.Time
		err := s.db.QueryRow(ctx, sql, params...).Scan(&rec.Version, &rec.UpdatedAt, &by, &at)
		rec.Cancel = cancelRequest(by, at)
		if !errors.Is(err, pgx.ErrNoRows) {
			found = true
			return err
		}
		// Not written: say why, with the version stored now.
		err = s.db.QueryRow(ctx, `SELECT version FROM `+s.runs+` WHERE run_id = $1`, rec.RunID).Scan(&stored)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		found = true
		return err
	})
	switch {
	case isUnique(err):
		return agents.RunRecord{}, &agents.CallExistsError{RunID: rec.RunID, Key: strings.Join(keys, ",")}
	case err != nil:
		return agents.RunRecord{}, fmt.Errorf("pgstore: update run %s: %w", rec.RunID, err)
	case !found:
		return agents.RunRecord{}, &agents.RunNotFoundError{RunID: rec.RunID}
	case stored != 0:
		return agents.RunRecord{}, &agents.ConflictError{RunID: rec.RunID, Version: rec.Version, Stored: stored}
	}
	return rec, nil
}

// LoadRun implements agents.Store. The checkpoint is decoded as stored,
// without UnmarshalCheckpoint's checks: the runtime checks it when it
// resumes, and a store that refused to show an old checkpoint would hide
// the run from its operators.
func (s *Store) LoadRun(ctx context.Context, runID string) (agents.RunRecord, error) {
	if !storable(runID) {
		return agents.RunRecord{}, &agents.RunNotFoundError{RunID: runID}
	}
	rec := agents.RunRecord{RunID: runID}
	var status string
	var cp []byte
	err := s.do(ctx, func(ctx context.Context) error {
		var by *string
		var at *time.Time
		err := s.db.QueryRow(ctx, `SELECT agent, status, version, checkpoint::text, updated_at, cancel_by, cancel_at, created_at FROM `+s.runs+` WHERE run_id = $1`, runID).
			Scan(&rec.Agent, &status, &rec.Version, &cp, &rec.UpdatedAt, &by, &at, &rec.CreatedAt)
		rec.Cancel = cancelRequest(by, at)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return agents.RunRecord{}, &agents.RunNotFoundError{RunID: runID}
	}
	if err != nil {
		return agents.RunRecord{}, fmt.Errorf("pgstore: load run %s: %w", runID, err)
	}
	rec.Status = agents.Status(status)
	if err := json.Unmarshal(cp, &rec.Checkpoint); err != nil {
		return agents.RunRecord{}, fmt.Errorf("pgstore: load run %s: decode checkpoint: %w", runID, err)
	}
	return rec, nil
}

// RecordCall implements agents.Store.
func (s *Store) RecordCall(ctx context.Context, rec agents.CallRecord) error {
	if err := errors.Join(checkText("run id", rec.RunID), checkText("call key", rec.Key), checkText("effects", string(rec.Effects))); err != nil {
		return err
	}
	err := s.do(ctx, func(ctx context.Context) error {
		_, err := s.db.Exec(ctx, `INSERT INTO `+s.calls+` (run_id, key, call_id, tool, effects, arguments)
			VALUES ($1, $2, $3, $4, $5, $6)`,
			rec.RunID, rec.Key, []byte(rec.CallID), []byte(rec.Tool), string(rec.Effects), []byte(rec.Arguments))
		return err
	})
	if isUnique(err) {
		return &agents.CallExistsError{RunID: rec.RunID, Key: rec.Key}
	}
	if err != nil {
		return fmt.Errorf("pgstore: record call %s of run %s: %w", rec.Key, rec.RunID, err)
	}
	return nil
}

// FinishCall implements agents.Store. The result is written by one UPDATE
// ... WHERE finished_at IS NULL, so of two results for one call the
// database keeps exactly one; the same statement tells a call never
// recorded from one already finished.
func (s *Store) FinishCall(ctx context.Context, runID, key string, res agents.CallResult) error {
	if !storable(runID) || !storable(key) {
		return &agents.CallNotFoundError{RunID: runID, Key: key}
	}
	if err := checkText("error kind", string(res.ErrorKind)); err != nil {
		return err
	}
	var finished, exists bool
	err := s.do(ctx, func(ctx context.Context) error {
		return s.db.QueryRow(ctx, `WITH u AS (
				UPDATE `+s.calls+` SET observation = $3, error_kind = $4, finished_at = clock_timestamp()
				WHERE run_id = $1 AND key = $2 AND finished_at IS NULL
				RETURNING 1
			)
			SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM `+s.calls+` WHERE run_id = $1 AND key = $2)`,
			runID, key, []byte(res.Observation), string(res.ErrorKind)).Scan(&finished, &exists)
	})
	switch {
	case err != nil:
		return fmt.Errorf("pgstore: finish call %s of run %s: %w", key, runID, err)
	case finished:
		return nil
	case exists:
		return &agents.CallFinishedError{RunID: runID, Key: key}
	}
	return &agents.CallNotFoundError{RunID: runID, Key: key}
}

// Call implements agents.Store.
func (s *Store) Call(ctx context.Context, runID, key string) (agents.CallRecord, error) {
	if !storable(runID) || !storable(key) {
		return agents.CallRecord{}, &agents.CallNotFoundError{RunID: runID, Key: key}
	}
	var out []agents.CallRecord
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.queryCalls(ctx, `WHERE run_id = $1 AND key = $2`, runID, key)
		return err
	})
	if err != nil {
		return agents.CallRecord{}, fmt.Errorf("pgstore: read call %s of run %s: %w", key, runID, err)
	}
	if len(out) == 0 {
		return agents.CallRecord{}, &agents.CallNotFoundError{RunID: runID, Key: key}
	}
	return out[0], nil
}

// Calls implements agents.Store.
func (s *Store) Calls(ctx context.Context, runID string) ([]agents.CallRecord, error) {
	if !storable(runID) {
		return nil, nil
	}
	var out []agents.CallRecord
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.queryCalls(ctx, `WHERE run_id = $1 ORDER BY seq`, runID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: read calls of run %s: %w", runID, err)
	}
	return out, nil
}

func (s *Store) queryCalls(ctx context.Context, where string, args ...any) ([]agents.CallRecord, error) {
	rows, err := s.db.Query(ctx, `SELECT run_id, key, call_id, tool, effects, arguments, observation, error_kind FROM `+s.calls+` `+where, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (agents.CallRecord, error) {
		var c agents.CallRecord
		var callID, tool, arguments, observation []byte
		var effects string
		var kind *string
		if err := row.Scan(&c.RunID, &c.Key, &callID, &tool, &effects, &arguments, &observation, &kind); err != nil {
			return c, err
		}
		c.CallID, c.Tool, c.Effects, c.Arguments = string(callID), string(tool), agents.Effects(effects), string(arguments)
		if kind != nil {
			c.Result = &agents.CallResult{Observation: string(observation), ErrorKind: agents.ErrorKind(*kind)}
		}
		return c, nil
	})
}

// AddGrant implements agents.Store.
func (s *Store) AddGrant(ctx context.Context, g agents.Grant) error {
	if g.ThreadID == "" {
		return fmt.Errorf("pgstore: grant of %s in run %s: a thread grant needs a thread id", g.Tool, g.RunID)
	}
	if err := errors.Join(checkText("thread id", g.ThreadID), checkText("tool", g.Tool), checkText("granter", g.By), checkText("run id", g.RunID), checkText("scope", string(g.Scope))); err != nil {
		return err
	}
	err := s.do(ctx, func(ctx context.Context) error {
		// One grant per tool and thread, the latest (agents.Store).
		_, err := s.db.Exec(ctx, `WITH gone AS (DELETE FROM `+s.grants+` WHERE thread_id = $1 AND tool = $2)
			INSERT INTO `+s.grants+` (thread_id, tool, scope, granted_by, granted_at, run_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			g.ThreadID, g.Tool, string(g.Scope), g.By, g.At, g.RunID)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: add a grant to thread %s: %w", g.ThreadID, err)
	}
	return nil
}

// Grants implements agents.Store.
func (s *Store) Grants(ctx context.Context, threadID string) ([]agents.Grant, error) {
	if !storable(threadID) {
		return nil, nil
	}
	var out []agents.Grant
	err := s.do(ctx, func(ctx context.Context) error {
		rows, err := s.db.Query(ctx, `SELECT thread_id, tool, scope, granted_by, granted_at, run_id FROM `+s.grants+` WHERE thread_id = $1 ORDER BY id`, threadID)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (agents.Grant, error) {
			var g agents.Grant
			var scope string
			err := row.Scan(&g.ThreadID, &g.Tool, &scope, &g.By, &g.At, &g.RunID)
			g.Scope = agents.GrantScope(scope)
			return g, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: read the grants of thread %s: %w", threadID, err)
	}
	return out, nil
}

var _ agents.StepStore = (*Store)(nil)

// ListRuns implements agents.RunLister: one indexed range scan of the
// filter's tenant (every tenant's with AllTenants), newest first, from the
// cursor on.
func (s *Store) ListRuns(ctx context.Context, f agents.RunFilter) (agents.RunPage, error) {
	f, after, err := f.Check()
	if err != nil {
		return agents.RunPage{}, err
	}
	if err := errors.Join(checkText("key", f.Key), checkText("tenant", f.Tenant)); err != nil {
		return agents.RunPage{}, err
	}
	statuses := make([]string, len(f.Statuses))
	for i, st := range f.Statuses {
		statuses[i] = string(st)
	}
	var cursorAt *time.Time
	if !after.Zero() {
		cursorAt = &after.Created
	}
	// One more than the page says whether there is a next one.
	sql := `SELECT run_id, agent, status, version, checkpoint::text, updated_at, cancel_by, cancel_at, created_at FROM ` + s.runs + `
		WHERE ($1 OR tenant = $2) AND ($3 = '' OR caller_key = $3) AND (cardinality($4::text[]) = 0 OR status = ANY($4))
			AND ($5::timestamptz IS NULL OR (created_at, run_id) < ($5, $6))
		ORDER BY created_at DESC, run_id DESC LIMIT $7`
	var page agents.RunPage
	err = s.do(ctx, func(ctx context.Context) error {
		page = agents.RunPage{}
		rows, err := s.db.Query(ctx, sql, f.AllTenants, f.Tenant, f.Key, statuses, cursorAt, after.RunID, f.Limit+1)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rec agents.RunRecord
			var status string
			var cp []byte
			var by *string
			var at *time.Time
			if err := rows.Scan(&rec.RunID, &rec.Agent, &status, &rec.Version, &cp, &rec.UpdatedAt, &by, &at, &rec.CreatedAt); err != nil {
				return err
			}
			rec.Status, rec.Cancel = agents.Status(status), cancelRequest(by, at)
			if err := json.Unmarshal(cp, &rec.Checkpoint); err != nil {
				return fmt.Errorf("decode the checkpoint of run %s: %w", rec.RunID, err)
			}
			page.Runs = append(page.Runs, rec)
		}
		return rows.Err()
	})
	if err != nil {
		return agents.RunPage{}, fmt.Errorf("pgstore: list runs: %w", err)
	}
	if len(page.Runs) > f.Limit {
		page.Runs = page.Runs[:f.Limit]
		last := page.Runs[f.Limit-1]
		page.Next = agents.RunCursor{Created: last.CreatedAt, RunID: last.RunID}.String()
	}
	return page, nil
}

// DeleteRun implements agents.RunDeleter: the run's row and its calls, in
// one statement.
func (s *Store) DeleteRun(ctx context.Context, runID string) error {
	if !storable(runID) {
		return &agents.RunNotFoundError{RunID: runID}
	}
	var n int64
	err := s.do(ctx, func(ctx context.Context) error {
		tag, err := s.db.Exec(ctx, `WITH calls AS (DELETE FROM `+s.calls+` WHERE run_id = $1) DELETE FROM `+s.runs+` WHERE run_id = $1`, runID)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: delete run %s: %w", runID, err)
	}
	if n == 0 {
		return &agents.RunNotFoundError{RunID: runID}
	}
	return nil
}
