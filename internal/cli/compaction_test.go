package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/runtime/agents"
)

// TestRunShowsCompaction continues a thread run after run with --history
// until its agent compacts it: aidgen run prints the compaction before the
// step it made fit (and --json lists it), the summary keeps the facts the
// conversation marked, the next run starts from the summary, and aidgen
// replay replays the compacted run from its event log.
func TestRunShowsCompaction(t *testing.T) {
	dir := t.TempDir()
	app := writeAppFiles(t, dir, map[string]string{
		"script.json": `{"agents": {"desk": [{"text": "Noted."}]}}`,
		"app.cue": `name: "thread"
version: "0.1.0"
providers: fake: {kind: "fake", script: "script.json"}
models: "chat-2024-06-01": {provider: "fake", contextWindow: 1024, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.001, outputPer1kUSD: 0.002}, capabilities: ["tools"]}
models: "summ-2024-06-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 512, cost: {inputPer1kUSD: 0.0005, outputPer1kUSD: 0.001}, capabilities: ["tools"]}
aliases: {chat: "chat-2024-06-01", summ: "summ-2024-06-01"}
agents: desk: {model: "chat", instructions: "Take notes.", compaction: {model: "summ", keepTurns: 1}}
`,
	})
	state := filepath.Join(dir, "runs")
	input := func(i int) string {
		return fmt.Sprintf("FACT: code %d is X%03d.\nTurn %d. %s", i, i*7, i, strings.Repeat("Some words to fill the window. ", 8))
	}
	prev := ""
	turn := 0
	for i := 1; i <= 30 && turn == 0; i++ {
		args := []string{"run", app, "--state-dir", state, "--json"}
		if prev != "" {
			args = append(args, "--history", prev)
		}
		code, out, errOut := run(t, append(args, input(i))...)
		var res struct {
			Status      agents.Status             `json:"status"`
			Compactions []agents.CompactionRecord `json:"compactions"`
			Messages    []agents.SavedMessage     `json:"messages"`
		}
		if code != cli.ExitOK || json.Unmarshal([]byte(out), &res) != nil || res.Status != agents.StatusCompleted {
			t.Fatalf("turn %d: exit %d\n%s\n%s", i, code, out, errOut)
		}
		if len(res.Compactions) > 0 {
			c := res.Compactions[0]
			if c.Tier != agents.TierSummary || c.Before != 1 || c.Alias != "summ" || c.CostUSD <= 0 || !strings.Contains(c.Summary, "FACT: code 1 is X007.") {
				t.Fatalf("turn %d: compaction %+v", i, c)
			}
			if !strings.HasPrefix(res.Messages[0].Content, agents.SummaryPrefix) {
				t.Fatalf("turn %d: the thread starts with %.80q, not the summary", i, res.Messages[0].Content)
			}
			turn = i
			break
		}
		prev = filepath.Join(dir, fmt.Sprintf("turn%d.json", i))
		if err := os.WriteFile(prev, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if turn == 0 {
		t.Fatal("30 turns and no compaction")
	}

	// The same turn in text mode, recorded, then replayed.
	log := filepath.Join(dir, "compacted.jsonl")
	code, out, errOut := run(t, "run", app, "--state-dir", state, "--history", prev, "--record", log, input(turn))
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"compaction · summary · ", " · summ · $", "messages summarised", "summary: FACT: code 1 is X007.", "step 1 · desk"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "compaction ·") > strings.Index(out, "step 1 ·") {
		t.Errorf("the compaction is printed after the step it made fit:\n%s", out)
	}
	code, out, errOut = run(t, "replay", log, "--json")
	var rep agents.ReplayReport
	if code != cli.ExitOK || json.Unmarshal([]byte(out), &rep) != nil || rep.Divergence != nil || rep.ReplayStatus != agents.StatusCompleted {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, errOut)
	}

	// A history that is not an aidgen run's JSON is a usage error.
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`[1, 2]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, "run", app, "--state-dir", state, "--history", bad, "hi"); code != cli.ExitUsage || !strings.Contains(errOut, "is not the JSON of aidgen run --json") {
		t.Fatalf("bad history: exit %d\n%s", code, errOut)
	}
}
