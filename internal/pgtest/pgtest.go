package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// EnvVar is the environment variable that holds the DSN of the test server.
const EnvVar = "AID_TEST_DATABASE_URL"

// startHint tells a developer how to get a server; it ends every skip or failure message
// for a missing AID_TEST_DATABASE_URL.
const startHint = `start one with: eval "$(scripts/postgres.sh env)" (stop it with scripts/postgres.sh stop), or run every test with: bash scripts/test.sh`

// adminTimeout bounds each create or drop of a test database, so a hung server fails the
// test instead of stalling the whole run.
const adminTimeout = 60 * time.Second

// DSN returns the DSN of the test server from AID_TEST_DATABASE_URL. When it is unset, DSN
// fails the test if the CI environment variable is set (to anything but "", "false" or "0"),
// because a CI run must not go green by skipping its database tests; otherwise it skips the
// test. Either way the message says how to start a server.
func DSN(t testing.TB) string {
	t.Helper()
	if dsn := os.Getenv(EnvVar); dsn != "" {
		return dsn
	}
	msg := fmt.Sprintf("pgtest: %s is not set; this test needs PostgreSQL with pgvector; %s", EnvVar, startHint)
	if inCI() {
		t.Fatal(msg + " (failing instead of skipping because CI is set)")
	}
	t.Skip(msg)
	return ""
}

// inCI reports whether the CI environment variable asks for strictness.
func inCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "false", "0":
		return false
	}
	return true
}

// NewDatabase creates a fresh database with a unique name on the test server, with the
// vector extension created in it, and returns its DSN. The database is dropped, together
// with any connections still open to it, when the test and its subtests finish. It skips or
// fails like [DSN] when no server is configured.
func NewDatabase(t testing.TB) string {
	t.Helper()
	admin := DSN(t)
	name := databaseName(t.Name())
	dsn, err := withDatabase(admin, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := exec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	// Registered before anything else can fail, so a half-made database is dropped too.
	// Cleanup runs after t.Context() is canceled, so it gets a context of its own.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		if err := exec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	if err := exec(ctx, dsn, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		t.Fatalf("pgtest: create extension vector in %s (is pgvector installed? scripts/postgres.sh install): %v", name, err)
	}
	return dsn
}

// NewPool creates a database with [NewDatabase] and returns a pool connected to it whose
// connections know pgvector's types, so vectors scan into and encode from pgvector.Vector.
// The pool is closed before the database is dropped.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	dsn := NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgtest: parse DSN: %v", err)
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		return pgxvec.RegisterTypes(ctx, conn)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: ping %s: %v", cfg.ConnConfig.Database, err)
	}
	return pool
}

// exec runs one statement on a short-lived connection; CREATE and DROP DATABASE cannot run
// inside a transaction, and a pool would outlive its purpose.
func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// databaseName makes a database name that is unique across parallel tests and packages,
// readable in pg_database (it carries the test's name), and within PostgreSQL's 63-byte
// identifier limit.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	label := b.String()
	const maxLabel = 63 - len("aidt__") - 16
	if len(label) > maxLabel {
		label = label[:maxLabel]
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:]) // crypto/rand.Read never fails
	return "aidt_" + label + "_" + hex.EncodeToString(suffix[:])
}

// withDatabase returns dsn pointing at database name instead. It accepts both DSN forms
// that pgx accepts: a URL (postgres://...) and keyword/value pairs (host=... dbname=...).
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse %s: %w", EnvVar, err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	if _, err := pgx.ParseConfig(dsn); err != nil {
		return "", fmt.Errorf("parse %s: %w", EnvVar, err)
	}
	// Keyword/value: a later dbname overrides an earlier one.
	return dsn + " dbname=" + name, nil
}
