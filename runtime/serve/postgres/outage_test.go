package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestOutageIsUnavailable cuts, then stalls, the database under every
// store on PostgreSQL: each operation fails with a *kind.UnavailableError
// naming the store's part; once the database is back, the same store works again without
// being reopened.
func TestOutageIsUnavailable(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	proxy, viaProxy := pgtest.NewProxy(t, dsn)
	ctx := t.Context()
	open := func(mod func(*pgxpool.Config)) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(viaProxy)
		if err != nil {
			t.Fatal(err)
		}
		if mod != nil {
			mod(cfg)
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	const opTimeout = 300 * time.Millisecond
	runs, err := pgstore.New(ctx, open(nil), pgstore.WithOpTimeout(opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	mem, err := runs.Memory("notes")
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := pgledger.New(open(nil), pgledger.WithOpTimeout(opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	vectors, err := pgvector.New(ctx, open(pgvector.RegisterOnConnect), pgvector.Config{Table: "kb", Dimensions: 3, Distance: retrieval.DistanceCosine})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	ops := []struct {
		dependency string
		stalls     bool // the store bounds its operations, so a stall is an outage too
		op         func(context.Context) error
	}{
		{"run store", true, func(ctx context.Context) error {
			n++
			_, err := runs.CreateRun(ctx, agents.RunRecord{RunID: "run_" + strings.Repeat("x", n), Agent: "a", Status: agents.StatusRunning,
				Checkpoint: agents.Checkpoint{Version: agents.CheckpointVersion, RunID: "r", Agent: "a", Path: []string{"a"}, Alias: "m"}})
			return err
		}},
		{"run store", true, func(ctx context.Context) error {
			_, err := runs.LoadRun(ctx, "run_nope")
			if _, nf := errors.AsType[*agents.RunNotFoundError](err); nf {
				return nil
			}
			return err
		}},
		{"memory store", true, func(ctx context.Context) error {
			_, err := mem.Memories(ctx, agents.MemoryUser, "u1")
			return err
		}},
		{"budget ledger", true, func(ctx context.Context) error {
			n++
			return ledger.Reserve(ctx, gateway.Reservation{ID: "res_" + strings.Repeat("x", n), Alias: "m", Model: "m-1", Amount: gateway.Amount{Tokens: 1}})
		}},
		{"vector store", false, func(ctx context.Context) error {
			_, err := vectors.Search(ctx, []float32{1, 0, 0}, 2, nil)
			return err
		}},
	}
	check := func(phase string, want bool) {
		t.Helper()
		for _, o := range ops {
			if !want {
				if err := o.op(ctx); err != nil {
					t.Errorf("%s: %s: %v", phase, o.dependency, err)
				}
				continue
			}
			if phase == "stalled" && !o.stalls {
				continue
			}
			err := o.op(ctx)
			ue, ok := errors.AsType[*kind.UnavailableError](err)
			if !ok || ue.Dependency != o.dependency {
				t.Errorf("%s: %s: %v, want a *kind.UnavailableError of the %s", phase, o.dependency, err, o.dependency)
				continue
			}
		}
	}
	check("up", false)
	proxy.Cut()
	check("cut", true)
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	check("restored", false)
	proxy.Stall()
	check("stalled", true)
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	check("restored after the stall", false)

	// The caller's own deadline is not an outage.
	short, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-short.Done()
	if _, err := runs.LoadRun(short, "run_nope"); errors.As(err, new(*kind.UnavailableError)) || err == nil {
		t.Errorf("a caller's expired context: %v", err)
	}
}
