package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// refundDesk is an agent with a read tool (lookup) and an approval-gated
// write tool (refund) that counts and remembers its calls.
type refundDesk struct {
	fx      fixture
	store   agents.Store
	mu      sync.Mutex
	refunds []string
	lookups atomic.Int32
}

func (d *refundDesk) config() agents.Config { return d.configWith(d.store) }

func (d *refundDesk) configWith(store agents.Store) agents.Config {
	return agents.Config{
		Gateway: d.fx.gw,
		Store:   store,
		Agents:  []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund"}}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: lookupSchema},
			{Name: "refund", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways},
		},
		Implementations: map[string]agents.Implementation{
			"lookup": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
				d.lookups.Add(1)
				return "found " + string(args), nil
			}),
			"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
				d.mu.Lock()
				defer d.mu.Unlock()
				d.refunds = append(d.refunds, string(args))
				return "refunded " + string(args), nil
			}),
		},
	}
}

func newDesk(t *testing.T, script ...fake.Step) *refundDesk {
	return &refundDesk{fx: newFixture(t, fake.Config{Script: script}), store: agents.NewInMemoryStore()}
}

func TestPauseCheckpointJSONResumeInFreshRuntime(t *testing.T) {
	d := newDesk(t,
		calls(call("l", "lookup", `{"id":"A"}`), call("r", "refund", `{"id":"A"}`), call("l2", "lookup", `{"id":"B"}`)),
		answer("refunded A"),
	)
	res := mustRun(t, newRuntime(t, d.config()), "desk", "refund A", agents.RunOptions{ThreadID: "th", UserID: "u"})
	if res.Status != agents.StatusPaused || res.Checkpoint == nil {
		t.Fatalf("status %s", res.Status)
	}
	pc, ok := res.Checkpoint.Pending.Call()
	if !ok || pc.Name != "refund" || res.Checkpoint.Pending.Reason != agents.PauseApproval {
		t.Fatalf("pending %+v", res.Checkpoint.Pending)
	}
	if len(d.refunds) != 0 || d.lookups.Load() != 1 {
		t.Fatalf("before the decision: %d refunds, %d lookups", len(d.refunds), d.lookups.Load())
	}
	data, err := agents.MarshalCheckpoint(*res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := agents.UnmarshalCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(*res.Checkpoint, cp, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("checkpoint JSON round trip (-want +got):\n%s", diff)
	}
	// A brand-new runtime, with its own empty store, from the same config.
	r2 := newRuntime(t, d.configWith(agents.NewInMemoryStore()))
	res, err = r2.ResumeFrom(context.Background(), cp, agents.Decision{Action: agents.Approve})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agents.StatusCompleted || res.Answer != "refunded A" || res.Agent != "desk" {
		t.Fatalf("status %s answer %q", res.Status, res.Answer)
	}
	if d := cmp.Diff([]string{`{"id":"A"}`}, d.refunds); d != "" {
		t.Fatalf("refunds (-want +got):\n%s", d)
	}
	tc := res.Steps[0].ToolCalls
	if tc[1].Approval == nil || !tc[1].Approval.Approved || tc[2].Observation != `found {"id":"B"}` || d.lookups.Load() != 2 {
		t.Fatalf("calls %+v, lookups %d", tc, d.lookups.Load())
	}
	if diff := cmp.Diff([]string{"user", "assistant", "tool:l", "tool:r", "tool:l2", "assistant"}, roles(res.Messages)); diff != "" {
		t.Fatalf("thread (-want +got):\n%s", diff)
	}
	// The same checkpoint cannot be resumed twice.
	_, err = r2.ResumeFrom(context.Background(), cp, agents.Decision{Action: agents.Approve})
	var np *agents.WrongStatusError
	if !errors.As(err, &np) || np.Status != agents.StatusCompleted {
		t.Fatalf("second resume: %v", err)
	}
}

func TestResumeByIDAcrossRuntimesSharingAStore(t *testing.T) {
	d := newDesk(t, calls(call("r", "refund", `{"id":"A"}`)), answer("ok"))
	res := mustRun(t, newRuntime(t, d.config()), "desk", "refund A", agents.RunOptions{})
	res, err := newRuntime(t, d.config()).Resume(context.Background(), res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusCompleted || len(d.refunds) != 1 {
		t.Fatalf("status %s, err %v, refunds %v", res.Status, err, d.refunds)
	}
}

func TestDoublePauseAndRejectWithFeedback(t *testing.T) {
	d := newDesk(t,
		calls(call("r1", "refund", `{"id":"A"}`)),
		calls(call("r2", "refund", `{"id":"B"}`)),
		answer("refunded A, not B"),
	)
	r := newRuntime(t, d.config())
	res := mustRun(t, r, "desk", "refund A and B", agents.RunOptions{})
	first := res.RunID
	res, err := r.Resume(context.Background(), first, agents.Decision{Action: agents.Approve, Feedback: "fine"})
	if err != nil || res.Status != agents.StatusPaused || res.RunID != first {
		t.Fatalf("after first decision: %s %v", res.Status, err)
	}
	if pc, _ := res.Checkpoint.Pending.Call(); pc.ID != "r2" {
		t.Fatalf("second pause on %+v", pc)
	}
	res, err = r.Resume(context.Background(), first, agents.Decision{Action: agents.Reject, Feedback: "B was already refunded"})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("after second decision: %s %v", res.Status, err)
	}
	if diff := cmp.Diff([]string{`{"id":"A"}`}, d.refunds); diff != "" {
		t.Fatalf("refunds (-want +got):\n%s", diff)
	}
	rej := res.Steps[1].ToolCalls[0]
	if rej.ErrorKind != agents.KindRejected || !strings.Contains(rej.Observation, "B was already refunded") {
		t.Fatalf("rejected call %+v", rej)
	}
	// The model read the feedback.
	reqs := d.fx.fake.Requests()
	last := reqs[len(reqs)-1].Messages
	if m := last[len(last)-1]; m.Role != gateway.RoleTool || !strings.Contains(m.Content, "B was already refunded") {
		t.Fatalf("last message %+v", m)
	}
	// The rejection has its one result in the store too.
	cs, _ := r.Store().Calls(context.Background(), first)
	if len(cs) != 2 || cs[1].Result == nil || cs[1].Result.ErrorKind != agents.KindRejected {
		t.Fatalf("stored calls %+v", cs)
	}
}

func TestApprovalWithEditedArguments(t *testing.T) {
	d := newDesk(t, calls(call("r", "refund", `{"id":"A"}`)), answer("ok"))
	r := newRuntime(t, d.config())
	res := mustRun(t, r, "desk", "refund", agents.RunOptions{})
	ctx := context.Background()
	before, err := r.Store().LoadRun(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// Edits the schema refuses are refused before the approval is spent:
	// the run stays paused, untouched, and the tool has not run.
	for _, tt := range []struct{ args, want string }{
		{`{"order":"B"}`, "the edited arguments do not match the input schema of tool refund: additional properties 'order' not allowed; missing property 'id'"},
		{`{"id":7}`, "at /id: got number, want string"},
		{`"{\"id\":\"B\"}"`, "got string, want object"},
		{`{`, "the edited arguments are invalid: they are not valid JSON"},
	} {
		got, err := r.Resume(ctx, res.RunID, agents.Decision{Action: agents.Approve, Arguments: json.RawMessage(tt.args)})
		var ia *agents.InvalidArgumentsError
		if !errors.As(err, &ia) || !strings.Contains(err.Error(), tt.want) || got.Status != agents.StatusPaused {
			t.Errorf("edit %s: %s %v, want an *InvalidArgumentsError saying %q", tt.args, got.Status, err, tt.want)
		}
		after, lerr := r.Store().LoadRun(ctx, res.RunID)
		if lerr != nil || after.Status != agents.StatusPaused || after.Version != before.Version {
			t.Fatalf("after edit %s the run is %s at version %d (was %d): %v", tt.args, after.Status, after.Version, before.Version, lerr)
		}
	}
	if len(d.refunds) != 0 {
		t.Fatalf("refunds %v", d.refunds)
	}
	// The pause can still be decided, here with a valid edit.
	res, err = r.Resume(ctx, res.RunID, agents.Decision{Action: agents.Approve, Arguments: json.RawMessage(`{"id":"B"}`)})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("valid edit: %s %v", res.Status, err)
	}
	c := res.Steps[0].ToolCalls[0]
	if c.Arguments != `{"id":"B"}` || c.Approval.OriginalArguments != `{"id":"A"}` || c.ErrorKind != "" {
		t.Fatalf("call %+v", c)
	}
	if diff := cmp.Diff([]string{`{"id":"B"}`}, d.refunds, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("refunds (-want +got):\n%s", diff)
	}
}

func TestResumeRefusals(t *testing.T) {
	d := newDesk(t, calls(call("r", "refund", `{"id":"A"}`)), answer("ok"), answer("plain"))
	r := newRuntime(t, d.config())
	paused := mustRun(t, r, "desk", "refund", agents.RunOptions{})
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		d    agents.Decision
		want string
	}{
		{"no action", agents.Decision{}, `action "" is not`},
		{"reject with edits", agents.Decision{Action: agents.Reject, Arguments: json.RawMessage(`{}`)}, "cannot edit"},
		{"invalid edit", agents.Decision{Action: agents.Approve, Arguments: json.RawMessage(`{`)}, "not valid JSON"},
	} {
		if _, err := r.Resume(ctx, paused.RunID, tt.d); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
	var nf *agents.RunNotFoundError
	if _, err := r.Resume(ctx, "run_nope", agents.Decision{Action: agents.Approve}); !errors.As(err, &nf) {
		t.Errorf("unknown run: %v", err)
	}
	// A stale checkpoint (the store moved on) is refused.
	stale := *paused.Checkpoint
	if _, err := r.Resume(ctx, paused.RunID, agents.Decision{Action: agents.Approve}); err != nil {
		t.Fatal(err)
	}
	var np *agents.WrongStatusError
	if _, err := r.Resume(ctx, paused.RunID, agents.Decision{Action: agents.Approve}); !errors.As(err, &np) || np.Status != agents.StatusCompleted {
		t.Errorf("resume of a completed run: %v", err)
	}
	if _, err := r.ResumeFrom(ctx, stale, agents.Decision{Action: agents.Approve}); !errors.As(err, &np) {
		t.Errorf("stale checkpoint: %v", err)
	}
	if len(d.refunds) != 1 {
		t.Fatalf("refunds %v", d.refunds)
	}
	// A checkpoint of another version, or naming an unknown agent, is
	// refused before anything runs.
	bad := stale
	bad.Version = 99
	var ve *agents.CheckpointVersionError
	if _, err := r.ResumeFrom(ctx, bad, agents.Decision{Action: agents.Approve}); !errors.As(err, &ve) {
		t.Errorf("version: %v", err)
	}
	data, _ := agents.MarshalCheckpoint(bad)
	if _, err := agents.UnmarshalCheckpoint(data); !errors.As(err, &ve) {
		t.Errorf("unmarshal version: %v", err)
	}
	// A checkpoint naming an agent or a tool this runtime does not have
	// is refused before anything is written: no paused run that could
	// never be resumed is left in the store.
	other := stale
	other.RunID, other.Agent, other.Path = "run_other", "ghost", []string{"ghost"}
	var ua *agents.UnknownAgentError
	if _, err := r.ResumeFrom(ctx, other, agents.Decision{Action: agents.Approve}); !errors.As(err, &ua) {
		t.Errorf("unknown agent: %v", err)
	}
	noTool := stale
	noTool.RunID = "run_no_tool"
	noTool.Pending = &agents.Pending{Step: stale.Pending.Step, Next: stale.Pending.Next, Reason: stale.Pending.Reason}
	noTool.Pending.Step.ToolCalls = []agents.ToolCallRecord{{ID: "r", Name: "wire_money", Arguments: `{}`}}
	var ut *agents.UnknownToolError
	if _, err := r.ResumeFrom(ctx, noTool, agents.Decision{Action: agents.Approve}); !errors.As(err, &ut) || ut.Tool != "wire_money" {
		t.Errorf("unknown tool: %v", err)
	}
	badEdit := stale
	badEdit.RunID = "run_bad_edit"
	var ia *agents.InvalidArgumentsError
	if _, err := r.ResumeFrom(ctx, badEdit, agents.Decision{Action: agents.Approve, Arguments: json.RawMessage(`{"id":1}`)}); !errors.As(err, &ia) {
		t.Errorf("invalid edit: %v", err)
	}
	for _, id := range []string{"run_other", "run_no_tool", "run_bad_edit"} {
		if rec, err := r.Store().LoadRun(ctx, id); !errors.As(err, &nf) {
			t.Errorf("a refused ResumeFrom stored run %s: %+v %v", id, rec, err)
		}
	}
	if _, err := agents.UnmarshalCheckpoint([]byte(`{"version":1}`)); err == nil || !strings.Contains(err.Error(), "no run id") {
		t.Errorf("empty checkpoint: %v", err)
	}
}

// TestConcurrentResumesOneWins resumes the same pause from many goroutines:
// the refund runs once.
func TestConcurrentResumesOneWins(t *testing.T) {
	d := newDesk(t, calls(call("r", "refund", `{"id":"A"}`)), answer("ok"))
	r := newRuntime(t, d.config())
	paused := mustRun(t, r, "desk", "refund", agents.RunOptions{})
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.Resume(context.Background(), paused.RunID, agents.Decision{Action: agents.Approve}); err == nil {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || len(d.refunds) != 1 {
		t.Fatalf("%d resumes won, %d refunds", wins.Load(), len(d.refunds))
	}
}

// crashingStore simulates a process that dies right after recording a call
// of a chosen tool: from then on nothing it writes reaches the store.
type crashingStore struct {
	agents.Store
	tool    string
	crashed atomic.Bool
}

var errCrashed = errors.New("process died")

func (s *crashingStore) RecordCall(ctx context.Context, rec agents.CallRecord) error {
	if s.crashed.Load() {
		return errCrashed
	}
	err := s.Store.RecordCall(ctx, rec)
	if rec.Tool == s.tool {
		s.crashed.Store(true)
	}
	return err
}

func (s *crashingStore) FinishCall(ctx context.Context, runID, key string, res agents.CallResult) error {
	if s.crashed.Load() {
		return errCrashed
	}
	return s.Store.FinishCall(ctx, runID, key, res)
}

func (s *crashingStore) UpdateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	if s.crashed.Load() {
		return agents.RunRecord{}, errCrashed
	}
	return s.Store.UpdateRun(ctx, rec)
}

func TestCrashBetweenRecordAndResult(t *testing.T) {
	t.Run("read call is re-run", func(t *testing.T) {
		d := newDesk(t, calls(call("l1", "lookup", `{"id":"A"}`), call("l2", "lookup", `{"id":"B"}`)), answer("found both"))
		shared := d.store
		d.store = &crashingStore{Store: shared, tool: "lookup"}
		res, err := newRuntime(t, d.config()).Run(context.Background(), "desk", "look", agents.RunOptions{})
		if !errors.Is(err, errCrashed) {
			t.Fatalf("crashed run: %s %v", res.Status, err)
		}
		rec, _ := shared.LoadRun(context.Background(), res.RunID)
		if rec.Status != agents.StatusRunning || rec.Checkpoint.Pending == nil {
			t.Fatalf("stored run after the crash: %s pending %v", rec.Status, rec.Checkpoint.Pending)
		}
		before := d.lookups.Load()
		d.store = shared
		res, err = newRuntime(t, d.config()).Drive(context.Background(), res.RunID, agents.DriveOptions{})
		if err != nil || res.Status != agents.StatusCompleted || res.Answer != "found both" {
			t.Fatalf("recovered: %s %v", res.Status, err)
		}
		if d.lookups.Load() <= before {
			t.Fatalf("the interrupted read was not re-run")
		}
		cs, _ := shared.Calls(context.Background(), res.RunID)
		for _, c := range cs {
			if c.Result == nil {
				t.Fatalf("call %s has no result after recovery", c.Key)
			}
		}
	})
	t.Run("write call waits for a decision", func(t *testing.T) {
		d := newDesk(t, calls(call("l", "lookup", `{"id":"A"}`), call("r", "refund", `{"id":"A"}`)), answer("refunded"))
		shared := d.store
		r := newRuntime(t, d.config())
		paused := mustRun(t, r, "desk", "refund A", agents.RunOptions{})
		// The approved refund runs, but the process dies before its result
		// is stored.
		d.store = &crashingStore{Store: shared, tool: "refund"}
		if _, err := newRuntime(t, d.config()).Resume(context.Background(), paused.RunID, agents.Decision{Action: agents.Approve}); !errors.Is(err, errCrashed) {
			t.Fatalf("crashed resume: %v", err)
		}
		if len(d.refunds) != 1 {
			t.Fatalf("refunds %v", d.refunds)
		}
		d.store = shared
		r2 := newRuntime(t, d.config())
		res, err := r2.Drive(context.Background(), paused.RunID, agents.DriveOptions{})
		if err != nil || res.Status != agents.StatusPaused {
			t.Fatalf("recovered: %s %v", res.Status, err)
		}
		if res.Checkpoint.Pending.Reason != agents.PauseInterrupted || len(d.refunds) != 1 {
			t.Fatalf("pending %+v, refunds %v", res.Checkpoint.Pending, d.refunds)
		}
		// The lookup kept its recorded result and did not run again.
		if d.lookups.Load() != 1 || !res.Checkpoint.Pending.Step.ToolCalls[0].Done {
			t.Fatalf("lookups %d", d.lookups.Load())
		}
		// The human says it did not happen: run it again, once.
		res, err = r2.Resume(context.Background(), paused.RunID, agents.Decision{Action: agents.Approve})
		if err != nil || res.Status != agents.StatusCompleted || len(d.refunds) != 2 {
			t.Fatalf("after decision: %s %v refunds %v", res.Status, err, d.refunds)
		}
		var fin *agents.CallFinishedError
		if err := shared.FinishCall(context.Background(), paused.RunID, "1.1", agents.CallResult{}); !errors.As(err, &fin) {
			t.Fatalf("the refund call should have exactly one result: %v", err)
		}
	})
	t.Run("only a queued or running run is driven", func(t *testing.T) {
		d := newDesk(t, answer("done"))
		r := newRuntime(t, d.config())
		res := mustRun(t, r, "desk", "hi", agents.RunOptions{})
		var np *agents.WrongStatusError
		if _, err := r.Drive(context.Background(), res.RunID, agents.DriveOptions{}); !errors.As(err, &np) || np.Status != agents.StatusCompleted {
			t.Fatalf("drive of a completed run: %v", err)
		}
	})
}

// TestCheckpointSurvivesHostileArguments pauses after a model wrote
// arguments that are not JSON: the checkpoint must still serialise.
func TestCheckpointSurvivesHostileArguments(t *testing.T) {
	d := newDesk(t, calls(call("x", "lookup", `{"id":`), call("r", "refund", `{"id":"A"}`)), answer("ok"))
	res := mustRun(t, newRuntime(t, d.config()), "desk", "hi", agents.RunOptions{})
	data, err := agents.MarshalCheckpoint(*res.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := agents.UnmarshalCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Messages[1].ToolCalls[0].Arguments != `{"id":` {
		t.Fatalf("arguments %q", cp.Messages[1].ToolCalls[0].Arguments)
	}
}
