package pgstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// policyReplica is a replica whose desk reads (lookup) and refunds under
// a policy that denies secret lookups and asks about refunds.
func policyReplica(t *testing.T, dsn string, script map[string][]fake.Step) *agents.Runtime {
	t.Helper()
	st, err := pgstore.New(t.Context(), openPool(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	gw, _ := newGateway(t, fake.Config{Agents: script})
	impl := agents.ToolFunc(func(_ context.Context, args json.RawMessage) (string, error) { return "ok " + string(args), nil })
	rt, err := agents.New(agents.Config{
		Gateway: gw, Store: st,
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund"}}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: lookupSchema},
			{Name: "refund", Description: "d", Input: lookupSchema, Effects: agents.EffectsWrite},
		},
		Implementations: map[string]agents.Implementation{"lookup": impl, "refund": impl},
		Conditions:      cel.Language{},
		Approvals: policy.Policy{Rules: []policy.Rule{
			{Tool: "lookup", When: `args.id == "secret"`, Action: policy.Deny, Reason: "not for customers"},
			{Tool: "refund", Action: policy.Ask},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// TestPolicyOnPostgres runs the policy on the PostgreSQL store, which
// records a step's read calls with its checkpoint: a lookup the policy may
// deny is not recorded ahead, so every recorded call has its one result;
// and a refund approved for the thread on one replica runs without asking
// in the thread's next run on another.
func TestPolicyOnPostgres(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	script := map[string][]fake.Step{"desk": {
		calls(call("l1", "lookup", `{"id":"A"}`), call("l2", "lookup", `{"id":"secret"}`), call("l3", "lookup", `{"id":"B"}`)),
		calls(call("r1", "refund", `{"id":"A"}`)),
		answer("done"),
	}}
	a := policyReplica(t, dsn, script)
	res, err := a.Run(t.Context(), "desk", "look and refund", agents.RunOptions{ThreadID: "th"})
	if err != nil || res.Status != agents.StatusPaused {
		t.Fatalf("run: %s %v", res.Status, err)
	}
	res, err = a.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve, Scope: agents.GrantThread, By: "ops"})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("resume: %s %v", res.Status, err)
	}
	if c := res.Steps[0].ToolCalls[1]; c.ErrorKind != agents.KindDenied {
		t.Fatalf("secret lookup %+v", c)
	}
	st, err := pgstore.New(t.Context(), openPool(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	checkAllFinished(t, st, res.RunID, 3) // the allowed lookups and the refund
	b := policyReplica(t, dsn, script)
	res, err = b.Run(t.Context(), "desk", "again", agents.RunOptions{ThreadID: "th"})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("the thread's next run on another replica: %s %v", res.Status, err)
	}
	if g := res.Steps[1].ToolCalls[0].Policy.Grant; g == nil || g.By != "ops" || g.Scope != agents.GrantThread {
		t.Fatalf("refund's grant %+v", g)
	}
}
