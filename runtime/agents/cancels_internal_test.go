package agents

import (
	"context"
	"fmt"
	"testing"
)

// TestCancelsDropEndedWatches watches many runs whose contexts end at once,
// as a busy service's runs do, and checks that the set holds no more than
// about twice the live watches, that a live watch outlasts every sweep and
// is still called, and that an ended one never is.
func TestCancelsDropEndedWatches(t *testing.T) {
	var c Cancels
	liveCtx, stopLive := context.WithCancel(context.Background())
	defer stopLive()
	var got []CancelRequest
	c.Watch(liveCtx, "run_live", nil, func(r CancelRequest) { got = append(got, r) })
	ended := 0
	c.Watch(canceled(), "run_ended", nil, func(CancelRequest) { ended++ })
	for i := range 10_000 {
		ctx, cancel := context.WithCancel(context.Background())
		c.Watch(ctx, fmt.Sprintf("run_%d", i), nil, func(CancelRequest) { ended++ })
		cancel()
		c.mu.Lock()
		held := c.held
		c.mu.Unlock()
		if held > 2*minSweep {
			t.Fatalf("after %d ended runs the set holds %d watches for 1 live one", i+1, held)
		}
	}
	if n := c.Len(); n != 1 {
		t.Fatalf("Len = %d, want the one live watch", n)
	}
	if ids := c.Watched(); len(ids) != 1 || ids[0] != "run_live" {
		t.Fatalf("Watched = %v", ids)
	}
	c.Notify("run_ended", CancelRequest{By: "ops"})
	c.Notify("run_9999", CancelRequest{By: "ops"})
	c.Notify("run_live", CancelRequest{By: "ops"})
	c.Notify("run_live", CancelRequest{By: "again"})
	if ended != 0 || len(got) != 1 || got[0].By != "ops" {
		t.Fatalf("ended watches called %d times; the live one got %v", ended, got)
	}
}

// TestCancelsManyLiveWatches keeps every watch alive: none is dropped and
// every one is called once.
func TestCancelsManyLiveWatches(t *testing.T) {
	var c Cancels
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := make([]int, 1000)
	for i := range calls {
		c.Watch(ctx, fmt.Sprintf("run_%d", i%500), nil, func(CancelRequest) { calls[i]++ })
	}
	if n := c.Len(); n != 500 {
		t.Fatalf("Len = %d, want 500", n)
	}
	for i := range 500 {
		c.Notify(fmt.Sprintf("run_%d", i), CancelRequest{By: "ops"})
	}
	for i, n := range calls {
		if n != 1 {
			t.Fatalf("watch %d called %d times", i, n)
		}
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// BenchmarkCancelsWatch is a run's watch from start to end: no goroutine
// runs when it ends.
func BenchmarkCancelsWatch(b *testing.B) {
	var c Cancels
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		c.Watch(ctx, "run_x", nil, func(CancelRequest) {})
		cancel()
	}
}
