package pgtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB runs statements: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// AbortWrites makes the first `times` row writes of table that events names
// ("UPDATE", "INSERT OR UPDATE", ...) raise SQLSTATE code, as the database
// does when it picks a statement as a deadlock's victim or a serialization
// failure; it is how a test drives a store's retry of aborted transactions.
// The writes are counted by a sequence, which a rollback does not undo, and
// the returned function reports how many were attempted so far, aborted or
// not. One call per database: the trigger's objects have fixed names.
func AbortWrites(t testing.TB, db DB, table, events, code string, times int) (fired func() int64) {
	t.Helper()
	for _, stmt := range []string{
		`CREATE SEQUENCE test_abort_seq`,
		fmt.Sprintf(`CREATE FUNCTION test_abort() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('test_abort_seq') <= %d THEN
				RAISE EXCEPTION 'injected abort' USING ERRCODE = '%s';
			END IF;
			RETURN NEW;
		END $$`, times, code),
		`CREATE TRIGGER test_abort BEFORE ` + events + ` ON ` + table + ` FOR EACH ROW EXECUTE FUNCTION test_abort()`,
	} {
		if _, err := db.Exec(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	return func() int64 {
		t.Helper()
		var n int64
		if err := db.QueryRow(t.Context(), `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM test_abort_seq`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
