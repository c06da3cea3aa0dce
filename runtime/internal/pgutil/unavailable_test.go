package pgutil_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/kind"
)

// TestUnavailable classifies errors: what says the database is out of
// reach becomes a *kind.UnavailableError naming the dependency, keeping
// the cause; the rest, the caller's own deadline included, is left alone.
func TestUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"refused", fmt.Errorf("acquire: %w", refused), true},
		{"dropped", fmt.Errorf("query: %w", io.ErrUnexpectedEOF), true},
		{"closed", pgconn.ErrConnClosed, true},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true},
		{"starting up", &pgconn.PgError{Code: "57P03"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"plain", errors.New("no rows"), false},
		{"nil", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := pgutil.Unavailable(t.Context(), "run store", tt.err)
			ue, ok := errors.AsType[*kind.UnavailableError](got)
			if ok != tt.want || (ok && (ue.Dependency != "run store" || !errors.Is(got, tt.err))) || (!ok && got != tt.err) {
				t.Errorf("Unavailable(%v) = %v", tt.err, got)
			}
		})
	}
	// The store's own bound running out is an outage; the caller's is not.
	op, cancel := pgutil.WithOpTimeout(t.Context(), time.Nanosecond)
	defer cancel()
	<-op.Done()
	if _, ok := errors.AsType[*kind.UnavailableError](pgutil.Unavailable(op, "budget ledger", op.Err())); !ok {
		t.Error("the operation's own timeout is not an outage")
	}
	caller, cancelCaller := context.WithTimeout(t.Context(), time.Nanosecond)
	defer cancelCaller()
	op, cancel = pgutil.WithOpTimeout(caller, time.Hour)
	defer cancel()
	<-op.Done()
	if _, ok := errors.AsType[*kind.UnavailableError](pgutil.Unavailable(op, "budget ledger", fmt.Errorf("x: %w", refused))); ok {
		t.Error("the caller's deadline became an outage")
	}
}
