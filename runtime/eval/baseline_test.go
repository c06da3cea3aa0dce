package eval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aidgen/aid/runtime/eval"
)

// smallDataset is a fixed dataset for format tests, independent of the fixtures.
func smallDataset(t *testing.T) *eval.Dataset {
	t.Helper()
	ds, err := eval.NewDataset("capitals-small", "1", []eval.Case{
		{ID: "fr", Input: "What is the capital of France?", Expected: "Paris"},
		{ID: "jp", Input: "What is the capital of Japan?", Expected: "Tokyo"},
		{ID: "br", Input: "What is the capital of Brazil?", Expected: "Brasília"},
		{ID: "au", Input: "What is the capital of Australia?", Expected: "Canberra"},
		{ID: "ng", Input: "What is the capital of Nigeria?", Expected: "Abuja"},
		{ID: "us", Input: "What is the capital of the United States?", Expected: "Washington, D.C."},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func capitalsBaseline(t *testing.T, seed uint64, runs int) *eval.Baseline {
	t.Helper()
	res, err := eval.Run(context.Background(), smallDataset(t), seededRunner(seed, 0.6, 0),
		[]eval.Metric{eval.ExactMatch{}, eval.NormalizedContains{}}, eval.Options{Runs: runs, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eval.NewBaseline(res, "v0.1.0", "seeded fake, accuracy 0.6")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBaselineFormatGolden(t *testing.T) {
	b := capitalsBaseline(t, 0, 10)
	data, err := eval.MarshalBaseline(b)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "baseline.golden.json", data)
	again, err := eval.MarshalBaseline(capitalsBaseline(t, 0, 10))
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(data) {
		t.Error("the same run encodes to different bytes")
	}
	other, err := eval.MarshalBaseline(capitalsBaseline(t, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	if string(other) == string(data) {
		t.Error("a different seed encodes to the same bytes")
	}
	if !strings.HasSuffix(string(data), "}\n") || strings.HasSuffix(string(data), "\n\n") {
		t.Error("baseline must end with exactly one newline")
	}
	for _, want := range []string{`"format": "aid-baseline/v1"`, `"mean": 0.`, `"fr": `, `"runs": 10`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("baseline lacks %s", want)
		}
	}
	// Keys are sorted at every level.
	if i, j := strings.Index(string(data), `"aidVersion"`), strings.Index(string(data), `"note"`); i < 0 || j < i {
		t.Error("top-level keys are not sorted")
	}
}

func TestBaselineRoundTrip(t *testing.T) {
	b := capitalsBaseline(t, 0, 10)
	path := filepath.Join(t.TempDir(), "capitals-baseline.json")
	if err := eval.WriteBaselineFile(path, b); err != nil {
		t.Fatal(err)
	}
	got, err := eval.ReadBaseline(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, got, cmpopts.EquateApprox(0, 5e-7)); diff != "" {
		t.Errorf("round trip (-wrote +read):\n%s", diff)
	}
	if changes := eval.DiffBaselines(b, got); len(changes) != 0 {
		t.Errorf("a round trip shows changes: %v", changes)
	}
	// Rewriting leaves no temporary file behind and replaces the content.
	b.Note = "second"
	if err := eval.WriteBaselineFile(path, b); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries after two writes, want 1", len(entries))
	}
	if got, err := eval.ReadBaseline(path); err != nil || got.Note != "second" {
		t.Errorf("reread note %q, %v", got.Note, err)
	}
	// A failed write leaves the old file in place.
	if err := eval.WriteBaselineFile(filepath.Join(path, "not-a-dir", "x.json"), b); err == nil {
		t.Error("write into a missing directory succeeded")
	}
	bad := &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": {Runs: 1, Cases: 1, Mean: nan()}}}
	if err := eval.WriteBaselineFile(path, bad); err == nil {
		t.Error("wrote a NaN")
	}
	if got, err := eval.ReadBaseline(path); err != nil || got.Note != "second" {
		t.Errorf("old baseline damaged by a failed write: %v", err)
	}
}

func TestReadBaselineErrors(t *testing.T) {
	valid := `{"aidVersion":"v","dataset":"d","datasetVersion":"1","format":"aid-baseline/v1","metrics":{"m":{"caseMeans":{"a":0.5},"cases":1,"errors":0,"mean":0.5,"modelDerived":false,"runs":2,"stdDev":0,"stdErr":0,"withinCaseVariance":0.25}},"models":[],"note":""}`
	if _, err := eval.ParseBaseline("b.json", []byte(valid)); err != nil {
		t.Fatalf("valid baseline: %v", err)
	}
	tests := []struct{ name, data, want string }{
		{"syntax", "{\n  \"format\": \"aid-baseline/v1\",\n  \"metrics\": {,}\n}", "b.json:3:15: invalid JSON"},
		{"type", "{\n  \"format\": 1\n}", "b.json:2:13: field format: got a JSON number, want string"},
		{"unknown field", `{"format":"aid-baseline/v1","extra":1}`, `unknown field "extra"`},
		{"wrong format", `{"format":"other/v9"}`, `format "other/v9" is not "aid-baseline/v1"; regenerate`},
		{"trailing data", valid + "{}", "data after the baseline object"},
		{"bad stats", strings.Replace(strings.Replace(valid, `"mean":0.5`, `"mean":1.5`, 1), `"runs":2`, `"runs":0`, 1),
			`metric "m": runs 0 must be at least 1` + "\n" + `mean 1.5 is not a finite number in [0, 1]`},
		{"case means count", strings.Replace(valid, `"cases":1`, `"cases":2`, 1), "has 1 case means for 2 cases"},
	}
	for _, tt := range tests {
		_, err := eval.ParseBaseline("b.json", []byte(tt.data))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	if _, err := eval.ReadBaseline(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "read baseline") {
		t.Errorf("missing file: %v", err)
	}
}

func TestDiffBaselines(t *testing.T) {
	old := &eval.Baseline{Dataset: "capitals", DatasetVersion: "1.0.0", AidVersion: "v0.1.0", Models: []string{"m1"},
		Metrics: map[string]eval.MetricStats{
			"exact_match": {Runs: 10, Cases: 2, Mean: 0.6, StdDev: 0.1, StdErr: 0.07, CaseMeans: map[string]float64{"fr": 0.7, "de": 0.5}},
			"old_metric":  {Runs: 10, Cases: 2, Mean: 0.5},
		}}
	cur := &eval.Baseline{Dataset: "capitals", DatasetVersion: "1.1.0", AidVersion: "v0.1.0", Models: []string{"m1"}, Note: "new cases",
		Metrics: map[string]eval.MetricStats{
			"exact_match":         {Runs: 10, Cases: 2, Mean: 0.65, StdDev: 0.1, StdErr: 0.07, CaseMeans: map[string]float64{"fr": 0.8, "it": 0.5}},
			"normalized_contains": {Runs: 10, Cases: 2, Mean: 0.9},
		}}
	var got []string
	for _, c := range eval.DiffBaselines(old, cur) {
		got = append(got, c.String())
	}
	want := []string{
		"datasetVersion: 1.0.0 → 1.1.0",
		"note: (none) → new cases",
		"metrics.exact_match.mean: 0.600000 → 0.650000 (+0.050000)",
		"metrics.exact_match.caseMeans.de: 0.500000 → (none)",
		"metrics.exact_match.caseMeans.fr: 0.700000 → 0.800000",
		"metrics.exact_match.caseMeans.it: (none) → 0.500000",
		"metrics.normalized_contains: (none) → mean 0.900000 over 2 cases × 10 runs",
		"metrics.old_metric: mean 0.500000 over 2 cases × 10 runs → (none)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DiffBaselines (-want +got):\n%s", diff)
	}
	if first := eval.DiffBaselines(nil, cur); len(first) == 0 || first[0].Path != "dataset" {
		t.Errorf("diff against no baseline: %v", first)
	}
}

// TestBaselineAnswers: a baseline keeps every case's answers, each cut at
// ReportTextBytes with its length said, and reads them back; a baseline
// written before answers were kept (testdata/eval/helpdesk/baseline.json) still
// reads, without any.
func TestBaselineAnswers(t *testing.T) {
	long := strings.Repeat("é", eval.ReportTextBytes) // 2 bytes a rune
	ds, err := eval.NewDataset("d", "1", []eval.Case{{ID: "a", Input: "q", Expected: "x"}, {ID: "b", Input: "q", Expected: "y"}})
	if err != nil {
		t.Fatal(err)
	}
	runner := eval.RunnerFunc(func(_ context.Context, c eval.Case, k int) (eval.Answer, error) {
		if c.ID == "b" {
			return eval.Answer{Text: long}, nil
		}
		return eval.Answer{Text: "answer " + string(rune('0'+k))}, nil
	})
	res, err := eval.Run(t.Context(), ds, runner, []eval.Metric{eval.ExactMatch{}}, eval.Options{Runs: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eval.NewBaseline(res, "v", "")
	if err != nil {
		t.Fatal(err)
	}
	data, err := eval.MarshalBaseline(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := eval.ParseBaseline("b.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Answers["a"]; len(got) != 2 || got[0] != "answer 0" || got[1] != "answer 1" {
		t.Errorf("answers of a: %q", got)
	}
	cut := back.Answers["b"][0]
	if len(cut) > eval.ReportTextBytes+64 || !strings.HasSuffix(cut, fmt.Sprintf("[cut at %d of %d bytes]", eval.ReportTextBytes, 2*eval.ReportTextBytes)) {
		t.Errorf("a long answer is kept as %d bytes ending %q", len(cut), cut[max(0, len(cut)-40):])
	}

	old, err := eval.ReadBaseline("../../testdata/eval/helpdesk/baseline.json")
	if err != nil {
		t.Fatalf("an old baseline does not read: %v", err)
	}
	if old.Answers != nil || len(old.Metrics) == 0 {
		t.Errorf("old baseline read with answers %v, metrics %v", old.Answers, old.Metrics)
	}
}
