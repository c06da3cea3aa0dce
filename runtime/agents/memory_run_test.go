package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// TestMemoryInjectionIsVisible runs an agent with user and global memory
// and a thread budget: the request carries one extra system message with
// the memory, the history is trimmed to whole turns, and a tool writes
// user memory that the next call sees.
func TestMemoryInjectionIsVisible(t *testing.T) {
	mem := agents.NewInMemoryMemory()
	ctx := context.Background()
	if _, err := mem.AddMemory(ctx, agents.MemoryGlobal, "", "refunds take 5 days"); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.AddMemory(ctx, agents.MemoryUser, "u1", "prefers email"); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, fake.Config{Script: []fake.Step{calls(call("c", "remember", `{"fact":"order A-1 is late"}`)), answer("noted")}})
	r := newRuntime(t, agents.Config{
		Gateway:      fx.gw,
		MemoryStores: map[string]agents.MemoryStore{"mem": mem},
		Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "help", Tools: []string{"remember"},
			Memory: &agents.Memory{ThreadTokenBudget: 60, User: &agents.StoredMemory{Store: "mem"}, Global: &agents.StoredMemory{Store: "mem"}}}},
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
	history := []gateway.Message{
		{Role: gateway.RoleSystem, Content: "stale system message"},
		{Role: gateway.RoleUser, Content: strings.Repeat("old question ", 20)},
		{Role: gateway.RoleAssistant, Content: strings.Repeat("old answer ", 20)},
	}
	res := mustRun(t, r, "a", "my order is late", agents.RunOptions{UserID: "u1", History: history})
	reqs := fx.fake.Requests()
	first := reqs[0].Messages
	if d := cmp.Diff([]string{"system", "system", "user"}, roles(first)); d != "" {
		t.Fatalf("first request (-want +got):\n%s", d)
	}
	if first[0].Content != "help" || first[1].Content != "Memory about this user:\n- prefers email\n\nShared memory:\n- refunds take 5 days" {
		t.Fatalf("system messages %q / %q", first[0].Content, first[1].Content)
	}
	if first[2].Content != "my order is late" {
		t.Fatalf("the old turn was not trimmed: %q", first[2].Content)
	}
	if !strings.Contains(reqs[1].Messages[1].Content, "- order A-1 is late") {
		t.Fatalf("the tool's memory write is not visible in the next call: %q", reqs[1].Messages[1].Content)
	}
	// The thread keeps everything (it is trimmed per request, not
	// forgotten) except the stale system message.
	if d := cmp.Diff([]string{"user", "assistant", "user", "assistant", "tool:c", "assistant"}, roles(res.Messages)); d != "" {
		t.Fatalf("thread (-want +got):\n%s", d)
	}
	// Thread memory never reaches the memory store.
	global, _ := mem.Memories(ctx, agents.MemoryGlobal, "")
	user, _ := mem.Memories(ctx, agents.MemoryUser, "u1")
	if len(global) != 1 || len(user) != 2 {
		t.Fatalf("memory store holds %d global and %d user entries", len(global), len(user))
	}
	// User memory needs a user.
	var noUser *agents.UserIDRequiredError
	if _, err := r.Run(ctx, "a", "hi", agents.RunOptions{}); !errors.As(err, &noUser) || noUser.Agent != "a" || !strings.Contains(err.Error(), "UserID is required") {
		t.Fatalf("run without user: %v", err)
	}
}

func TestStructuredOutput(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)
	for _, tt := range []struct {
		name    string
		script  []fake.Step
		status  agents.Status
		answer  string
		calls   int
		invalid bool
	}{
		{"valid at once", []fake.Step{answer(`{"city":"Paris"}`)}, agents.StatusCompleted, `{"city":"Paris"}`, 1, false},
		{"repaired", []fake.Step{answer("Paris"), answer(`{"city":"Paris"}`)}, agents.StatusCompleted, `{"city":"Paris"}`, 2, false},
		{"one repair only", []fake.Step{answer("Paris"), answer(`{"town":"Paris"}`), answer(`{"city":"Paris"}`)}, agents.StatusFailed, "", 2, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t, fake.Config{Script: tt.script})
			r := newRuntime(t, agents.Config{Gateway: fx.gw, Agents: []agents.Agent{{Name: "a", Model: "small", Output: schema}}})
			res, err := r.Run(context.Background(), "a", "capital of France?", agents.RunOptions{})
			var ov *agents.OutputValidationError
			if res.Status != tt.status || res.Answer != tt.answer || fx.fake.Calls() != tt.calls || errors.As(err, &ov) != tt.invalid {
				t.Fatalf("status %s answer %q calls %d err %v", res.Status, res.Answer, fx.fake.Calls(), err)
			}
			reqs := fx.fake.Requests()
			if rf := reqs[0].ResponseFormat; rf == nil || string(rf.Schema) != string(schema) {
				t.Fatalf("response format %+v", rf)
			}
			if tt.calls == 2 {
				repair := reqs[1].Messages[len(reqs[1].Messages)-1]
				if repair.Role != gateway.RoleUser || !strings.Contains(repair.Content, "does not match the required JSON schema") {
					t.Fatalf("repair message %+v", repair)
				}
			}
			if tt.invalid && ov.Answer != `{"town":"Paris"}` {
				t.Fatalf("error answer %q", ov.Answer)
			}
		})
	}
}

// TestRepairSurvivesTrimming repairs an answer on an agent whose thread
// budget the history already exceeds: the repair request still holds the
// question and the answer under repair, the older turn goes, and a run
// paused and resumed between the question and the repair trims the same
// way from its checkpoint.
func TestRepairSurvivesTrimming(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	history := []gateway.Message{
		{Role: gateway.RoleUser, Content: strings.Repeat("an old question ", 40)},
		{Role: gateway.RoleAssistant, Content: strings.Repeat("an old answer ", 40)},
	}
	fx := newFixture(t, fake.Config{Script: []fake.Step{
		calls(call("r", "confirm", `{"id":"A"}`)),
		answer("Paris, of course"),
		answer(`{"city":"Paris"}`),
	}})
	r := newRuntime(t, agents.Config{
		Gateway: fx.gw,
		Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "Answer in JSON.", Output: schema, Tools: []string{"confirm"},
			Memory: &agents.Memory{ThreadTokenBudget: 40}}},
		Tools:           []agents.Tool{{Name: "confirm", Description: "d", Input: lookupSchema, Approval: agents.ApprovalAlways}},
		Implementations: map[string]agents.Implementation{"confirm": echoTool},
	})
	paused := mustRun(t, r, "a", "capital of France?", agents.RunOptions{History: history})
	if paused.Status != agents.StatusPaused || paused.Checkpoint.Turn != 2 {
		t.Fatalf("status %s, checkpoint turn %d", paused.Status, paused.Checkpoint.Turn)
	}
	// Resumed from the checkpoint alone, in a runtime whose store never
	// saw the run.
	r2 := newRuntime(t, agents.Config{
		Gateway: fx.gw,
		Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "Answer in JSON.", Output: schema, Tools: []string{"confirm"},
			Memory: &agents.Memory{ThreadTokenBudget: 40}}},
		Tools:           []agents.Tool{{Name: "confirm", Description: "d", Input: lookupSchema, Approval: agents.ApprovalAlways}},
		Implementations: map[string]agents.Implementation{"confirm": echoTool},
	})
	data, _ := agents.MarshalCheckpoint(*paused.Checkpoint)
	cp, err := agents.UnmarshalCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r2.ResumeFrom(context.Background(), cp, agents.Decision{Action: agents.Approve})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != `{"city":"Paris"}` {
		t.Fatalf("status %s answer %q: %v", res.Status, res.Answer, err)
	}
	reqs := fx.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model calls", len(reqs))
	}
	got := reqs[2].Messages
	want := []string{"system", "user", "assistant", "tool:r", "assistant", "user"}
	if d := cmp.Diff(want, roles(got)); d != "" {
		t.Fatalf("repair request (-want +got):\n%s", d)
	}
	if got[1].Content != "capital of France?" || got[4].Content != "Paris, of course" || !strings.Contains(got[5].Content, "does not match the required JSON schema") {
		t.Fatalf("repair request %+v", got)
	}
}

// TestGlobalMemoryIsTheTenants: global memory is kept per tenant. A tool
// of an acme run writes a fact to global memory for its run's tenant
// (RunInfo.Tenant); the next acme run is given it, while a globex run, a
// run of no tenant and a run of a tenant named like acme but for case are
// given only their own, and a globex tool reading global memory for its
// own tenant finds nothing of acme's.
func TestGlobalMemoryIsTheTenants(t *testing.T) {
	mem := agents.NewInMemoryMemory()
	ctx := context.Background()
	if _, err := mem.AddMemory(ctx, agents.MemoryGlobal, "globex", "globex ships on Mondays"); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, fake.Config{Script: []fake.Step{
		calls(call("c1", "remember", `{"fact":"acme's refund override code is 4417"}`)), answer("noted"),
		answer("acme again"), answer("globex"), answer("nobody"), answer("Acme"),
	}})
	var seen []string
	r := newRuntime(t, agents.Config{
		Gateway:      fx.gw,
		MemoryStores: map[string]agents.MemoryStore{"mem": mem},
		Agents: []agents.Agent{{Name: "a", Model: "small", Instructions: "help", Tools: []string{"remember"},
			Memory: &agents.Memory{Global: &agents.StoredMemory{Store: "mem"}}}},
		Tools: []agents.Tool{{Name: "remember", Description: "d", Effects: agents.EffectsWrite,
			Input: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string"}},"required":["fact"]}`)}},
		Implementations: map[string]agents.Implementation{"remember": agents.Typed(func(ctx context.Context, in struct {
			Fact string `json:"fact"`
		}) (string, error) {
			ri, _ := agents.RunInfoFromContext(ctx)
			seen = append(seen, ri.Tenant)
			_, err := mem.AddMemory(ctx, agents.MemoryGlobal, ri.Tenant, in.Fact)
			return "remembered", err
		})},
	})
	runAs := func(tenant string) string {
		t.Helper()
		before := len(fx.fake.Requests())
		mustRun(t, r, "a", "hello", agents.RunOptions{Caller: kind.Caller{Key: "k-" + tenant, Tenant: tenant}})
		var all strings.Builder
		for _, req := range fx.fake.Requests()[before:] {
			for _, m := range req.Messages {
				all.WriteString(m.Content + "\n")
			}
		}
		return all.String()
	}
	if got := runAs("acme"); strings.Contains(got, "globex ships") {
		t.Errorf("an acme run was given globex's memory:\n%s", got)
	}
	if d := cmp.Diff([]string{"acme"}, seen); d != "" {
		t.Errorf("the tool's RunInfo.Tenant (-want +got):\n%s", d)
	}
	if got := runAs("acme"); !strings.Contains(got, "4417") {
		t.Errorf("the next acme run was not given acme's memory:\n%s", got)
	}
	for _, other := range []string{"globex", "", "Acme"} {
		got := runAs(other)
		if strings.Contains(got, "4417") {
			t.Errorf("a run of tenant %q was given acme's memory:\n%s", other, got)
		}
		if want := other == "globex"; strings.Contains(got, "globex ships") != want {
			t.Errorf("a run of tenant %q: globex's memory given %v, want %v:\n%s", other, !want, want, got)
		}
	}
	if got, _ := mem.Memories(ctx, agents.MemoryGlobal, "globex"); len(got) != 1 {
		t.Errorf("globex's global memory %+v", got)
	}
}
