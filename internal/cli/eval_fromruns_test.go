package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalFromRuns is the CI pattern a dataset from recorded runs serves:
// 200 runs recorded with aidgen run --record become the cases (input, the
// recorded answer as the expected value), a declared redaction pattern
// never reaching the dataset file; the baseline recorded on them passes
// the unchanged application and a changed prompt fails the gate.
func TestEvalFromRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The fake echoes the last user message: the agent's recorded answer
	// is "echo: <input>", and the eval's model target answers
	// "echo: <prompt>", so the prompt decides whether it still agrees.
	app := func(prompt string) string {
		return write("app.cue", `name: "traffic"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0}
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0.0001, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
agents: desk: {model: "m", instructions: "Answer the customer."}
evals: lastweek: {
	dataset: "placeholder.jsonl"
	target: {model: "m", prompt: "`+prompt+`"}
	runs: 2
	metrics: ["exact_match"]
	baseline: "baseline.json"
	thresholds: [{metric: "exact_match", maxRegression: 0.1}]
}
`)
	}
	// placeholder.jsonl does not exist: --from-runs replaces the dataset.
	path := app("{{.Input}}")
	var all bytes.Buffer
	for i := range 200 {
		rec := filepath.Join(dir, fmt.Sprintf("run-%d.jsonl", i))
		input := fmt.Sprintf("Where is order %d? Mail me at user%d@example.com", i, i)
		if code, out, errOut := run(t, "run", path, "--agent", "desk", "--state-dir", filepath.Join(dir, "state"), "--record", rec, input); code != 0 {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out, errOut)
		}
		b, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	runs := write("runs.jsonl", all.String())
	ds := filepath.Join(dir, "lastweek.jsonl")
	from := []string{"eval", "--progress", "none", "--from-runs", runs, "--runs-agent", "desk", "--redact", `[a-z0-9.]+@[a-z0-9.]+\.[a-z]+`}

	code, out, errOut := run(t, append(from, "--dataset-out", ds, "--update-baseline", path)...)
	if code != 0 || !strings.Contains(out, "200 cases × 2 runs") {
		t.Fatalf("baseline from 200 runs: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(ds)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n != 200 {
		t.Errorf("the dataset file has %d cases, want 200", n)
	}
	if bytes.Contains(data, []byte("@example.com")) || bytes.Contains(data, []byte("user7@")) {
		t.Error("a redacted pattern reached the dataset file")
	}
	if !bytes.Contains(data, []byte(`"input":"Where is order 7? Mail me at [redacted]","expected":"echo: Where is order 7? Mail me at [redacted]"`)) {
		t.Errorf("the dataset does not hold the redacted input and recorded answer:\n%.600s", data)
	}
	if base, _ := os.ReadFile(filepath.Join(dir, "baseline.json")); bytes.Contains(base, []byte("@example.com")) {
		t.Error("a redacted pattern reached the baseline")
	}

	if code, out, errOut := run(t, append(from, path)...); code != 0 || !strings.Contains(out, "verdict: pass") {
		t.Errorf("the unchanged application: exit %d, want a pass\n%s%s", code, out, errOut)
	}
	path = app("Please help: {{.Input}}")
	if code, out, errOut := run(t, append(from, path)...); code != 1 || !strings.Contains(out, "verdict: regression") {
		t.Errorf("a changed prompt: exit %d, want a regression\n%s%s", code, out, errOut)
	}
	if code, out, errOut := run(t, append(from, "--runs-sample", "50", "--seed", "3", path)...); code != 1 || !strings.Contains(out, "50 cases × 2 runs") {
		t.Errorf("a sample of 50: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := run(t, append(from, "--runs-status", "failed", path)...); code != 2 || !strings.Contains(errOut, "no recorded run of 200 passes the filters (dropped 200 by status)") {
		t.Errorf("no run passing: exit %d\n%s", code, errOut)
	}
}
