package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/filestore"
	"github.com/aidgen/aid/runtime/agents"
)

var continueID = regexp.MustCompile(`--continue (run_[0-9a-f]+)`)

// writeAppFiles writes files into dir and returns the path of its app.cue.
func writeAppFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "app.cue")
}

// hang holds a request until its client goes away. The body is read
// first: the server notices a closed connection only once it has.
func hang(r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// TestRunContinueAfterMaxSteps stops a run at its two steps and continues
// it from another process with one more: the same run completes, its file
// lists the continuation, and a run that did not stop early is refused.
func TestRunContinueAfterMaxSteps(t *testing.T) {
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"looper": [{"text": "Pinging.", "toolCalls": [{"name": "ping", "arguments": {}}]}, {"toolCalls": [{"name": "ping", "arguments": {}}]}, {"text": "pong twice"}]}}`,
		"ping.json":   `[{"args": {}, "result": "pong"}]`,
		"app.cue": `name: "looper"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: ping: {description: "Ping.", implementation: {kind: "fixture", file: "ping.json"}, input: {type: "object"}}
agents: looper: {model: "small", instructions: "Ping twice.", tools: ["ping"], maxSteps: 2}
`,
	})
	state := filepath.Join(dir, "runs")
	code, out, errOut := run(t, "run", app, "--state-dir", state, "hello")
	m := continueID.FindStringSubmatch(out)
	if code != cli.ExitRunFailed || m == nil || !strings.Contains(out, "max_steps: 2 steps") || !strings.Contains(out, "last text (looper):\nPinging.") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	id := m[1]
	code, out, errOut = runProcess(t, "run", app, "--state-dir", state, "--continue", id, "--steps", "1")
	if code != cli.ExitOK {
		t.Fatalf("continue: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"continuing run " + id + " on looper (max_steps after step 2) with 1 more step", "step 3 · looper", "answer (looper):\npong twice", "completed: 3 steps"} {
		if !strings.Contains(out, want) {
			t.Errorf("continue's stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "step 2 ·") {
		t.Errorf("the continuation printed the steps the first run printed:\n%s", out)
	}
	fs, err := filestore.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := fs.LoadRun(t.Context(), id)
	if err != nil || len(rec.Checkpoint.Continuations) != 1 || rec.Checkpoint.Continuations[0].Steps != 1 || rec.Checkpoint.Continuations[0].From != agents.StatusMaxSteps {
		t.Fatalf("stored run: %+v %v", rec.Checkpoint.Continuations, err)
	}
	code, _, errOut = run(t, "run", app, "--state-dir", state, "--continue", id)
	if code != cli.ExitUsage || !strings.Contains(errOut, "is completed: only a run that stopped early") {
		t.Fatalf("continue of a completed run: exit %d %s", code, errOut)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--steps", "2", "hi"}, "--steps goes with --continue RUN_ID"},
		{[]string{"--continue", id, "--resume", id, "--approve"}, "give one of --resume, --recover, --continue and --cancel"},
		{[]string{"--continue", id, "--approve"}, "--approve goes with --resume, not --continue"},
		{[]string{"--continue", id, "--steps", "-1"}, "cannot be negative"},
		{[]string{"--continue", id, "hi"}, "takes the application file only"},
		{[]string{"--continue", "run_nobody"}, "no run run_nobody in"},
	} {
		code, _, errOut := run(t, append([]string{"run", app, "--state-dir", state}, tt.args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tt.args, code, errOut, tt.want)
		}
	}
}

// TestRunTimeoutAndContinue gives an agent a step timeout that an http
// tool outlasts the first time: the run ends timed_out with the call
// marked interrupted and its partial result; --continue runs the read
// again and completes the run. --json reports the same.
func TestRunTimeoutAndContinue(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			hang(r)
			return
		}
		_, _ = w.Write([]byte(`{"status":"shipped"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"desk": [{"text": "Checking.", "toolCalls": [{"name": "track", "arguments": {"id": "A1"}}]}, {"text": "A1 has shipped."}]}}`,
		"app.cue": `name: "desk"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: track: {description: "Track a parcel.", implementation: {kind: "http", url: "` + srv.URL + `"}, input: {type: "object", properties: id: type: "string"}}
agents: desk: {model: "small", instructions: "Track parcels.", tools: ["track"], timeouts: step: "200ms"}
`,
	})
	state := filepath.Join(dir, "runs")
	code, out, errOut := run(t, "run", app, "--state-dir", state, "--json", "where is A1?")
	var res struct {
		RunID    string              `json:"run_id"`
		Status   agents.Status       `json:"status"`
		LastText string              `json:"last_text"`
		CostUSD  float64             `json:"cost_usd"`
		Steps    []agents.StepRecord `json:"steps"`
		Continue string              `json:"continue_command"`
		Error    string              `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != cli.ExitRunFailed {
		t.Fatalf("exit %d %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errOut)
	}
	if res.Status != agents.StatusTimedOut || res.LastText != "Checking." || res.CostUSD <= 0 || len(res.Steps) != 1 ||
		!res.Steps[0].ToolCalls[0].Interrupted || !strings.Contains(res.Continue, "--continue "+res.RunID) || !strings.Contains(res.Error, "step 1 timed out after 200ms") {
		t.Fatalf("timed-out run:\n%s", out)
	}
	code, out, errOut = run(t, "run", app, "--state-dir", state, "--continue", res.RunID)
	if code != cli.ExitOK || !strings.Contains(out, "continuing run "+res.RunID+" on desk (timed_out after step 0)") ||
		!strings.Contains(out, `↳ {"status":"shipped"}`) || !strings.Contains(out, "A1 has shipped.") {
		t.Fatalf("continue: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if calls.Load() != 2 {
		t.Fatalf("the tool was called %d times, want 2 (the interrupted read runs again)", calls.Load())
	}
}

// TestRunPrintsAnInterruptedCall prints a timed-out run for a person: the
// call in flight is marked interrupted, and the continue command follows.
func TestRunPrintsAnInterruptedCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hang(r) }))
	defer srv.Close()
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"desk": [{"toolCalls": [{"name": "track", "arguments": {"id": "A1"}}]}]}}`,
		"app.cue": `name: "desk"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: track: {description: "Track a parcel.", effects: "write", implementation: {kind: "http", url: "` + srv.URL + `"}}
agents: desk: {model: "small", instructions: "Track parcels.", tools: ["track"]}
service: timeouts: run: "150ms"
`,
	})
	code, out, errOut := run(t, "run", app, "--state-dir", filepath.Join(dir, "runs"), "where is A1?")
	for _, want := range []string{"track {\"id\":\"A1\"}", "⏹ interrupted", "continue it:", "timed_out: 1 step"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if code != cli.ExitRunFailed || !strings.Contains(errOut, "the run timed out after 150ms") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	if t.Failed() {
		t.Logf("stdout:\n%s", out)
	}
}

// TestRunCancelFromAnotherProcess starts a run in one process whose write
// tool (an http endpoint) hangs, and cancels it from another through the
// state directory: the first process's call is cancelled, its run ends
// cancelled with the call interrupted (exit 1, the continue command
// printed), and --continue then asks about the interrupted write.
func TestRunCancelFromAnotherProcess(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		hang(r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"desk": [{"text": "Sending.", "toolCalls": [{"name": "send", "arguments": {"id": "A1"}}]}, {"text": "Sent."}]}}`,
		"app.cue": `name: "desk"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: send: {description: "Send a parcel.", effects: "write", implementation: {kind: "http", url: "` + srv.URL + `"}, input: {type: "object", properties: id: type: "string"}}
agents: desk: {model: "small", instructions: "Send parcels.", tools: ["send"]}
`,
	})
	state := filepath.Join(dir, "runs")
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$")
	cmd.Env = append(os.Environ(), "AIDGEN_TEST_ARGS="+strings.Join([]string{"run", app, "--state-dir", state, "send A1"}, "\x1f"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for calls.Load() == 0 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the tool was never called\nstderr:\n%s", errb.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	files, _ := filepath.Glob(filepath.Join(state, "run_*.json"))
	if len(files) != 1 {
		t.Fatalf("run files %v", files)
	}
	id := strings.TrimSuffix(filepath.Base(files[0]), ".json")
	code, cout, cerr := run(t, "run", app, "--state-dir", state, "--cancel", id)
	if code != cli.ExitOK || !strings.Contains(cout, "cancelled run "+id+" on desk by ") || !strings.Contains(cout, "⏹ interrupted") || !strings.Contains(cout, "cancelled: 1 step") {
		t.Fatalf("cancel: exit %d\nstdout:\n%s\nstderr:\n%s", code, cout, cerr)
	}
	err := cmd.Wait()
	if cmd.ProcessState.ExitCode() != cli.ExitRunFailed || !strings.Contains(out.String(), "--continue "+id) || !strings.Contains(errb.String(), "was cancelled by") {
		t.Fatalf("the cancelled process: %v, exit %d\nstdout:\n%s\nstderr:\n%s", err, cmd.ProcessState.ExitCode(), out.String(), errb.String())
	}
	// The write may or may not have happened: continuing asks.
	code, cout, _ = run(t, "run", app, "--state-dir", state, "--continue", id)
	if code != cli.ExitPaused || !strings.Contains(cout, "is waiting for a decision (its process died during the call") {
		t.Fatalf("continue: exit %d\n%s", code, cout)
	}
	// A paused run is cancelled by the command itself; a cancelled one is
	// not cancelled again but shown; unknown runs and wrong flags are
	// usage errors.
	code, cout, _ = run(t, "run", app, "--state-dir", state, "--cancel", id)
	if code != cli.ExitOK || !strings.Contains(cout, "cancelled run "+id) {
		t.Fatalf("cancel of a paused run: exit %d\n%s", code, cout)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--cancel", "run_nobody"}, "no run run_nobody in"},
		{[]string{"--cancel", id, "--steps", "1"}, "--steps does not go with --cancel"},
		{[]string{"--cancel", id, "--continue", id}, "give one of --resume, --recover, --continue and --cancel"},
		{[]string{"--cancel", id, "hello"}, "takes the application file only"},
	} {
		code, _, errOut := run(t, append([]string{"run", app, "--state-dir", state}, tt.args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tt.args, code, errOut, tt.want)
		}
	}
}

// TestRunApprovalPolicy runs an app whose approval policy denies large
// refunds and asks about the rest: the denial and its reason are printed,
// the pause names the rule, an approval for the thread is kept, and the
// thread's next run does not ask.
func TestRunApprovalPolicy(t *testing.T) {
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"desk": [
			{"toolCalls": [{"name": "refund", "arguments": {"order": "A1", "amount_usd": 900}}, {"name": "refund", "arguments": {"order": "A2", "amount_usd": 30}}]},
			{"text": "Refunded A2."}]}}`,
		"refund.json": `[{"args": {"order": "A2", "amount_usd": 30}, "result": "refunded A2"}]`,
		"app.cue": `name: "desk"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: refund: {description: "Refund.", effects: "write", implementation: {kind: "fixture", file: "refund.json"}, input: {type: "object", properties: {order: type: "string", amount_usd: type: "number"}}}
agents: desk: {model: "small", instructions: "Refund.", tools: ["refund"]}
approvals: rules: [
	{tool: "refund", when: "args.amount_usd > 500", action: "deny", reason: "refunds above 500 USD go through finance"},
	{tool: "refund", action: "ask", reason: "refunds move money"},
]
`,
	})
	state := filepath.Join(dir, "runs")
	code, out, errOut := run(t, "run", app, "--state-dir", state, "--thread", "th-1", "refund both")
	m := resumeID.FindStringSubmatch(out)
	if code != cli.ExitPaused || m == nil {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"error (denied): the approval policy denies this call (rule 1): refunds above 500 USD go through finance",
		"is waiting for approval of desk's call (approval rule 2: refunds move money)",
		"--scope run or thread approves refund",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("stdout:\n%s", out)
	}
	code, out, _ = run(t, "run", app, "--state-dir", state, "--resume", m[1], "--approve", "--scope", "thread")
	if code != cli.ExitOK || !strings.Contains(out, "for the thread") {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	code, out, errOut = run(t, "run", app, "--state-dir", state, "--thread", "th-1", "refund both again")
	if code != cli.ExitOK || !strings.Contains(out, "✓ allowed by ") || !strings.Contains(out, "grant for the thread (approval rule 2: refunds move money)") {
		t.Fatalf("the thread's next run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--scope", "run", "hi"}, "use it with --resume RUN_ID --approve"},
		{[]string{"--resume", m[1], "--approve", "--scope", "forever"}, "--scope is call, run or thread"},
		{[]string{"--resume", m[1], "--reject", "--scope", "run"}, "a rejection is for the call"},
	} {
		code, _, errOut := run(t, append([]string{"run", app, "--state-dir", state}, tt.args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tt.args, code, errOut, tt.want)
		}
	}
}

// TestRecordAndReplaySupportDesk records the README's refund with aidgen
// run --record (paused, then resumed in another process), replays it
// against the example (identical, exit 0), then against a copy whose
// billing prompt changed: it diverges at step 3, billing's first, with a
// diff of the prompt (exit 1).
func TestRecordAndReplaySupportDesk(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	state, paused, done := filepath.Join(dir, "runs"), filepath.Join(dir, "paused.jsonl"), filepath.Join(dir, "done.jsonl")
	id, _ := startRefund(t, state, "--record", paused)
	code, out, errOut := runProcess(t, "run", supportDesk, "--state-dir", state, "--resume", id, "--approve", "--record", done)
	if code != cli.ExitOK {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	// The paused recording replays up to its pause.
	code, out, errOut = run(t, "replay", paused)
	if code != cli.ExitOK || !strings.Contains(out, "identical: 7 model calls, 4 tool calls, 0 decisions replayed, ending paused") {
		t.Fatalf("replay of the paused run: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = run(t, "replay", done)
	if code != cli.ExitOK || !strings.Contains(out, "replaying run "+id+" (support-desk 0.1.0, recorded completed) against "+supportDesk) ||
		// The decision is named by who made it: here the login name
		// aidgen run recorded; on a service, the key.
		!strings.Contains(out, "identical: 8 model calls, 5 tool calls, 1 decision (by ") || !strings.Contains(out, ") replayed, ending completed") {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errOut)
	}
	// A copy of the example whose billing prompt changed.
	changed := filepath.Join(dir, "desk")
	if err := os.CopyFS(changed, os.DirFS(filepath.Dir(supportDesk))); err != nil {
		t.Fatal(err)
	}
	prompt := filepath.Join(changed, "prompts", "billing.md")
	b, err := os.ReadFile(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(prompt, append(b, "Always thank the customer first.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, _ = run(t, "replay", done, filepath.Join(changed, "app.cue"))
	if code != cli.ExitDiverged || !strings.Contains(out, "diverged at step 3 (billing): request: the model request of step 3 differs from the recorded one") ||
		!strings.Contains(out, "the cached prefix moves at step 3, in the system") ||
		!strings.Contains(out, "+    Always thank the customer first.") || !strings.Contains(out, "replayed as recorded before it: 2 model calls") {
		t.Fatalf("replay of a changed prompt: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "replay", "--json", done, filepath.Join(changed, "app.cue"))
	var rep agents.ReplayReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != cli.ExitDiverged || rep.Divergence == nil || rep.Divergence.Step != 3 || rep.Divergence.Kind != agents.DivergeRequest || rep.Divergence.Prefix != agents.PrefixSystem {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"replay"}, "usage: aidgen replay FILE [APP]"},
		{[]string{"replay", filepath.Join(dir, "nope.jsonl")}, "reading the recording"},
		{[]string{"replay", supportDesk}, "event log line 1"},
	} {
		code, _, errOut := run(t, tt.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tt.args, code, errOut, tt.want)
		}
	}
}
