package fromruns_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/eval/fromruns"
)

// record writes the event log of a completed run of agent on input whose
// one step called lookup (twice with the same arguments, once failing) and
// a delegate whose run called refund.
func record(t *testing.T, w *bytes.Buffer, id, agent, input string, at time.Time) {
	t.Helper()
	sub := agents.StepRecord{Number: 1, Agent: "helper", ToolCalls: []agents.ToolCallRecord{
		{ID: "c3", Name: "refund", Arguments: `{"card": "4111 1111 1111 1111"}`, Observation: "refunded to card 4111 1111 1111 1111"},
	}}
	step := agents.StepRecord{Number: 1, Agent: agent, ToolCalls: []agents.ToolCallRecord{
		{ID: "c1", Name: "lookup", Arguments: `{"q": 1.0}`, Observation: "found"},
		{ID: "c2", Name: "lookup", Arguments: `{"q":1}`, Observation: "found again"},
		{ID: "c4", Name: "lookup", Arguments: `{"q": 2}`, Observation: "error: tool lookup failed: down", ErrorKind: agents.KindToolFailed},
		{ID: "c5", Name: "delegate_to_helper", Arguments: `{"input": "refund"}`, Observation: "done", Delegate: &agents.DelegateRecord{Agent: "helper", Steps: []agents.StepRecord{sub}}},
	}}
	final := agents.StepRecord{Number: 2, Agent: agent, Text: "Refunded to 4111 1111 1111 1111."}
	rec := agents.RunRecord{RunID: id, Agent: agent, Status: agents.StatusCompleted, UpdatedAt: at, Checkpoint: agents.Checkpoint{
		RunID: id, Agent: agent, Path: []string{agent},
		Messages: []agents.SavedMessage{{Role: "user", Content: input}},
		Steps:    []agents.StepRecord{step, final},
	}}
	if err := agents.Record(w, rec, "app", "1", ""); err != nil {
		t.Fatal(err)
	}
}

// TestDataset: concatenated logs are read run by run; agent and time
// filters keep the runs they name; a case holds the run's input, answer
// and every call of a declared tool (a delegated run's included, each
// tool and arguments once, failures as errors, delegations left out); a
// card number declared for redaction is nowhere in the written dataset.
func TestDataset(t *testing.T) {
	day := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	record(t, &logs, "r1", "desk", "Refund card 4111 1111 1111 1111 please", day)
	record(t, &logs, "r2", "desk", "Second", day.Add(48*time.Hour))
	record(t, &logs, "r3", "other", "Third", day)
	recs, err := fromruns.Read("runs.jsonl", &logs)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("read %d runs, want 3", len(recs))
	}
	ds, err := fromruns.Dataset("d", recs, fromruns.Options{Agent: "desk", Until: day.Add(time.Hour),
		Redact: []*regexp.Regexp{regexp.MustCompile(`\d{4}( \d{4}){3}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Cases) != 1 || ds.Cases[0].ID != "r1" {
		t.Fatalf("cases %+v, want r1 alone", ds.Cases)
	}
	c := ds.Cases[0]
	if c.Input != "Refund card [redacted] please" || c.Expected != "Refunded to [redacted]." {
		t.Errorf("input %q, expected %q", c.Input, c.Expected)
	}
	got, _ := json.Marshal(c.Tools)
	want := `[{"tool":"lookup","args":{"q":1.0},"result":"found"},` +
		`{"tool":"lookup","args":{"q":2},"error":"tool lookup failed: down"},` +
		`{"tool":"refund","args":{"card":"[redacted]"},"result":"refunded to card [redacted]"}]`
	if string(got) != want {
		t.Errorf("tools\n got %s\nwant %s", got, want)
	}
	var out bytes.Buffer
	if err := fromruns.WriteJSONL(&out, ds); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "4111") {
		t.Errorf("the card number reached the dataset: %s", out.String())
	}
	back, err := eval.ParseDatasetJSONL("d.jsonl", out.Bytes())
	if err != nil || len(back.Cases) != 1 || len(back.Cases[0].Tools) != 3 {
		t.Fatalf("the written dataset reads back as %+v, %v", back, err)
	}
}

// TestDatasetTime: --runs-since keeps the runs last written at or after
// its time, --runs-until the runs before its own, both a window; a run
// with no recorded time is dropped by either, and the error when none is
// left says the time filter dropped them.
func TestDatasetTime(t *testing.T) {
	cut := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	var logs bytes.Buffer
	record(t, &logs, "before", "desk", "a", cut.Add(-time.Second))
	record(t, &logs, "at", "desk", "b", cut)
	record(t, &logs, "after", "desk", "c", cut.Add(time.Hour))
	record(t, &logs, "untimed", "desk", "d", time.Time{})
	recs, err := fromruns.Read("runs.jsonl", &logs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		since, until time.Time
		want         []string
	}{
		{"since", cut, time.Time{}, []string{"after", "at"}},
		{"until", time.Time{}, cut, []string{"before"}},
		{"window", cut.Add(-time.Minute), cut.Add(time.Minute), []string{"at", "before"}},
		{"none", time.Time{}, time.Time{}, []string{"after", "at", "before", "untimed"}},
	} {
		ds, err := fromruns.Dataset("d", recs, fromruns.Options{Since: tc.since, Until: tc.until})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got []string
		for _, c := range ds.Cases {
			got = append(got, c.ID)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: kept %v, want %v", tc.name, got, tc.want)
		}
	}
	_, err = fromruns.Dataset("d", recs, fromruns.Options{Since: cut.Add(2 * time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "3 by time") || !strings.Contains(err.Error(), "1 by time (not recorded)") {
		t.Errorf("nothing after the last run: %v", err)
	}
}
