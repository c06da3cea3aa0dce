package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// desk is an application whose agent calls the test server's tools, played
// by the fake provider's script.
func desk(t *testing.T, server mcp.Server) app.Description {
	t.Helper()
	dir := t.TempDir()
	script := `{"agents": {"desk": [
		{"toolCalls": [{"name": "echo", "arguments": {"text": "hello"}}, {"name": "srv_progress", "arguments": {}}]},
		{"toolCalls": [{"name": "srv_forecast", "arguments": {}}, {"name": "echo", "arguments": {"text": 42}}]},
		{"answer": true, "text": "It is -3.5 in Oslo."}
	]}}`
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return app.Description{
		Name: "desk", Version: "0.1.0", Dir: dir,
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1, Script: "script.json"}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", ContextWindow: 8192, MaxOutputTokens: 64,
			Capabilities: []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityStreaming}}}},
		Resources: []kind.Resource{{Name: "srv", Kind: server}},
		Tools: []app.Tool{
			{Decl: agents.Tool{Name: "echo"}, Kind: mcp.Kind{Server: "srv"}},
			{Decl: agents.Tool{Name: "srv"}, Kind: mcp.Kind{Server: "srv", Import: &mcp.Import{Allow: []string{"progress", "forecast"}, Prefix: "srv_"}}},
		},
		Agents: []agents.Agent{{Name: "desk", Model: "m", Instructions: "Answer.", Tools: []string{"echo", "srv"}}},
	}
}

// TestAgentCallsServer assembles an application whose agent uses a
// server's tools, a declared one and imported ones, and runs it: the
// arguments are checked against the server's schema, the observations are
// the server's answers, progress reaches the run's events, and each
// execute_tool span names the server and its transport.
func TestAgentCallsServer(t *testing.T) {
	s, lookup := stdioServer("serve")
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	a, err := app.Assemble(t.Context(), desk(t, s), app.Options{LookupEnv: lookup, Tracer: tp.Tracer("test")})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := strings.Join(a.Agents.Tools("desk"), " "); got != "echo srv_progress srv_forecast" {
		t.Errorf("desk is offered %q", got)
	}
	var progress []string
	res, err := a.Agents.Run(t.Context(), "desk", "What is the weather?", agents.RunOptions{OnEvent: func(ev agents.Event) {
		if ev.Kind == agents.EventToolProgress {
			progress = append(progress, ev.Calls[0].Name+":"+ev.Progress.Message)
		}
	}})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("run: %v, %+v", err, res)
	}
	obs := map[string]string{}
	for _, st := range res.Steps {
		for _, c := range st.ToolCalls {
			obs[c.Name+" "+c.Arguments] = c.Observation
		}
	}
	for call, want := range map[string]string{
		`echo {"text":"hello"}`: "hello",
		`srv_progress {}`:       "done",
		`srv_forecast {}`:       `{"city":"Oslo","temp_c":-3.5}`,
		`echo {"text":42}`:      "error: invalid arguments for echo",
	} {
		if got := obs[call]; !strings.HasPrefix(got, want) {
			t.Errorf("%s → %q, want %q", call, got, want)
		}
	}
	if strings.Join(progress, ",") != "srv_progress:step 1,srv_progress:step 2,srv_progress:step 3" {
		t.Errorf("progress events: %q", progress)
	}
	var seen int
	for _, sp := range spans.Ended() {
		if !strings.HasPrefix(sp.Name(), "execute_tool ") {
			continue
		}
		attrs := map[attribute.Key]string{}
		for _, kv := range sp.Attributes() {
			attrs[kv.Key] = kv.Value.String()
		}
		if attrs["aid.mcp.server"] == "srv" && attrs["aid.mcp.transport"] == "stdio" && attrs["network.transport"] == "pipe" && attrs["mcp.method.name"] == "tools/call" && attrs["mcp.protocol.version"] != "" {
			seen++
		}
	}
	if seen != 3 { // the fourth call never reached the server
		t.Errorf("%d execute_tool spans name the server, want 3", seen)
	}
}

// TestApprovalRulesGovernImportedTools: an approval rule governs a tool
// imported from a server by the tool's own name (srv_forecast) and by the
// name of the declaration it was imported from (srv, for srv_progress),
// as the declaration's shorthand does; a declared tool keeps its own.
func TestApprovalRulesGovernImportedTools(t *testing.T) {
	s, lookup := stdioServer("serve")
	d := desk(t, s)
	d.Approvals = policy.Policy{Rules: []policy.Rule{
		{Tool: "srv_forecast", Action: policy.Deny, Reason: "no forecasts"},
		{Tool: "srv", Action: policy.Ask, Reason: "the server's tools need a person"},
	}}
	a, err := app.Assemble(t.Context(), d, app.Options{LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := a.Agents.Run(t.Context(), "desk", "What is the weather?", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	call, ok := res.Checkpoint.Pending.Call()
	if res.Status != agents.StatusPaused || !ok || call.Name != "srv_progress" {
		t.Fatalf("status %s, pending %+v: want paused on srv_progress (rule 2, through its declaration srv)", res.Status, res.Checkpoint.Pending)
	}
	if obs := res.Checkpoint.Pending.Step.ToolCalls[0]; obs.Name != "echo" || obs.Observation != "hello" {
		t.Errorf("the declared tool's call: %+v, want echo run and answered", obs)
	}
	res, err = a.Agents.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agents.StatusCompleted {
		t.Fatalf("after approval: %s", res.Status)
	}
	var forecast string
	for _, st := range res.Steps {
		for _, c := range st.ToolCalls {
			if c.Name == "srv_forecast" {
				forecast = c.Observation
			}
		}
	}
	if !strings.Contains(forecast, "no forecasts") {
		t.Errorf("srv_forecast (rule 1) answered %q, want the denial's reason", forecast)
	}
}

// TestObservationBounded: a server's answer longer than the tool's
// maxObservationBytes reaches the model cut to that bound, as every kind's
// does, whether the tool is declared or imported; an answer of 50 MB never
// reaches it (TestHugeAnswer).
func TestObservationBounded(t *testing.T) {
	s, lookup := stdioServer("flood")
	dir := t.TempDir()
	script := `{"agents": {"desk": [
		{"toolCalls": [{"name": "huge", "arguments": {"bytes": 100000}}, {"name": "f_huge", "arguments": {"bytes": 100000}}]},
		{"answer": true, "text": "Long."}
	]}}`
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	desc := app.Description{
		Name: "desk", Version: "0.1.0", Dir: dir,
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1, Script: "script.json"}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", ContextWindow: 128000, MaxOutputTokens: 64,
			Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Resources: []kind.Resource{{Name: "srv", Kind: s}},
		Tools: []app.Tool{
			{Decl: agents.Tool{Name: "huge", MaxObservationBytes: 4096}, Kind: mcp.Kind{Server: "srv"}},
			{Decl: agents.Tool{Name: "f"}, Kind: mcp.Kind{Server: "srv", Import: &mcp.Import{Prefix: "f_"}}},
		},
		Agents: []agents.Agent{{Name: "desk", Model: "m", Instructions: "Answer.", Tools: []string{"huge", "f"}}},
	}
	a, err := app.Assemble(t.Context(), desc, app.Options{LookupEnv: lookup})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := a.Agents.Run(t.Context(), "desk", "Read it all.", agents.RunOptions{})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("run: %v, status %s", err, res.Status)
	}
	limits := map[string]int{"huge": 4096, "f_huge": agents.DefaultMaxObservationBytes}
	for _, st := range res.Steps {
		for _, c := range st.ToolCalls {
			limit := limits[c.Name]
			if len(c.Observation) > limit || len(c.Observation) < limit-200 || !strings.HasPrefix(c.Observation, "xxxx") || !strings.Contains(c.Observation, "observation cut by aid") {
				t.Errorf("%s: %d bytes, want at most %d, cut: …%s", c.Name, len(c.Observation), limit, c.Observation[max(0, len(c.Observation)-80):])
			}
			delete(limits, c.Name)
		}
	}
	if len(limits) > 0 {
		t.Errorf("calls not made: %v", limits)
	}
}

// TestReadinessFollowsTheServer: an application whose tools come from an
// MCP server has a readiness check for it (which the service's /readyz
// calls), passing while the server answers and failing, naming it, once
// the server is gone.
func TestReadinessFollowsTheServer(t *testing.T) {
	s, hs, _ := closableHTTPServer(t)
	a, err := app.Assemble(t.Context(), desk(t, s), app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	checks := a.ReadyChecks()
	if len(checks) != 1 || checks[0].Name != "mcp_server:srv" {
		t.Fatalf("checks %+v, want one named mcp_server:srv", checks)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := checks[0].Check(ctx); err != nil {
		t.Fatalf("the server answers, and the check fails: %v", err)
	}
	hs.Close()
	if err := checks[0].Check(ctx); err == nil || !strings.Contains(err.Error(), `MCP server "srv"`) {
		t.Fatalf("the server is gone, and the check says %v", err)
	}
}
