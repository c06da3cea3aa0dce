package pgutil

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/aidgen/aid/runtime/kind"
	"github.com/jackc/pgx/v5/pgconn"
)

// errOpTimeout is the cause of a context that WithOpTimeout ended.
var errOpTimeout = errors.New("the database did not answer within the operation timeout")

// WithOpTimeout bounds one store operation by d, marking the context so
// that Unavailable tells the store's own bound running out (a database
// that stopped answering) from the caller's deadline.
func WithOpTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, d, errOpTimeout)
}

// Unavailable returns err as a *kind.UnavailableError naming dependency
// when it says the database could not be reached or stopped answering:
// a refused or dropped connection, a server shutting down or not yet
// accepting connections, too many connections, or, for ctx made by
// WithOpTimeout, the operation's own timeout. Any other error, the
// caller's cancellation or deadline included, is returned as it is. It
// is the one place the stores on PostgreSQL (pgstore, pgledger, pgvector)
// classify an outage, so that a service answers every one alike (503)
// whichever store met it.
func Unavailable(ctx context.Context, dependency string, err error) error {
	if err == nil || !unavailable(ctx, err) {
		return err
	}
	var ue *kind.UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	return &kind.UnavailableError{Dependency: dependency, Err: err}
}

func unavailable(ctx context.Context, err error) bool {
	if ctx != nil && ctx.Err() != nil {
		// Only the store's own bound is an outage; the caller's deadline
		// or cancellation is the caller's.
		return errors.Is(context.Cause(ctx), errOpTimeout)
	}
	var (
		connect *pgconn.ConnectError
		netErr  net.Error
		pgErr   *pgconn.PgError
	)
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed), errors.Is(err, pgconn.ErrConnClosed):
		return true // the connection went away mid-operation
	case errors.As(err, &pgErr):
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", // admin_shutdown, crash_shutdown, cannot_connect_now
			"53300",                                     // too_many_connections
			"08000", "08001", "08003", "08004", "08006": // connection exceptions
			return true
		}
	}
	return false
}
