package agents

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// clockStore is an in-memory store whose clock the test moves.
type clockStore struct {
	*InMemoryStore
	t   time.Time
	ctx context.Context
}

func newClockStore(t *testing.T, keep Retention) *clockStore {
	t.Helper()
	s, err := NewInMemoryStoreWith(keep)
	if err != nil {
		t.Fatal(err)
	}
	c := &clockStore{InMemoryStore: s, t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), ctx: t.Context()}
	s.now = func() time.Time { return c.t }
	return c
}

func (c *clockStore) advance(d time.Duration) { c.t = c.t.Add(d) }

// create stores a run with status and, for an ended one, finishes it with
// a second write, as the runtime does.
func (c *clockStore) create(t *testing.T, id string, status Status) RunRecord {
	t.Helper()
	rec, err := c.CreateRun(c.ctx, RunRecord{RunID: id, Agent: "a", Status: StatusRunning})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RecordCall(c.ctx, CallRecord{RunID: id, Key: "1.0", Tool: "lookup"}); err != nil {
		t.Fatal(err)
	}
	if status == StatusRunning {
		return rec
	}
	rec.Status = status
	rec, err = c.UpdateRun(c.ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (c *clockStore) has(id string) bool {
	_, err := c.LoadRun(c.ctx, id)
	var nf *RunNotFoundError
	if err != nil && !errors.As(err, &nf) {
		panic(err)
	}
	return err == nil
}

// stored reports whether the store still holds the run or its calls in
// memory, expired or not: what the process pays for.
func (c *clockStore) stored(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, run := c.runs[id]
	_, calls := c.calls[id]
	return run || calls
}

func TestInMemoryStoreExpiresFinishedRuns(t *testing.T) {
	c := newClockStore(t, Retention{Finished: time.Hour, Paused: 24 * time.Hour})
	for _, st := range []Status{StatusCompleted, StatusFailed, StatusMaxSteps, StatusBudgetExceeded} {
		c.create(t, "run_"+string(st), st)
	}
	c.advance(time.Hour - time.Second)
	for _, st := range []Status{StatusCompleted, StatusFailed, StatusMaxSteps, StatusBudgetExceeded} {
		if !c.has("run_" + string(st)) {
			t.Errorf("%s run gone before its retention", st)
		}
	}
	c.advance(time.Second)
	for _, st := range []Status{StatusCompleted, StatusFailed, StatusMaxSteps, StatusBudgetExceeded} {
		id := "run_" + string(st)
		if c.has(id) {
			t.Errorf("%s run still there after its retention", st)
		}
		if calls, err := c.Calls(c.ctx, id); err != nil || len(calls) != 0 {
			t.Errorf("%s run's calls after its retention: %v %v", st, calls, err)
		}
	}
	// A write drops expired runs without anyone asking for them.
	c.create(t, "run_late", StatusCompleted)
	c.advance(2 * time.Hour)
	c.create(t, "run_next", StatusCompleted)
	if c.stored("run_late") {
		t.Error("an expired run is still held after later writes")
	}
	if done, open := c.Len(); done != 1 || open != 0 {
		t.Errorf("Len = %d finished, %d open; want 1, 0", done, open)
	}
}

func TestInMemoryStoreEvictsBeyondMaxFinished(t *testing.T) {
	c := newClockStore(t, Retention{MaxFinished: 3})
	for i := range 5 {
		c.create(t, fmt.Sprint("run_", i), StatusCompleted)
		c.advance(time.Second)
	}
	for i := range 5 {
		if got, want := c.has(fmt.Sprint("run_", i)), i >= 2; got != want {
			t.Errorf("run_%d kept = %v, want %v (the 3 most recent)", i, got, want)
		}
		if got, want := c.stored(fmt.Sprint("run_", i)), i >= 2; got != want {
			t.Errorf("run_%d held = %v, want %v", i, got, want)
		}
	}
	// Paused and running runs do not count, and are not evicted by ended
	// ones however many.
	c.create(t, "run_paused", StatusPaused)
	c.create(t, "run_running", StatusRunning)
	for i := range 10 {
		c.create(t, fmt.Sprint("run_more_", i), StatusFailed)
	}
	if !c.has("run_paused") || !c.has("run_running") {
		t.Error("an open run was evicted to make room for ended ones")
	}
	if done, open := c.Len(); done != 3 || open != 2 {
		t.Errorf("Len = %d finished, %d open; want 3, 2", done, open)
	}
	// A write moves a run to the back: the least recently written goes
	// first, not the first created.
	rec, _ := c.LoadRun(c.ctx, "run_more_7")
	if _, err := c.UpdateRun(c.ctx, rec); err != nil {
		t.Fatal(err)
	}
	c.create(t, "run_last", StatusCompleted)
	if !c.has("run_more_7") || c.has("run_more_8") {
		t.Error("eviction did not follow the last write")
	}
}

func TestInMemoryStoreKeepsPausedRunsUntilDecidedOrTheirRetention(t *testing.T) {
	c := newClockStore(t, Retention{Finished: time.Minute, Paused: 48 * time.Hour})
	c.create(t, "run_wait", StatusPaused)
	c.create(t, "run_decided", StatusPaused)
	c.create(t, "run_forgotten", StatusPaused)
	c.advance(47 * time.Hour)
	// A decision claims the run (running), then it ends: from then on it is
	// a finished run with the finished retention.
	rec, err := c.LoadRun(c.ctx, "run_decided")
	if err != nil {
		t.Fatalf("a paused run is gone after 47h of a 48h retention: %v", err)
	}
	rec.Status = StatusRunning
	if rec, err = c.UpdateRun(c.ctx, rec); err != nil {
		t.Fatal(err)
	}
	rec.Status = StatusCompleted
	if _, err = c.UpdateRun(c.ctx, rec); err != nil {
		t.Fatal(err)
	}
	// Many finished runs meanwhile do not push paused ones out.
	for i := range 50 {
		c.create(t, fmt.Sprint("run_", i), StatusCompleted)
	}
	c.advance(30 * time.Minute) // 47h30m
	if !c.has("run_wait") || !c.has("run_forgotten") {
		t.Fatal("paused runs gone within their retention")
	}
	if c.has("run_decided") {
		t.Error("a decided run kept past the finished retention")
	}
	// A paused run written again (a resume that paused once more) starts
	// its retention again.
	rec, _ = c.LoadRun(c.ctx, "run_wait")
	if _, err := c.UpdateRun(c.ctx, rec); err != nil {
		t.Fatal(err)
	}
	c.advance(30 * time.Minute) // 48h
	if c.has("run_forgotten") {
		t.Error("a paused run kept past its retention")
	}
	if !c.has("run_wait") {
		t.Error("a paused run written 30 minutes ago is gone")
	}
	var nf *RunNotFoundError
	if _, err := c.UpdateRun(c.ctx, RunRecord{RunID: "run_forgotten", Version: 1}); !errors.As(err, &nf) {
		t.Errorf("a decision on an expired pause: %v, want *RunNotFoundError", err)
	}
	// The id of an expired run can be stored again.
	if _, err := c.CreateRun(c.ctx, RunRecord{RunID: "run_forgotten", Status: StatusPaused}); err != nil {
		t.Errorf("re-creating an expired run: %v", err)
	}
}

func TestRetentionValidate(t *testing.T) {
	for _, r := range []Retention{{Finished: -1}, {MaxFinished: -1}, {Paused: -time.Second}} {
		if _, err := NewInMemoryStoreWith(r); err == nil {
			t.Errorf("%+v accepted", r)
		}
	}
	got := Retention{}.WithDefaults()
	if got != (Retention{Finished: DefaultRetainFinished, MaxFinished: DefaultMaxFinished, Paused: DefaultRetainPaused}) {
		t.Errorf("defaults: %+v", got)
	}
}

// TestRunsAtTheStoreBound: a runtime over a store bounded to a few
// finished runs serves many runs and keeps only the bound, and its run
// accounts of a run-scoped budget are closed as each run ends.
func TestRunsAtTheStoreBound(t *testing.T) {
	r := benchRuntime(t)
	s := newClockStore(t, Retention{MaxFinished: 5})
	r.store = s
	r.gen = stubModel{steps: 2}
	for range 40 {
		if _, err := r.Run(t.Context(), "a", "where is order A-1?", RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if done, open := s.Len(); done != 5 || open != 0 {
		t.Errorf("Len = %d finished, %d open; want 5, 0", done, open)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) != 5 {
		t.Errorf("calls of %d runs held, want 5", len(s.calls))
	}
}

// lastWrite remembers the record a store last returned from a write.
type lastWrite struct {
	*InMemoryStore
	rec RunRecord
}

func (l *lastWrite) UpdateRun(ctx context.Context, rec RunRecord) (RunRecord, error) {
	out, err := l.InMemoryStore.UpdateRun(ctx, rec)
	l.rec = out
	return out, err
}

// TestInMemoryStorePacksEndedRuns: an ended run's checkpoint is held
// encoded, out of the collector's way, and loads back as it was written.
func TestInMemoryStorePacksEndedRuns(t *testing.T) {
	r := benchRuntime(t)
	s := &lastWrite{InMemoryStore: NewInMemoryStore()}
	r.store = s
	r.gen = stubModel{steps: 4}
	res, err := r.Run(t.Context(), "a", "where is order A-1?", RunOptions{ThreadID: "t1", UserID: "u1"})
	if err != nil || res.Status != StatusCompleted {
		t.Fatalf("run: %v %v", res.Status, err)
	}
	s.mu.Lock()
	held := s.runs[res.RunID]
	packed, cp := held.packed != nil, held.rec.Checkpoint
	s.mu.Unlock()
	if !packed || cp.RunID != "" || len(cp.Messages) != 0 {
		t.Errorf("an ended run's checkpoint is held unpacked (packed %v, checkpoint %+v)", packed, cp)
	}
	got, err := s.LoadRun(t.Context(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.rec.Checkpoint.Steps) != 4 || len(s.rec.Checkpoint.Messages) < 7 {
		t.Fatalf("the run's last write is not the whole run: %+v", s.rec.Checkpoint)
	}
	if diff := cmp.Diff(s.rec, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("loaded ended run differs from the one written (-written +loaded):\n%s", diff)
	}
}
