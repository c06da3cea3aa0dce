package cli_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
)

const refundMessage = "I want a refund for order AB-123456"

var resumeID = regexp.MustCompile(`--resume (run_[0-9a-f]+) --approve`)

// startRefund runs the README's support-desk command with state in dir and
// returns the paused run's id, checking what the first process prints.
func startRefund(t *testing.T, dir string, extra ...string) (string, string) {
	t.Helper()
	args := append([]string{"run", supportDesk, "--state-dir", dir}, extra...)
	code, out, errOut := run(t, append(args, refundMessage)...)
	if code != cli.ExitPaused {
		t.Fatalf("exit %d, want %d (paused)\nstdout:\n%s\nstderr:\n%s", code, cli.ExitPaused, out, errOut)
	}
	m := resumeID.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no resume command in:\n%s", out)
	}
	return m[1], out
}

// TestRunSupportDesk is the README's walkthrough: on the keyless fake, the
// triage agent looks the order up, hands off to billing, which delegates to
// the researcher (whose searches find the ingested docs), fetches the
// invoice and pauses on the refund; a second process approves it and the
// run completes; a third finds nothing left to resume.
func TestRunSupportDesk(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	id, out := startRefund(t, dir, "--agent", "triage")
	for _, want := range []string{
		"step 1 · triage · large",
		`lookup_order {"order_id":"AB-123456"}`,
		`"status":"delivered"`,
		"→ billing",
		"delegate to researcher: What does the help centre say about refunds",
		"    step 1 · researcher · small",
		"search_kb {",
		"docs/refunds.md#Refunds",
		"researcher completed: 2 steps",
		"get_invoice",
		"issue_refund {",
		"⏸ waiting for a decision",
		"is waiting for approval of billing's call",
		`"amount_usd": 59.90`,
		"aidgen run " + supportDesk + " --state-dir " + dir + " --resume " + id + " --approve",
		"--resume " + id + " --reject --feedback",
		"paused: 5 steps",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("first run's stdout lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("stdout:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, id+".json")); err != nil {
		t.Fatalf("the paused run is not in the state directory: %v", err)
	}

	// A second process: nothing shared with the first but the directory.
	code, out, errOut := runProcess(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--approve")
	if code != cli.ExitOK {
		t.Fatalf("resume: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"resuming run " + id + " on billing: approved issue_refund",
		"step 5 · billing",
		"✓ approved by a person",
		`"refund_id":"RF-0001"`,
		"answer (billing):\n{\"answer\":\"I have refunded 59.90 USD",
		"completed: 6 steps",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("resume's stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "step 4 ·") {
		t.Errorf("the resume printed the steps the first run printed:\n%s", out)
	}

	code, _, errOut = run(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--approve")
	if code != cli.ExitUsage || !strings.Contains(errOut, "is completed, not paused") {
		t.Fatalf("second resume: exit %d, stderr %q; want %d and \"is completed, not paused\"", code, errOut, cli.ExitUsage)
	}
}

// TestRunHelperProcess runs aidgen in a process of its own for the tests
// that need one; it does nothing in a normal test run.
func TestRunHelperProcess(t *testing.T) {
	args := os.Getenv("AIDGEN_TEST_ARGS")
	if args == "" {
		return
	}
	os.Exit(cli.Main(strings.Split(args, "\x1f"), os.Stdin, os.Stdout, os.Stderr))
}

// runProcess runs aidgen in another process, from the working directory.
func runProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunHelperProcess$")
	cmd.Env = append(os.Environ(), "AIDGEN_TEST_ARGS="+strings.Join(args, "\x1f"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

// TestRunReject rejects the refund with feedback: the call does not run,
// the model is told why, and the run still completes. --agent is left out:
// the application's service.entry is triage.
func TestRunReject(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	id, _ := startRefund(t, dir)
	// A paused run is decided, not recovered.
	if code, _, errOut := run(t, "run", supportDesk, "--state-dir", dir, "--recover", id); code != cli.ExitUsage || !strings.Contains(errOut, "is paused, not running: nothing to recover") {
		t.Fatalf("recover of a paused run: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := run(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--reject", "--feedback", "store credit only", "--json")
	if code != cli.ExitOK {
		t.Fatalf("reject: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var res struct {
		Status agents.Status       `json:"status"`
		Steps  []agents.StepRecord `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	refund := res.Steps[4].ToolCalls[0]
	if res.Status != agents.StatusCompleted || refund.Name != "issue_refund" || refund.ErrorKind != agents.KindRejected ||
		refund.Approval == nil || refund.Approval.Approved || refund.Approval.Feedback != "store credit only" || !strings.Contains(refund.Observation, "store credit only") {
		t.Fatalf("status %s, refund call %+v", res.Status, refund)
	}
}

// TestRunApproveEditedArguments approves the refund with other arguments:
// they are what runs (here no fixture row matches them, so the tool says
// so), and the model's are kept beside them.
func TestRunApproveEditedArguments(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	id, _ := startRefund(t, dir)
	edited := `{"order_id": "AB-123456", "amount_usd": 10, "reason": "partial"}`
	code, out, errOut := run(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--approve", "--arguments", edited)
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{
		`issue_refund {"order_id":"AB-123456","amount_usd":10,"reason":"partial"}`,
		`✓ approved with edited arguments (the model wrote {"order_id":"AB-123456","amount_usd":59.90,`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// TestRunApproveInvalidArguments approves the refund with arguments its
// schema refuses: exit 2 with the schema's complaint, nothing runs, and the
// run is still paused for a decision that fits.
func TestRunApproveInvalidArguments(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	id, _ := startRefund(t, dir)
	code, out, errOut := run(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--approve", "--arguments", `{"order_id": "AB-123456", "amount_usd": "all of it"}`)
	want := "run " + id + ": the edited arguments do not match the input schema of tool issue_refund: at /amount_usd: got string, want number; missing property 'reason'; the run is still paused and can be decided again"
	if code != cli.ExitUsage || !strings.Contains(errOut, want) || out != "" {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stderr %q", code, out, errOut, want)
	}
	code, out, errOut = run(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--reject", "--feedback", "no")
	if code != cli.ExitOK {
		t.Fatalf("the run was not left paused: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// TestRunJSON checks --json on a pause and on the resume: one object with
// the run's fields, the pending call and the commands that decide it.
func TestRunJSON(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	code, out, errOut := run(t, "run", supportDesk, "--state-dir", dir, "--json", refundMessage)
	if code != cli.ExitPaused {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var paused struct {
		RunID   string              `json:"run_id"`
		Status  agents.Status       `json:"status"`
		Agent   string              `json:"agent"`
		Path    []string            `json:"path"`
		Steps   []agents.StepRecord `json:"steps"`
		CostUSD float64             `json:"cost_usd"`
		Usage   struct {
			TotalTokens int64 `json:"total_tokens"`
		} `json:"usage"`
		Messages []agents.SavedMessage `json:"messages"`
		Pending  struct {
			Tool      string `json:"tool"`
			Arguments string `json:"arguments"`
			Reason    string `json:"reason"`
			Approve   string `json:"approve_command"`
		} `json:"pending"`
		Checkpoint *agents.Checkpoint `json:"checkpoint"`
	}
	if err := json.Unmarshal([]byte(out), &paused); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	if paused.Status != agents.StatusPaused || paused.Agent != "billing" || strings.Join(paused.Path, ">") != "triage>billing" ||
		len(paused.Steps) != 4 || paused.CostUSD <= 0 || paused.Usage.TotalTokens <= 0 || len(paused.Messages) == 0 ||
		paused.Pending.Tool != "issue_refund" || paused.Pending.Reason != "approval" || !strings.Contains(paused.Pending.Arguments, "59.90") ||
		paused.Pending.Approve != "aidgen run "+supportDesk+" --state-dir "+dir+" --resume "+paused.RunID+" --approve" ||
		paused.Checkpoint == nil || paused.Checkpoint.RunID != paused.RunID {
		t.Fatalf("paused run as JSON:\n%s", out)
	}
	if d := paused.Steps[2].ToolCalls[0].Delegate; d == nil || d.Agent != "researcher" || len(d.Steps) != 2 {
		t.Fatalf("delegation as JSON: %+v", d)
	}

	code, out, errOut = run(t, "run", supportDesk, "--state-dir", dir, "--resume", paused.RunID, "--approve", "--json")
	if code != cli.ExitOK {
		t.Fatalf("resume: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	var done map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &done); err != nil {
		t.Fatalf("--json output does not parse: %v\n%s", err, out)
	}
	var answer struct {
		Refunded bool `json:"refunded"`
	}
	var text string
	if err := json.Unmarshal(done["answer"], &text); err != nil || json.Unmarshal([]byte(text), &answer) != nil || !answer.Refunded {
		t.Fatalf("answer %s", done["answer"])
	}
	for _, absent := range []string{"pending", "checkpoint", "error"} {
		if _, ok := done[absent]; ok {
			t.Errorf("a completed run's JSON has %q", absent)
		}
	}
	if string(done["status"]) != `"completed"` {
		t.Errorf("status %s", done["status"])
	}
}

// TestRunFails runs an agent that uses all its steps without answering:
// the steps taken are printed, the exit is 1 and the error names the bound.
func TestRunFails(t *testing.T) {
	dir := t.TempDir()
	app := writeLoopApp(t, dir)
	code, out, errOut := run(t, "run", app, "--state-dir", filepath.Join(dir, "runs"), "hello")
	if code != cli.ExitRunFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, cli.ExitRunFailed, out, errOut)
	}
	if !strings.Contains(out, "step 2 · looper") || !strings.Contains(out, "max_steps: 2 steps") || !strings.Contains(errOut, "reached its 2 steps without a final answer") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", out, errOut)
	}
	code, out, _ = run(t, "run", app, "--state-dir", filepath.Join(dir, "runs"), "--json", "hello")
	var res struct {
		Status agents.Status `json:"status"`
		Error  string        `json:"error"`
	}
	if code != cli.ExitRunFailed || json.Unmarshal([]byte(out), &res) != nil || res.Status != agents.StatusMaxSteps || !strings.Contains(res.Error, "without a final answer") {
		t.Fatalf("--json of a failed run: exit %d\n%s", code, out)
	}
}

// writeLoopApp writes an application whose only agent calls a tool at
// every step and has two steps.
func writeLoopApp(t *testing.T, dir string) string {
	t.Helper()
	files := map[string]string{
		"script.json": `{"agents": {"looper": [{"toolCalls": [{"name": "ping", "arguments": {}}]}, {"toolCalls": [{"name": "ping", "arguments": {}}]}]}}`,
		"ping.json":   `[{"args": {}, "result": "pong"}]`,
		"app.cue": `name: "looper"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: ping: {description: "Ping.", implementation: {kind: "fixture", file: "ping.json"}, input: {type: "object"}}
agents: looper: {model: "small", instructions: "Ping forever.", tools: ["ping"], maxSteps: 2}
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "app.cue")
}

func TestRunUsageErrors(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	pgApp := postgresDesk(t, "AID_RUN_TEST_UNSET_DSN")
	sd := []string{"--state-dir", dir}
	tests := []struct {
		name     string
		args     []string
		inStderr string
	}{
		{"no arguments", nil, "needs an application file and a message"},
		{"no message", []string{supportDesk}, "needs a message"},
		{"unquoted message", []string{supportDesk, "I", "want"}, `quote it: aidgen run examples/support-desk/app.cue "I want"`},
		{"decision without resume", []string{supportDesk, "--approve", "hi"}, "--approve decides a paused run"},
		{"feedback without resume", []string{supportDesk, "--feedback", "x", "hi"}, "--feedback decides a paused run"},
		{"resume without decision", []string{supportDesk, "--resume", "run_1"}, "exactly one of --approve and --reject"},
		{"resume with both decisions", []string{supportDesk, "--resume", "run_1", "--approve", "--reject"}, "exactly one of --approve and --reject"},
		{"resume with a message", []string{supportDesk, "--resume", "run_1", "--approve", "hi"}, "a resume takes the application file only"},
		{"resume changes the agent", []string{supportDesk, "--resume", "run_1", "--approve", "--agent", "tech"}, "--agent cannot change a run that has started"},
		{"edited arguments are not JSON", []string{supportDesk, "--resume", "run_1", "--approve", "--arguments", "{nope"}, "--arguments is not valid JSON"},
		{"edited arguments on a rejection", []string{supportDesk, "--resume", "run_1", "--reject", "--arguments", "{}"}, "a rejected call does not run"},
		{"resume and recover", []string{supportDesk, "--resume", "run_1", "--recover", "run_1"}, "not both"},
		{"unknown agent", append([]string{supportDesk, "--agent", "nobody", "hi"}, sd...), `has no agent "nobody"; agents: billing, researcher, tech, triage`},
		{"unknown run", append([]string{supportDesk, "--resume", "run_nobody", "--approve"}, sd...), "no run run_nobody in " + dir},
		{"unknown run to recover", append([]string{supportDesk, "--recover", "run_nobody"}, sd...), "no run run_nobody in " + dir},
		{"invalid application", append([]string{"testdata/cases/unknown-alias/app.cue", "hi"}, sd...), "not a valid application"},
		{"missing file", append([]string{"nope.cue", "hi"}, sd...), "no such file"},
		{"state dir for a postgres application", append([]string{pgApp, "hi"}, sd...), "--state-dir applies to applications whose state is in memory"},
		{"postgres without its DSN", []string{pgApp, "hi"}, "AID_RUN_TEST_UNSET_DSN is not set"},
		{"empty user", append([]string{supportDesk, "--user", "", "hi"}, sd...), "--user cannot be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"run"}, tt.args...)...)
			if code != cli.ExitUsage || !strings.Contains(errOut, tt.inStderr) {
				t.Fatalf("exit %d, want %d; stderr lacks %q:\n%s\nstdout:\n%s", code, cli.ExitUsage, tt.inStderr, errOut, out)
			}
		})
	}
}

// TestRunPostgresState runs the support desk with its state in PostgreSQL:
// the pause is kept in the database, and another process resumes it there.
func TestRunPostgresState(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	chdirRoot(t)
	app := postgresDesk(t, "AID_RUN_TEST_DSN")
	t.Setenv("AID_RUN_TEST_DSN", dsn)
	code, out, errOut := run(t, "run", app, refundMessage)
	if code != cli.ExitPaused || !strings.Contains(out, "run state: PostgreSQL ($AID_RUN_TEST_DSN)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	id := resumeID.FindStringSubmatch(out)[1]
	if strings.Contains(out, "--state-dir") {
		t.Errorf("the resume command of a postgres run names a state directory:\n%s", out)
	}
	code, out, errOut = runProcess(t, "run", app, "--resume", id, "--approve")
	if code != cli.ExitOK || !strings.Contains(out, `"refund_id":"RF-0001"`) {
		t.Fatalf("resume: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

// postgresDesk copies the support desk to a temporary directory with its
// state in PostgreSQL, at the DSN in the environment variable dsnEnv.
func postgresDesk(t *testing.T, dsnEnv string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "support-desk")
	if err := os.CopyFS(dir, os.DirFS(filepath.Dir(supportDesk))); err != nil {
		t.Fatal(err)
	}
	app := filepath.Join(dir, "app.cue")
	f, err := os.OpenFile(app, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("\nservice: state: {kind: \"postgres\", dsnEnv: \"" + dsnEnv + "\"}\n"); err != nil {
		t.Fatal(err)
	}
	return app
}

// TestRunDefaultStateDir checks where runs go without --state-dir:
// $AID_STATE_DIR, else $XDG_STATE_HOME/aid/runs/APP; the resume command
// then needs no --state-dir.
func TestRunDefaultStateDir(t *testing.T) {
	chdirRoot(t)
	for _, tt := range []struct {
		env string
		dir func(string) string
	}{
		{cli.RunStateDirEnv, func(d string) string { return d }},
		{"XDG_STATE_HOME", func(d string) string { return filepath.Join(d, "aid", "runs", "support-desk") }},
	} {
		t.Run(tt.env, func(t *testing.T) {
			base := t.TempDir()
			t.Setenv(cli.RunStateDirEnv, "")
			t.Setenv(tt.env, base)
			code, out, errOut := run(t, "run", supportDesk, refundMessage)
			if code != cli.ExitPaused {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
			}
			id := resumeID.FindStringSubmatch(out)[1]
			if !strings.Contains(out, "aidgen run "+supportDesk+" --resume "+id+" --approve") || !strings.Contains(out, "run state: "+tt.dir(base)) {
				t.Fatalf("stdout:\n%s", out)
			}
			if _, err := os.Stat(filepath.Join(tt.dir(base), id+".json")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRunConcurrentResumes has several processes approve the same pause at
// once: exactly one runs the refund and completes; the others run nothing
// and say why.
func TestRunConcurrentResumes(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	id, _ := startRefund(t, dir)
	const n = 4
	type result struct {
		code     int
		out, err string
	}
	results := make(chan result, n)
	for range n {
		go func() {
			code, out, errOut := runProcess(t, "run", supportDesk, "--state-dir", dir, "--resume", id, "--approve")
			results <- result{code, out, errOut}
		}()
	}
	wins := 0
	for range n {
		r := <-results
		switch {
		case r.code == cli.ExitOK && strings.Contains(r.out, `"refund_id":"RF-0001"`):
			wins++
		case r.code == cli.ExitUsage && (strings.Contains(r.err, "resumed by another process first") || strings.Contains(r.err, "not paused")):
			if strings.Contains(r.out, "RF-0001") {
				t.Errorf("a losing process ran the refund:\n%s", r.out)
			}
		default:
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d processes completed the run, want 1", wins)
	}
	data, err := os.ReadFile(filepath.Join(dir, id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(string(data), `"tool": "issue_refund"`); c != 1 {
		t.Fatalf("the refund call is recorded %d times, want 1", c)
	}
}
