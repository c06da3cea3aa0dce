package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/serve/postgres"
)

// TestMemoryStoresOutliveTheProcess writes memory through one process's
// openers and reads it through another's, as two replicas (or a restart)
// would: the entries live in the database.
func TestMemoryStoresOutliveTheProcess(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := retrieval.StoreConfig{Name: "mem", Kind: retrieval.StorePGVector}

	var a app.Options
	closeA := postgres.Open(t.Context(), &a)
	mem, err := a.MemoryStoreOpeners[retrieval.StorePGVector](t.Context(), cfg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.AddMemory(t.Context(), agents.MemoryUser, "u1", "prefers email"); err != nil {
		t.Fatal(err)
	}
	closeA()

	var b app.Options
	closeB := postgres.Open(t.Context(), &b)
	defer closeB()
	mem, err = b.MemoryStoreOpeners[retrieval.StorePGVector](t.Context(), cfg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	got, err := mem.Memories(t.Context(), agents.MemoryUser, "u1")
	if err != nil || len(got) != 1 || got[0].Text != "prefers email" {
		t.Fatalf("memories after a restart: %+v, %v", got, err)
	}
	// A second store name on the same database is kept apart.
	other, err := b.MemoryStoreOpeners[retrieval.StorePGVector](t.Context(), retrieval.StoreConfig{Name: "other", Kind: retrieval.StorePGVector}, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Memories(t.Context(), agents.MemoryUser, "u1"); err != nil || len(got) != 0 {
		t.Fatalf("another store sees %+v, %v", got, err)
	}
}

// TestOpenSharesOnePool opens the state and memory of one DSN that says
// pool_max_conns=1 and works them hard at once: the run store, the ledger
// and the memory share that one pool, so the database sees one connection
// from them, where a pool each would have opened three.
func TestOpenSharesOnePool(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("pool_max_conns", "1")
	q.Set("application_name", "aid_open_test")
	u.RawQuery = q.Encode()

	var o app.Options
	closeAll := postgres.Open(t.Context(), &o)
	defer closeAll()
	store, ledger, err := o.OpenState(t.Context(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := o.MemoryStoreOpeners[retrieval.StorePGVector](t.Context(), retrieval.StoreConfig{Name: "mem"}, u.String())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			id := fmt.Sprintf("run_%d", i)
			if _, err := store.CreateRun(context.Background(), agents.RunRecord{RunID: id, Agent: "a", Status: agents.StatusRunning,
				Checkpoint: agents.Checkpoint{Version: agents.CheckpointVersion, RunID: id, Agent: "a", Path: []string{"a"}, Alias: "m"}}); err != nil {
				t.Error(err)
			}
			if err := ledger.Reserve(context.Background(), gateway.Reservation{ID: "res_" + id, Alias: "m", Model: "m-1", Amount: gateway.Amount{Tokens: 1}}); err != nil {
				t.Error(err)
			}
			if _, err := mem.AddMemory(context.Background(), agents.MemoryGlobal, "", "fact "+id); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'aid_open_test'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the state and memory of one DSN hold %d connections, want the 1 of their shared pool", n)
	}
	// A second OpenState of the same DSN is the same store, not a new pool.
	again, _, err := o.OpenState(t.Context(), u.String())
	if err != nil || again != store {
		t.Errorf("a second OpenState gave another store: %v", err)
	}
	if !strings.Contains(u.String(), "pool_max_conns=1") {
		t.Fatal("the DSN lost pool_max_conns")
	}
}
