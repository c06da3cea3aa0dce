package pgledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
)

// unversioned is the schema that releases before the ledger counted its
// versions created, with one account and one call settled on it.
var unversioned = []string{
	`CREATE TABLE aid_budget_accounts (
		budget text NOT NULL, scope text NOT NULL, key text NOT NULL,
		spent_nano_usd bigint NOT NULL DEFAULT 0, spent_tokens bigint NOT NULL DEFAULT 0,
		reserved_nano_usd bigint NOT NULL DEFAULT 0, reserved_tokens bigint NOT NULL DEFAULT 0,
		calls bigint NOT NULL DEFAULT 0,
		PRIMARY KEY (budget, scope, key))`,
	`CREATE TABLE aid_budget_reservations (
		id text PRIMARY KEY, alias text NOT NULL, model text NOT NULL,
		nano_usd bigint NOT NULL, tokens bigint NOT NULL,
		budgets text[] NOT NULL, scopes text[] NOT NULL, keys text[] NOT NULL,
		settled boolean NOT NULL DEFAULT false, actual_nano_usd bigint, actual_tokens bigint,
		created_at timestamptz NOT NULL DEFAULT now(), settled_at timestamptz)`,
	`INSERT INTO aid_budget_accounts (budget, scope, key, spent_nano_usd, spent_tokens, calls)
		VALUES ('nightly', 'run', 'r1', 500, 50, 1)`,
	`INSERT INTO aid_budget_reservations (id, alias, model, nano_usd, tokens, budgets, scopes, keys, settled, actual_nano_usd, actual_tokens)
		VALUES ('old', 'small', 'm-1', 900, 90, '{nightly}', '{run}', '{r1}', true, 500, 50)`,
}

// TestMigrateAdoptsUnversionedSchema opens a ledger on a database that an
// earlier release made: its spend is kept, counted as having no cached
// input tokens, and new calls record theirs.
func TestMigrateAdoptsUnversionedSchema(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, s := range unversioned {
		if _, err := conn.Exec(t.Context(), s); err != nil {
			t.Fatal(err)
		}
	}
	l, err := pgledger.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.Migrate(t.Context()); err != nil {
		t.Fatalf("second migration: %v", err)
	}
	var version int
	if err := conn.QueryRow(t.Context(), `SELECT max(version) FROM aid_budget_migrations`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != pgledger.SchemaVersion {
		t.Errorf("database at version %d, want %d", version, pgledger.SchemaVersion)
	}

	acct := gateway.Account{Budget: "nightly", Scope: gateway.ScopeRun, Key: "r1"}
	lim := gateway.Limit{Account: acct, Max: gateway.Amount{NanoUSD: 1e9}}
	ctx := t.Context()
	if err := l.Reserve(ctx, gateway.Reservation{ID: "new", Alias: "small", Model: "m-1", Amount: gateway.Amount{NanoUSD: 900, Tokens: 90}, Limits: []gateway.Limit{lim}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, "new", gateway.Amount{NanoUSD: 300, Tokens: 40, CachedInputTokens: 25}); err != nil {
		t.Fatal(err)
	}
	s, err := l.Summary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	spent := gateway.Amount{NanoUSD: 800, Tokens: 90, CachedInputTokens: 25}
	want := gateway.SpendSummary{
		Total:     spent,
		Calls:     2,
		ByAccount: []gateway.AccountSpend{{Account: acct, Spent: spent, Calls: 2}},
		ByAlias:   []gateway.NamedSpend{{Name: "small", Spent: spent, Calls: 2}},
		ByModel:   []gateway.NamedSpend{{Name: "m-1", Spent: spent, Calls: 2}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// TestMigrateRefusesNewerSchema: a database a newer release migrated is
// not touched by this one.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	l, err := pgledger.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(t.Context(), `INSERT INTO aid_budget_migrations (version) VALUES ($1)`, pgledger.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	err = l.Migrate(t.Context())
	var tooNew *pgledger.SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Database != pgledger.SchemaVersion+1 || tooNew.Known != pgledger.SchemaVersion {
		t.Fatalf("Migrate = %v, want a *SchemaTooNewError at version %d", err, pgledger.SchemaVersion+1)
	}
}
