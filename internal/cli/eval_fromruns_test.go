package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/internal/cli"
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
	placeholder := write("placeholder.jsonl", `{"id": "x", "input": "x", "expected": "x"}`+"\n")
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
	// The eval's dataset file is gone: --from-runs replaces it, so vet
	// must not ask for it.
	if err := os.Remove(placeholder); err != nil {
		t.Fatal(err)
	}
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

// TestEvalSourceRuns: an eval declares source: "runs" in app.cue, so its
// cases come from recorded runs with no flag and no dataset file, its
// declared redaction applied before the dataset file is written; its judge
// declares a calibration set, is measured on it when the baseline is
// written, gates with the baseline's calibration afterwards, and is refused
// below its floor.
func TestEvalSourceRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// The fake echoes the last user message, so the judge's reply ends with
	// the last "SCORE:" line of the answer it is shown: each labelled answer
	// says what the judge will answer, and the test knows its errors (one
	// miss among 12 passes, one among 12 fails).
	var labels strings.Builder
	for i := range 24 {
		pass, score := i < 12, 0
		if pass != (i == 0 || i == 12) {
			score = 1
		}
		fmt.Fprintf(&labels, `{"input": "q%d", "answer": "a%d\nSCORE: %d", "pass": %v}`+"\n", i, i, score, pass)
	}
	write("labels.jsonl", labels.String())
	app := func(prompt string, floor float64) string {
		return write("app.cue", fmt.Sprintf(`name: "traffic"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0}
models: "fake-2024-01-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 1024, cost: inputPer1kUSD: 0.0001, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
agents: desk: {model: "m", instructions: "Answer the customer."}
evals: lastweek: {
	source: "runs"
	fromRuns: {file: "runs.jsonl", agent: "desk", redact: ["[a-z0-9.]+@[a-z0-9.]+\\.[a-z]+"]}
	target: {model: "m", prompt: %q}
	runs: 2
	metrics: ["exact_match", "llm_judge"]
	judge: {model: "m", rubric: "Score the answer.", calibration: {labels: "labels.jsonl", minYouden: %g}}
	baseline: "baseline.json"
	thresholds: [{metric: "exact_match", maxRegression: 0.1}, {metric: "llm_judge", maxRegression: 0.2}]
}
`, prompt, floor))
	}
	write("runs.jsonl", "") // vet asks for the file; the runs are recorded next
	path := app("{{.Input}}", 0.2)
	var all bytes.Buffer
	for i := range 30 {
		rec := filepath.Join(dir, fmt.Sprintf("run-%d.jsonl", i))
		input := fmt.Sprintf("Where is order %d? Mail me at user%d@example.com\nSCORE: 1", i, i)
		if code, out, errOut := run(t, "run", path, "--agent", "desk", "--state-dir", filepath.Join(dir, "state"), "--record", rec, input); code != 0 {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out, errOut)
		}
		b, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	write("runs.jsonl", all.String())
	ds := filepath.Join(dir, "lastweek.jsonl")
	code, out, errOut := run(t, "eval", "--progress", "none", "--dataset-out", ds, "--update-baseline", path)
	if code != 0 || !strings.Contains(out, "30 cases × 2 runs") || !strings.Contains(out, "judge calibration (measured on") {
		t.Fatalf("baseline from the declared runs: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(ds)
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join(dir, "baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"dataset": data, "baseline": base} {
		if bytes.Contains(b, []byte("@example.com")) {
			t.Errorf("a redacted pattern reached the %s file", name)
		}
	}
	if !bytes.Contains(base, []byte(`"truePositives": 11`)) || !bytes.Contains(base, []byte(`"trueNegatives": 11`)) {
		t.Errorf("the baseline does not keep the judge's calibration:\n%.2000s", base)
	}

	jsonOut := filepath.Join(dir, "report.json")
	code, out, errOut = run(t, "eval", "--progress", "none", "--json", jsonOut, path)
	if code == 2 || !strings.Contains(out, "judge calibration (the baseline's)") {
		t.Fatalf("the unchanged application: exit %d\n%s%s", code, out, errOut)
	}
	rep, err := os.ReadFile(jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(rep, []byte("Rogan–Gladen")) || !bytes.Contains(rep, []byte(`"youdenLower"`)) {
		t.Errorf("the report does not say the judge's gate is corrected:\n%.3000s", rep)
	}
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "..", cli.ReportSchemaPath))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(rep))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("the report with a calibrated judge does not match %s: %v", cli.ReportSchemaPath, err)
	}
	path = app("Please help: {{.Input}}", 0.2)
	if code, out, errOut := run(t, "eval", "--progress", "none", path); code != 1 || !strings.Contains(out, "verdict: regression") {
		t.Errorf("a changed prompt: exit %d, want a regression\n%s%s", code, out, errOut)
	}
	// A floor above what 24 labels can show refuses the judge.
	path = app("{{.Input}}", 0.5)
	if code, _, errOut := run(t, "eval", "--progress", "none", path); code != 2 || !strings.Contains(errOut, "below the floor 0.5") {
		t.Errorf("a judge below its floor: exit %d\n%s", code, errOut)
	}
	// Such an eval cannot be queued: the workers read dataset files.
	if code, _, errOut := run(t, "eval", "--progress", "none", "--queue", "postgres://nobody@127.0.0.1:1/x", path); code != 2 || !strings.Contains(errOut, "cannot go to --queue") {
		t.Errorf("queued: exit %d\n%s", code, errOut)
	}
}
