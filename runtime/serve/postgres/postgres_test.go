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
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
	"github.com/aidgen/aid/runtime/serve/postgres"
)

// TestOpenSharesOnePool opens the state (OpenState) and the memory of a
// pgvector store (OpenMemory) of one DSN that says pool_max_conns=1 in one
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
	mem, err := openMemory(t, env, pgvector.Kind{DSNEnv: "MEM_DSN"}, "mem")
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

// openMemory opens the memory named store in the database of the store
// kind k, as app.Assemble does: OpenMemory on the kind's DSN.
func openMemory(t *testing.T, env kind.Env, k retrieval.DatabaseKind, store string) (agents.MemoryStore, error) {
	t.Helper()
	dsn, err := k.DatabaseDSN(env, store)
	if err != nil {
		return nil, err
	}
	return postgres.OpenMemory(t.Context(), env, dsn, store)
}

// memEnv is an application's environment holding one variable, with a
// scope of its own.
func memEnv(name, value string) kind.Env {
	return kind.Env{
		LookupEnv: func(n string) (string, bool) { return value, n == name },
		Scope:     &kind.Scope{},
	}
}

// TestOpenMemory writes memory through one application's pgvector store and
// reads it through another's, as two replicas (or a restart) would: the
// entries live in the database, and each store name is kept apart.
func TestOpenMemory(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	k := pgvector.Kind{DSNEnv: "MEM_DSN"}
	first := memEnv("MEM_DSN", dsn)
	a, err := openMemory(t, first, k, "mem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddMemory(t.Context(), agents.MemoryUser, "u1", "prefers email"); err != nil {
		t.Fatal(err)
	}
	if err := first.Scope.Close(); err != nil {
		t.Fatal(err)
	}

	second := memEnv("MEM_DSN", dsn)
	defer second.Scope.Close()
	b, err := openMemory(t, second, k, "mem")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Memories(t.Context(), agents.MemoryUser, "u1")
	if err != nil || len(got) != 1 || got[0].Text != "prefers email" {
		t.Fatalf("memories after a restart: %+v, %v", got, err)
	}
	other, err := openMemory(t, second, k, "other")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := other.Memories(t.Context(), agents.MemoryUser, "u1"); err != nil || len(got) != 0 {
		t.Fatalf("another store sees %+v, %v", got, err)
	}
}
