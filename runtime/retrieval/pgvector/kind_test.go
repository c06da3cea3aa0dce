package pgvector_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// env is an application's environment holding one variable, with a scope
// of its own.
func env(name, value string) kind.Env {
	return kind.Env{
		LookupEnv: func(n string) (string, bool) { return value, n == name },
		Scope:     &kind.Scope{},
	}
}

// TestKindVectorStores opens stores the way retrieval.Build does: through
// the kind, with the DSN from the named variable of the application's
// environment (never os's), one pool per DSN in the application's scope,
// which closes it.
func TestKindVectorStores(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	e := env("AID_PGVECTOR_TEST_DSN", dsn)
	ctx := context.Background()
	k := pgvector.Kind{DSNEnv: "AID_PGVECTOR_TEST_DSN", Table: "kb_a"}
	if k.StoreKind() != kind.StorePGVector || k.InMemory() {
		t.Errorf("kind %q, in memory %v", k.StoreKind(), k.InMemory())
	}
	a, err := retrieval.OpenStore(ctx, e, retrieval.StoreConfig{Name: "a", Kind: k}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if a.Distance() != retrieval.DistanceCosine || a.Dimensions() != 3 {
		t.Errorf("store a: distance %q, width %d", a.Distance(), a.Dimensions())
	}
	b, err := retrieval.OpenStore(ctx, e, retrieval.StoreConfig{Name: "b", Distance: retrieval.DistanceL2, Kind: pgvector.Kind{DSNEnv: "AID_PGVECTOR_TEST_DSN", Table: "kb_b"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Upsert(ctx, []retrieval.Record{{Chunk: retrieval.Chunk{ID: "x"}, Vector: []float32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if ids, err := b.IDs(ctx, nil); err != nil || len(ids) != 0 {
		t.Errorf("stores on one database share rows: %v, %v", ids, err)
	}
	// Reopening a table with another width goes through the same check.
	if _, err := retrieval.OpenStore(ctx, e, retrieval.StoreConfig{Name: "a2", Kind: k}, 4); err == nil {
		t.Error("reopening kb_a with width 4 was accepted")
	}
	t.Setenv("AID_PGVECTOR_UNSET", dsn) // in the process's environment, not the application's
	_, err = retrieval.OpenStore(ctx, e, retrieval.StoreConfig{Name: "c", Kind: pgvector.Kind{DSNEnv: "AID_PGVECTOR_UNSET", Table: "kb_c"}}, 3)
	if err == nil || !strings.Contains(err.Error(), "AID_PGVECTOR_UNSET") {
		t.Errorf("an unset DSN variable: %v", err)
	}
	if err := e.Scope.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.IDs(ctx, nil); err == nil {
		t.Error("a store still works after its application closed")
	}
	if _, err := retrieval.OpenStore(ctx, e, retrieval.StoreConfig{Name: "d", Kind: k}, 3); !errors.Is(err, kind.ErrScopeClosed) {
		t.Errorf("open after close: %v", err)
	}
}

// TestKindDatabaseDSN: the kind says where its database is, for the agents'
// memory the application opens there (serve/postgres.OpenMemory), from the
// named variable of the application's environment, or DATABASE_URL.
func TestKindDatabaseDSN(t *testing.T) {
	var k retrieval.DatabaseKind = pgvector.Kind{DSNEnv: "MEM_DSN"}
	if dsn, err := k.DatabaseDSN(env("MEM_DSN", "postgres://mem"), "mem"); err != nil || dsn != "postgres://mem" {
		t.Errorf("DSN %q, %v", dsn, err)
	}
	if dsn, err := (pgvector.Kind{}).DatabaseDSN(env(pgvector.DefaultDSNEnv, "postgres://db"), "mem"); err != nil || dsn != "postgres://db" {
		t.Errorf("default DSN variable: %q, %v", dsn, err)
	}
	if _, err := k.DatabaseDSN(env("OTHER", "postgres://mem"), "mem"); err == nil || !strings.Contains(err.Error(), "MEM_DSN") || !strings.Contains(err.Error(), `"mem"`) {
		t.Errorf("without the DSN variable: %v", err)
	}
}
