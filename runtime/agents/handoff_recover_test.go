package agents_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// diesAfterCall is a store whose process dies once the call with key has
// its result: every later write fails, as if nothing after it reached the
// database.
type diesAfterCall struct {
	agents.Store
	key  string
	dead atomic.Bool
}

func (s *diesAfterCall) FinishCall(ctx context.Context, runID, key string, res agents.CallResult) error {
	if s.dead.Load() {
		return errCrashed
	}
	err := s.Store.FinishCall(ctx, runID, key, res)
	if err == nil && key == s.key {
		s.dead.Store(true)
	}
	return err
}

func (s *diesAfterCall) RecordCall(ctx context.Context, rec agents.CallRecord) error {
	if s.dead.Load() {
		return errCrashed
	}
	return s.Store.RecordCall(ctx, rec)
}

func (s *diesAfterCall) UpdateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	if s.dead.Load() {
		return agents.RunRecord{}, errCrashed
	}
	return s.Store.UpdateRun(ctx, rec)
}

// TestRecoverKeepsAFinishedHandoff crashes a run right after its transfer
// call got its result, before anything else was stored: the stored step
// still holds the transfer as pending, finished. Recovering it must hand
// the conversation over, not resume the caller, whose transfer would
// otherwise be lost.
func TestRecoverKeepsAFinishedHandoff(t *testing.T) {
	fc := fake.Config{Agents: map[string][]fake.Step{
		"a": {calls(call("t", "transfer_to_b", `{}`))},
		"b": {answer("b here")},
	}}
	fx := newFixture(t, fc)
	shared := agents.NewInMemoryStore()
	cfg := agents.Config{Gateway: fx.gw, Agents: []agents.Agent{
		{Name: "a", Model: "small", Handoffs: []string{"b"}},
		{Name: "b", Model: "small"},
	}}
	cfg.Store = &diesAfterCall{Store: shared, key: "1.0"}
	res, err := newRuntime(t, cfg).Run(context.Background(), "a", "hi", agents.RunOptions{})
	if !errors.Is(err, errCrashed) {
		t.Fatalf("crashed run: %s %v", res.Status, err)
	}
	rec, err := shared.LoadRun(context.Background(), res.RunID)
	if err != nil || rec.Status != agents.StatusRunning || rec.Agent != "a" {
		t.Fatalf("stored run after the crash: %+v, %v", rec, err)
	}
	cfg.Store = shared
	got, err := newRuntime(t, cfg).Drive(context.Background(), res.RunID, agents.DriveOptions{})
	if err != nil || got.Status != agents.StatusCompleted || got.Answer != "b here" {
		t.Fatalf("recovered: %s %q %v", got.Status, got.Answer, err)
	}
	if got.Agent != "b" || !slices.Equal(got.Path, []string{"a", "b"}) {
		t.Fatalf("recovered on agent %q, path %v; want b, [a b]", got.Agent, got.Path)
	}
}
