package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// pathOnly is an environment that gives a stdio server PATH and nothing
// else.
var pathOnly = map[string]string{"PATH": "PATH"}

// scripted is an application with one agent, played by the fake from
// script (the agent's steps), offered tools.
func scripted(t *testing.T, dir string, servers []kind.Resource, tools []app.Tool, script string) app.Description {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "script.json"), []byte(`{"agents": {"agent": `+script+`}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Decl.Name)
	}
	return app.Description{
		Name: "e2e", Version: "0.1.0", Dir: dir,
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Script: "script.json"}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", ContextWindow: 16384, MaxOutputTokens: 64,
			Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Resources: servers,
		Tools:     tools,
		Agents:    []agents.Agent{{Name: "agent", Model: "m", Instructions: "Use the tools.", Tools: names, MaxSteps: 10}},
	}
}

// observations are a run's tool calls, name and arguments → observation.
func observations(res agents.RunResult) map[string]string {
	out := map[string]string{}
	for _, st := range res.Steps {
		for _, c := range st.ToolCalls {
			out[c.Name+" "+c.Arguments] = c.Observation
		}
	}
	return out
}

// TestFilesystemServer: an agent lists and reads the files of a temporary
// directory through @modelcontextprotocol/server-filesystem, and cannot
// leave it.
func TestFilesystemServer(t *testing.T) {
	server := module(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	data := t.TempDir()
	for name, text := range map[string]string{"notes.txt": "The meeting moved to Thursday.", "todo.md": "# Todo\n- call the bank"} {
		if err := os.WriteFile(filepath.Join(data, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := mcp.Server{Transport: mcp.TransportStdio, Command: "node", Args: []string{server, data}, Env: pathOnly}
	desc := scripted(t, t.TempDir(), []kind.Resource{{Name: "fs", Kind: fs}}, []app.Tool{
		{Decl: agents.Tool{Name: "list_directory"}, Kind: mcp.Kind{Server: "fs"}},
		{Decl: agents.Tool{Name: "read"}, Kind: mcp.Kind{Server: "fs", Tool: "read_text_file"}},
		{Decl: agents.Tool{Name: "fs", Approval: agents.ApprovalAlways}, Kind: mcp.Kind{Server: "fs", Import: &mcp.Import{Allow: []string{"write_file"}, Prefix: "fs_"}}},
	}, `[
		{"toolCalls": [{"name": "list_directory", "arguments": {"path": `+quote(data)+`}}]},
		{"toolCalls": [{"name": "read", "arguments": {"path": `+quote(filepath.Join(data, "notes.txt"))+`}}, {"name": "read", "arguments": {"path": "/etc/passwd"}}]},
		{"toolCalls": [{"name": "fs_write_file", "arguments": {"path": `+quote(filepath.Join(data, "new.txt"))+`, "content": "x"}}]},
		{"answer": true, "text": "Your notes say the meeting moved to Thursday."}
	]`)
	a, err := app.Assemble(t.Context(), desc, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	res, err := a.Agents.Run(t.Context(), "agent", "What do my notes say?", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The write needs approval (the IR says so; the server does not
	// annotate it readOnlyHint, so it is a write too): the run pauses.
	if res.Status != agents.StatusPaused {
		t.Fatalf("status %s, want paused at the write", res.Status)
	}
	obs := observations(res)
	if got := obs[`list_directory {"path":`+quote(data)+`}`]; !strings.Contains(got, "[FILE] notes.txt") || !strings.Contains(got, "[FILE] todo.md") {
		t.Errorf("list_directory: %q", got)
	}
	if got := obs[`read {"path":`+quote(filepath.Join(data, "notes.txt"))+`}`]; !strings.Contains(got, "The meeting moved to Thursday.") {
		t.Errorf("read: %q", got)
	}
	if got := obs[`read {"path":"/etc/passwd"}`]; !strings.HasPrefix(got, "error: tool read failed: ") || !strings.Contains(got, "denied") {
		t.Errorf("reading outside the directory: %q", got)
	}
	if _, err := os.Stat(filepath.Join(data, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the write ran before approval: %v", err)
	}
	res, err = a.Agents.Resume(t.Context(), res.RunID, agents.Decision{Action: agents.Approve})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(data, "new.txt")); err != nil || string(b) != "x" {
		t.Errorf("after approval the file holds %q, %v (run %s)", b, err, res.Status)
	}
}

// TestMCPFilesExample runs examples/mcp-files with aidgen run on the
// keyless fake, the filesystem server installed here.
func TestMCPFilesExample(t *testing.T) {
	server := module(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	var out, errb strings.Builder
	code := cli.Main([]string{"run", "../../../examples/mcp-files/app.cue", "-t", "fs=" + server, "How long do I have to return an item?"}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	for _, want := range []string{
		`list_directory {"path":"."}`, `[FILE] returns.md\n[FILE] shipping.md`,
		`read_text_file {"path":"returns.md"}`, `# Returns\n\nUnused items can be returned within 30 days`,
		"completed: 3 steps",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestMCPFilesReplay records examples/mcp-files against the real
// filesystem server and replays the recording with nothing changed: the
// replay compares against the tool definitions the recording holds and
// never starts the server (it is given no fs tag, so it would try npx),
// and a changed prompt still diverges, at its step.
func TestMCPFilesReplay(t *testing.T) {
	server := module(t, "@modelcontextprotocol/server-filesystem/dist/index.js")
	rec := filepath.Join(t.TempDir(), "r.jsonl")
	app := "../../../examples/mcp-files/app.cue"
	var out, errb strings.Builder
	if code := cli.Main([]string{"run", app, "-t", "fs=" + server, "--record", rec, "How long do I have to return an item?"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	// PATH without npx or node: a replay that started the server fails.
	t.Setenv("PATH", t.TempDir())
	if code := cli.Main([]string{"replay", rec, app}, strings.NewReader(""), &out, &errb); code != 0 || !strings.Contains(out.String(), "\nidentical: ") {
		t.Fatalf("replay of an unchanged app: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
	changed := filepath.Join(t.TempDir(), "app.cue")
	src, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(src), "instructions: ", "instructions: \"Answer in French. \" + ", 1)
	if edited == string(src) {
		t.Fatal("the example has no instructions to change")
	}
	if err := os.WriteFile(changed, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"fake-script.json", "library"} {
		abs, err := filepath.Abs(filepath.Join(filepath.Dir(app), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(filepath.Dir(changed), f)); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	errb.Reset()
	code := cli.Main([]string{"replay", rec, changed}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "diverged at step 1") {
		t.Fatalf("replay of a changed prompt: exit %d\n%s\n%s", code, out.String(), errb.String())
	}
}

// everything is the reference server that exercises the protocol, over
// stdio.
func everything(t *testing.T) mcp.Server {
	return mcp.Server{Transport: mcp.TransportStdio, Command: "node", Args: []string{module(t, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio"}, Env: pathOnly}
}

// TestEverythingContent calls @modelcontextprotocol/server-everything's
// tools for every kind of content and for errors.
func TestEverythingContent(t *testing.T) {
	scope := &kind.Scope{}
	defer scope.Close()
	env := kind.Env{Scope: scope, Resources: []kind.Resource{{Name: "ev", Kind: everything(t)}}}
	built, err := mcp.Kind{Server: "ev", Import: &mcp.Import{}}.NewTools(t.Context(), agents.Tool{Name: "ev"}, env)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]agents.BuiltTool{}
	for _, b := range built {
		tools[b.Tool.Name] = b
	}
	if tools["echo"].Tool.Effects != agents.EffectsRead || tools["toggle-simulated-logging"].Tool.Effects != agents.EffectsWrite {
		t.Errorf("effects: echo %q, toggle-simulated-logging %q", tools["echo"].Tool.Effects, tools["toggle-simulated-logging"].Tool.Effects)
	}
	call := func(name, args string) (string, error) {
		t.Helper()
		b, ok := tools[name]
		if !ok {
			t.Fatalf("the server offers no %s", name)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		return b.Implementation.Call(ctx, json.RawMessage(args))
	}
	for _, tt := range []struct {
		tool, args string
		want       []string
	}{
		{"echo", `{"message":"hello"}`, []string{"Echo: hello"}},
		{"get-sum", `{"a":2,"b":3}`, []string{"5"}},
		{"get-tiny-image", `{}`, []string{"[image: image/png, ", " bytes, not shown]"}},
		{"get-structured-content", `{"location":"Chicago"}`, []string{`{"`, `"temperature"`}},
		{"get-resource-links", `{"count":2}`, []string{"[resource link: demo://resource/"}},
		{"get-resource-reference", `{"resourceType":"Blob","resourceId":2}`, []string{"[resource: demo://resource/", "bytes, not shown]"}},
		{"get-annotated-message", `{"messageType":"error","includeImage":true}`, []string{"[image: image/png"}},
	} {
		obs, err := call(tt.tool, tt.args)
		if err != nil {
			t.Errorf("%s: %v", tt.tool, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(obs, w) {
				t.Errorf("%s = %q, lacks %q", tt.tool, obs, w)
			}
		}
		if strings.Contains(obs, "iVBOR") { // a PNG in base64
			t.Errorf("%s inlines an image: %q", tt.tool, obs)
		}
	}
	// The server checks arguments too: wrong ones are its tool error.
	_, err = call("get-sum", `{"a":"two","b":3}`)
	var te *mcp.ToolError
	if !errors.As(err, &te) || te.Server != "ev" || te.Tool != "get-sum" {
		t.Errorf("wrong arguments: %v", err)
	}
	// Only PATH reaches the server.
	obs, err := call("get-env", `{}`)
	if err != nil {
		t.Fatal(err)
	}
	var environ map[string]string
	if err := json.Unmarshal([]byte(obs), &environ); err != nil {
		t.Fatalf("get-env: %v: %q", err, obs)
	}
	for k := range environ {
		if k != "PATH" {
			t.Errorf("the server sees %s, which its env does not name", k)
		}
	}
}

// TestEverythingRun: an agent calls the everything server's long-running
// operation: its progress notifications reach the run's events; one that
// outlasts the tool's timeout is cancelled, and the next call is served.
func TestEverythingRun(t *testing.T) {
	desc := scripted(t, t.TempDir(), []kind.Resource{{Name: "ev", Kind: everything(t)}}, []app.Tool{
		{Decl: agents.Tool{Name: "ev", Timeout: 4 * time.Second}, Kind: mcp.Kind{Server: "ev", Import: &mcp.Import{Allow: []string{"trigger-long-running-operation", "echo"}, Prefix: "ev_"}}},
	}, `[
		{"toolCalls": [{"name": "ev_trigger-long-running-operation", "arguments": {"duration": 1, "steps": 4}}]},
		{"toolCalls": [{"name": "ev_trigger-long-running-operation", "arguments": {"duration": 60, "steps": 3}}]},
		{"toolCalls": [{"name": "ev_echo", "arguments": {"message": "after the timeout"}}]},
		{"answer": true, "text": "done"}
	]`)
	a, err := app.Assemble(t.Context(), desc, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var progress []agents.ToolProgress
	start := time.Now()
	res, err := a.Agents.Run(t.Context(), "agent", "go", agents.RunOptions{OnEvent: func(ev agents.Event) {
		if ev.Kind == agents.EventToolProgress {
			progress = append(progress, *ev.Progress)
		}
	}})
	if err != nil || res.Status != agents.StatusCompleted {
		t.Fatalf("run: %v, %s", err, res.Status)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the run took %v: the timeout did not cancel the long operation", took)
	}
	obs := observations(res)
	if got := obs[`ev_trigger-long-running-operation {"duration":1,"steps":4}`]; !strings.Contains(got, "Long running operation completed") {
		t.Errorf("short operation: %q", got)
	}
	if got := obs[`ev_trigger-long-running-operation {"duration":60,"steps":3}`]; got != "error: tool ev_trigger-long-running-operation timed out after 4s" {
		t.Errorf("long operation: %q", got)
	}
	if got := obs[`ev_echo {"message":"after the timeout"}`]; got != "Echo: after the timeout" {
		t.Errorf("the call after the timeout: %q", got)
	}
	// The server sends its fourth notification just before its result,
	// and the SDK handles notifications apart from results: that one may
	// be handled after the call returned, and is then dropped (see the
	// package documentation of runtime/agents/tools/mcp).
	if len(progress) < 3 || len(progress) > 4 {
		t.Errorf("progress events: %+v", progress)
	}
	for i, p := range progress {
		if p.Progress != float64(i+1) || p.Total != 4 {
			t.Errorf("progress event %d: %+v", i, p)
		}
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
