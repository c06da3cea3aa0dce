package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// record writes the stored run's event log and reads it back.
func record(t *testing.T, store agents.Store, runID string) (*agents.Recording, []byte) {
	t.Helper()
	rec, err := store.LoadRun(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := agents.Record(&b, rec, "support-desk", "0.1.0", ""); err != nil {
		t.Fatal(err)
	}
	got, err := agents.ReadRecording(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatalf("read back: %v\n%s", err, b.String())
	}
	return got, b.Bytes()
}

// deskRun runs the support desk's refund conversation, pausing on the
// refund and resuming it with decision, and returns the store.
func deskRun(t *testing.T, d agents.Decision) (agents.Store, string) {
	t.Helper()
	cfg, _ := supportDeskConfig(t, loadSupportDeskScript(t))
	cfg.Store = agents.NewInMemoryStore()
	r := newRuntime(t, cfg)
	res := mustRun(t, r, "triage", "I want a refund for order AB-123456", agents.RunOptions{UserID: "u1", ThreadID: "th1"})
	if res.Status != agents.StatusPaused {
		t.Fatalf("status %s", res.Status)
	}
	res, err := r.Resume(context.Background(), res.RunID, d)
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("resume: %s %v", res.Status, err)
	}
	return cfg.Store, res.RunID
}

// replayConfig is the support desk's configuration on a gateway whose
// provider counts its calls, none of which a replay may make.
func replayConfig(t *testing.T, edit func(*agents.Config)) (agents.Config, *fake.Provider) {
	t.Helper()
	cfg, p := supportDeskConfig(t, fake.Config{Analyzer: analysis.English{}, Script: []fake.Step{answer("a replay must not call me")}})
	cfg.Implementations = nil // the recording answers for the tools
	if edit != nil {
		edit(&cfg)
	}
	return cfg, p
}

// TestReplaySupportDesk records the support desk's refund (a lookup, a
// handoff, a delegation with two searches, an invoice, a refund paused for
// approval and resumed with edited arguments) and replays it offline on
// the same configuration: no divergence, every model call, tool call and
// decision replayed, the provider never called.
func TestReplaySupportDesk(t *testing.T) {
	store, id := deskRun(t, agents.Decision{Action: agents.Approve, By: "alice", ClaimedBy: "mallory",
		Arguments: json.RawMessage(`{"order_id":"AB-123456","amount_usd":59.90,"reason":"Customer asked for a refund within 30 days of delivery."}`)})
	rec, log := record(t, store, id)
	if rec.Run.Agent != "triage" || rec.Run.Input != "I want a refund for order AB-123456" || rec.Run.AppVersion != "0.1.0" || len(rec.Steps) != 6 {
		t.Fatalf("recording %+v, %d steps", rec.Run, len(rec.Steps))
	}
	for _, want := range []string{`"type":"run"`, `"type":"step"`, `"type":"call"`, `"model":"fake-large-2024-06-01"`, `"depth":1`, `"approval":{"approved":true,"by":"alice","claimed_by":"mallory"`, `"policy":{"action":"ask","source":"tool"`} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("the event log lacks %s", want)
		}
	}
	stored, _ := store.LoadRun(context.Background(), id)
	if d := cmp.Diff(stored.Checkpoint.Steps, rec.Steps, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("the log does not round-trip the steps (-stored +read):\n%s", d)
	}
	cfg, p := replayConfig(t, nil)
	before, err := cfg.Gateway.Spend(context.Background()) // the retriever's ingest
	if err != nil {
		t.Fatal(err)
	}
	rep, err := agents.Replay(context.Background(), cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil {
		t.Fatalf("divergence %+v\n%s", rep.Divergence, rep.Divergence.Diff)
	}
	// 6 model calls of the run and 2 of the researcher; 5 tool calls of the
	// run (the handoff and the delegation are the runtime's) and 2 searches.
	if len(rep.DecidedBy) != 1 || rep.DecidedBy[0] != "alice" {
		t.Errorf("decided by %q, want the recorded decider alice", rep.DecidedBy)
	}
	if rep.Steps != 8 || rep.Calls != 5 || rep.Decisions != 1 || rep.ReplayStatus != agents.StatusCompleted {
		t.Fatalf("report %+v", rep)
	}
	if p.Calls() != 0 {
		t.Fatalf("the replay called the provider %d times", p.Calls())
	}
	if spend, _ := cfg.Gateway.Spend(context.Background()); spend.Calls != before.Calls || spend.Total != before.Total {
		t.Fatalf("the replay spent: %+v, before %+v", spend, before)
	}
	// Deterministic: the same again.
	again, err := agents.Replay(context.Background(), cfg, rec)
	if err != nil || !cmp.Equal(rep, again) {
		t.Fatalf("a second replay differs: %+v %v", again, err)
	}
}

// TestReplayChangedPrompt changes billing's instructions: the replay
// matches triage's two steps and diverges at step 3, billing's first,
// with a diff of the system message. A changed triage prompt diverges at
// step 1.
func TestReplayChangedPrompt(t *testing.T) {
	store, id := deskRun(t, agents.Decision{Action: agents.Approve})
	rec, _ := record(t, store, id)
	for _, tt := range []struct {
		agent string
		step  int
	}{{"billing", 3}, {"triage", 1}} {
		t.Run(tt.agent, func(t *testing.T) {
			cfg, p := replayConfig(t, func(c *agents.Config) {
				for i := range c.Agents {
					if c.Agents[i].Name == tt.agent {
						c.Agents[i].Instructions += "\nAlways greet the customer by name."
					}
				}
			})
			rep, err := agents.Replay(context.Background(), cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			d := rep.Divergence
			if d != nil && (d.Prefix != agents.PrefixSystem || !strings.Contains(d.Message, fmt.Sprintf("the cached prefix moves at step %d, in the system", tt.step))) {
				t.Errorf("divergence %+v: want the system prompt named as the part of the cached prefix that moved", d)
			}
			if d == nil || d.Kind != agents.DivergeRequest || d.Step != tt.step || d.Agent != tt.agent || d.Depth != 0 {
				t.Fatalf("divergence %+v", d)
			}
			if !strings.Contains(d.Diff, "+    Always greet the customer by name.") || !strings.Contains(d.Diff, "--- recorded") || !strings.Contains(d.Message, "message 1, system, differs") {
				t.Fatalf("diff:\n%s\nmessage %s", d.Diff, d.Message)
			}
			if rep.Steps != tt.step-1 || p.Calls() != 0 {
				t.Fatalf("%d steps replayed before the divergence, %d provider calls", rep.Steps, p.Calls())
			}
		})
	}
}

// TestReplayOtherDivergences changes what the recording cannot absorb: a
// policy that denies the refund, a researcher's prompt (inside the
// delegation), a tool's schema that refuses the model's arguments, and
// a handoff that is gone.
func TestReplayOtherDivergences(t *testing.T) {
	store, id := deskRun(t, agents.Decision{Action: agents.Approve})
	rec, _ := record(t, store, id)
	for _, tt := range []struct {
		name  string
		edit  func(*agents.Config)
		kind  agents.DivergenceKind
		step  int
		depth int
		agent string
		in    string
	}{
		{"the policy denies the refund", func(c *agents.Config) {
			c.Approvals = policy.Policy{Rules: []policy.Rule{{Tool: "issue_refund", Action: policy.Deny, Reason: "no refunds today"}}}
			c.Tools[2].Approval = ""
		}, agents.DivergeDecision, 5, 0, "billing", "recorded ask by the tool's approval, replayed deny by rule 1"},
		{"the policy allows the refund", func(c *agents.Config) { c.Tools[2].Approval = agents.ApprovalNever },
			agents.DivergeDecision, 5, 0, "billing", "the recording asked a person about issue_refund; the replay runs it without asking"},
		{"the researcher's prompt", func(c *agents.Config) { c.Agents[3].Instructions = "Answer in one sentence." },
			agents.DivergeRequest, 1, 1, "researcher", "the model request of step 1 differs"},
		{"a tool's schema", func(c *agents.Config) {
			c.Tools[1].Input = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ZZ"}},"required":["order_id"]}`)
		}, agents.DivergeRequest, 3, 0, "billing", "offers the same tools, with other definitions"},
		{"the handoff is gone", func(c *agents.Config) { c.Agents[0].Handoffs = []string{"tech"} },
			agents.DivergeRequest, 1, 0, "triage", "offers other tools"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, p := replayConfig(t, tt.edit)
			rep, err := agents.Replay(context.Background(), cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			d := rep.Divergence
			if d == nil || d.Kind != tt.kind || d.Step != tt.step || d.Depth != tt.depth || d.Agent != tt.agent || !strings.Contains(d.Message, tt.in) {
				t.Fatalf("divergence %+v, want %s at step %d depth %d of %s, saying %q", d, tt.kind, tt.step, tt.depth, tt.agent, tt.in)
			}
			if p.Calls() != 0 {
				t.Fatalf("%d provider calls", p.Calls())
			}
		})
	}
}

// TestReplayRunsWhatWasDenied records a call the policy denied and
// replays it under a policy that allows it: the replay would run a call
// the recording never ran.
func TestReplayRunsWhatWasDenied(t *testing.T) {
	d := newPolicyDesk(t, policy.Policy{Rules: []policy.Rule{{Tool: "refund", Action: policy.Deny}}}, map[string][]fake.Step{"desk": {
		calls(call("r1", "refund", `{"order":"A"}`)),
		answer("could not refund"),
	}})
	res := mustRun(t, d.runtime(t), "desk", "refund", agents.RunOptions{})
	rec, _ := record(t, d.store, res.RunID)
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}})
	cfg := agents.Config{Gateway: fx.gw, Tools: d.tools,
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund", "credit"}}}}
	rep, err := agents.Replay(context.Background(), cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	if dv := rep.Divergence; dv == nil || dv.Kind != agents.DivergeToolCall || dv.Step != 1 || dv.Call != "r1" || !strings.Contains(dv.Message, "the recording did not run it (denied)") {
		t.Fatalf("divergence %+v", rep.Divergence)
	}
	// The same policy replays alike.
	cfg.Approvals = d.policy
	if rep, err := agents.Replay(context.Background(), cfg, rec); err != nil || rep.Divergence != nil {
		t.Fatalf("same policy: %+v %v", rep, err)
	}
}

// TestReplayStopsAndContinuations records a run that timed out during a
// read call, was continued, used its steps, was continued again, paused,
// was cancelled while paused, continued and approved: the replay stops,
// continues, cancels and decides where the recording did.
func TestReplayStopsAndContinuations(t *testing.T) {
	fc := fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"desk": {
		calls(call("l1", "lookup", `{"id":"A"}`)),
		calls(call("l2", "lookup", `{"id":"B"}`)),
		calls(call("s1", "send", `{"id":"C"}`)),
		answer("all done"),
	}}}
	var block blocker
	cfg := func(f fake.Config) agents.Config {
		fx := newFixture(t, f)
		return agents.Config{
			Gateway: fx.gw, Store: agents.NewInMemoryStore(),
			Agents: []agents.Agent{{Name: "desk", Model: "small", MaxSteps: 2, Tools: []string{"lookup", "send"}, Timeouts: agents.Timeouts{Step: 50 * time.Millisecond}}},
			Tools: []agents.Tool{
				{Name: "lookup", Description: "d", Input: lookupSchema},
				{Name: "send", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways},
			},
			Implementations: map[string]agents.Implementation{"lookup": block.tool("lookup"), "send": block.tool("send")},
		}
	}
	live := cfg(fc)
	r := newRuntime(t, live)
	block.on.Store(true)
	res, _ := r.Run(context.Background(), "desk", "go", agents.RunOptions{})
	if res.Status != agents.StatusTimedOut {
		t.Fatalf("run: %s", res.Status)
	}
	block.on.Store(false)
	id := res.RunID
	steps := []struct {
		do   func() (agents.RunResult, error)
		want agents.Status
	}{
		{func() (agents.RunResult, error) {
			return r.Continue(context.Background(), id, agents.ContinueOptions{Steps: 1})
		}, agents.StatusMaxSteps},
		{func() (agents.RunResult, error) {
			return r.Continue(context.Background(), id, agents.ContinueOptions{Steps: 1})
		}, agents.StatusPaused},
		{func() (agents.RunResult, error) {
			rec, err := r.Cancel(context.Background(), id, agents.CancelOptions{By: "ops"})
			return agents.RunResult{Status: rec.Status}, err
		}, agents.StatusCancelled},
		{func() (agents.RunResult, error) {
			return r.Continue(context.Background(), id, agents.ContinueOptions{Steps: 2})
		}, agents.StatusPaused},
		{func() (agents.RunResult, error) {
			return r.Resume(context.Background(), id, agents.Decision{Action: agents.Approve, By: "bob"})
		}, agents.StatusCompleted},
	}
	for i, s := range steps {
		res, err := s.do()
		if res.Status != s.want {
			t.Fatalf("move %d: %s %v, want %s", i, res.Status, err, s.want)
		}
	}
	rec, _ := record(t, live.Store, id)
	if len(rec.Run.Continuations) != 3 || rec.Run.Continuations[0].PendingStep != 1 || len(rec.Run.Continuations[0].Interrupted) != 1 {
		t.Fatalf("continuations %+v", rec.Run.Continuations)
	}
	calls := block.calls.Load()
	rcfg := cfg(fake.Config{Analyzer: analysis.English{}})
	rcfg.Implementations = nil
	rep, err := agents.Replay(context.Background(), rcfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence != nil || rep.ReplayStatus != agents.StatusCompleted || rep.Decisions != 1 {
		t.Fatalf("report %+v, divergence %+v", rep, rep.Divergence)
	}
	if block.calls.Load() != calls {
		t.Fatal("the replay called a tool")
	}
}

// TestReplayOfAStoppedRecording replays a recording that ends timed out
// in a tool call: the replay stops at the same call, as recorded.
func TestReplayOfAStoppedRecording(t *testing.T) {
	d := newShutdownDesk(t, calls(call("l", "lookup", `{"id":"A"}`)))
	d.block.Store(true)
	d.timeouts = agents.Timeouts{Step: 30 * time.Millisecond}
	cfg := d.config()
	res, _ := newRuntime(t, cfg).Run(context.Background(), "desk", "help", agents.RunOptions{})
	if res.Status != agents.StatusTimedOut {
		t.Fatalf("run: %s", res.Status)
	}
	rec, _ := record(t, d.store, res.RunID)
	if !rec.Pending || rec.Run.Status != agents.StatusTimedOut {
		t.Fatalf("recording: pending %v status %s", rec.Pending, rec.Run.Status)
	}
	rep, err := agents.Replay(context.Background(), cfg, rec)
	if err != nil || rep.Divergence != nil || rep.ReplayStatus != agents.StatusTimedOut {
		t.Fatalf("replay %+v %v", rep, err)
	}
}

func TestReadRecordingRefusesBadLogs(t *testing.T) {
	for _, tt := range []struct{ name, log, want string }{
		{"empty", "", "event log: empty"},
		{"not JSON", "{\n", "line 1: not JSON"},
		{"no run first", `{"type":"step","depth":0,"number":1}` + "\n", "line 1: the log starts with a \"step\" line"},
		{"another format", `{"type":"run","format":9}` + "\n", "line 1: format 9"},
		{"a call without its step", `{"type":"run","format":1}` + "\n" + `{"type":"call","depth":0,"step":1,"index":0,"id":"x"}` + "\n", "line 2: a call without its step"},
		{"unknown line", `{"type":"run","format":1}` + "\n" + `{"type":"gossip"}` + "\n", `line 2: unknown line type "gossip"`},
		{"a bad keep", `{"type":"run","format":1}` + "\n" + `{"type":"step","depth":0,"number":1,"request":{"keep":3,"messages":[],"fingerprint":"f"}}` + "\n", "keeps 3 messages of a request of 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agents.ReadRecording(strings.NewReader(tt.log))
			var re *agents.RecordingError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want a *RecordingError with %q", err, tt.want)
			}
		})
	}
}

// TestReplayNeedsTheAgent refuses a recording of an agent the
// configuration does not have.
func TestReplayNeedsTheAgent(t *testing.T) {
	fx := newFixture(t, fake.Config{Analyzer: analysis.English{}})
	rec := &agents.Recording{Run: agents.RecordedRun{Type: "run", Format: agents.RecordingFormat, RunID: "run_x", Agent: "ghost", Status: agents.StatusCompleted}}
	_, err := agents.Replay(context.Background(), agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "desk", Model: "small"}}}, rec)
	if _, ok := errors.AsType[*agents.UnknownAgentError](err); !ok {
		t.Fatalf("error %v", err)
	}
}

// blocker's tools block until their context ends while on is set, and
// count the calls that ran.
type blocker struct {
	on    atomic.Bool
	calls atomic.Int32
}

func (b *blocker) tool(name string) agents.Implementation {
	return agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		if b.on.Load() {
			<-ctx.Done()
			return "", ctx.Err()
		}
		b.calls.Add(1)
		return name + " " + string(args), nil
	})
}

// TestReplayNamesThePrefixThatMoved replays the support-desk run with the
// changes that make a prompt cache stop hitting: a timestamp added to
// triage's instructions (the system prompt moves at step 1), a tool added
// to billing (its tools move at step 3, billing's first), and a policy
// edit outside the prompt, which moves no prefix.
func TestReplayNamesThePrefixThatMoved(t *testing.T) {
	store, id := deskRun(t, agents.Decision{Action: agents.Approve})
	rec, _ := record(t, store, id)
	for _, tt := range []struct {
		name   string
		edit   func(*agents.Config)
		step   int
		prefix string
	}{
		{"a timestamp in the instructions", func(c *agents.Config) {
			c.Agents[0].Instructions = "Now: 2026-12-02T11:23:00Z.\n" + c.Agents[0].Instructions
		}, 1, agents.PrefixSystem},
		{"a tool added", func(c *agents.Config) {
			for i := range c.Agents {
				if c.Agents[i].Name == "billing" {
					c.Agents[i].Tools = append(c.Agents[i].Tools, "update_ticket")
				}
			}
		}, 3, agents.PrefixTools},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _ := replayConfig(t, tt.edit)
			rep, err := agents.Replay(context.Background(), cfg, rec)
			if err != nil {
				t.Fatal(err)
			}
			d := rep.Divergence
			if d == nil || d.Kind != agents.DivergeRequest || d.Step != tt.step || d.Prefix != tt.prefix {
				t.Fatalf("divergence %+v, want a request divergence at step %d naming the %s", d, tt.step, tt.prefix)
			}
			if want := fmt.Sprintf("the cached prefix moves at step %d, in the %s", tt.step, tt.prefix); !strings.Contains(d.Message, want) {
				t.Errorf("message %q lacks %q", d.Message, want)
			}
		})
	}
}
