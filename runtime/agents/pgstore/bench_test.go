package pgstore_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// BenchmarkConcurrentRuns starts 1,000 runs of three steps at once (two
// tool steps and an answer, a model and tools that answer at once) and
// reports the per-step overhead a run sees: its wall time over its three
// steps, the median (p50-ns/step) and the 99th percentile (p99-ns/step),
// on the in-memory store and on PostgreSQL (AID_TEST_DATABASE_URL; the
// sub-benchmark skips without it). Run it without the race detector:
//
//	go test -run '^$' -bench BenchmarkConcurrentRuns -benchtime 3x ./runtime/agents/pgstore/
//
// scripts/bench-concurrent-runs.sh does, with the database's DSN.
func BenchmarkConcurrentRuns(b *testing.B) {
	b.Run("memory", func(b *testing.B) { benchConcurrentRuns(b, agents.NewInMemoryStore()) })
	b.Run("postgres", func(b *testing.B) {
		pool := openPool(b, pgtest.NewDatabase(b))
		st, err := pgstore.New(context.Background(), pool)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(st.Close)
		benchConcurrentRuns(b, st)
	})
}

func benchConcurrentRuns(b *testing.B, store agents.Store) {
	const runs, steps = 1000, 3
	id := json.RawMessage(`{"id":"A-1"}`)
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"desk": {
		calls(call("l", "lookup", string(id))),
		calls(call("l", "lookup", string(id))),
		answer("done"),
	}}})
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 8000,
			MaxOutputTokens: 100, Capabilities: []gateway.Capability{gateway.CapabilityTools}, Cost: gateway.CostProfile{InputPer1kUSD: 0.001}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := agents.New(agents.Config{
		Gateway: gw, Store: store,
		Agents: []agents.Agent{{Name: "desk", Model: "small", Instructions: "Look orders up.", Tools: []string{"lookup"}}},
		Tools:  []agents.Tool{{Name: "lookup", Description: "d", Input: lookupSchema}},
		Implementations: map[string]agents.Implementation{
			"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "found", nil }),
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	var perStep []time.Duration
	for b.Loop() {
		perStep = perStep[:0]
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range runs {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				res, err := rt.Run(context.Background(), "desk", "where is A-1?", agents.RunOptions{})
				d := time.Since(t0)
				if err != nil || len(res.Steps) != steps {
					b.Errorf("%s, %d steps: %v", res.Status, len(res.Steps), err)
					return
				}
				mu.Lock()
				perStep = append(perStep, d/steps)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
	}
	if len(perStep) == 0 {
		return
	}
	slices.Sort(perStep)
	b.ReportMetric(float64(perStep[len(perStep)/2]), "p50-ns/step")
	b.ReportMetric(float64(perStep[len(perStep)*99/100]), "p99-ns/step")
}
