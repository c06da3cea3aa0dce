package pgutil

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATE codes of transactions the database aborted so that another
// could go on.
const (
	CodeDeadlock      = "40P01"
	CodeSerialization = "40001"
)

// Retryable reports an operation the database aborted so that another could
// go on: a deadlock (40P01) or a serialization failure (40001). An aborted
// transaction changed nothing, so running it again from scratch is safe.
func Retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == CodeDeadlock || pe.Code == CodeSerialization)
}

// Retry runs op, and runs it once more if the database aborted it for a
// deadlock or a serialization failure and ctx is still live. Once, not in a
// loop: the stores order their locks so that their own transactions should
// never meet either, and the second try is a safety net for a database that
// another program also locks; a second abort is a real conflict the caller
// must see. disabled turns the second try off, so that a test can tell the
// first attempt from the safety net. op must not keep state between runs.
//
// Apart from that rule, an operation that failed before anything reached
// the server (pgconn.SafeToRetry: a pooled connection found closed, as
// after a database restart) runs again on another connection, up to
// maxSafeRetries times: nothing happened, and a pool can hold that many
// dead connections after an outage.
func Retry(ctx context.Context, disabled bool, op func() error) error {
	err := runSafe(ctx, op)
	if !disabled && Retryable(err) && ctx.Err() == nil {
		err = runSafe(ctx, op)
	}
	return err
}

// maxSafeRetries bounds the runs of an operation that failed before
// reaching the server.
const maxSafeRetries = 64

func runSafe(ctx context.Context, op func() error) error {
	err := op()
	for i := 0; i < maxSafeRetries && err != nil && pgconn.SafeToRetry(err) && ctx.Err() == nil; i++ {
		err = op()
	}
	return err
}

// Beginner starts a transaction: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// InTx runs fn in a transaction on db, and once more, from scratch in a new
// transaction, under the rule of Retry.
func InTx(ctx context.Context, db Beginner, disabled bool, fn func(pgx.Tx) error) error {
	return Retry(ctx, disabled, func() error { return pgx.BeginFunc(ctx, db, fn) })
}
