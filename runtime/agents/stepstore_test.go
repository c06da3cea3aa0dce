package agents_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents"
)

// stepStore is an in-memory StepStore that says which calls were recorded
// with their step's checkpoint and which on their own.
type stepStore struct {
	*agents.InMemoryStore
	mu              sync.Mutex
	batched, single []string
}

func (s *stepStore) UpdateRunRecordCalls(ctx context.Context, rec agents.RunRecord, calls []agents.CallRecord) (agents.RunRecord, error) {
	rec, err := s.UpdateRun(ctx, rec)
	if err != nil {
		return rec, err
	}
	for _, c := range calls {
		if err := s.InMemoryStore.RecordCall(ctx, c); err != nil {
			return rec, err
		}
		s.mu.Lock()
		s.batched = append(s.batched, c.Key+" "+c.Tool)
		s.mu.Unlock()
	}
	return rec, nil
}

func (s *stepStore) RecordCall(ctx context.Context, c agents.CallRecord) error {
	s.mu.Lock()
	s.single = append(s.single, c.Key+" "+c.Tool)
	s.mu.Unlock()
	return s.InMemoryStore.RecordCall(ctx, c)
}

// TestStepStoreRecordsReadsWithTheirStep checks which calls a StepStore
// records with their step's checkpoint: a sequential step's first read and
// every call of a parallel step, never a write (whose recovery depends on
// whether it started) nor a call that waits for approval; each call is
// recorded once either way.
func TestStepStoreRecordsReadsWithTheirStep(t *testing.T) {
	d := newDesk(t,
		calls(call("l", "lookup", `{"id":"A"}`)),
		calls(call("r", "refund", `{"id":"A"}`)),
		calls(call("p1", "lookup", `{"id":"B"}`), call("p2", "lookup", `{"id":"C"}`)),
		calls(call("w", "lookup", `{"id":"D"}`), call("x", "refund", `{"id":"D"}`)),
		answer("done"),
	)
	cfg := d.config()
	store := &stepStore{InMemoryStore: agents.NewInMemoryStore()}
	cfg.Store = store
	r := newRuntime(t, cfg)
	res := mustRun(t, r, "desk", "go", agents.RunOptions{})
	for res.Status == agents.StatusPaused {
		var err error
		if res, err = r.Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve}); err != nil {
			t.Fatal(err)
		}
	}
	if res.Status != agents.StatusCompleted {
		t.Fatalf("status %s", res.Status)
	}
	if d := cmp.Diff([]string{"1.0 lookup", "3.0 lookup", "3.1 lookup", "4.0 lookup"}, store.batched); d != "" {
		t.Errorf("recorded with their step (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"2.0 refund", "4.1 refund"}, store.single); d != "" {
		t.Errorf("recorded on their own (-want +got):\n%s", d)
	}
	cs, err := store.Calls(context.Background(), res.RunID)
	if err != nil || len(cs) != 6 {
		t.Fatalf("%d calls stored, %v", len(cs), err)
	}
	for _, c := range cs {
		if c.Result == nil {
			t.Errorf("call %s has no result", c.Key)
		}
	}
}
