package agentstoretest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/agents"
)

// Run runs the Store contract against stores made by newStore, which must
// return a fresh, empty store each time it is called.
func Run(t *testing.T, newStore func(t *testing.T) agents.Store) {
	t.Run("CreateLoadUpdate", func(t *testing.T) { testRunLifecycle(t, newStore(t)) })
	t.Run("CheckpointRoundTrip", func(t *testing.T) { testCheckpoint(t, newStore(t)) })
	t.Run("VersionConflict", func(t *testing.T) { testConflict(t, newStore(t)) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testConcurrentClaims(t, newStore(t)) })
	t.Run("CallsRecordedThenFinishedOnce", func(t *testing.T) { testCalls(t, newStore(t)) })
	t.Run("ConcurrentFinish", func(t *testing.T) { testConcurrentFinish(t, newStore(t)) })
	t.Run("RunsAreIsolated", func(t *testing.T) { testIsolation(t, newStore(t)) })
	t.Run("UpdateReplacesEverything", func(t *testing.T) { testUpdateReplaces(t, newStore(t)) })
	t.Run("HostileText", func(t *testing.T) { testHostileText(t, newStore(t)) })
	t.Run("CanceledContext", func(t *testing.T) { testCanceled(t, newStore(t)) })
	t.Run("CancelRequests", func(t *testing.T) { testCancelRequests(t, newStore(t)) })
	t.Run("WatchCancel", func(t *testing.T) { testWatchCancel(t, newStore(t)) })
	t.Run("ThreadGrants", func(t *testing.T) { testGrants(t, newStore(t)) })
	t.Run("DeleteRun", func(t *testing.T) {
		s := newStore(t)
		d, ok := s.(agents.RunDeleter)
		if !ok {
			t.Skip("the store is not an agents.RunDeleter")
		}
		testDeleteRun(t, d, s)
	})
	t.Run("ListRuns", func(t *testing.T) {
		s := newStore(t)
		l, ok := s.(agents.RunLister)
		if !ok {
			t.Skip("the store is not an agents.RunLister")
		}
		testListRuns(t, l, s)
	})
	t.Run("StepStore", func(t *testing.T) {
		s, ok := newStore(t).(agents.StepStore)
		if !ok {
			t.Skip("the store is not an agents.StepStore")
		}
		testStepStore(t, s)
	})
}

// testGrants checks that a thread's grants come back in the order given,
// whole, only for their thread, and one per tool.
func testGrants(t *testing.T, s agents.Store) {
	ctx := context.Background()
	if gs, err := s.Grants(ctx, "th_none"); err != nil || len(gs) != 0 {
		t.Fatalf("grants of an unknown thread: %v %v", gs, err)
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	want := []agents.Grant{
		{Tool: "issue_refund", Scope: agents.GrantThread, By: "ops \u00e9", At: at, RunID: "run_g1", ThreadID: "th_1"},
		{Tool: "update_ticket", Scope: agents.GrantThread, At: at.Add(time.Minute), RunID: "run_g2", ThreadID: "th_1"},
	}
	for _, g := range want {
		if err := s.AddGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddGrant(ctx, agents.Grant{Tool: "issue_refund", Scope: agents.GrantThread, At: at, RunID: "run_g3", ThreadID: "th_2"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Grants(ctx, "th_1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got, cmpopts.EquateApproxTime(time.Microsecond)); d != "" {
		t.Fatalf("grants of th_1 (-want +got):\n%s", d)
	}
	// Granting a tool again replaces the thread's grant of it.
	again := agents.Grant{Tool: "issue_refund", Scope: agents.GrantThread, By: "lead", At: at.Add(time.Hour), RunID: "run_g5", ThreadID: "th_1"}
	if err := s.AddGrant(ctx, again); err != nil {
		t.Fatal(err)
	}
	got, err = s.Grants(ctx, "th_1")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]agents.Grant{want[1], again}, got, cmpopts.EquateApproxTime(time.Microsecond)); d != "" {
		t.Fatalf("grants of th_1 after granting issue_refund again (-want +got):\n%s", d)
	}
	if err := s.AddGrant(ctx, agents.Grant{Tool: "issue_refund", Scope: agents.GrantThread, RunID: "run_g4"}); err == nil {
		t.Errorf("a thread grant without a thread was kept")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.AddGrant(cctx, want[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("AddGrant with a canceled context: %v", err)
	}
	if _, err := s.Grants(cctx, "th_1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Grants with a canceled context: %v", err)
	}
}

// RunReplicas runs the part of the Store contract that spans processes
// against pairs of stores made by newPair: two handles on one fresh, empty
// store, as two replicas (processes) of a service hold them. A store kept
// in one process's memory passes its one handle twice.
func RunReplicas(t *testing.T, newPair func(t *testing.T) (a, b agents.Store)) {
	t.Run("CancelReachesAnotherReplica", func(t *testing.T) {
		a, b := newPair(t)
		testCancelAcross(t, a, b)
	})
}

// testCancelAcross watches a run through a and asks through b to stop it:
// the request reaches a's watcher, and both see it recorded.
func testCancelAcross(t *testing.T, a, b agents.Store) {
	ctx := context.Background()
	if _, err := a.CreateRun(ctx, agents.RunRecord{RunID: "run_r", Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint("run_r")}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := watch(t, wctx, a, "run_r")
	if err != nil {
		t.Fatal(err)
	}
	req := agents.CancelRequest{By: "replica b", At: time.Now().UTC().Truncate(time.Microsecond)}
	if st, err := b.RequestCancel(ctx, "run_r", req); err != nil || st != agents.StatusRunning {
		t.Fatalf("request through b: %s %v", st, err)
	}
	select {
	case got := <-ch:
		if got.By != req.By || !got.At.Equal(req.At) {
			t.Fatalf("a's watcher got %+v, want %+v", got, req)
		}
	case <-time.After(CancelDelivery):
		t.Fatalf("a request made through b did not reach a's watcher within %v", CancelDelivery)
	}
	rec, err := a.LoadRun(ctx, "run_r")
	if err != nil || rec.Cancel == nil || rec.Cancel.By != req.By {
		t.Fatalf("a does not see b's request: %+v %v", rec.Cancel, err)
	}
}

// CancelDelivery bounds, in the contract, the time a cancel request takes
// to reach a watcher of the same store. It is generous for a loaded CI
// machine; the delay a store states is its own.
const CancelDelivery = 5 * time.Second

// testCancelRequests checks what RequestCancel records: only on a running
// run, the first request kept, kept across UpdateRun while the run runs
// and dropped when it is written with another status.
func testCancelRequests(t *testing.T, s agents.Store) {
	ctx := context.Background()
	var nf *agents.RunNotFoundError
	if _, err := s.RequestCancel(ctx, "run_nobody", agents.CancelRequest{}); !errors.As(err, &nf) {
		t.Fatalf("RequestCancel of a missing run: got %v, want *RunNotFoundError", err)
	}
	rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_cx", Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint("run_cx")})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Cancel != nil {
		t.Fatalf("a new run has a cancel request: %+v", rec.Cancel)
	}
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	first := agents.CancelRequest{By: "ops é", At: at}
	if st, err := s.RequestCancel(ctx, "run_cx", first); err != nil || st != agents.StatusRunning {
		t.Fatalf("RequestCancel: %s %v", st, err)
	}
	if _, err := s.RequestCancel(ctx, "run_cx", agents.CancelRequest{By: "second", At: at.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadRun(ctx, "run_cx")
	if err != nil {
		t.Fatal(err)
	}
	if got.Cancel == nil || got.Cancel.By != first.By || !got.Cancel.At.Equal(at) || got.Version != rec.Version {
		t.Fatalf("recorded request %+v at version %d; want the first, %v, and no new version", got.Cancel, got.Version, first)
	}
	// A step saved while the run runs keeps the request.
	got.Checkpoint.AgentSteps = 1
	got.Cancel = nil
	got, err = s.UpdateRun(ctx, got)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.LoadRun(ctx, "run_cx"); again.Cancel == nil || again.Cancel.By != first.By {
		t.Fatalf("UpdateRun of a running run dropped the request: %+v", again.Cancel)
	}
	// The run's end serves it.
	got.Status = agents.StatusCancelled
	if _, err := s.UpdateRun(ctx, got); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.LoadRun(ctx, "run_cx"); again.Cancel != nil {
		t.Fatalf("a cancelled run still has a request: %+v", again.Cancel)
	}
	// A run that does not run records nothing, and says what it is.
	for _, status := range []agents.Status{agents.StatusPaused, agents.StatusCompleted} {
		id := "run_c_" + string(status)
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "triage", Status: status, Checkpoint: checkpoint(id)}); err != nil {
			t.Fatal(err)
		}
		if st, err := s.RequestCancel(ctx, id, first); err != nil || st != status {
			t.Fatalf("RequestCancel of a %s run: %s %v", status, st, err)
		}
		if again, _ := s.LoadRun(ctx, id); again.Cancel != nil {
			t.Fatalf("a %s run recorded a request", status)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.RequestCancel(cctx, "run_cx", first); !errors.Is(err, context.Canceled) {
		t.Errorf("RequestCancel with a canceled context: %v", err)
	}
	if _, err := watch(t, cctx, s, "run_cx"); !errors.Is(err, context.Canceled) {
		t.Errorf("WatchCancel with a canceled context: %v", err)
	}
}

// watch watches runID through s and returns a channel that receives the
// request the watch is called with; a watch called twice fails the test.
func watch(t *testing.T, ctx context.Context, s agents.Store, runID string) (<-chan agents.CancelRequest, error) {
	ch := make(chan agents.CancelRequest, 1)
	var called atomic.Bool
	err := s.WatchCancel(ctx, runID, func(req agents.CancelRequest) {
		if called.Swap(true) {
			t.Errorf("the watch of %s was called twice", runID)
			return
		}
		ch <- req
	})
	return ch, err
}

// testWatchCancel checks that a request reaches every watcher of its run,
// and only them; that a request pending when the watch starts arrives at
// once; and that a watch ends with its context.
func testWatchCancel(t *testing.T, s agents.Store) {
	ctx := context.Background()
	for _, id := range []string{"run_w1", "run_w2", "run_w3"} {
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint(id)}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	a, err := watch(t, wctx, s, "run_w1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := watch(t, wctx, s, "run_w1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := watch(t, wctx, s, "run_w2")
	if err != nil {
		t.Fatal(err)
	}
	ended, endWatch := context.WithCancel(ctx)
	gone, err := watch(t, ended, s, "run_w1")
	if err != nil {
		t.Fatal(err)
	}
	endWatch()
	req := agents.CancelRequest{By: "ops", At: time.Now().UTC().Truncate(time.Microsecond)}
	if _, err := s.RequestCancel(ctx, "run_w1", req); err != nil {
		t.Fatal(err)
	}
	for i, ch := range []<-chan agents.CancelRequest{a, b} {
		select {
		case got := <-ch:
			if got.By != "ops" || !got.At.Equal(req.At) {
				t.Fatalf("watcher %d got %+v, want %+v", i, got, req)
			}
		case <-time.After(CancelDelivery):
			t.Fatalf("watcher %d: no request within %v", i, CancelDelivery)
		}
	}
	// A watcher of another run, and one whose watch ended, get nothing.
	time.Sleep(50 * time.Millisecond)
	select {
	case got := <-other:
		t.Fatalf("a watcher of run_w2 got run_w1's request %+v", got)
	case got := <-gone:
		t.Fatalf("an ended watch got a request %+v", got)
	default:
	}
	// A request made before the watch arrives at once.
	if _, err := s.RequestCancel(ctx, "run_w3", req); err != nil {
		t.Fatal(err)
	}
	late, err := watch(t, wctx, s, "run_w3")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-late:
		if got.By != "ops" {
			t.Fatalf("late watcher got %+v", got)
		}
	case <-time.After(CancelDelivery):
		t.Fatalf("a pending request did not reach a new watcher")
	}
}

// testStepStore checks UpdateRunRecordCalls: the update and the records
// together, and neither when either is refused.
func testStepStore(t *testing.T, s agents.StepStore) {
	ctx := context.Background()
	rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_s", Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint("run_s")})
	if err != nil {
		t.Fatal(err)
	}
	calls := func(keys ...string) []agents.CallRecord {
		out := make([]agents.CallRecord, len(keys))
		for i, k := range keys {
			out[i] = agents.CallRecord{RunID: "run_s", Key: k, CallID: "c" + k, Tool: "lookup", Effects: agents.EffectsRead, Arguments: `{"k":"` + k + `"}`}
		}
		return out
	}
	rec.Agent = "billing"
	upd, err := s.UpdateRunRecordCalls(ctx, rec, calls("1.0", "1.1"))
	if err != nil || upd.Version != rec.Version+1 {
		t.Fatalf("UpdateRunRecordCalls: version %d, %v", upd.Version, err)
	}
	got, err := s.Calls(ctx, "run_s")
	if err != nil || len(got) != 2 || got[0].Key != "1.0" || got[1].Key != "1.1" || got[1].Arguments != `{"k":"1.1"}` || got[0].Result != nil {
		t.Fatalf("recorded %+v, %v", got, err)
	}
	if l, _ := s.LoadRun(ctx, "run_s"); l.Agent != "billing" || l.Version != upd.Version {
		t.Fatalf("run after the step: %+v", l)
	}
	// A lost claim records nothing.
	var ce *agents.ConflictError
	if _, err := s.UpdateRunRecordCalls(ctx, rec, calls("2.0")); !errors.As(err, &ce) {
		t.Fatalf("stale version: %v, want *ConflictError", err)
	}
	// A call recorded already leaves the run as it was.
	var ex *agents.CallExistsError
	if _, err := s.UpdateRunRecordCalls(ctx, upd, calls("2.0", "1.1")); !errors.As(err, &ex) {
		t.Fatalf("a recorded call: %v, want *CallExistsError", err)
	}
	if l, _ := s.LoadRun(ctx, "run_s"); l.Version != upd.Version {
		t.Fatalf("a refused step moved the run to version %d", l.Version)
	}
	var nf *agents.RunNotFoundError
	if _, err := s.UpdateRunRecordCalls(ctx, agents.RunRecord{RunID: "run_none", Version: 1}, []agents.CallRecord{{RunID: "run_none", Key: "1.0"}}); !errors.As(err, &nf) {
		t.Fatalf("unknown run: %v, want *RunNotFoundError", err)
	}
	if got, _ := s.Calls(ctx, "run_s"); len(got) != 2 {
		t.Fatalf("refused steps recorded calls: %+v", got)
	}
	if got, _ := s.Calls(ctx, "run_none"); len(got) != 0 {
		t.Fatalf("an unknown run got calls: %+v", got)
	}
}

// testUpdateReplaces checks that UpdateRun keeps the whole record it is
// given, not only the status: a transfer changes the agent, every step the
// checkpoint.
func testUpdateReplaces(t *testing.T, s agents.Store) {
	ctx := context.Background()
	rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_u", Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint("run_u")})
	if err != nil {
		t.Fatal(err)
	}
	cp := checkpoint("run_u")
	cp.Agent, cp.Path, cp.Alias, cp.AgentSteps = "billing", []string{"triage", "billing"}, "large", 3
	cp.Messages = append(cp.Messages, agents.SavedMessage{Role: "assistant", ToolCalls: []agents.SavedToolCall{{ID: "t", Name: "transfer_to_billing", Arguments: "{}"}}})
	rec.Agent, rec.Status, rec.Checkpoint = "billing", agents.StatusCompleted, cp
	upd, err := s.UpdateRun(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if upd.UpdatedAt.Before(rec.UpdatedAt) {
		t.Fatalf("update went back in time: %v before %v", upd.UpdatedAt, rec.UpdatedAt)
	}
	got, err := s.LoadRun(ctx, "run_u")
	if err != nil {
		t.Fatal(err)
	}
	if got.Agent != "billing" || got.Status != agents.StatusCompleted || got.Version != 2 {
		t.Fatalf("loaded %s %s v%d, want billing completed v2", got.Agent, got.Status, got.Version)
	}
	if d := cmp.Diff(cp, got.Checkpoint, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("UpdateRun did not replace the checkpoint (-want +got):\n%s", d)
	}
}

// hostile is text a model or a tool may produce: a NUL byte, bytes that are
// not UTF-8, a lone surrogate's encoding, quotes and backslashes, and
// characters outside the BMP.
const hostile = "a\x00b \xff\xfe \xed\xa0\x80 \"quoted\" \\ \U0001F600 \u2028"

// hostileUTF8 is hostile text that is valid UTF-8, as a checkpoint holds
// it (JSON replaces invalid bytes).
const hostileUTF8 = "a\x00b \"quoted\" \\ \U0001F600 \u2028 </script>"

// testHostileText stores what a model or a tool may write: a call's id,
// tool name, arguments and observation, and a checkpoint's messages, must
// come back exactly, whatever bytes they hold; a store that cannot keep
// them would fail the run on a tool's odd answer.
func testHostileText(t *testing.T, s agents.Store) {
	ctx := context.Background()
	cp := checkpoint("run_h")
	cp.Messages = append(cp.Messages, agents.SavedMessage{Role: "tool", Content: hostileUTF8, ToolCallID: hostileUTF8,
		ToolCalls: []agents.SavedToolCall{{ID: hostileUTF8, Name: hostileUTF8, Arguments: hostileUTF8}}})
	if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_h", Agent: "triage", Status: agents.StatusRunning, Checkpoint: cp}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadRun(ctx, "run_h")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(cp, got.Checkpoint, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("checkpoint changed in the store (-want +got):\n%s", d)
	}
	rec := agents.CallRecord{RunID: "run_h", Key: "1.0", CallID: hostile, Tool: hostile, Effects: agents.EffectsRead, Arguments: hostile}
	if err := s.RecordCall(ctx, rec); err != nil {
		t.Fatalf("record a call with hostile text: %v", err)
	}
	res := agents.CallResult{Observation: hostile, ErrorKind: agents.KindToolFailed}
	if err := s.FinishCall(ctx, "run_h", "1.0", res); err != nil {
		t.Fatalf("finish a call with hostile text: %v", err)
	}
	rec.Result = &res
	c, err := s.Call(ctx, "run_h", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(rec, c); d != "" {
		t.Fatalf("call changed in the store (-want +got):\n%s", d)
	}
	// An empty observation is a result, not the absence of one.
	if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_h", Key: "1.1", Tool: "lookup", Effects: agents.EffectsRead}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishCall(ctx, "run_h", "1.1", agents.CallResult{}); err != nil {
		t.Fatal(err)
	}
	if c, err := s.Call(ctx, "run_h", "1.1"); err != nil || c.Result == nil {
		t.Fatalf("call with an empty result: %+v, %v; want a result", c, err)
	}
	// Unknown runs have no calls.
	if cs, err := s.Calls(ctx, "run_nobody"); err != nil || len(cs) != 0 {
		t.Fatalf("calls of an unknown run: %v, %v", cs, err)
	}
}

// testCanceled checks that every operation refuses a canceled context.
func testCanceled(t *testing.T, s agents.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := agents.RunRecord{RunID: "run_x", Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint("run_x")}
	if _, err := s.CreateRun(ctx, rec); err == nil {
		t.Errorf("CreateRun with a canceled context succeeded")
	}
	if _, err := s.LoadRun(context.Background(), "run_x"); err == nil {
		t.Errorf("a canceled CreateRun stored the run")
	}
	for name, op := range map[string]func() error{
		"UpdateRun":  func() error { _, err := s.UpdateRun(ctx, rec); return err },
		"LoadRun":    func() error { _, err := s.LoadRun(ctx, "run_x"); return err },
		"RecordCall": func() error { return s.RecordCall(ctx, agents.CallRecord{RunID: "run_x", Key: "1.0", Tool: "lookup"}) },
		"FinishCall": func() error { return s.FinishCall(ctx, "run_x", "1.0", agents.CallResult{}) },
		"Call":       func() error { _, err := s.Call(ctx, "run_x", "1.0"); return err },
		"Calls":      func() error { _, err := s.Calls(ctx, "run_x"); return err },
	} {
		if err := op(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: %v, want context.Canceled", name, err)
		}
	}
}

func checkpoint(runID string) agents.Checkpoint {
	return agents.Checkpoint{
		Version: agents.CheckpointVersion, RunID: runID, Agent: "triage", Path: []string{"triage"}, Alias: "small",
		Messages: []agents.SavedMessage{{Role: "user", Content: "hello"}},
		Steps:    []agents.StepRecord{},
	}
}

func testRunLifecycle(t *testing.T, s agents.Store) {
	ctx := context.Background()
	var nf *agents.RunNotFoundError
	if _, err := s.LoadRun(ctx, "run_a"); !errors.As(err, &nf) {
		t.Fatalf("LoadRun of a missing run: got %v, want *RunNotFoundError", err)
	}
	if _, err := s.UpdateRun(ctx, agents.RunRecord{RunID: "run_a", Version: 1}); !errors.As(err, &nf) {
		t.Fatalf("UpdateRun of a missing run: got %v, want *RunNotFoundError", err)
	}
	rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_a", Agent: "triage", Status: agents.StatusRunning, Checkpoint: checkpoint("run_a")})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != 1 || rec.UpdatedAt.IsZero() {
		t.Fatalf("created record: version %d, updated %v; want version 1 and a time", rec.Version, rec.UpdatedAt)
	}
	var ex *agents.RunExistsError
	if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_a"}); !errors.As(err, &ex) {
		t.Fatalf("second CreateRun: got %v, want *RunExistsError", err)
	}
	rec.Status = agents.StatusPaused
	rec2, err := s.UpdateRun(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Version != 2 {
		t.Fatalf("updated version %d, want 2", rec2.Version)
	}
	got, err := s.LoadRun(ctx, "run_a")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != agents.StatusPaused || got.Version != 2 || got.Agent != "triage" {
		t.Fatalf("loaded %+v", got)
	}
}

func testCheckpoint(t *testing.T, s agents.Store) {
	ctx := context.Background()
	cp := checkpoint("run_cp")
	cp.Steps = []agents.StepRecord{{Number: 1, Agent: "triage", Alias: "small", Requested: "small", Model: "m-small", Text: "x",
		Usage: agents.UsageRecord{InputTokens: 3, OutputTokens: 4, TotalTokens: 7}, CostUSD: 0.5,
		ToolCalls: []agents.ToolCallRecord{{ID: "c1", Name: "lookup", Arguments: `{"id":`, Done: true, Observation: "o", ErrorKind: agents.KindInvalidArguments}}}}
	cp.Pending = &agents.Pending{Step: agents.StepRecord{Number: 2, ToolCalls: []agents.ToolCallRecord{{ID: "c2", Name: "refund", Arguments: "{}"}}}, Reason: agents.PauseApproval}
	cp.Degraded, cp.ThreadID, cp.UserID, cp.AgentSteps, cp.Delegations = true, "t1", "u1", 2, 1
	if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_cp", Agent: "triage", Status: agents.StatusPaused, Checkpoint: cp}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadRun(ctx, "run_cp")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(cp, got.Checkpoint, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("checkpoint changed in the store (-want +got):\n%s", d)
	}
}

func testConflict(t *testing.T, s agents.Store) {
	ctx := context.Background()
	rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_c", Agent: "triage", Status: agents.StatusPaused, Checkpoint: checkpoint("run_c")})
	if err != nil {
		t.Fatal(err)
	}
	a, b := rec, rec
	a.Status, b.Status = agents.StatusRunning, agents.StatusFailed
	if _, err := s.UpdateRun(ctx, a); err != nil {
		t.Fatal(err)
	}
	var ce *agents.ConflictError
	if _, err := s.UpdateRun(ctx, b); !errors.As(err, &ce) || ce.Version != 1 || ce.Stored != 2 {
		t.Fatalf("stale UpdateRun: got %v, want *ConflictError 1 vs 2", err)
	}
	got, _ := s.LoadRun(ctx, "run_c")
	if got.Status != agents.StatusRunning {
		t.Fatalf("the losing write changed the record: status %s", got.Status)
	}
}

// testConcurrentClaims has many writers claim the same paused run at once;
// exactly one wins.
func testConcurrentClaims(t *testing.T, s agents.Store) {
	ctx := context.Background()
	rec, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_claim", Agent: "triage", Status: agents.StatusPaused, Checkpoint: checkpoint("run_claim")})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rec
			r.Status = agents.StatusRunning
			_, err := s.UpdateRun(ctx, r)
			var ce *agents.ConflictError
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.As(err, &ce):
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d writers won the same version, want 1", wins.Load())
	}
}

func testCalls(t *testing.T, s agents.Store) {
	ctx := context.Background()
	var nf *agents.CallNotFoundError
	if err := s.FinishCall(ctx, "run_k", "1.0", agents.CallResult{Observation: "x"}); !errors.As(err, &nf) {
		t.Fatalf("FinishCall before RecordCall: got %v, want *CallNotFoundError", err)
	}
	if _, err := s.Call(ctx, "run_k", "1.0"); !errors.As(err, &nf) {
		t.Fatalf("Call before RecordCall: got %v, want *CallNotFoundError", err)
	}
	for i, tool := range []string{"lookup", "refund", "lookup"} {
		rec := agents.CallRecord{RunID: "run_k", Key: fmt.Sprintf("1.%d", i), CallID: fmt.Sprintf("c%d", i), Tool: tool, Effects: agents.EffectsRead, Arguments: `{"i":1}`}
		if tool == "refund" {
			rec.Effects = agents.EffectsWrite
		}
		if err := s.RecordCall(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	var ex *agents.CallExistsError
	if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_k", Key: "1.1", Tool: "refund"}); !errors.As(err, &ex) {
		t.Fatalf("second RecordCall: got %v, want *CallExistsError", err)
	}
	c, err := s.Call(ctx, "run_k", "1.1")
	if err != nil {
		t.Fatal(err)
	}
	if c.Result != nil || c.Tool != "refund" || c.Effects != agents.EffectsWrite || c.Arguments != `{"i":1}` {
		t.Fatalf("recorded call %+v", c)
	}
	if err := s.FinishCall(ctx, "run_k", "1.1", agents.CallResult{Observation: "done", ErrorKind: ""}); err != nil {
		t.Fatal(err)
	}
	var fin *agents.CallFinishedError
	if err := s.FinishCall(ctx, "run_k", "1.1", agents.CallResult{Observation: "again"}); !errors.As(err, &fin) {
		t.Fatalf("second FinishCall: got %v, want *CallFinishedError", err)
	}
	if err := s.FinishCall(ctx, "run_k", "1.2", agents.CallResult{Observation: "error: x", ErrorKind: agents.KindTimeout}); err != nil {
		t.Fatal(err)
	}
	calls, err := s.Calls(ctx, "run_k")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range calls {
		keys = append(keys, c.Key)
	}
	if d := cmp.Diff([]string{"1.0", "1.1", "1.2"}, keys); d != "" {
		t.Fatalf("calls not in record order (-want +got):\n%s", d)
	}
	if calls[0].Result != nil {
		t.Fatalf("unfinished call has a result: %+v", calls[0].Result)
	}
	if r := calls[1].Result; r == nil || r.Observation != "done" {
		t.Fatalf("finished call result %+v", r)
	}
	if r := calls[2].Result; r == nil || r.ErrorKind != agents.KindTimeout {
		t.Fatalf("failed call result %+v", r)
	}
	// A returned record is a copy: changing it does not change the store.
	calls[1].Result.Observation = "tampered"
	again, _ := s.Call(ctx, "run_k", "1.1")
	if again.Result.Observation != "done" {
		t.Fatalf("store shares results with callers: %q", again.Result.Observation)
	}
}

// testConcurrentFinish gives one call many concurrent results; exactly one
// is kept.
func testConcurrentFinish(t *testing.T, s agents.Store) {
	ctx := context.Background()
	if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_f", Key: "1.0", Tool: "refund", Effects: agents.EffectsWrite}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.FinishCall(ctx, "run_f", "1.0", agents.CallResult{Observation: fmt.Sprint(i)})
			var fin *agents.CallFinishedError
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.As(err, &fin):
				t.Errorf("finish: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d results kept for one call, want 1", wins.Load())
	}
}

func testIsolation(t *testing.T, s agents.Store) {
	ctx := context.Background()
	for _, id := range []string{"run_x", "run_y"} {
		if err := s.RecordCall(ctx, agents.CallRecord{RunID: id, Key: "1.0", Tool: "lookup"}); err != nil {
			t.Fatalf("the same key in another run: %v", err)
		}
	}
	if err := s.FinishCall(ctx, "run_x", "1.0", agents.CallResult{Observation: "x"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Call(ctx, "run_y", "1.0")
	if err != nil {
		t.Fatal(err)
	}
	if c.Result != nil {
		t.Fatalf("finishing run_x's call finished run_y's")
	}
}

// RunMemory runs the MemoryStore contract against stores made by newStore,
// which must return a fresh, empty store each time it is called.
func RunMemory(t *testing.T, newStore func(t *testing.T) agents.MemoryStore) {
	t.Run("AppendAndList", func(t *testing.T) {
		ctx := context.Background()
		s := newStore(t)
		for _, text := range []string{"likes tea", "lives in Lyon"} {
			e, err := s.AddMemory(ctx, agents.MemoryUser, "u1", text)
			if err != nil {
				t.Fatal(err)
			}
			if e.Text != text || e.Subject != "u1" || e.Scope != agents.MemoryUser || e.Created.IsZero() {
				t.Fatalf("added entry %+v", e)
			}
		}
		if _, err := s.AddMemory(ctx, agents.MemoryGlobal, "", "office closes at 6"); err != nil {
			t.Fatal(err)
		}
		got, err := s.Memories(ctx, agents.MemoryUser, "u1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Text != "likes tea" || got[1].Text != "lives in Lyon" {
			t.Fatalf("user memories %+v, want both in order", got)
		}
		other, err := s.Memories(ctx, agents.MemoryUser, "u2")
		if err != nil {
			t.Fatal(err)
		}
		if len(other) != 0 {
			t.Fatalf("u2 sees u1's memory: %+v", other)
		}
		global, err := s.Memories(ctx, agents.MemoryGlobal, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(global) != 1 || global[0].Text != "office closes at 6" {
			t.Fatalf("global memories %+v", global)
		}
	})
	t.Run("TenantsApart", func(t *testing.T) {
		// Global memory's subject is the tenant: one tenant's entries do
		// not exist for another, for the runs of no tenant, nor for a
		// tenant whose name differs only in case or by a prefix.
		ctx := context.Background()
		s := newStore(t)
		if _, err := s.AddMemory(ctx, agents.MemoryGlobal, "acme", "acme's refund override code is 4417"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddMemory(ctx, agents.MemoryGlobal, "", "office closes at 6"); err != nil {
			t.Fatal(err)
		}
		for _, other := range []string{"globex", "", "Acme", "acm", "acme ", "acme/"} {
			got, err := s.Memories(ctx, agents.MemoryGlobal, other)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range got {
				if strings.Contains(e.Text, "4417") {
					t.Errorf("tenant %q reads acme's global memory: %+v", other, got)
				}
			}
		}
		got, err := s.Memories(ctx, agents.MemoryGlobal, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Subject != "acme" || got[0].Scope != agents.MemoryGlobal {
			t.Errorf("acme's global memory %+v, want its one entry (and not the runs of no tenant's)", got)
		}
		if user, err := s.Memories(ctx, agents.MemoryUser, "acme"); err != nil || len(user) != 0 {
			t.Errorf("a user named like the tenant reads its global memory: %+v %v", user, err)
		}
	})
	t.Run("HostileTextAndOrder", func(t *testing.T) {
		ctx := context.Background()
		s := newStore(t)
		var want []string
		for i := range 40 {
			text := fmt.Sprintf("%d %s", i, hostile)
			if _, err := s.AddMemory(ctx, agents.MemoryUser, "u\u00e9", text); err != nil {
				t.Fatalf("add entry %d: %v", i, err)
			}
			want = append(want, text)
		}
		got, err := s.Memories(ctx, agents.MemoryUser, "u\u00e9")
		if err != nil {
			t.Fatal(err)
		}
		texts := make([]string, len(got))
		for i, e := range got {
			texts[i] = e.Text
		}
		if d := cmp.Diff(want, texts); d != "" {
			t.Fatalf("entries changed or reordered (-want +got):\n%s", d)
		}
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.AddMemory(ctx, agents.MemoryGlobal, "", "x"); !errors.Is(err, context.Canceled) {
			t.Errorf("AddMemory with a canceled context: %v", err)
		}
		if _, err := s.Memories(ctx, agents.MemoryGlobal, ""); !errors.Is(err, context.Canceled) {
			t.Errorf("Memories with a canceled context: %v", err)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		ctx := context.Background()
		s := newStore(t)
		for _, c := range []struct {
			scope         agents.MemoryScope
			subject, text string
		}{
			{agents.MemoryUser, "", "x"},
			{"thread", "t", "x"},
			{agents.MemoryUser, "u1", "  "},
		} {
			if _, err := s.AddMemory(ctx, c.scope, c.subject, c.text); err == nil {
				t.Errorf("AddMemory(%q, %q, %q) accepted", c.scope, c.subject, c.text)
			}
		}
		if _, err := s.Memories(ctx, agents.MemoryUser, ""); err == nil {
			t.Errorf("Memories of user memory without a user accepted")
		}
	})
}

// testDeleteRun: a deleted run and its calls are gone, another run is
// untouched, and deleting it again is a *RunNotFoundError.
func testDeleteRun(t *testing.T, d agents.RunDeleter, s agents.Store) {
	ctx := context.Background()
	for _, id := range []string{"run_d", "run_k"} {
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "triage", Status: agents.StatusCompleted, Checkpoint: checkpoint(id)}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordCall(ctx, agents.CallRecord{RunID: id, Key: "1.0", CallID: "c1", Tool: "lookup", Effects: agents.EffectsRead, Arguments: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DeleteRun(ctx, "run_d"); err != nil {
		t.Fatal(err)
	}
	var nf *agents.RunNotFoundError
	if _, err := s.LoadRun(ctx, "run_d"); !errors.As(err, &nf) {
		t.Fatalf("LoadRun of a deleted run: %v", err)
	}
	if calls, err := s.Calls(ctx, "run_d"); err != nil || len(calls) != 0 {
		t.Fatalf("calls of a deleted run: %v, %v", calls, err)
	}
	if err := d.DeleteRun(ctx, "run_d"); !errors.As(err, &nf) {
		t.Fatalf("deleting a deleted run: %v", err)
	}
	if _, err := s.LoadRun(ctx, "run_k"); err != nil {
		t.Fatalf("the other run: %v", err)
	}
	if calls, err := s.Calls(ctx, "run_k"); err != nil || len(calls) != 1 {
		t.Fatalf("the other run's calls: %v, %v", calls, err)
	}
}
