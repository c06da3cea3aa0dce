package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
)

// TestEvalFromRunStore: --from-runs with a postgres:// DSN reads the
// runs the run store holds; --runs-tenant keeps one tenant's; a redaction
// pattern never reaches the dataset file; --runs-tenant with a file of
// event logs is refused, a log recording no tenant.
func TestEvalFromRunStore(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := pgstore.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for i, tenant := range []string{"acme", "globex", "acme"} {
		id := fmt.Sprintf("run_%032x", i+1)
		input := fmt.Sprintf("Where is order %d? Mail me at user%d@example.com", i, i)
		cp := agents.Checkpoint{
			Version: agents.CheckpointVersion, RunID: id, Agent: "desk", Path: []string{"desk"}, Tenant: tenant,
			Messages: []agents.SavedMessage{{Role: "user", Content: input}},
			Steps:    []agents.StepRecord{{Number: 1, Agent: "desk", Text: "echo: " + input}},
		}
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "desk", Status: agents.StatusCompleted, Checkpoint: cp}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(`name: "traffic"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0}
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0.0001, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
agents: desk: {model: "m", instructions: "Answer the customer."}
evals: lastweek: {
	dataset: "placeholder.jsonl"
	target: {model: "m", prompt: "{{.Input}}"}
	metrics: ["exact_match"]
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "placeholder.jsonl"), []byte(`{"id": "x", "input": "x", "expected": "x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ds := filepath.Join(dir, "acme.jsonl")
	code, out, errOut := run(t, "eval", "--progress", "none", "--from-runs", dsn, "--runs-tenant", "acme",
		"--redact", `[a-z0-9.]+@[a-z0-9.]+\.[a-z]+`, "--dataset-out", ds, path)
	if code != 0 || !strings.Contains(out, "2 cases") {
		t.Fatalf("acme's runs: exit %d\n%s%s", code, out, errOut)
	}
	data, err := os.ReadFile(ds)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("@example.com")) {
		t.Errorf("a redacted pattern reached the dataset file:\n%s", data)
	}
	if !bytes.Contains(data, []byte(`"input":"Where is order 2? Mail me at [redacted]"`)) || bytes.Contains(data, []byte("order 1?")) {
		t.Errorf("the dataset is not acme's two runs, redacted:\n%s", data)
	}
	if code, out, _ := run(t, "eval", "--progress", "none", "--from-runs", dsn, path); code != 0 || !strings.Contains(out, "3 cases") {
		t.Errorf("every tenant's runs: exit %d\n%s", code, out)
	}
	if code, _, errOut := run(t, "eval", "--from-runs", ds, "--runs-tenant", "acme", path); code != 2 || !strings.Contains(errOut, "--runs-tenant applies with --from-runs postgres://") {
		t.Errorf("--runs-tenant on a file: exit %d\n%s", code, errOut)
	}
}
