package pgvector_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestConnector opens stores the way retrieval.Build does: by kind, with
// the DSN from the named environment variable, one pool per DSN.
func TestConnector(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	t.Setenv("AID_PGVECTOR_TEST_DSN", dsn)
	t.Setenv("AID_PGVECTOR_UNSET", "")
	c := pgvector.NewConnector(t.Context(), 60)
	defer c.Close()
	openers := map[string]retrieval.StoreOpener{retrieval.StorePGVector: c.Open}

	a, err := retrieval.OpenStore(retrieval.StoreConfig{Name: "a", Kind: retrieval.StorePGVector, DSNEnv: "AID_PGVECTOR_TEST_DSN", Table: "kb_a"}, 3, openers)
	if err != nil {
		t.Fatal(err)
	}
	if a.Distance() != retrieval.DistanceCosine || a.Dimensions() != 3 || a.(*pgvector.Store).EFSearch() != 60 {
		t.Errorf("store a: distance %q, width %d", a.Distance(), a.Dimensions())
	}
	b, err := retrieval.OpenStore(retrieval.StoreConfig{Name: "b", Kind: retrieval.StorePGVector, DSNEnv: "AID_PGVECTOR_TEST_DSN", Table: "kb_b", Distance: retrieval.DistanceL2}, 2, openers)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := a.Upsert(ctx, []retrieval.Record{{Chunk: retrieval.Chunk{ID: "x"}, Vector: []float32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if ids, err := b.IDs(ctx, nil); err != nil || len(ids) != 0 {
		t.Errorf("stores on one database share rows: %v, %v", ids, err)
	}
	// Reopening a table with another width goes through the same check.
	if _, err := retrieval.OpenStore(retrieval.StoreConfig{Name: "a2", Kind: retrieval.StorePGVector, DSNEnv: "AID_PGVECTOR_TEST_DSN", Table: "kb_a"}, 4, openers); err == nil {
		t.Error("reopening kb_a with width 4 was accepted")
	}
	_, err = retrieval.OpenStore(retrieval.StoreConfig{Name: "c", Kind: retrieval.StorePGVector, DSNEnv: "AID_PGVECTOR_UNSET", Table: "kb_c"}, 3, openers)
	if err == nil || !strings.Contains(err.Error(), "AID_PGVECTOR_UNSET") {
		t.Errorf("an unset DSN variable: %v", err)
	}
	c.Close()
	if _, err := a.IDs(ctx, nil); err == nil {
		t.Error("a store still works after its connector closed")
	}
	if _, err := c.Open(retrieval.StoreConfig{Name: "d", DSNEnv: "AID_PGVECTOR_TEST_DSN", Table: "kb_d"}, 3); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("open after close: %v", err)
	}
}
