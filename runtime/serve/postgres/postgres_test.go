package postgres_test

import (
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/serve/postgres"
)

// TestMemoryStoresOutliveTheProcess writes memory through one service's
// opener and reads it through another's, as two replicas (or a restart)
// would: the entries live in the database.
func TestMemoryStoresOutliveTheProcess(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := retrieval.StoreConfig{Name: "mem", Kind: retrieval.StorePGVector}

	openers, closeA := postgres.MemoryStores(t.Context())
	a, err := openers[retrieval.StorePGVector](t.Context(), cfg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddMemory(t.Context(), agents.MemoryUser, "u1", "prefers email"); err != nil {
		t.Fatal(err)
	}
	closeA()

	openers, closeB := postgres.MemoryStores(t.Context())
	defer closeB()
	b, err := openers[retrieval.StorePGVector](t.Context(), cfg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Memories(t.Context(), agents.MemoryUser, "u1")
	if err != nil || len(got) != 1 || got[0].Text != "prefers email" {
		t.Fatalf("memories after a restart: %+v, %v", got, err)
	}
	// A second store name on the same database is kept apart.
	other, err := openers[retrieval.StorePGVector](t.Context(), retrieval.StoreConfig{Name: "other", Kind: retrieval.StorePGVector}, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Memories(t.Context(), agents.MemoryUser, "u1"); err != nil || len(got) != 0 {
		t.Fatalf("another store sees %+v, %v", got, err)
	}
}
