package pgutil_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/internal/pgutil"
)

// steps are a schema whose steps fail when run twice or out of order: each
// creates or alters without IF NOT EXISTS, and step 2 and 3 need step 1's
// table. The log records the order they ran in.
var steps = []string{
	`CREATE TABLE {t} (n integer);
	CREATE TABLE {t}_log (seq serial PRIMARY KEY, step integer NOT NULL);
	INSERT INTO {t}_log (step) VALUES (1);`,
	`ALTER TABLE {t} ADD COLUMN m integer;
	INSERT INTO {t}_log (step) VALUES (2);`,
	`ALTER TABLE {t} ADD COLUMN k integer;
	INSERT INTO {t}_log (step) VALUES (3);`,
}

func schema(n int) pgutil.Schema {
	return pgutil.Schema{
		LockKey:  pgutil.LockKey("pgutil test"),
		Steps:    steps[:n],
		Names:    strings.NewReplacer("{t}", "thing"),
		Versions: pgutil.MigrationsTable{Name: pgx.Identifier{"thing_migrations"}.Sanitize(), Clock: "clock_timestamp()"},
	}
}

func migrate(ctx context.Context, pool *pgxpool.Pool, s pgutil.Schema) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return pgutil.Migrate(ctx, tx, s) })
}

// logged returns the steps run, in order, and the versions recorded.
func logged(t *testing.T, pool *pgxpool.Pool) (ran, versions []int) {
	t.Helper()
	ctx := t.Context()
	for q, out := range map[string]*[]int{
		`SELECT coalesce(array_agg(step ORDER BY seq), '{}') FROM thing_log`:               &ran,
		`SELECT coalesce(array_agg(version ORDER BY version), '{}') FROM thing_migrations`: &versions,
	} {
		if err := pool.QueryRow(ctx, q).Scan(out); err != nil {
			t.Fatal(err)
		}
	}
	return ran, versions
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestMigrateAppliesStepsInOrderOnce migrates a new database in two
// releases, and again: each step runs once, in order, and is recorded.
func TestMigrateAppliesStepsInOrderOnce(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	for _, tt := range []struct {
		steps        int
		wantRan      []int
		wantVersions []int
	}{
		{steps: 1, wantRan: []int{1}, wantVersions: []int{1}},
		{steps: 1, wantRan: []int{1}, wantVersions: []int{1}},
		{steps: 3, wantRan: []int{1, 2, 3}, wantVersions: []int{1, 2, 3}},
		{steps: 3, wantRan: []int{1, 2, 3}, wantVersions: []int{1, 2, 3}},
	} {
		if err := migrate(ctx, pool, schema(tt.steps)); err != nil {
			t.Fatalf("migrate to %d: %v", tt.steps, err)
		}
		ran, versions := logged(t, pool)
		if !equal(ran, tt.wantRan) || !equal(versions, tt.wantVersions) {
			t.Errorf("after migrating to %d: ran %v, recorded %v; want %v, %v", tt.steps, ran, versions, tt.wantRan, tt.wantVersions)
		}
	}
}

// TestMigrateFailedStepChangesNothing has the last step fail: the earlier
// steps of the same migration are rolled back with it, and the error names
// the step.
func TestMigrateFailedStepChangesNothing(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	if err := migrate(ctx, pool, schema(1)); err != nil {
		t.Fatal(err)
	}
	s := schema(3)
	s.Steps = append(s.Steps[:2:2], `ALTER TABLE {t} ADD COLUMN m integer`) // m exists after step 2
	err := migrate(ctx, pool, s)
	if err == nil || !strings.Contains(err.Error(), "step 3") {
		t.Fatalf("migrate = %v, want step 3 to fail", err)
	}
	ran, versions := logged(t, pool)
	if !equal(ran, []int{1}) || !equal(versions, []int{1}) {
		t.Errorf("after a failed migration: ran %v, recorded %v; want [1], [1]", ran, versions)
	}
}

// TestMigrateConcurrentCallersSerialize starts many migrations of a new
// database at once. The steps fail if run twice, so without the advisory
// lock all but one would fail (or two would both apply them).
func TestMigrateConcurrentCallersSerialize(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = migrate(ctx, pool, schema(3)) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migration %d: %v", i, err)
		}
	}
	ran, versions := logged(t, pool)
	if !equal(ran, []int{1, 2, 3}) || !equal(versions, []int{1, 2, 3}) {
		t.Errorf("ran %v, recorded %v; want [1 2 3] each", ran, versions)
	}
}

// TestMigrateRefusesNewerSchema opens a database a newer release migrated:
// Migrate refuses it with a *SchemaTooNewError and changes nothing.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := t.Context()
	if err := migrate(ctx, pool, schema(3)); err != nil {
		t.Fatal(err)
	}
	err := migrate(ctx, pool, schema(2))
	var tooNew *pgutil.SchemaTooNewError
	if !errors.As(err, &tooNew) || tooNew.Database != 3 || tooNew.Known != 2 {
		t.Fatalf("migrate = %v, want a *SchemaTooNewError from 3 to 2", err)
	}
	if ran, versions := logged(t, pool); !equal(ran, []int{1, 2, 3}) || !equal(versions, []int{1, 2, 3}) {
		t.Errorf("ran %v, recorded %v; want [1 2 3] each", ran, versions)
	}
}

// refusing is a Versions that refuses the schema.
type refusing struct{ err error }

func (r refusing) Current(context.Context, pgx.Tx) (int, error) { return 0, r.err }
func (r refusing) Applied(context.Context, pgx.Tx, int) error   { return errors.New("applied called") }

// TestMigrateReturnsVersionsError passes a store's own refusal through as
// it is, so that the store can report it with its own type.
func TestMigrateReturnsVersionsError(t *testing.T) {
	pool := pgtest.NewPool(t)
	refusal := errors.New("opened with another width")
	s := schema(1)
	s.Versions = refusing{refusal}
	if err := migrate(t.Context(), pool, s); !errors.Is(err, refusal) {
		t.Fatalf("migrate = %v, want %v", err, refusal)
	}
}
