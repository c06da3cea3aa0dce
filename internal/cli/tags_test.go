package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
)

// devProdApp is one app file for dev (a keyless fake playing a script) and
// prod (an OpenAI-compatible endpoint), chosen with -t env=prod.
const devProdApp = `name:    "desk"
version: "0.1.0"
_env: *"dev" | "prod" @tag(env,short=dev|prod)
if _env == "dev" {
	providers: main: {kind: "fake", seed: 1, script: "script.json"}
}
if _env == "prod" {
	providers: main: {kind: "openai-compatible", baseURL: "https://llm.example.com/v1", apiKeyEnv: "DESK_LLM_KEY"}
}
models: "m-2024-01-01": {
	provider:        "main"
	contextWindow:   4096
	maxOutputTokens: 256
	cost: inputPer1kUSD: 0
}
aliases: m: "m-2024-01-01"
agents: desk: {model: "m", instructions: "Answer."}
`

const devProdScript = `{"agents": {"desk": [{"answer": true, "text": "hello from the dev fake"}]}}`

func writeDevProd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"app.cue": devProdApp, "script.json": devProdScript} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "app.cue")
}

// TestInjectTags: every command that reads an app file takes -t, and a tag
// the file cannot take is a usage error (exit 2) that names the tags it
// can.
func TestInjectTags(t *testing.T) {
	app := writeDevProd(t)
	for _, args := range [][]string{
		{"vet", app},
		{"vet", "-t", "env=prod", app},
		{"vet", "--inject", "prod", app},
	} {
		if code, _, errOut := run(t, args...); code != cli.ExitOK {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	for _, verb := range []string{"vet", "run", "eval", "index", "build"} {
		args := []string{verb, "-t", "region=eu", app}
		switch verb {
		case "run":
			args = append(args, "hello")
		case "build":
			args = append(args, "-o", t.TempDir())
		}
		code, _, errOut := run(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, "-t region=eu: no field of the app file is marked @tag(region); the file's tags are: env") {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming the tag and the file's tags", args, code, errOut)
		}
	}
	code, _, errOut := run(t, "search", "-t", "env=staging", app, "kb", "q")
	if code != cli.ExitUsage || !strings.Contains(errOut, `-t env=staging: the field allows *"dev" | "prod", and "staging" is not one of them`) {
		t.Errorf("search -t env=staging: exit %d, stderr %q", code, errOut)
	}
}

// TestInjectTagsChooseTheProvider: the dev variant runs on the fake, and
// the prod variant builds a service whose description names the
// OpenAI-compatible endpoint.
func TestInjectTagsChooseTheProvider(t *testing.T) {
	app := writeDevProd(t)
	code, out, errOut := run(t, "run", "--state-dir", t.TempDir(), app, "hi")
	if code != cli.ExitOK || !strings.Contains(out, "hello from the dev fake") {
		t.Fatalf("run (dev): exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, tc := range []struct {
		tags       []string
		want, lose string
	}{
		{nil, "script.json", "llm.example.com"},
		{[]string{"-t", "env=prod"}, "https://llm.example.com/v1", "script.json"},
	} {
		dir := t.TempDir()
		args := append(append([]string{"build"}, tc.tags...), app, "-o", dir, "--no-replace")
		if code, _, errOut := run(t, args...); code != cli.ExitOK {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errOut)
		}
		gen, err := os.ReadFile(filepath.Join(dir, "aid_gen.go"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(gen), tc.want) || strings.Contains(string(gen), tc.lose) {
			t.Errorf("%v: aid_gen.go should hold %q and not %q:\n%s", args, tc.want, tc.lose, gen)
		}
	}
}

// TestRunCommandsKeepTheTags: the commands aidgen run prints to continue,
// resume or decide a run carry the -t tags the run was started with, since
// a tag may choose where runs are kept or what the agents are; the printed
// command, run as printed, finds the run.
func TestRunCommandsKeepTheTags(t *testing.T) {
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"looper": [{"toolCalls": [{"name": "ping", "arguments": {}}]}, {"toolCalls": [{"name": "ping", "arguments": {}}]}, {"text": "pong"}]}}`,
		"ping.json":   `[{"args": {}, "result": "pong"}]`,
		"app.cue": `name: "looper"
version: "0.1.0"
_steps: *8 | int @tag(steps,type=int)
_note: *"plain" | string @tag(note)
_approval: *"never" | "always" @tag(approval)
providers: fake: {kind: "fake", script: "script.json"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
aliases: small: "fake-chat-2024-06-01"
tools: ping: {description: "Ping.", implementation: {kind: "fixture", file: "ping.json"}, input: {type: "object"}, approval: _approval}
agents: looper: {model: "small", instructions: "Ping (\(_note)).", tools: ["ping"], maxSteps: _steps}
`,
	})
	state := filepath.Join(dir, "runs")
	code, out, errOut := run(t, "run", "-t", "steps=1", "-t", "note=two words", app, "--state-dir", state, "hello")
	m := continueID.FindStringSubmatch(out)
	if code != cli.ExitRunFailed || m == nil {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	prefix := "aidgen run -t steps=1 -t 'note=two words' " + app + " --state-dir " + state
	if want := prefix + " --continue " + m[1]; !strings.Contains(out, want) {
		t.Fatalf("stdout lacks %q:\n%s", want, out)
	}
	code, out, errOut = run(t, "run", "-t", "steps=1", "-t", "note=two words", app, "--state-dir", state, "--json", "--continue", m[1])
	var res struct {
		Continue string `json:"continue_command"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != cli.ExitRunFailed {
		t.Fatalf("continue --json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errOut)
	}
	if want := prefix + " --continue " + m[1]; res.Continue != want {
		t.Fatalf("continue_command = %q, want %q", res.Continue, want)
	}

	code, out, errOut = run(t, "run", "-t", "approval=always", app, "--state-dir", state, "hello")
	p := resumeID.FindStringSubmatch(out)
	if code != cli.ExitPaused || p == nil {
		t.Fatalf("paused run: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	prefix = "aidgen run -t approval=always " + app + " --state-dir " + state + " --resume " + p[1]
	for _, want := range []string{prefix + " --approve", prefix + " --reject"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}
