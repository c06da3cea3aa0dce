package pgledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/kind"
)

// Ledger is the PostgreSQL gateway.Ledger. It is safe for concurrent use, in
// one process and across processes.
type Ledger struct {
	pool     *pgxpool.Pool
	timeout  time.Duration
	ownsPool bool
	accounts string // quoted table names
	holds    string
	// counters and admissions are the rate limits' tables.
	counters, admissions string
	// migrations is the quoted name of the table of applied schema
	// versions.
	migrations string
	prefix     string
	noRetry    bool // tests only: give up at the first abort
}

// Option adjusts a Ledger.
type Option func(*Ledger) error

// WithTablePrefix names the ledger's tables <prefix>_accounts,
// <prefix>_reservations, <prefix>_rate_counters, <prefix>_rate_admissions
// and <prefix>_migrations; the default prefix is "aid_budget". The prefix is
// lower-case letters, digits and underscores.
func WithTablePrefix(prefix string) Option {
	return func(l *Ledger) error {
		if err := pgutil.CheckTablePrefix(prefix); err != nil {
			return fmt.Errorf("pgledger: %w", err)
		}
		l.prefix = prefix
		return nil
	}
}

// WithOpTimeout bounds each ledger operation; the default is 10 seconds. The
// gateway settles with a context that ignores the caller's cancellation, so
// that spend is recorded even for a caller that gave up; this bound keeps a
// hung database from holding such a call forever.
func WithOpTimeout(d time.Duration) Option {
	return func(l *Ledger) error {
		if err := pgutil.CheckOpTimeout(d); err != nil {
			return fmt.Errorf("pgledger: %w", err)
		}
		l.timeout = d
		return nil
	}
}

// New returns a ledger on pool, which the caller keeps and closes. Call
// Migrate once before use (or use Open, which does).
func New(pool *pgxpool.Pool, opts ...Option) (*Ledger, error) {
	l := &Ledger{pool: pool, prefix: "aid_budget", timeout: pgutil.DefaultOpTimeout}
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	l.accounts = pgx.Identifier{l.prefix + "_accounts"}.Sanitize()
	l.holds = pgx.Identifier{l.prefix + "_reservations"}.Sanitize()
	l.migrations = pgx.Identifier{l.prefix + "_migrations"}.Sanitize()
	l.counters = pgx.Identifier{l.prefix + "_rate_counters"}.Sanitize()
	l.admissions = pgx.Identifier{l.prefix + "_rate_admissions"}.Sanitize()
	return l, nil
}

// sharedKey keeps an application's ledger of one DSN in its scope.
type sharedKey struct{ dsn string }

// Shared returns the application's ledger on dsn, its tables created if
// they are missing, opened on first use with default options on the pool
// its run store, budget ledger and memory on that DSN share
// (pgutil.SharedPool), and kept in scope, which closes the pool. ctx bounds
// connecting and migrating.
func Shared(ctx context.Context, scope *kind.Scope, dsn string) (*Ledger, error) {
	return kind.Shared(scope, sharedKey{dsn}, func() (*Ledger, func() error, error) {
		pool, err := pgutil.SharedPool(ctx, scope, dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("pgledger: %w", err)
		}
		l, err := New(pool)
		if err == nil {
			err = l.Migrate(ctx)
		}
		return l, nil, err
	})
}

// Open connects to dsn, creates the ledger's tables if they are missing and
// returns a ledger that owns its pool; Close closes it. The pool has the
// DSN's pool_max_conns connections at most, or pgutil.DefaultMaxConns.
func Open(ctx context.Context, dsn string, opts ...Option) (*Ledger, error) {
	cfg, err := pgutil.PoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgledger: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgledger: connect: %w", err)
	}
	l, err := New(pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	l.ownsPool = true
	if err := l.Migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return l, nil
}

// Close closes the pool if the ledger opened it.
func (l *Ledger) Close() {
	if l.ownsPool {
		l.pool.Close()
	}
}

// migrationSteps are the schema's versions, in order: step i brings the
// schema from version i to version i+1. A step is never edited once
// released; a change is a new step, so that every database, whatever
// version it is at, reaches the same schema.
//
// Step 1 is the schema of the releases before the ledger counted its
// versions, and creates its tables only if they are missing, so that a
// database those releases made is adopted as version 1 as it is.
var migrationSteps = []string{
	// 1: accounts and reservations.
	`CREATE TABLE IF NOT EXISTS {accounts} (
		budget            text   NOT NULL,
		scope             text   NOT NULL,
		key               text   NOT NULL,
		spent_nano_usd    bigint NOT NULL DEFAULT 0,
		spent_tokens      bigint NOT NULL DEFAULT 0,
		reserved_nano_usd bigint NOT NULL DEFAULT 0,
		reserved_tokens   bigint NOT NULL DEFAULT 0,
		calls             bigint NOT NULL DEFAULT 0,
		PRIMARY KEY (budget, scope, key)
	);
	CREATE TABLE IF NOT EXISTS {holds} (
		id              text        PRIMARY KEY,
		alias           text        NOT NULL,
		model           text        NOT NULL,
		nano_usd        bigint      NOT NULL,
		tokens          bigint      NOT NULL,
		budgets         text[]      NOT NULL,
		scopes          text[]      NOT NULL,
		keys            text[]      NOT NULL,
		settled         boolean     NOT NULL DEFAULT false,
		actual_nano_usd bigint,
		actual_tokens   bigint,
		created_at      timestamptz NOT NULL DEFAULT now(),
		settled_at      timestamptz
	);`,
	// 2: the input tokens served from a provider's prompt cache
	// (gateway.Amount.CachedInputTokens), spent per account and recorded
	// per settled call. Rows settled before it count none.
	`ALTER TABLE {accounts} ADD COLUMN spent_cached_input_tokens bigint NOT NULL DEFAULT 0;
	ALTER TABLE {holds} ADD COLUMN actual_cached_input_tokens bigint NOT NULL DEFAULT 0;`,
	// 3: rate limits (gateway.Limiter): a row per counter, which an
	// admission locks, and the admissions of the last minute.
	`CREATE TABLE {counters} (
		limit_name text NOT NULL,
		key        text NOT NULL,
		PRIMARY KEY (limit_name, key)
	);
	CREATE TABLE {admissions} (
		limit_name text        NOT NULL,
		key        text        NOT NULL,
		at         timestamptz NOT NULL,
		tokens     bigint      NOT NULL
	);
	CREATE INDEX ON {admissions} (limit_name, key, at);`,
}

// SchemaVersion is the schema version this code reads and writes: the
// number of migration steps.
const SchemaVersion = 3

// SchemaTooNewError reports a database migrated by a newer release of this
// package: this code does not know what the later steps changed, so it
// refuses to migrate rather than guess. In a rolling upgrade that adds a
// step, an old replica that restarts after a new one migrated stops here:
// finish the rollout rather than roll back past a migration.
type SchemaTooNewError struct {
	// Database is the version the database is at.
	Database int
	// Known is the newest version this code knows.
	Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("pgledger: the database schema is at version %d, newer than this code's %d; upgrade the program", e.Database, e.Known)
}

// Migrate brings the ledger's tables to SchemaVersion, recording the
// version in <prefix>_migrations. It runs in one transaction under an
// advisory lock, so that replicas starting together apply each step once,
// one after another, and a failed step leaves the database as it was. It
// is idempotent.
func (l *Ledger) Migrate(ctx context.Context) error {
	ctx, cancel := pgutil.WithOpTimeout(ctx, l.timeout)
	defer cancel()
	schema := pgutil.Schema{
		// "aidb", whatever the prefix: ledgers of every prefix wait for
		// each other, as they always have.
		LockKey:  0x61696462,
		Steps:    migrationSteps,
		Names:    strings.NewReplacer("{accounts}", l.accounts, "{holds}", l.holds, "{counters}", l.counters, "{admissions}", l.admissions),
		Versions: pgutil.MigrationsTable{Name: l.migrations, Clock: "now()"},
	}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error { return pgutil.Migrate(ctx, tx, schema) })
	var tooNew *pgutil.SchemaTooNewError
	if errors.As(err, &tooNew) {
		return &SchemaTooNewError{Database: tooNew.Database, Known: tooNew.Known}
	}
	if err != nil {
		return fmt.Errorf("pgledger: migrate: %w", err)
	}
	return nil
}

// lockAccounts creates the named accounts that are missing and locks them
// all, and returns their spend. Both steps go through the accounts in one
// global order, (budget, scope, key) compared byte-wise, whatever order the
// caller named them in: INSERT ... ON CONFLICT makes a second inserter of a
// row wait for the first, in the order the rows are inserted, and SELECT ...
// FOR UPDATE takes row locks in the order it returns them. Two transactions
// over overlapping accounts therefore always wait for each other in the same
// direction and cannot deadlock.
func (l *Ledger) lockAccounts(ctx context.Context, tx pgx.Tx, budgets, scopes, keys []string) (map[gateway.Account][2]gateway.Amount, error) {
	if _, err := tx.Exec(ctx, `INSERT INTO `+l.accounts+` (budget, scope, key)
		SELECT w.budget, w.scope, w.key FROM unnest($1::text[], $2::text[], $3::text[]) AS w(budget, scope, key)
		ORDER BY w.budget COLLATE "C", w.scope COLLATE "C", w.key COLLATE "C"
		ON CONFLICT DO NOTHING`, budgets, scopes, keys); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, `SELECT a.budget, a.scope, a.key, a.spent_nano_usd, a.spent_tokens, a.reserved_nano_usd, a.reserved_tokens
		FROM `+l.accounts+` a JOIN unnest($1::text[], $2::text[], $3::text[]) AS w(budget, scope, key)
		  ON a.budget = w.budget AND a.scope = w.scope AND a.key = w.key
		ORDER BY a.budget COLLATE "C", a.scope COLLATE "C", a.key COLLATE "C"
		FOR UPDATE OF a`, budgets, scopes, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[gateway.Account][2]gateway.Amount, len(budgets))
	for rows.Next() {
		var a gateway.Account
		var spent, reserved gateway.Amount
		var scope string
		if err := rows.Scan(&a.Budget, &scope, &a.Key, &spent.NanoUSD, &spent.Tokens, &reserved.NanoUSD, &reserved.Tokens); err != nil {
			rows.Close()
			return nil, err
		}
		a.Scope = gateway.Scope(scope)
		out[a] = [2]gateway.Amount{spent, reserved}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// inTx runs fn in a transaction, and runs it once more, from scratch in a new
// transaction, if the database aborted the first for a deadlock or a
// serialization failure (pgutil.InTx). The global lock order means the
// ledger's own transactions should never meet either; the second try is a
// safety net for a database that another program also locks. fn must not
// keep state between runs.
func (l *Ledger) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgutil.InTx(ctx, l.pool, l.noRetry, fn)
}

// unavailable makes a database that cannot be reached a
// *kind.UnavailableError (pgutil.Unavailable); ctx is the operation's.
func (l *Ledger) unavailable(ctx context.Context, err error) error {
	return pgutil.Unavailable(ctx, "budget ledger", err)
}

func split(limits []gateway.Limit) (budgets, scopes, keys []string) {
	budgets = make([]string, len(limits))
	scopes = make([]string, len(limits))
	keys = make([]string, len(limits))
	for i, lim := range limits {
		budgets[i], scopes[i], keys[i] = lim.Account.Budget, string(lim.Account.Scope), lim.Account.Key
	}
	return budgets, scopes, keys
}

// Reserve implements gateway.Ledger.
func (l *Ledger) Reserve(ctx context.Context, r gateway.Reservation) error {
	ctx, cancel := pgutil.WithOpTimeout(ctx, l.timeout)
	defer cancel()
	if r.ID == "" {
		return errors.New("pgledger: reserve: empty reservation id")
	}
	budgets, scopes, keys := split(r.Limits)
	insert := `INSERT INTO ` + l.holds + ` (id, alias, model, nano_usd, tokens, budgets, scopes, keys)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`
	args := []any{r.ID, r.Alias, r.Model, r.Amount.NanoUSD, r.Amount.Tokens, budgets, scopes, keys}
	if len(r.Limits) == 0 {
		if _, err := l.pool.Exec(ctx, insert, args...); err != nil {
			return fmt.Errorf("pgledger: reserve %q: %w", r.ID, l.unavailable(ctx, err))
		}
		return nil
	}
	err := l.inTx(ctx, func(tx pgx.Tx) error {
		state, err := l.lockAccounts(ctx, tx, budgets, scopes, keys)
		if err != nil {
			return err
		}
		for _, lim := range r.Limits {
			st := state[lim.Account]
			if dim, over := gateway.Exceeds(lim.Max, st[0], st[1], r.Amount); over {
				return &gateway.BudgetExceededError{
					Budget: lim.Account.Budget, Scope: lim.Account.Scope, Key: lim.Account.Key,
					Dimension: dim, Limit: lim.Max, Spent: st[0], Reserved: st[1], Requested: r.Amount,
				}
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE `+l.accounts+` a
			SET reserved_nano_usd = a.reserved_nano_usd + $4, reserved_tokens = a.reserved_tokens + $5
			FROM unnest($1::text[], $2::text[], $3::text[]) AS w(budget, scope, key)
			WHERE a.budget = w.budget AND a.scope = w.scope AND a.key = w.key`,
			budgets, scopes, keys, r.Amount.NanoUSD, r.Amount.Tokens); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, insert, args...)
		return err
	})
	var be *gateway.BudgetExceededError
	if errors.As(err, &be) {
		return be
	}
	if err != nil {
		return fmt.Errorf("pgledger: reserve %q: %w", r.ID, l.unavailable(ctx, err))
	}
	return nil
}

// Settle implements gateway.Ledger.
func (l *Ledger) Settle(ctx context.Context, id string, actual gateway.Amount) error {
	ctx, cancel := pgutil.WithOpTimeout(ctx, l.timeout)
	defer cancel()
	err := l.inTx(ctx, func(tx pgx.Tx) error {
		var held gateway.Amount
		var budgets, scopes, keys []string
		err := tx.QueryRow(ctx, `UPDATE `+l.holds+`
			SET settled = true, actual_nano_usd = $2, actual_tokens = $3, actual_cached_input_tokens = $4, settled_at = now()
			WHERE id = $1 AND NOT settled
			RETURNING nano_usd, tokens, budgets, scopes, keys`, id, actual.NanoUSD, actual.Tokens, actual.CachedInputTokens).
			Scan(&held.NanoUSD, &held.Tokens, &budgets, &scopes, &keys)
		if errors.Is(err, pgx.ErrNoRows) {
			return gateway.ErrUnknownReservation
		}
		if err != nil || len(budgets) == 0 {
			return err
		}
		if _, err := l.lockAccounts(ctx, tx, budgets, scopes, keys); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+l.accounts+` a
			SET reserved_nano_usd = a.reserved_nano_usd - $4, reserved_tokens = a.reserved_tokens - $5,
			    spent_nano_usd = a.spent_nano_usd + $6, spent_tokens = a.spent_tokens + $7,
			    spent_cached_input_tokens = a.spent_cached_input_tokens + $8, calls = a.calls + 1
			FROM unnest($1::text[], $2::text[], $3::text[]) AS w(budget, scope, key)
			WHERE a.budget = w.budget AND a.scope = w.scope AND a.key = w.key`,
			budgets, scopes, keys, held.NanoUSD, held.Tokens, actual.NanoUSD, actual.Tokens, actual.CachedInputTokens)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgledger: settle %q: %w", id, l.unavailable(ctx, err))
	}
	return nil
}

// Release implements gateway.Ledger.
func (l *Ledger) Release(ctx context.Context, id string) error {
	ctx, cancel := pgutil.WithOpTimeout(ctx, l.timeout)
	defer cancel()
	err := l.inTx(ctx, func(tx pgx.Tx) error {
		var held gateway.Amount
		var budgets, scopes, keys []string
		err := tx.QueryRow(ctx, `DELETE FROM `+l.holds+` WHERE id = $1 AND NOT settled
			RETURNING nano_usd, tokens, budgets, scopes, keys`, id).
			Scan(&held.NanoUSD, &held.Tokens, &budgets, &scopes, &keys)
		if errors.Is(err, pgx.ErrNoRows) {
			return gateway.ErrUnknownReservation
		}
		if err != nil || len(budgets) == 0 {
			return err
		}
		if _, err := l.lockAccounts(ctx, tx, budgets, scopes, keys); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE `+l.accounts+` a
			SET reserved_nano_usd = a.reserved_nano_usd - $4, reserved_tokens = a.reserved_tokens - $5
			FROM unnest($1::text[], $2::text[], $3::text[]) AS w(budget, scope, key)
			WHERE a.budget = w.budget AND a.scope = w.scope AND a.key = w.key`,
			budgets, scopes, keys, held.NanoUSD, held.Tokens)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgledger: release %q: %w", id, l.unavailable(ctx, err))
	}
	return nil
}

// Summary implements gateway.Ledger.
func (l *Ledger) Summary(ctx context.Context) (gateway.SpendSummary, error) {
	ctx, cancel := pgutil.WithOpTimeout(ctx, l.timeout)
	defer cancel()
	var s gateway.SpendSummary
	rows, err := l.pool.Query(ctx, `SELECT budget, scope, key, spent_nano_usd, spent_tokens, spent_cached_input_tokens, reserved_nano_usd, reserved_tokens, calls FROM `+l.accounts)
	if err != nil {
		return s, fmt.Errorf("pgledger: summary: %w", l.unavailable(ctx, err))
	}
	for rows.Next() {
		var a gateway.AccountSpend
		var scope string
		if err := rows.Scan(&a.Account.Budget, &scope, &a.Account.Key, &a.Spent.NanoUSD, &a.Spent.Tokens, &a.Spent.CachedInputTokens, &a.Reserved.NanoUSD, &a.Reserved.Tokens, &a.Calls); err != nil {
			rows.Close()
			return s, fmt.Errorf("pgledger: summary: %w", l.unavailable(ctx, err))
		}
		a.Account.Scope = gateway.Scope(scope)
		s.ByAccount = append(s.ByAccount, a)
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("pgledger: summary: %w", l.unavailable(ctx, err))
	}
	for _, col := range []string{"alias", "model"} {
		rows, err := l.pool.Query(ctx, `SELECT `+col+`, sum(actual_nano_usd)::bigint, sum(actual_tokens)::bigint, sum(actual_cached_input_tokens)::bigint, count(*)
			FROM `+l.holds+` WHERE settled GROUP BY `+col)
		if err != nil {
			return s, fmt.Errorf("pgledger: summary: %w", l.unavailable(ctx, err))
		}
		for rows.Next() {
			var n gateway.NamedSpend
			if err := rows.Scan(&n.Name, &n.Spent.NanoUSD, &n.Spent.Tokens, &n.Spent.CachedInputTokens, &n.Calls); err != nil {
				rows.Close()
				return s, fmt.Errorf("pgledger: summary: %w", l.unavailable(ctx, err))
			}
			if col == "alias" {
				s.ByAlias = append(s.ByAlias, n)
				s.Total = s.Total.Add(n.Spent)
				s.Calls += n.Calls
			} else {
				s.ByModel = append(s.ByModel, n)
			}
		}
		if err := rows.Err(); err != nil {
			return s, fmt.Errorf("pgledger: summary: %w", l.unavailable(ctx, err))
		}
	}
	gateway.SortSummary(&s)
	return s, nil
}

// SpendByBudget implements gateway.Ledger. The sums are made in the
// database (one GROUP BY over the accounts table), so a scrape moves one
// row per budget and scope, however many runs were charged.
func (l *Ledger) SpendByBudget(ctx context.Context) ([]gateway.BudgetSpend, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	rows, err := l.pool.Query(ctx, `SELECT budget, scope, sum(spent_nano_usd)::bigint, sum(spent_tokens)::bigint,
		sum(spent_cached_input_tokens)::bigint, sum(calls)::bigint FROM `+l.accounts+` GROUP BY budget, scope`)
	if err != nil {
		return nil, fmt.Errorf("pgledger: spend by budget: %w", err)
	}
	var out []gateway.BudgetSpend
	for rows.Next() {
		var b gateway.BudgetSpend
		var scope string
		if err := rows.Scan(&b.Budget, &scope, &b.Spent.NanoUSD, &b.Spent.Tokens, &b.Spent.CachedInputTokens, &b.Calls); err != nil {
			rows.Close()
			return nil, fmt.Errorf("pgledger: spend by budget: %w", err)
		}
		b.Scope = gateway.Scope(scope)
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgledger: spend by budget: %w", err)
	}
	gateway.SortBudgetSpend(out)
	return out, nil
}

// CloseAccounts implements gateway.Ledger by keeping the accounts: in the
// database they cost disk, not the memory of a process, and they are the
// record of what each run and thread spent, which every replica shares.
func (l *Ledger) CloseAccounts(ctx context.Context, _ []gateway.Account) error {
	return ctx.Err()
}

// Admit implements gateway.Limiter exactly, across every process on the
// database: one transaction locks the counters' rows in one global order
// (as lockAccounts does, so admissions cannot deadlock), drops their
// admissions older than the window, reads the rest, checks the call with
// gateway.RateCheck and records it. now is the gateway's clock, read in
// microseconds, PostgreSQL's precision: replicas whose clocks differ by d
// count a window d apart, which lets up to the admissions of d through
// twice at a window's edge.
func (l *Ledger) Admit(ctx context.Context, now time.Time, counters []gateway.RateCounter, tokens int64) error {
	if len(counters) == 0 {
		return nil
	}
	ctx, cancel := pgutil.WithOpTimeout(ctx, l.timeout)
	defer cancel()
	now = now.Truncate(time.Microsecond)
	names := make([]string, len(counters))
	keys := make([]string, len(counters))
	for i, c := range counters {
		names[i], keys[i] = c.Limit, c.Key
	}
	err := l.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+l.counters+` (limit_name, key)
			SELECT w.n, w.k FROM unnest($1::text[], $2::text[]) AS w(n, k)
			ORDER BY w.n COLLATE "C", w.k COLLATE "C"
			ON CONFLICT DO NOTHING`, names, keys); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT 1 FROM `+l.counters+` c JOIN unnest($1::text[], $2::text[]) AS w(n, k)
			  ON c.limit_name = w.n AND c.key = w.k
			ORDER BY c.limit_name COLLATE "C", c.key COLLATE "C"
			FOR UPDATE OF c`, names, keys); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+l.admissions+` a USING unnest($1::text[], $2::text[]) AS w(n, k)
			WHERE a.limit_name = w.n AND a.key = w.k AND a.at <= $3`, names, keys, now.Add(-gateway.RateWindow)); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT a.limit_name, a.key, a.at, a.tokens FROM `+l.admissions+` a
			JOIN unnest($1::text[], $2::text[]) AS w(n, k) ON a.limit_name = w.n AND a.key = w.k
			ORDER BY a.at`, names, keys)
		if err != nil {
			return err
		}
		type log struct {
			at     []time.Time
			tokens []int64
			used   int64
		}
		logs := make(map[[2]string]*log, len(counters))
		for rows.Next() {
			var n, k string
			var at time.Time
			var t int64
			if err := rows.Scan(&n, &k, &at, &t); err != nil {
				rows.Close()
				return err
			}
			lg := logs[[2]string{n, k}]
			if lg == nil {
				lg = &log{}
				logs[[2]string{n, k}] = lg
			}
			lg.at, lg.tokens, lg.used = append(lg.at, at), append(lg.tokens, t), lg.used+t
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, c := range counters {
			lg := logs[[2]string{c.Limit, c.Key}]
			if lg == nil {
				lg = &log{}
			}
			if rl := gateway.RateCheck(c, now, lg.at, lg.tokens, lg.used, tokens); rl != nil {
				return rl
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+l.admissions+` (limit_name, key, at, tokens)
			SELECT w.n, w.k, $3, $4 FROM unnest($1::text[], $2::text[]) AS w(n, k)`, names, keys, now, tokens)
		return err
	})
	if rl, ok := errors.AsType[*gateway.RateLimitedError](err); ok {
		return rl
	}
	if err != nil {
		return fmt.Errorf("pgledger: admit: %w", l.unavailable(ctx, err))
	}
	return nil
}

var (
	_ gateway.Ledger  = (*Ledger)(nil)
	_ gateway.Limiter = (*Ledger)(nil)
)
