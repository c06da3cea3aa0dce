package pgvector_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
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

// TestKindMemoryStores writes memory through one application's store and
// reads it through another's, as two replicas (or a restart) would: the
// entries live in the database, and each store name is kept apart.
func TestKindMemoryStores(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	k := pgvector.Kind{DSNEnv: "MEM_DSN"}
	first := env("MEM_DSN", dsn)
	a, err := k.OpenMemoryStore(t.Context(), first, "mem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddMemory(t.Context(), agents.MemoryUser, "u1", "prefers email"); err != nil {
		t.Fatal(err)
	}
	if err := first.Scope.Close(); err != nil {
		t.Fatal(err)
	}

	second := env("MEM_DSN", dsn)
	defer second.Scope.Close()
	b, err := k.OpenMemoryStore(t.Context(), second, "mem")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Memories(t.Context(), agents.MemoryUser, "u1")
	if err != nil || len(got) != 1 || got[0].Text != "prefers email" {
		t.Fatalf("memories after a restart: %+v, %v", got, err)
	}
	other, err := k.OpenMemoryStore(t.Context(), second, "other")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Memories(t.Context(), agents.MemoryUser, "u1"); err != nil || len(got) != 0 {
		t.Fatalf("another store sees %+v, %v", got, err)
	}
	if _, err := k.OpenMemoryStore(t.Context(), env("OTHER", dsn), "mem"); err == nil || !strings.Contains(err.Error(), "MEM_DSN") {
		t.Errorf("without the DSN variable: %v", err)
	}
}
