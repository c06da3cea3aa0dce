package agents

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestDecayingMax(t *testing.T) {
	var h atomic.Int32
	for _, c := range []struct{ n, want int }{
		{40, 40}, // rises at once
		{2, 35},  // falls by an eighth of the gap
		{2, 30},  //
		{60, 60}, //
		{1000, maxSizeHint},
		{0, maxSizeHint - 16},
	} {
		decayingMax(&h, c.n)
		if got := int(h.Load()); got != c.want {
			t.Fatalf("after %d: %d, want %d", c.n, got, c.want)
		}
	}
	for range 200 {
		decayingMax(&h, 3)
	}
	if got := h.Load(); got != 3 {
		t.Fatalf("after many runs of 3: %d", got)
	}
}

// TestRunSizesRemembered: the second 20-step run of an agent finds its
// thread, checkpointed messages and steps made at their size, where the
// first grew them one doubling at a time.
func TestRunSizesRemembered(t *testing.T) {
	r := benchRuntime(t)
	r.gen = stubModel{steps: 20}
	mallocs := func() uint64 {
		r.store = NewInMemoryStore()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := r.Run(context.Background(), "a", "where is order A-1?", RunOptions{}); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return after.Mallocs - before.Mallocs
	}
	first, second := mallocs(), mallocs()
	// The doublings of four slices to 41 messages and 20 steps are more
	// than 20 allocations.
	if second+15 > first {
		t.Fatalf("first run %d allocations, second %d: the second did not start at the first's size", first, second)
	}
}
