package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// loadDesk builds a runtime over store whose model answers with script: two
// parallel lookups, a refund (gated by approval when approve is set), a
// memory write, each counted.
func loadDesk(t *testing.T, store agents.Store, mem agents.MemoryStore, approve bool, count *atomic.Int64, script ...fake.Step) *agents.Runtime {
	t.Helper()
	gw, _ := newGateway(t, fake.Config{Script: script})
	approval := agents.ApprovalNever
	if approve {
		approval = agents.ApprovalAlways
	}
	rt, err := agents.New(agents.Config{
		Gateway: gw, Store: store, MaxParallelTools: 2,
		MemoryStores: map[string]agents.MemoryStore{"notes": mem},
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund", "remember"},
			Memory: &agents.Memory{User: &agents.StoredMemory{Store: "notes"}}}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: lookupSchema},
			{Name: "refund", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: approval},
			{Name: "remember", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite},
		},
		Implementations: map[string]agents.Implementation{
			"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "found", nil }),
			"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
				count.Add(1)
				return "refunded", nil
			}),
			"remember": agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
				ri, _ := agents.RunInfoFromContext(ctx)
				_, err := mem.AddMemory(ctx, agents.MemoryUser, ri.UserID, "asked about "+string(args))
				return "remembered", err
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestManyConcurrentRuns drives 240 runs at once through one pool of four
// connections, then pauses 200 more and has two replicas race to resume
// each. The store is told not to retry, so a deadlock or serialization
// failure would fail a run instead of hiding behind the safety net. Every
// run must end completed, every call with one result, every refund run
// once, and every memory write kept.
func TestManyConcurrentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	dsn := pgtest.NewDatabase(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := pgstore.New(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	pgstore.NoRetry(st)
	mem, err := st.Memory("notes")
	if err != nil {
		t.Fatal(err)
	}
	const users = 10
	script := func(i int) []fake.Step {
		id := fmt.Sprintf(`{"id":"R%d"}`, i)
		return []fake.Step{
			calls(call("l1", "lookup", id), call("l2", "lookup", id)),
			calls(call("r", "refund", id), call("m", "remember", id)),
			answer("done"),
		}
	}
	user := func(i int) string { return fmt.Sprintf("u%d", i%users) }

	t.Run("runs", func(t *testing.T) {
		const n = 240
		var refunds atomic.Int64
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			rt := loadDesk(t, st, mem, false, &refunds, script(i)...)
			wg.Go(func() {
				res, err := rt.Run(t.Context(), "desk", "refund", agents.RunOptions{UserID: user(i)})
				if err != nil || res.Status != agents.StatusCompleted {
					t.Errorf("run %d: %s %v", i, res.Status, err)
				}
				ids[i] = res.RunID
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if refunds.Load() != n {
			t.Fatalf("%d refunds, want %d", refunds.Load(), n)
		}
		for _, id := range ids {
			checkAllFinished(t, st, id, 4)
		}
		total := 0
		for u := range users {
			es, err := mem.Memories(t.Context(), agents.MemoryUser, fmt.Sprintf("u%d", u))
			if err != nil {
				t.Fatal(err)
			}
			total += len(es)
		}
		if total != n {
			t.Fatalf("%d memory entries kept, want %d", total, n)
		}
	})

	t.Run("racing resumes", func(t *testing.T) {
		const n = 200
		var refunds atomic.Int64
		ids := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			rt := loadDesk(t, st, mem, true, &refunds, script(i)[:2]...)
			wg.Go(func() {
				res, err := rt.Run(t.Context(), "desk", "refund", agents.RunOptions{UserID: user(i)})
				if err != nil || res.Status != agents.StatusPaused {
					t.Errorf("run %d: %s %v", i, res.Status, err)
				}
				ids[i] = res.RunID
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		var wins, losses atomic.Int64
		for i := range n {
			for range 2 {
				rt := loadDesk(t, st, mem, true, &refunds, script(i)[2:]...)
				wg.Go(func() {
					res, err := rt.Resume(t.Context(), ids[i], agents.Decision{Action: agents.Approve})
					var conflict *agents.ConflictError
					var np *agents.WrongStatusError
					switch {
					case err == nil && res.Status == agents.StatusCompleted:
						wins.Add(1)
					case errors.As(err, &conflict), errors.As(err, &np):
						losses.Add(1)
					default:
						t.Errorf("resume of run %d: %s %v", i, res.Status, err)
					}
				})
			}
		}
		wg.Wait()
		if wins.Load() != n || losses.Load() != n || refunds.Load() != n {
			t.Fatalf("%d wins, %d losses, %d refunds; want %d of each", wins.Load(), losses.Load(), refunds.Load(), n)
		}
		for _, id := range ids {
			checkAllFinished(t, st, id, 4)
		}
	})
}
