package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// These tests run the real agent runtime on the PostgreSQL store. Each
// "replica" is its own pool, store, gateway, fake provider and Runtime over
// one database, as separate processes of a service would be; only the
// tools' side effects (the refund desk's ledger) are shared, as an external
// system would be.

var lookupSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)

func answer(text string) fake.Step { return fake.Step{Text: text} }

func calls(cs ...gateway.ToolCall) fake.Step { return fake.Step{ToolCalls: cs} }

func call(id, name, args string) gateway.ToolCall {
	return gateway.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// newGateway builds a gateway over a recording fake provider.
func newGateway(t testing.TB, fc fake.Config) (*gateway.Gateway, *fake.Provider) {
	t.Helper()
	fc.Record = true
	p, err := fake.New(fc)
	if err != nil {
		t.Fatal(err)
	}
	caps := []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 8000,
			MaxOutputTokens: 100, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}}},
		Providers: map[string]gateway.Provider{"fake": p},
		Retry:     gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gw, p
}

// openPool opens a pool of its own on dsn, as a new process would.
func openPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// desk is a refund desk: a read tool (lookup) and a write tool (refund)
// that counts and remembers its calls, across replicas. approve gates
// refunds behind a human; hook, when set, runs inside each tool call (a
// test uses it to kill a replica mid-call).
type desk struct {
	approve bool
	mu      sync.Mutex
	refunds []string
	lookups atomic.Int32
	hook    func(tool string)
}

func (d *desk) refundCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.refunds)
}

// replica is one process of the service.
type replica struct {
	pool  *pgxpool.Pool
	store *pgstore.Store
	rt    *agents.Runtime
	fake  *fake.Provider
}

// newReplica starts a replica on dsn whose model answers with script.
func (d *desk) newReplica(t testing.TB, dsn string, script ...fake.Step) *replica {
	t.Helper()
	pool := openPool(t, dsn)
	st, err := pgstore.New(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	gw, p := newGateway(t, fake.Config{Script: script})
	approval := agents.ApprovalNever
	if d.approve {
		approval = agents.ApprovalAlways
	}
	rt, err := agents.New(agents.Config{
		Gateway: gw,
		Store:   st,
		Agents:  []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund"}}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: lookupSchema},
			{Name: "refund", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: approval},
		},
		Implementations: map[string]agents.Implementation{
			"lookup": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
				d.lookups.Add(1)
				if d.hook != nil {
					d.hook("lookup")
				}
				return "found " + string(args), nil
			}),
			"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
				d.mu.Lock()
				d.refunds = append(d.refunds, string(args))
				d.mu.Unlock()
				if d.hook != nil {
					d.hook("refund")
				}
				return "refunded " + string(args), nil
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &replica{pool: pool, store: st, rt: rt, fake: p}
}

// checkAllFinished fails unless every recorded call of the run has exactly
// its one result, and no call is left without one.
func checkAllFinished(t *testing.T, s agents.Store, runID string, want int) {
	t.Helper()
	cs, err := s.Calls(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != want {
		t.Fatalf("%d calls recorded, want %d", len(cs), want)
	}
	for _, c := range cs {
		if c.Result == nil {
			t.Fatalf("call %s (%s) has no result", c.Key, c.Tool)
		}
		var fin *agents.CallFinishedError
		if err := s.FinishCall(context.Background(), runID, c.Key, agents.CallResult{Observation: "again"}); !errors.As(err, &fin) {
			t.Fatalf("a second result for call %s: %v, want *CallFinishedError", c.Key, err)
		}
	}
}

// TestPauseResumeInNewProcess pauses a run in one replica, which then
// exits (its pool closed), and resumes it in a brand-new one: by run id,
// and from the checkpoint's JSON.
func TestPauseResumeInNewProcess(t *testing.T) {
	for _, by := range []string{"run id", "checkpoint JSON"} {
		t.Run(by, func(t *testing.T) {
			dsn := pgtest.NewDatabase(t)
			d := &desk{approve: true}
			a := d.newReplica(t, dsn, calls(call("l", "lookup", `{"id":"A"}`), call("r", "refund", `{"id":"A"}`)))
			res, err := a.rt.Run(t.Context(), "desk", "refund A", agents.RunOptions{ThreadID: "th", UserID: "u"})
			if err != nil || res.Status != agents.StatusPaused {
				t.Fatalf("run: %s %v", res.Status, err)
			}
			data, err := agents.MarshalCheckpoint(*res.Checkpoint)
			if err != nil {
				t.Fatal(err)
			}
			a.pool.Close() // the first process is gone

			b := d.newReplica(t, dsn, answer("refunded A"))
			if d.refundCount() != 0 || d.lookups.Load() != 1 {
				t.Fatalf("before the decision: %d refunds, %d lookups", d.refundCount(), d.lookups.Load())
			}
			if by == "run id" {
				res, err = b.rt.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
			} else {
				cp, uerr := agents.UnmarshalCheckpoint(data)
				if uerr != nil {
					t.Fatal(uerr)
				}
				res, err = b.rt.ResumeFrom(t.Context(), cp, agents.Decision{Action: agents.Approve})
			}
			if err != nil || res.Status != agents.StatusCompleted || res.Answer != "refunded A" {
				t.Fatalf("resumed: %s %q %v", res.Status, res.Answer, err)
			}
			if d.refundCount() != 1 || d.lookups.Load() != 1 {
				t.Fatalf("after the decision: %d refunds, %d lookups; want 1 and 1", d.refundCount(), d.lookups.Load())
			}
			// The resumed model call saw the whole thread, from the store.
			reqs := b.fake.Requests()
			if len(reqs) != 1 || len(reqs[0].Messages) != 4 || reqs[0].Messages[3].Content != `refunded {"id":"A"}` {
				t.Fatalf("resumed request %+v", reqs)
			}
			rec, err := b.store.LoadRun(t.Context(), res.RunID)
			if err != nil || rec.Status != agents.StatusCompleted || rec.Checkpoint.ThreadID != "th" || rec.Checkpoint.UserID != "u" {
				t.Fatalf("stored run %+v, %v", rec, err)
			}
			checkAllFinished(t, b.store, res.RunID, 2)
			// Neither way can resume it again.
			var np *agents.WrongStatusError
			if _, err := b.rt.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve}); !errors.As(err, &np) {
				t.Fatalf("second resume: %v", err)
			}
		})
	}
}

// TestResumeByIDFromAnotherReplica resumes, by run id, a run another live
// replica paused, then pauses it again there and resumes it back.
func TestResumeByIDFromAnotherReplica(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	d := &desk{approve: true}
	a := d.newReplica(t, dsn, calls(call("r1", "refund", `{"id":"A"}`)), answer("A refunded, B rejected"))
	b := d.newReplica(t, dsn, calls(call("r2", "refund", `{"id":"B"}`)))
	res, err := a.rt.Run(t.Context(), "desk", "refund A and B", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusPaused {
		t.Fatalf("run: %s %v", res.Status, err)
	}
	id := res.RunID
	res, err = b.rt.Resume(t.Context(), id, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusPaused {
		t.Fatalf("first resume on b: %s %v", res.Status, err)
	}
	res, err = a.rt.Resume(t.Context(), id, agents.Decision{Action: agents.Reject, Feedback: "B was refunded last week"})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("second resume on a: %s %v", res.Status, err)
	}
	if d := cmp.Diff([]string{`{"id":"A"}`}, d.refunds); d != "" {
		t.Fatalf("refunds (-want +got):\n%s", d)
	}
	cs, err := a.store.Calls(t.Context(), id)
	if err != nil || len(cs) != 2 || cs[1].Result == nil || cs[1].Result.ErrorKind != agents.KindRejected {
		t.Fatalf("calls %+v, %v", cs, err)
	}
	checkAllFinished(t, a.store, id, 2)
}

// TestRacingResumesOneWins has several replicas resume the same pause at
// once, round after round: exactly one proceeds, the refund runs once, and
// each loser is told why and runs nothing.
func TestRacingResumesOneWins(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	d := &desk{approve: true}
	const racers, rounds = 4, 10
	origin := d.newReplica(t, dsn)
	var rs []*replica
	for range racers {
		rs = append(rs, d.newReplica(t, dsn))
	}
	for round := range rounds {
		// Each round's scripts: the origin pauses, every racer answers.
		id := fmt.Sprintf(`{"id":"R%d"}`, round)
		o := d.newReplicaOn(t, origin, calls(call("r", "refund", id)))
		paused, err := o.Run(t.Context(), "desk", "refund", agents.RunOptions{})
		if err != nil || paused.Status != agents.StatusPaused {
			t.Fatalf("round %d: run: %s %v", round, paused.Status, err)
		}
		var wins atomic.Int32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, rp := range rs {
			rt := d.newReplicaOn(t, rp, answer("ok"))
			wg.Go(func() {
				<-start
				res, err := rt.Resume(t.Context(), paused.RunID, agents.Decision{Action: agents.Approve})
				var conflict *agents.ConflictError
				var np *agents.WrongStatusError
				switch {
				case err == nil && res.Status == agents.StatusCompleted:
					wins.Add(1)
				case errors.As(err, &conflict), errors.As(err, &np):
				default:
					t.Errorf("round %d: a losing resume: %s %v", round, res.Status, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || d.refundCount() != round+1 {
			t.Fatalf("round %d: %d resumes won, %d refunds in all; want 1 and %d", round, wins.Load(), d.refundCount(), round+1)
		}
		checkAllFinished(t, origin.store, paused.RunID, 1)
	}
}

// newReplicaOn builds a runtime whose model answers with script, on an
// existing replica's store and pool: a replica whose model moved on.
func (d *desk) newReplicaOn(t testing.TB, r *replica, script ...fake.Step) *agents.Runtime {
	t.Helper()
	gw, _ := newGateway(t, fake.Config{Script: script})
	rt, err := agents.New(agents.Config{
		Gateway: gw, Store: r.store,
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund"}}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: lookupSchema},
			{Name: "refund", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways},
		},
		Implementations: map[string]agents.Implementation{
			"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { d.lookups.Add(1); return "found", nil }),
			"refund": agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) {
				d.mu.Lock()
				defer d.mu.Unlock()
				d.refunds = append(d.refunds, string(args))
				return "refunded", nil
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestCrashBetweenRecordAndResult kills a replica in the middle of a tool
// call: the tool closes the replica's pool, so the call is recorded but its
// result, and everything after, never reaches the database, as when the
// process dies. Another replica's Recover re-runs an interrupted read (two
// replicas recovering at once: one does) and pauses on an interrupted
// write, which runs again only on a decision.
func TestCrashBetweenRecordAndResult(t *testing.T) {
	t.Run("read is re-run", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t)
		d := &desk{}
		a := d.newReplica(t, dsn, calls(call("l", "lookup", `{"id":"A"}`)))
		var once sync.Once
		d.hook = func(tool string) {
			if tool == "lookup" {
				once.Do(a.pool.Close)
			}
		}
		res, err := a.rt.Run(t.Context(), "desk", "look A up", agents.RunOptions{})
		if err == nil {
			t.Fatalf("the crashed replica finished its run: %s", res.Status)
		}
		d.hook = nil
		b := d.newReplica(t, dsn, answer("found A"))
		rec, err := b.store.LoadRun(t.Context(), res.RunID)
		if err != nil || rec.Status != agents.StatusRunning || rec.Checkpoint.Pending == nil {
			t.Fatalf("stored run after the crash: %+v, %v", rec, err)
		}
		if c, err := b.store.Call(t.Context(), res.RunID, "1.0"); err != nil || c.Result != nil {
			t.Fatalf("the interrupted call: %+v, %v; want recorded without a result", c, err)
		}
		// Two replicas notice the dead run at once: one recovers it, the
		// other is told it lost (a *ConflictError) and writes nothing more.
		c := d.newReplica(t, dsn, answer("found A"))
		results := make([]agents.RunResult, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, r := range []*replica{b, c} {
			wg.Go(func() {
				<-start
				results[i], errs[i] = r.rt.Drive(t.Context(), res.RunID, agents.DriveOptions{})
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range 2 {
			var conflict *agents.ConflictError
			var np *agents.WrongStatusError
			switch {
			case errs[i] == nil && results[i].Status == agents.StatusCompleted && results[i].Answer == "found A":
				won++
			case errors.As(errs[i], &conflict), errors.As(errs[i], &np):
			default:
				t.Fatalf("recover %d: %s %v", i, results[i].Status, errs[i])
			}
		}
		if won == 0 {
			// Each claim moves the record on, so both recoveries can lose:
			// B finishes the read but C's claim came after B's, and C's
			// result comes second. Nothing is lost: the run is still
			// running with its call finished, and the next recovery
			// completes it without running the read again.
			e := d.newReplica(t, dsn, answer("found A"))
			res, err := e.rt.Drive(t.Context(), res.RunID, agents.DriveOptions{})
			if err != nil || res.Status != agents.StatusCompleted || res.Answer != "found A" {
				t.Fatalf("recovery after two lost ones: %s %q %v", res.Status, res.Answer, err)
			}
			won = 1
		}
		if won != 1 {
			t.Fatalf("%d recoveries won, want 1", won)
		}
		// Both recoveries may re-run the interrupted read before one of them
		// finishes it (a read may run again); the loser then stops with a
		// *ConflictError and writes nothing more.
		if n := d.lookups.Load(); n != 2 && n != 3 {
			t.Fatalf("%d lookups, want 2 or 3: the interrupted read runs again, at most once per recovery", n)
		}
		checkAllFinished(t, b.store, res.RunID, 1)
	})
	t.Run("write waits for a decision", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t)
		d := &desk{}
		a := d.newReplica(t, dsn, calls(call("l", "lookup", `{"id":"A"}`), call("r", "refund", `{"id":"A"}`)))
		var once sync.Once
		d.hook = func(tool string) {
			if tool == "refund" {
				once.Do(a.pool.Close)
			}
		}
		res, err := a.rt.Run(t.Context(), "desk", "refund A", agents.RunOptions{})
		if err == nil {
			t.Fatalf("the crashed replica finished its run: %s", res.Status)
		}
		d.hook = nil
		if d.refundCount() != 1 {
			t.Fatalf("refunds %v", d.refunds)
		}
		b := d.newReplica(t, dsn, answer("refunded A"))
		res, err = b.rt.Drive(t.Context(), res.RunID, agents.DriveOptions{})
		if err != nil || res.Status != agents.StatusPaused {
			t.Fatalf("recovered: %s %v", res.Status, err)
		}
		p := res.Checkpoint.Pending
		if pc, ok := p.Call(); !ok || p.Reason != agents.PauseInterrupted || pc.Name != "refund" {
			t.Fatalf("pending %+v", p)
		}
		// The lookup kept its stored result and did not run again; the
		// refund did not run again either.
		if d.lookups.Load() != 1 || !p.Step.ToolCalls[0].Done || d.refundCount() != 1 {
			t.Fatalf("after recovery: %d lookups, %d refunds", d.lookups.Load(), d.refundCount())
		}
		// Recovering again is refused: the run is paused, not running.
		var np *agents.WrongStatusError
		if _, err := b.rt.Drive(t.Context(), res.RunID, agents.DriveOptions{}); !errors.As(err, &np) {
			t.Fatalf("second recover: %v", err)
		}
		// The human says it did not happen: it runs again, once.
		c := d.newReplica(t, dsn, answer("refunded A"))
		res, err = c.rt.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
		if err != nil || res.Status != agents.StatusCompleted || d.refundCount() != 2 {
			t.Fatalf("after the decision: %s %v, %d refunds", res.Status, err, d.refundCount())
		}
		checkAllFinished(t, c.store, res.RunID, 2)
	})
}

// TestMemorySharedAcrossReplicas has a tool in one replica write user
// memory that the next run, in another replica, finds in its request;
// another user's run does not, and stores of other names are apart.
func TestMemorySharedAcrossReplicas(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	newReplica := func(script ...fake.Step) (*fake.Provider, *agents.Runtime, *pgstore.Memory) {
		st, err := pgstore.New(t.Context(), openPool(t, dsn))
		if err != nil {
			t.Fatal(err)
		}
		mem, err := st.Memory("notes")
		if err != nil {
			t.Fatal(err)
		}
		gw, p := newGateway(t, fake.Config{Script: script})
		rt, err := agents.New(agents.Config{
			Gateway: gw, Store: st,
			MemoryStores: map[string]agents.MemoryStore{"notes": mem},
			Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "help", Tools: []string{"remember"},
				Memory: &agents.Memory{User: &agents.StoredMemory{Store: "notes"}, Global: &agents.StoredMemory{Store: "notes"}}}},
			Tools: []agents.Tool{{Name: "remember", Description: "d", Effects: agents.EffectsWrite,
				Input: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string"}},"required":["fact"]}`)}},
			Implementations: map[string]agents.Implementation{"remember": agents.Typed(func(ctx context.Context, in struct {
				Fact string `json:"fact"`
			}) (string, error) {
				ri, _ := agents.RunInfoFromContext(ctx)
				_, err := mem.AddMemory(ctx, agents.MemoryUser, ri.UserID, in.Fact)
				return "remembered", err
			})},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p, rt, mem
	}
	_, a, mem := newReplica(calls(call("c", "remember", `{"fact":"prefers email"}`)), answer("noted"))
	if _, err := mem.AddMemory(t.Context(), agents.MemoryGlobal, "", "refunds take 5 days"); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Run(t.Context(), "a", "I prefer email", agents.RunOptions{UserID: "u1"}); err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("run on a: %s %v", res.Status, err)
	}
	p, b, _ := newReplica(answer("hello"), answer("hello"))
	for _, user := range []string{"u1", "u2"} {
		if _, err := b.Run(t.Context(), "a", "hi", agents.RunOptions{UserID: user}); err != nil {
			t.Fatal(err)
		}
	}
	reqs := p.Requests()
	want := []string{
		"Memory about this user:\n- prefers email\n\nShared memory:\n- refunds take 5 days",
		"Shared memory:\n- refunds take 5 days",
	}
	for i, w := range want {
		if got := reqs[i].Messages[1].Content; got != w {
			t.Errorf("run %d's memory message %q, want %q", i+1, got, w)
		}
	}
	// Another store name in the same database sees none of it.
	st, err := pgstore.New(t.Context(), openPool(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.Memory("other")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		scope   agents.MemoryScope
		subject string
	}{{agents.MemoryUser, "u1"}, {agents.MemoryGlobal, ""}} {
		if es, err := other.Memories(t.Context(), q.scope, q.subject); err != nil || len(es) != 0 {
			t.Errorf("store %q sees %s memory of store %q: %+v, %v", "other", q.scope, "notes", es, err)
		}
	}
	if !strings.Contains(reqs[0].Messages[0].Content, "help") {
		t.Errorf("instructions %q", reqs[0].Messages[0].Content)
	}
}
