package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/internal/pgutil"
)

// benchStores gives each benchmark the in-memory store and the PostgreSQL
// one, so that one run shows what the database costs beside the floor.
func benchStores(b *testing.B, fn func(b *testing.B, s agents.Store)) {
	b.Run("store=memory", func(b *testing.B) { fn(b, agents.NewInMemoryStore()) })
	b.Run("store=postgres", func(b *testing.B) {
		s, err := pgstore.New(context.Background(), pgtest.NewPool(b))
		if err != nil {
			b.Fatal(err)
		}
		fn(b, s)
	})
}

// BenchmarkRecordFinishCall measures what every tool call costs the store:
// recording it before it runs and its result after (two round trips on
// PostgreSQL). Runs hold 20 calls each, as a long run would; the in-memory
// store scans a run's calls, so one run of b.N calls would measure that
// scan instead. The parallel variant measures the store's throughput with
// GOMAXPROCS callers sharing one pool.
func BenchmarkRecordFinishCall(b *testing.B) {
	ctx := context.Background()
	res := agents.CallResult{Observation: `{"status":"shipped","eta":"2 days"}`}
	one := func(s agents.Store, prefix string, i int64) {
		run, key := fmt.Sprintf("%s_%d", prefix, i/20), fmt.Sprintf("%d.0", i%20)
		if err := s.RecordCall(ctx, agents.CallRecord{RunID: run, Key: key, CallID: "call_1", Tool: "lookup", Effects: agents.EffectsRead, Arguments: `{"id":"A-1"}`}); err != nil {
			b.Fatal(err)
		}
		if err := s.FinishCall(ctx, run, key, res); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		benchStores(b, func(b *testing.B, s agents.Store) {
			b.ReportAllocs()
			var i int64
			for b.Loop() {
				i++
				one(s, "run_bench", i)
			}
		})
	})
	b.Run("parallel", func(b *testing.B) {
		benchStores(b, func(b *testing.B, s agents.Store) {
			b.ReportAllocs()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				run := fmt.Sprintf("run_%d", next.Add(1))
				var i int64
				for pb.Next() {
					i++
					one(s, run, i)
				}
			})
		})
	})
}

// BenchmarkUpdateRun measures the checkpoint write the runtime makes after
// every step, for a run ten steps in (a checkpoint of about 10 KB, reported
// as checkpoint-bytes).
func BenchmarkUpdateRun(b *testing.B) {
	ctx := context.Background()
	cp := checkpoint("run_bench")
	for i := range 10 {
		cp.Messages = append(cp.Messages,
			agents.SavedMessage{Role: "assistant", ToolCalls: []agents.SavedToolCall{{ID: fmt.Sprint(i), Name: "lookup", Arguments: `{"id":"A-1"}`}}},
			agents.SavedMessage{Role: "tool", ToolCallID: fmt.Sprint(i), Content: strings.Repeat("shipped ", 40)})
		cp.Steps = append(cp.Steps, agents.StepRecord{Number: i + 1, Agent: "desk", Alias: "small", Requested: "small", Model: "m-small",
			ToolCalls: []agents.ToolCallRecord{{ID: fmt.Sprint(i), Name: "lookup", Arguments: `{"id":"A-1"}`, Done: true, Observation: strings.Repeat("shipped ", 40)}}})
	}
	data, _ := agents.MarshalCheckpoint(cp)
	benchStores(b, func(b *testing.B, s agents.Store) {
		rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_bench", Agent: "desk", Status: agents.StatusRunning, Checkpoint: cp})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if rec, err = s.UpdateRun(ctx, rec); err != nil {
				b.Fatal(err)
			}
		}
		// After the loop: b.Loop resets the timer, which drops metrics
		// reported before it.
		b.ReportMetric(float64(len(data)), "checkpoint-bytes")
	})
}

// BenchmarkConcurrentRuns keeps 100 and 1,000 three-step runs in flight
// at once (a lookup, a second lookup, an answer) on one store, with a model
// that answers in 500 ms and runs starting spread over one model call, as
// requests reach a service's replica, on the in-memory store and on one
// pgstore pool, and reports what the store costs each step:
//
//   - runs/s: runs completed per second;
//   - overhead-ms/step-p50 and -p99: a run's time beyond its three model
//     calls' latency, per step, at the median and the 99th percentile
//     run: what the loop, the tools and the store add to each step with
//     that many runs in flight;
//   - store-ms/step: the time a step spends in store calls;
//   - round-trips/step (PostgreSQL): statements, batches and prepares sent
//     to the database per model step (a step's checkpoint and the read it
//     runs are one statement, agents.StepStore);
//   - acquire-wait-% (PostgreSQL): the time spent waiting for a pool
//     connection (pgxpool Stat().AcquireDuration()) as a share of the time
//     spent in store calls: how much of the store's cost is the pool being
//     too small.
//
// conns=default is the pool a DSN without pool_max_conns gets
// (pgutil.DefaultMaxConns); conns=4 is pgx's default on this machine.
// scripts/bench-concurrent-runs.sh runs it without the race detector:
//
//	go test -run '^$' -bench BenchmarkConcurrentRuns -benchtime 3x ./runtime/agents/pgstore/
func BenchmarkConcurrentRuns(b *testing.B) {
	for _, runs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("runs=%d/store=memory", runs), func(b *testing.B) {
			concurrentRuns(b, runs, agents.NewInMemoryStore(), nil, nil)
		})
		for _, conns := range []int32{4, pgutil.DefaultMaxConns()} {
			name := fmt.Sprintf("runs=%d/store=postgres/conns=%d", runs, conns)
			if conns == pgutil.DefaultMaxConns() {
				name = fmt.Sprintf("runs=%d/store=postgres/conns=default(%d)", runs, conns)
			}
			b.Run(name, func(b *testing.B) {
				cfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(b))
				if err != nil {
					b.Fatal(err)
				}
				cfg.MaxConns = conns
				var rt roundTrips
				cfg.ConnConfig.Tracer = &rt
				pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(pool.Close)
				st, err := pgstore.New(context.Background(), pool)
				if err != nil {
					b.Fatal(err)
				}
				concurrentRuns(b, runs, st, pool, &rt)
			})
		}
	}
}

// concurrentRuns is BenchmarkConcurrentRuns on one store; pool and rt are
// nil for the in-memory store.
func concurrentRuns(b *testing.B, runs int, st agents.Store, pool *pgxpool.Pool, rt *roundTrips) {
	const (
		steps   = 3
		latency = 500 * time.Millisecond
	)
	store := &timedStore{Store: st}
	var timed agents.Store = store
	if _, ok := st.(agents.StepStore); ok {
		timed = timedStepStore{store}
	}
	p, err := fake.New(fake.Config{Latency: latency, Agents: map[string][]fake.Step{"desk": {
		calls(call("l1", "lookup", `{"id":"A"}`)),
		calls(call("l2", "lookup", `{"id":"B"}`)),
		answer("done"),
	}}})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 8000,
			MaxOutputTokens: 100, Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		b.Fatal(err)
	}
	r, err := agents.New(agents.Config{
		Gateway: gw, Store: timed,
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup"}}},
		Tools:  []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return `{"status":"shipped"}`, nil
		})},
	})
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu       sync.Mutex
		overhead []time.Duration // per step, one a run
	)
	wave := func() {
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				// Starts spread over one model call, as requests
				// arrive; all at once, every step of every run
				// would reach the store in the same instant.
				time.Sleep(time.Duration(i) * latency / time.Duration(runs))
				start := time.Now()
				res, err := r.Run(context.Background(), "desk", "where are A and B?", agents.RunOptions{})
				d := (time.Since(start) - steps*latency) / steps
				if err != nil || res.Status != agents.StatusCompleted {
					b.Errorf("run: %s %v", res.Status, err)
				}
				mu.Lock()
				overhead = append(overhead, d)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	wave() // a service's pool is warm: its connections are open
	var before time.Duration
	if pool != nil {
		before = pool.Stat().AcquireDuration()
		rt.n.Store(0)
	}
	store.total.Store(0)
	overhead = overhead[:0]
	start := time.Now()
	for b.Loop() {
		wave()
	}
	elapsed := time.Since(start)
	total := float64(b.N * runs)
	slices.Sort(overhead)
	b.ReportMetric(total/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(overhead[len(overhead)/2])/1e6, "overhead-ms/step-p50")
	b.ReportMetric(float64(overhead[len(overhead)*99/100])/1e6, "overhead-ms/step-p99")
	b.ReportMetric(float64(store.total.Load())/1e6/(total*steps), "store-ms/step")
	if pool != nil {
		wait := pool.Stat().AcquireDuration() - before
		b.ReportMetric(float64(rt.n.Load())/(total*steps), "round-trips/step")
		b.ReportMetric(100*float64(wait)/float64(store.total.Load()), "acquire-wait-%")
	}
}

// roundTrips counts what a pool's connections send the database and wait
// for: statements, batches (one round trip each, however many statements
// they hold), COPYs and prepares.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}
func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.n.Add(1)
	return ctx
}
func (r *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// timedStore sums the time spent in a store's calls.
type timedStore struct {
	agents.Store
	total atomic.Int64 // nanoseconds
}

func (s *timedStore) since(t time.Time) { s.total.Add(int64(time.Since(t))) }

func (s *timedStore) CreateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	defer s.since(time.Now())
	return s.Store.CreateRun(ctx, rec)
}
func (s *timedStore) UpdateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	defer s.since(time.Now())
	return s.Store.UpdateRun(ctx, rec)
}
func (s *timedStore) LoadRun(ctx context.Context, id string) (agents.RunRecord, error) {
	defer s.since(time.Now())
	return s.Store.LoadRun(ctx, id)
}
func (s *timedStore) RecordCall(ctx context.Context, rec agents.CallRecord) error {
	defer s.since(time.Now())
	return s.Store.RecordCall(ctx, rec)
}
func (s *timedStore) FinishCall(ctx context.Context, runID, key string, res agents.CallResult) error {
	defer s.since(time.Now())
	return s.Store.FinishCall(ctx, runID, key, res)
}

// timedStepStore is a timedStore over an agents.StepStore, which it stays.
type timedStepStore struct{ *timedStore }

func (s timedStepStore) UpdateRunRecordCalls(ctx context.Context, rec agents.RunRecord, calls []agents.CallRecord) (agents.RunRecord, error) {
	defer s.since(time.Now())
	return s.Store.(agents.StepStore).UpdateRunRecordCalls(ctx, rec, calls)
}
