// Package pgkeys keeps the API keys created at run time (aidgen keys
// create) in PostgreSQL, hashed: the service.KeyStore of a service whose
// state is in PostgreSQL, shared by its replicas. A secret is shown once,
// when its key is created; the table holds its SHA-256 only. A revoked key
// keeps its row, so that its name is not reused and the record of who
// approved what stays unambiguous.
//
// It is its own package so that a service whose state is in memory does
// not link pgx.
package pgkeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/service"
)

// Store is a service.KeyStore in PostgreSQL. It is safe for concurrent
// use, in one process and across processes sharing the database.
type Store struct {
	pool       *pgxpool.Pool
	ownsPool   bool
	keys       string // quoted table name
	migrations string
}

// Key is a key as the store lists it: no secret, nor its hash.
type Key struct {
	// Name, Roles and Tenant are as created.
	Name   string
	Roles  []service.Role
	Tenant string
	// Created is when the key was created; Revoked when it was revoked,
	// zero while it is live.
	Created time.Time
	Revoked time.Time
}

// migrationSteps are the table's versions, in order; a step is never
// edited once released.
var migrationSteps = []string{
	`CREATE TABLE {keys} (
		name          text        PRIMARY KEY,
		roles         text[]      NOT NULL CHECK (cardinality(roles) > 0),
		tenant        text        NOT NULL DEFAULT '',
		secret_sha256 bytea       NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
		created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
		revoked_at    timestamptz
	);`,
}

// New returns a store on pool, which the caller keeps and closes, after
// bringing its table (aid_keys) to the schema this code reads.
func New(ctx context.Context, pool *pgxpool.Pool) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgkeys: pool is nil")
	}
	s := &Store{pool: pool, keys: pgx.Identifier{"aid_keys"}.Sanitize(), migrations: pgx.Identifier{"aid_keys_migrations"}.Sanitize()}
	ctx, cancel := pgutil.WithOpTimeout(ctx, pgutil.DefaultOpTimeout)
	defer cancel()
	schema := pgutil.Schema{
		LockKey:  pgutil.LockKey("aid/pgkeys"),
		Steps:    migrationSteps,
		Names:    strings.NewReplacer("{keys}", s.keys),
		Versions: pgutil.MigrationsTable{Name: s.migrations, Clock: "clock_timestamp()"},
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return pgutil.Migrate(ctx, tx, schema) }); err != nil {
		return nil, fmt.Errorf("pgkeys: migrate: %w", err)
	}
	return s, nil
}

// Open connects to dsn and returns a store that owns its pool; Close
// closes it.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgutil.PoolConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgkeys: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgkeys: connect: %w", err)
	}
	s, err := New(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

type sharedKey struct{ dsn string }

// Shared returns the application's key store on dsn, on the pool its
// state shares (pgutil.SharedPool), kept in scope.
func Shared(ctx context.Context, scope *kind.Scope, dsn string) (*Store, error) {
	return kind.Shared(scope, sharedKey{dsn}, func() (*Store, func() error, error) {
		pool, err := pgutil.SharedPool(ctx, scope, dsn)
		if err != nil {
			return nil, nil, fmt.Errorf("pgkeys: %w", err)
		}
		s, err := New(ctx, pool)
		if err != nil {
			return nil, nil, err
		}
		return s, func() error { return nil }, nil
	})
}

// Close closes the pool if the store opened it.
func (s *Store) Close() {
	if s.ownsPool {
		s.pool.Close()
	}
}

// ExistsError reports a key created with the name of one that exists, or
// existed: a revoked key's name is not given again.
type ExistsError struct{ Name string }

func (e *ExistsError) Error() string {
	return fmt.Sprintf("pgkeys: a key named %q exists or was revoked: choose another name", e.Name)
}

// NotFoundError reports a revocation of a key that is not live.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("pgkeys: no live key named %q", e.Name)
}

// SecretPrefix starts every secret Create makes, so that one is
// recognisable in a log or a leak scanner.
const SecretPrefix = "sk-aid-"

// Create stores a new key and returns its secret, which is kept nowhere:
// show it once. The name, roles and tenant are checked as a declared key's
// are (service.New's rules).
func (s *Store) Create(ctx context.Context, name string, roles []service.Role, tenant string) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	secret := SecretPrefix + hex.EncodeToString(b[:])
	if err := service.CheckKey(service.Key{Name: name, Roles: roles, Tenant: tenant, Secret: secret}); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(secret))
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	err := s.do(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO `+s.keys+` (name, roles, tenant, secret_sha256) VALUES ($1, $2, $3, $4)`, name, names, tenant, sum[:])
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "aid_keys_pkey" {
		return "", &ExistsError{Name: name}
	}
	if err != nil {
		return "", fmt.Errorf("pgkeys: create key %q: %w", name, err)
	}
	return secret, nil
}

// Revoke revokes a live key: every replica refuses it within its
// service.Auth.KeyCacheTTL.
func (s *Store) Revoke(ctx context.Context, name string) error {
	var n int64
	err := s.do(ctx, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, `UPDATE `+s.keys+` SET revoked_at = clock_timestamp() WHERE name = $1 AND revoked_at IS NULL`, name)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fmt.Errorf("pgkeys: revoke key %q: %w", name, err)
	}
	if n == 0 {
		return &NotFoundError{Name: name}
	}
	return nil
}

// List returns every key, revoked ones included, by name.
func (s *Store) List(ctx context.Context) ([]Key, error) {
	var out []Key
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT name, roles, tenant, created_at, revoked_at FROM `+s.keys+` ORDER BY name`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k Key
			var roles []string
			var revoked *time.Time
			if err := rows.Scan(&k.Name, &roles, &k.Tenant, &k.Created, &revoked); err != nil {
				return err
			}
			for _, r := range roles {
				k.Roles = append(k.Roles, service.Role(r))
			}
			if revoked != nil {
				k.Revoked = *revoked
			}
			out = append(out, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgkeys: list keys: %w", err)
	}
	return out, nil
}

// LookupKey implements service.KeyStore.
func (s *Store) LookupKey(ctx context.Context, sum [sha256.Size]byte) (service.Key, bool, error) {
	var k service.Key
	var roles []string
	err := s.do(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT name, roles, tenant FROM `+s.keys+` WHERE secret_sha256 = $1 AND revoked_at IS NULL`, sum[:]).Scan(&k.Name, &roles, &k.Tenant)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return service.Key{}, false, nil
	}
	if err != nil {
		return service.Key{}, false, fmt.Errorf("pgkeys: look up a key: %w", err)
	}
	for _, r := range roles {
		if slices.Contains(service.Roles, service.Role(r)) {
			k.Roles = append(k.Roles, service.Role(r))
		}
	}
	return k, true, nil
}

// do runs one statement bounded by the default operation timeout; an
// unreachable database is a *kind.UnavailableError (pgutil.Unavailable),
// which the service answers 503.
func (s *Store) do(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := pgutil.WithOpTimeout(ctx, pgutil.DefaultOpTimeout)
	defer cancel()
	return pgutil.Unavailable(ctx, "key store", pgutil.Retry(ctx, false, func() error { return fn(ctx) }))
}
