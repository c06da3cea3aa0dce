package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
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
