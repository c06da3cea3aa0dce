package pgutil_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/internal/pgutil"
)

// TestRetry runs an operation that fails `fails` times with err: a deadlock
// or a serialization failure, however wrapped, is run once more and only
// once; any other error, a disabled retry or a finished context is not.
func TestRetry(t *testing.T) {
	deadlock := &pgconn.PgError{Code: pgutil.CodeDeadlock}
	serialization := &pgconn.PgError{Code: pgutil.CodeSerialization}
	tests := []struct {
		name     string
		err      error
		fails    int
		disabled bool
		cancel   bool
		wantRuns int
		wantErr  bool
	}{
		{name: "success", err: nil, fails: 0, wantRuns: 1},
		{name: "deadlock once", err: deadlock, fails: 1, wantRuns: 2},
		{name: "serialization once", err: serialization, fails: 1, wantRuns: 2},
		{name: "wrapped deadlock once", err: fmt.Errorf("reserve: %w", deadlock), fails: 1, wantRuns: 2},
		{name: "deadlock twice", err: deadlock, fails: 2, wantRuns: 2, wantErr: true},
		{name: "serialization twice", err: serialization, fails: 2, wantRuns: 2, wantErr: true},
		{name: "unique violation", err: &pgconn.PgError{Code: "23505"}, fails: 1, wantRuns: 1, wantErr: true},
		{name: "lock timeout", err: &pgconn.PgError{Code: "55P03"}, fails: 1, wantRuns: 1, wantErr: true},
		{name: "plain error", err: errors.New("40P01"), fails: 1, wantRuns: 1, wantErr: true},
		{name: "disabled", err: deadlock, fails: 1, disabled: true, wantRuns: 1, wantErr: true},
		{name: "context done", err: serialization, fails: 1, cancel: true, wantRuns: 1, wantErr: true},
		// A pooled connection found closed before anything was sent: the
		// next try takes another connection, even with retries disabled.
		{name: "closed connections", err: fmt.Errorf("acquire: %w", safeErr{}), fails: 40, disabled: true, wantRuns: 41},
		{name: "closed connections without end", err: safeErr{}, fails: 1000, wantRuns: 65, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			runs := 0
			err := pgutil.Retry(ctx, tt.disabled, func() error {
				runs++
				if tt.cancel {
					cancel()
				}
				if runs <= tt.fails {
					return tt.err
				}
				return nil
			})
			if runs != tt.wantRuns {
				t.Errorf("ran %d times, want %d", runs, tt.wantRuns)
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("Retry = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, tt.err) {
				t.Errorf("Retry = %v, want the operation's error %v", err, tt.err)
			}
		})
	}
}

// TestInTxRetriesFromScratch has the database itself abort a transaction
// after it wrote a row: the second run starts in a new transaction, so the
// first run's row is gone and exactly one remains. A second abort, or
// another code, reaches the caller with nothing written.
func TestInTxRetriesFromScratch(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE written (run integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		code     string
		aborts   int
		disabled bool
		wantRuns int
		wantRows int
	}{
		{code: pgutil.CodeDeadlock, aborts: 1, wantRuns: 2, wantRows: 1},
		{code: pgutil.CodeSerialization, aborts: 1, wantRuns: 2, wantRows: 1},
		{code: pgutil.CodeDeadlock, aborts: 2, wantRuns: 2, wantRows: 0},
		{code: "23514", aborts: 1, wantRuns: 1, wantRows: 0},
		{code: pgutil.CodeSerialization, aborts: 1, disabled: true, wantRuns: 1, wantRows: 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %d disabled=%v", tt.code, tt.aborts, tt.disabled), func(t *testing.T) {
			ctx := t.Context()
			if _, err := pool.Exec(ctx, `TRUNCATE written`); err != nil {
				t.Fatal(err)
			}
			runs := 0
			err := pgutil.InTx(ctx, pool, tt.disabled, func(tx pgx.Tx) error {
				runs++
				if _, err := tx.Exec(ctx, `INSERT INTO written (run) VALUES ($1)`, runs); err != nil {
					return err
				}
				if runs <= tt.aborts {
					_, err := tx.Exec(ctx, fmt.Sprintf(`DO $$ BEGIN RAISE EXCEPTION 'aborted' USING ERRCODE = '%s'; END $$`, tt.code))
					return err
				}
				return nil
			})
			if runs != tt.wantRuns {
				t.Errorf("ran %d times, want %d", runs, tt.wantRuns)
			}
			var pe *pgconn.PgError
			if wantErr := tt.wantRows == 0; wantErr != (err != nil) || wantErr && (!errors.As(err, &pe) || pe.Code != tt.code) {
				t.Errorf("InTx = %v, want error %v with code %s", err, wantErr, tt.code)
			}
			if got := count(t, pool, `SELECT count(*) FROM written`); got != tt.wantRows {
				t.Errorf("%d rows written, want %d", got, tt.wantRows)
			}
		})
	}
}

func count(t *testing.T, pool *pgxpool.Pool, query string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// safeErr is an error pgconn.SafeToRetry accepts: nothing reached the
// server.
type safeErr struct{}

func (safeErr) Error() string     { return "conn closed" }
func (safeErr) SafeToRetry() bool { return true }
