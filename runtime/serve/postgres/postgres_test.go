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
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
	"github.com/aidgen/aid/runtime/serve/postgres"
)

// TestOpenSharesOnePool opens the state (OpenState) and the memory of a
// pgvector store (its kind) of one DSN that says pool_max_conns=1 in one
// application, and works them hard at once: the run store, the ledger and
// the memory share that one pool, so the database sees one connection from
// them, where a pool each would have opened three; closing the application
// closes it.
func TestOpenSharesOnePool(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("pool_max_conns", "1")
	q.Set("application_name", "aid_open_test")
	u.RawQuery = q.Encode()

	env := kind.Env{Scope: &kind.Scope{}, LookupEnv: func(k string) (string, bool) { return u.String(), k == "MEM_DSN" }}
	defer env.Scope.Close()
	store, ledger, err := postgres.OpenState(t.Context(), env, u.String())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := pgvector.Kind{DSNEnv: "MEM_DSN"}.OpenMemoryStore(t.Context(), env, "mem")
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
	again, _, err := postgres.OpenState(t.Context(), env, u.String())
	if err != nil || again != store {
		t.Errorf("a second OpenState gave another store: %v", err)
	}
	if !strings.Contains(u.String(), "pool_max_conns=1") {
		t.Fatal("the DSN lost pool_max_conns")
	}
}
