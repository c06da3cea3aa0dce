package pgutil

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Versions is where a schema's version is kept: a table of applied versions
// (MigrationsTable), or a row of a registry shared by several tables.
type Versions interface {
	// Current returns the version the schema is at, creating whatever the
	// bookkeeping needs; 0 is a schema no step has been applied to. It runs
	// under the migration's lock, and may refuse the schema with an error
	// that Migrate returns as it is.
	Current(ctx context.Context, tx pgx.Tx) (int, error)
	// Applied records that step v, which brought the schema to version v,
	// has been applied.
	Applied(ctx context.Context, tx pgx.Tx, v int) error
}

// Schema is a versioned schema.
type Schema struct {
	// LockKey is the advisory lock that serialises its migrations. It must
	// never change once released: replicas of an old and a new release
	// starting together must wait for each other.
	LockKey int64
	// Steps are the schema's versions, in order: step i brings the schema
	// from version i to version i+1. A step is never edited once released;
	// a change is a new step, so that every database, whatever version it
	// is at, reaches the same schema.
	Steps []string
	// Names fills the placeholders ("{table}") of the steps; nil leaves
	// them as they are.
	Names *strings.Replacer
	// Versions keeps the version.
	Versions Versions
}

// SchemaTooNewError reports a schema migrated by a newer release: this code
// does not know what the later steps changed, so it refuses to migrate
// rather than guess. Each store reports it as its own SchemaTooNewError.
type SchemaTooNewError struct {
	// Database is the version the database is at.
	Database int
	// Known is the newest version this code knows.
	Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("the database schema is at version %d, newer than this code's %d; upgrade the program", e.Database, e.Known)
}

// Migrate brings s to its newest version, len(s.Steps), in tx: it takes the
// schema's advisory lock for the rest of the transaction, so that replicas
// starting together apply each step once, one after another, reads the
// version, refuses a newer one with a *SchemaTooNewError, and applies the
// missing steps in order, recording each. Run in one transaction, a failed
// step leaves the database as it was. It is idempotent.
func Migrate(ctx context.Context, tx pgx.Tx, s Schema) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.LockKey); err != nil {
		return err
	}
	cur, err := s.Versions.Current(ctx, tx)
	if err != nil {
		return err
	}
	known := len(s.Steps)
	if cur > known {
		return &SchemaTooNewError{Database: cur, Known: known}
	}
	for v := cur; v < known; v++ {
		step := s.Steps[v]
		if s.Names != nil {
			step = s.Names.Replace(step)
		}
		if _, err := tx.Exec(ctx, step); err != nil {
			return fmt.Errorf("step %d: %w", v+1, err)
		}
		if err := s.Versions.Applied(ctx, tx, v+1); err != nil {
			return fmt.Errorf("step %d: %w", v+1, err)
		}
	}
	return nil
}

// MigrationsTable keeps a schema's version in a table of its own, one row
// per applied step; the version is the greatest.
type MigrationsTable struct {
	// Name is the table's quoted name, "<prefix>_migrations".
	Name string
	// Clock is the SQL function that stamps a row's applied_at when the
	// table is created: each store keeps the one its first release created
	// the table with (now() or clock_timestamp()).
	Clock string
}

// Current implements Versions.
func (m MigrationsTable) Current(ctx context.Context, tx pgx.Tx) (int, error) {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+m.Name+` (
			version    integer     PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT `+m.Clock+`
		)`); err != nil {
		return 0, err
	}
	var cur int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+m.Name).Scan(&cur); err != nil {
		return 0, err
	}
	return cur, nil
}

// Applied implements Versions.
func (m MigrationsTable) Applied(ctx context.Context, tx pgx.Tx, v int) error {
	_, err := tx.Exec(ctx, `INSERT INTO `+m.Name+` (version) VALUES ($1)`, v)
	return err
}

// LockKey is an advisory lock key for name: the 64-bit FNV-1a hash of it.
func LockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return int64(h.Sum64())
}
