package cli

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/eval"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

func TestLargestDrops(t *testing.T) {
	cur := eval.MetricStats{CaseMeans: map[string]float64{
		"a": 0.2, "b": 0.1, "c": 0.5, "d": 1.0 / 3, "e": 0, "f": 0.9, "g": 0.3, "h": 0.4, "new": 0,
	}}
	base := eval.MetricStats{CaseMeans: map[string]float64{
		"a": 0.7, "b": 0.6, // equal drops of 0.5 (in floating point, 0.7−0.2 ≠ 0.6−0.1): ties by id
		"c": 0.5,                              // unchanged
		"d": 0.333333,                         // 1/3 as a baseline file keeps it: no drop
		"e": 0.8, "f": 1, "g": 0.5, "h": 0.45, // drops of 0.8, 0.1, 0.2, 0.05
		"gone": 1,
	}}
	tests := []struct {
		name string
		base *eval.MetricStats
		n    int
		want metricDrops
	}{
		{"top five", &base, 5, metricDrops{Metric: "m", Dropped: 6, Largest: []caseDrop{
			{"e", 0.8, 0, 0.8}, {"a", 0.7, 0.2, 0.5}, {"b", 0.6, 0.1, 0.5}, {"g", 0.5, 0.3, 0.2}, {"f", 1, 0.9, 0.1},
		}}},
		{"fewer than asked", &base, 10, metricDrops{Metric: "m", Dropped: 6, Largest: []caseDrop{
			{"e", 0.8, 0, 0.8}, {"a", 0.7, 0.2, 0.5}, {"b", 0.6, 0.1, 0.5}, {"g", 0.5, 0.3, 0.2}, {"f", 1, 0.9, 0.1}, {"h", 0.45, 0.4, 0.05},
		}}},
		{"no baseline", nil, 5, metricDrops{Metric: "m", Largest: []caseDrop{}}},
		{"nothing dropped", &cur, 5, metricDrops{Metric: "m", Largest: []caseDrop{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, largestDrops("m", cur, tt.base, tt.n)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestErroredCases(t *testing.T) {
	got := erroredCases([]string{"b", "a", "c", "a", "b", "a"})
	want := []caseErrors{{"a", 3}, {"b", 2}, {"c", 1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		v              eval.Verdict
		onInconclusive string
		code           int
	}{
		{eval.Pass, "inconclusive", ExitOK},
		{eval.Regression, "pass", ExitRegression},
		{eval.Inconclusive, "inconclusive", ExitInconclusive},
		{eval.Inconclusive, "pass", ExitOK},
		{eval.Inconclusive, "fail", ExitRegression},
	} {
		if got := exitCode(tt.v, tt.onInconclusive); got != tt.code {
			t.Errorf("exitCode(%s, %s) = %d, want %d", tt.v, tt.onInconclusive, got, tt.code)
		}
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 runs", 1: "1 run", 2: "2 runs"} {
		if got := plural(n, "run", "runs"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// handBuilt is an outcome with everything a report can show: a regression
// resting on matched cases with added and removed ones, an inconclusive
// threshold with advice, a reported model-derived metric, drops, failed
// samples, case ids that need quoting or escaping, and a target model that
// changed since the baseline.
func handBuilt(t *testing.T) *evalOutcome {
	t.Helper()
	ids := []string{"a", "b", "c", "new york", "x|y]]>"}
	stats := func(means ...float64) eval.MetricStats {
		st := eval.MetricStats{Runs: 3, Cases: len(means), CaseMeans: map[string]float64{}}
		for i, m := range means {
			st.CaseMeans[ids[i]] = m
			st.Mean += m / float64(len(means))
		}
		st.StdErr = 0.05
		return st
	}
	cur := map[string]eval.MetricStats{
		"exact_match":         stats(0.2, 0.9, 0.5, 0, 1.0/3),
		"normalized_contains": stats(0.4, 0.9, 0.5, 0.5, 1),
		"llm_judge":           {ModelDerived: true, Runs: 3, Cases: 5, Mean: 0.7, StdErr: 0.1, CaseMeans: map[string]float64{}},
	}
	grouped := cur["exact_match"]
	grouped.Groups = map[string]string{"a": "doc-1", "b": "doc-1", "c": "doc-2"}
	cur["exact_match"] = grouped
	judge := eval.ModelPin{Role: eval.RoleJudge, Alias: "grader", Model: "fake-judge-2024-06-01", Provider: "fake"}
	baseline := &eval.Baseline{Metrics: map[string]eval.MetricStats{
		"exact_match":         stats(0.9, 0.9, 0.6, 1, 1),
		"normalized_contains": stats(0.5, 0.9, 0.5, 0.5, 1),
		"llm_judge":           {ModelDerived: true, Runs: 3, Cases: 5, Mean: 0.8, StdErr: 0.1, CaseMeans: map[string]float64{}},
	}, Pins: []eval.ModelPin{{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"}, judge}}
	gate := &eval.GateReport{Verdict: eval.Regression, Results: []eval.ThresholdResult{
		{
			Threshold: eval.Threshold{Metric: "exact_match", MaxRegression: 0.1, Alpha: 0.05},
			Verdict:   eval.Regression, Reason: "regression 0.4000 exceeds maxRegression 0.1000 beyond sampling noise (p=0.001, Holm-adjusted 0.002 ≤ alpha 0.05)",
			Tested: true, Paired: true, Cases: 5, BaselineMean: 0.88, BaselineSE: 0.07, CurrentMean: 0.387, CurrentSE: 0.16,
			Regression: 0.493, SE: 0.1, DF: 4, PValue: 0.001, AdjustedPValue: 0.002, UpperBound: 0.7, MDE: 0.3,
			RunsNeeded: 12, RunsNeededNewBaseline: 6, CasesNeeded: 40, GroupsNeeded: 24, PlannedPower: 0.83,
			MatchedCases: 5, AddedCases: []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7"}, RemovedCases: []string{"gone"},
			Basis: "paired over 5 matched cases; 7 added and 1 removed cases not compared", Clusters: 3,
		},
		{
			Threshold: eval.Threshold{Metric: "normalized_contains", MinMean: new(0.9), FailBelow: new(0.5), MaxRegression: 0.1, Alpha: 0.05},
			Verdict:   eval.Inconclusive, Reason: "regression 0.0200 is not significant (p=0.4) but the gate cannot see one of 2×maxRegression: MDE 0.3000 > maxRegression 0.1000",
			Advice: "run at least 12 runs per case (MDE at 3 runs: 0.3000; needed: ≤ 0.1000)",
			Tested: true, Paired: true, Cases: 5, BaselineMean: 0.68, BaselineSE: 0.05, CurrentMean: 0.66, CurrentSE: 0.05,
			Regression: 0.02, SE: 0.1, DF: 4, PValue: 0.4, AdjustedPValue: 0.4, UpperBound: 0.3, MDE: 0.3,
			RunsNeeded: 12, CasesNeeded: 40, MatchedCases: 5, Basis: "paired over 5 matched cases",
		},
	}}
	o := &evalOutcome{
		Name: "capitals", Dataset: "capitals", Version: "1", Cases: 5, Runs: 3, Models: []string{"fake-chat-2024-09-01"},
		CostUSD: 0.000123, Calls: 1, Failed: 1, Fallbacks: 2, Metrics: []string{"exact_match", "normalized_contains", "llm_judge"},
		Stats: cur, Gate: gate, Baseline: "fixtures/capitals-baseline.json", baseline: baseline,
		Errors: []string{`case "new york" sample 0: provider fake: boom`, `case "new york" sample 1: metric llm_judge: no score`, `case "a" sample 2: metric llm_judge: no score`},
	}
	o.pinModels([]eval.ModelPin{judge, {Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-09-01", Provider: "fake"}}, baseline)
	o.Drops = gateDrops(gate, cur, baseline)
	o.ErroredCases = erroredCases([]string{"new york", "new york", "a"})
	return o
}

// golden compares got with testdata/report/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "report", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", name, diff)
	}
}

// TestRenderHandBuilt renders one hand-built outcome in every format: the
// text table, the step summary and JUnit show the basis, the added and
// removed cases (the first five and a count), the largest drops, the
// errored cases, one sign convention and "± s.e." labels.
func TestRenderHandBuilt(t *testing.T) {
	o := handBuilt(t)
	var out bytes.Buffer
	printTable(&streams{out: &out}, o)
	golden(t, "hand-built.txt", out.Bytes())
	golden(t, "hand-built.md", []byte(markdownSummary("app.cue", []*evalOutcome{o}, false, "")))
	dir := t.TempDir()
	if err := writeJUnitReport(filepath.Join(dir, "r.xml"), []*evalOutcome{o}); err != nil {
		t.Fatal(err)
	}
	junit, err := os.ReadFile(filepath.Join(dir, "r.xml"))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "hand-built.xml", junit)
	var parsed junitSuites
	if err := xml.Unmarshal(junit, &parsed); err != nil {
		t.Fatalf("JUnit report does not parse: %v", err)
	}
	if got, want := parsed.Suites[0].Cases[0].Failure.Text, junitText(o, o.Gate.Results[0]); got != want {
		t.Errorf("JUnit failure text reads back as\n%s\nwant\n%s", got, want)
	}

	for format, text := range map[string]string{"text": out.String(), "markdown": markdownSummary("app.cue", []*evalOutcome{o}, false, ""), "junit": string(junit)} {
		for _, want := range []string{
			"paired over 5 matched cases; 7 added and 1 removed cases not compared",
			"7 added cases not in the baseline: n1, n2, n3, n4, n5 and 2 more",
			"1 removed case not in this run: gone",
			"largest drops (4 of 4 cases that dropped)",
			"3 failed samples or scores (each scored 0) in 2 cases",
			"models changed since the baseline: small: fake-chat-2024-06-01 → fake-chat-2024-09-01",
		} {
			if format == "markdown" {
				want = mdEscape(want)
			}
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q:\n%s", format, want, text)
			}
		}
	}
	for _, want := range []string{"baseline ± s.e.", "+0.493", `"new york"  1.000 → 0.000  regression +1.000`, "regression = baseline − current, positive is worse", "1 model call (ledger)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "-0.493") {
		t.Errorf("text shows the regression with the opposite sign:\n%s", out.String())
	}
	if !strings.HasPrefix(out.String(), "models changed since the baseline: ") {
		t.Errorf("the model change is not the first line of the text:\n%s", out.String())
	}
	if p := parsed.Suites[0].Properties; p == nil || len(p.Property) != 1 || p.Property[0].Name != "modelChanges" ||
		p.Property[0].Value != "models changed since the baseline: small: fake-chat-2024-06-01 → fake-chat-2024-09-01" {
		t.Errorf("JUnit suite properties %+v, want the model change", p)
	}
}

// TestRenderModelNotes renders an outcome whose models are the baseline's,
// one whose baseline records none and one with every kind of change: the
// first says nothing about models in any format, the second says once per
// format that the baseline does not record them, the third lists every
// change on one line; the verdict is the same in all three.
func TestRenderModelNotes(t *testing.T) {
	small := eval.ModelPin{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"}
	judge := eval.ModelPin{Role: eval.RoleJudge, Alias: "grader", Model: "fake-judge-2024-06-01", Provider: "fake"}
	moved := small
	moved.Provider = "azure"
	tests := []struct {
		name     string
		baseline []eval.ModelPin
		current  []eval.ModelPin
		want     string // the line every format shows; empty for none
	}{
		{"same models", []eval.ModelPin{small, judge}, []eval.ModelPin{judge, small}, ""},
		{"baseline without models", nil, []eval.ModelPin{small, judge}, unrecordedModelsText},
		{"changes", []eval.ModelPin{small}, []eval.ModelPin{moved, judge},
			"models changed since the baseline: small: fake-chat-2024-06-01 (fake) → fake-chat-2024-06-01 (azure); grader (judge): (not in the baseline) → fake-judge-2024-06-01 (fake)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := handBuilt(t)
			o.baseline.Pins = tt.baseline
			o.pinModels(tt.current, o.baseline)
			var out bytes.Buffer
			printTable(&streams{out: &out}, o)
			md := markdownSummary("app.cue", []*evalOutcome{o}, false, "")
			path := filepath.Join(t.TempDir(), "r.xml")
			if err := writeJUnitReport(path, []*evalOutcome{o}); err != nil {
				t.Fatal(err)
			}
			junit, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// The JUnit report repeats the line in each threshold's body
			// and once as a property.
			for format, c := range map[string]struct {
				text  string
				count int
			}{"text": {out.String(), 1}, "markdown": {md, 1}, "junit": {string(junit), 1 + len(o.Gate.Results)}} {
				for _, s := range []string{"models changed", "does not record its models"} {
					if tt.want == "" && strings.Contains(c.text, s) {
						t.Errorf("%s mentions %q although the models did not change:\n%s", format, s, c.text)
					}
				}
				if tt.want == "" {
					continue
				}
				want := tt.want
				if format == "markdown" {
					want = mdEscape(want)
				}
				if n := strings.Count(c.text, want); n != c.count {
					t.Errorf("%s shows %q %d times, want %d:\n%s", format, want, n, c.count, c.text)
				}
			}
			if !strings.Contains(out.String(), "verdict: regression") {
				t.Errorf("the verdict changed:\n%s", out.String())
			}
			if tt.want == "" && (o.ModelChanges != nil || o.BaselineModelsUnrecorded) {
				t.Errorf("model report %+v, want nothing", o.modelReport)
			}
		})
	}
}

// compileReportSchema compiles the committed schema from the repository root.
func compileReportSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(ReportSchemaPath)
	if err != nil {
		t.Fatalf("compiling %s: %v", ReportSchemaPath, err)
	}
	return sch
}

func validateReport(t *testing.T, sch *jsonschema.Schema, name string, data []byte) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: report is not JSON: %v", name, err)
	}
	if err := sch.Validate(doc); err != nil {
		t.Errorf("%s: report does not match %s: %v\n%s", name, ReportSchemaPath, err, data)
	}
}

// judgedApp writes a copy of the capitals app whose eval also has a judge
// that cannot be parsed (an echo), so that every sample has a failed
// score, and returns its path.
func judgedApp(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("fixtures/capitals.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capitals.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src := `name: "judged"
version: "0.1.0"
providers: {
	fake: {kind: "fake", answerKey: {dataset: "capitals.json", accuracy: 0.6}}
	grader: {kind: "fake"}
}
models: {
	"fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
	"fake-judge-2024-06-01": {provider: "grader", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
}
aliases: {small: "fake-chat-2024-06-01", judge: "fake-judge-2024-06-01"}
evals: capitals: {
	dataset: "capitals.json"
	target: {model: "small", prompt: "{{.Input}}"}
	runs: 2
	metrics: ["exact_match", "llm_judge"]
	judge: {model: "judge", rubric: "Score 1 when the answer names the right city."}
	baseline: "baseline.json"
	thresholds: [{metric: "exact_match", maxRegression: 0.2}]
}
`
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// calibratedApp writes an app whose judge is calibrated against 24 labelled
// answers and gates. The fake echoes the prompt, so the judge answers the
// last "SCORE:" line of the answer it is shown: one miss among 12 passes,
// one among 12 fails.
func calibratedApp(t *testing.T, dir string) string {
	t.Helper()
	var labels, cases strings.Builder
	for i := range 24 {
		pass, score := i < 12, 0
		if pass != (i == 0 || i == 12) {
			score = 1
		}
		fmt.Fprintf(&labels, `{"input": "q%d", "answer": "a%d\nSCORE: %d", "pass": %v}`+"\n", i, i, score, pass)
		fmt.Fprintf(&cases, `{"id": "c%d", "input": "q%d\nSCORE: %d", "expected": "echo: q%d"}`+"\n", i, i, i%2, i)
	}
	src := `name: "calibrated"
version: "0.1.0"
providers: fake: {kind: "fake"}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 1024, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
aliases: small: "fake-chat-2024-06-01"
evals: judged: {
	dataset: "cases.jsonl"
	target: {model: "small", prompt: "{{.Input}}"}
	runs: 2
	metrics: ["llm_judge"]
	judge: {model: "small", rubric: "Score the answer.", calibration: {labels: "labels.jsonl", minYouden: 0.2}}
	baseline: "baseline.json"
	thresholds: [{metric: "llm_judge", maxRegression: 0.2}]
}
`
	for name, body := range map[string]string{"labels.jsonl": labels.String(), "cases.jsonl": cases.String(), "app.cue": src} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "app.cue")
}

// TestEvalJSONReportSchema runs the real aidgen eval --json over a pass, a
// regression, an inconclusive gate, baseline updates and failing samples,
// and validates every report against the committed schema, whose objects
// admit no undocumented field. Every property the schema documents must
// appear in some report, so the schema cannot keep a field the report lost.
func TestEvalJSONReportSchema(t *testing.T) {
	t.Chdir("../..")
	sch := compileReportSchema(t)
	dir := t.TempDir()
	judged := judgedApp(t, dir)
	calibrated := calibratedApp(t, t.TempDir())
	tests := []struct {
		name string
		args []string
		code int
	}{
		{"pass", []string{"examples/capitals/app.cue"}, ExitOK},
		{"regression", []string{"testdata/eval/capitals-worse.cue"}, ExitRegression},
		{"inconclusive", []string{"examples/capitals/app.cue", "--runs", "1", "--seed", "2"}, ExitInconclusive},
		{"approvals decided", []string{helpdesk}, ExitOK},
		{"tool calls stubbed", []string{"examples/support-desk/app.cue", "--eval", "refund_flow", "--runs", "1"}, ExitOK},
		{"new baseline with failed scores", []string{judged, "--update-baseline", "--allow-failures"}, ExitOK},
		{"changed baseline", []string{judged, "--update-baseline", "--allow-failures", "--seed", "3"}, ExitOK},
		{"gate with failed scores", []string{judged}, ExitOK},
		{"calibrated judge baseline", []string{calibrated, "--update-baseline"}, ExitOK},
		{"calibrated judge gate", []string{calibrated}, ExitOK},
	}
	var all strings.Builder
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "report.json")
			var out, errOut bytes.Buffer
			args := append([]string{"eval", "--progress", "none", "--json", path}, tt.args...)
			if code := Main(args, strings.NewReader(""), &out, &errOut); code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, out.String(), errOut.String())
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			validateReport(t, sch, tt.name, data)
			all.Write(data)
			if i >= 5 && i <= 7 { // the judged app's
				var r struct {
					Evals []struct {
						ErroredCases []caseErrors `json:"erroredCases"`
					} `json:"evals"`
				}
				if err := json.Unmarshal(data, &r); err != nil {
					t.Fatal(err)
				}
				if n := len(r.Evals[0].ErroredCases); n != 30 || r.Evals[0].ErroredCases[0].Errors != 2 {
					t.Errorf("errored cases %+v, want 30 cases with 2 failed scores each", r.Evals[0].ErroredCases)
				}
				if !strings.Contains(out.String(), "60 failed samples or scores (each scored 0) in 30 cases: ") {
					t.Errorf("stdout does not name the errored cases:\n%s", out.String())
				}
			}
		})
	}

	// The hand-built outcomes set the fields the real runs leave empty: one
	// with a changed model, one whose baseline does not record its models.
	unrecorded := handBuilt(t)
	unrecorded.baseline.Pins = nil
	unrecorded.pinModels(unrecorded.PinnedModels, unrecorded.baseline)
	path := filepath.Join(dir, "hand.json")
	// A case of a group whose run failed.
	grouped := handBuilt(t)
	grouped.Details = []caseDetail{{ID: "paris", Group: "europe", Input: "Capital of France?", Expected: "Paris",
		Runs: []runDetail{{Failed: true, Err: "case \"paris\" sample 0: boom", Scores: map[string]float64{"exact_match": 0}}}}}
	if err := writeJSONReport(path, "app.cue", []*evalOutcome{grouped, unrecorded}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	validateReport(t, sch, "hand-built", data)
	all.Write(data)

	raw, err := os.ReadFile(ReportSchemaPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range schemaProperties(t, raw) {
		if !strings.Contains(all.String(), `"`+p+`":`) {
			t.Errorf("the schema documents %q, which no report contains", p)
		}
	}
}

// schemaProperties lists every property name the schema declares.
func schemaProperties(t *testing.T, raw []byte) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var names []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name := range props {
					names = append(names, name)
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	slices.Sort(names)
	return slices.Compact(names)
}

// TestReportSchemaIsStrict checks that the schema rejects what a careless
// change would produce: an undocumented field, at the top and deep inside,
// a Go field name, a missing schemaVersion.
func TestReportSchemaIsStrict(t *testing.T) {
	t.Chdir("../..")
	sch := compileReportSchema(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "hand.json")
	if err := writeJSONReport(path, "app.cue", []*evalOutcome{handBuilt(t)}); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(string) string{
		"top-level field":    func(s string) string { return strings.Replace(s, `"app":`, `"extra": 1, "app":`, 1) },
		"threshold field":    func(s string) string { return strings.Replace(s, `"basis":`, `"newStat": 1, "basis":`, 1) },
		"Go field name":      func(s string) string { return strings.Replace(s, `"stdErr":`, `"StdErr":`, 1) },
		"no schema version":  func(s string) string { return regexp.MustCompile(`"schemaVersion": \d+,`).ReplaceAllString(s, "") },
		"unknown verdict":    func(s string) string { return strings.Replace(s, `"verdict": "regression"`, `"verdict": "fail"`, 1) },
		"drop of wrong sign": func(s string) string { return strings.Replace(s, `"regression": 1`, `"regression": -1`, 1) },
		"unknown model role": func(s string) string { return strings.Replace(s, `"role": "target"`, `"role": "grader"`, 1) },
		"change without old": func(s string) string { return strings.Replace(s, `"oldModel": "fake-chat-2024-06-01",`, ``, 1) },
		"added with old": func(s string) string {
			return strings.Replace(s, `"kind": "changed"`, `"kind": "added"`, 1)
		},
		"no pinned models": func(s string) string {
			return regexp.MustCompile(`(?s)"pinnedModels": \[.*?\],`).ReplaceAllString(s, "")
		},
	} {
		t.Run(name, func(t *testing.T) {
			bad := edit(string(good))
			if bad == string(good) {
				t.Fatal("the edit changed nothing")
			}
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
			if err != nil {
				t.Fatal(err)
			}
			if sch.Validate(doc) == nil {
				t.Errorf("the schema accepts a report with a %s", name)
			}
		})
	}
}

// TestEvalReportsModelChanges runs the real aidgen eval: --update-baseline
// records the target's and the judge's pinned models; a gate on the same
// models says nothing about them; a baseline whose target model differs is
// reported in the text, JSON, JUnit and step summary while the exit status
// stays the gate's; a baseline from before models were recorded gets one
// note.
func TestEvalReportsModelChanges(t *testing.T) {
	t.Chdir("../..")
	sch := compileReportSchema(t)
	dir := t.TempDir()
	app := judgedApp(t, dir)
	baselinePath := filepath.Join(dir, "baseline.json")
	run := func(t *testing.T, extra ...string) (stdout string, report evalReportModels, junit, summary string) {
		t.Helper()
		jsonPath, junitPath, summaryPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml"), filepath.Join(dir, "summary.md")
		os.Remove(summaryPath)
		t.Setenv("GITHUB_STEP_SUMMARY", summaryPath)
		var out, errOut bytes.Buffer
		args := append([]string{"eval", "--progress", "none", "--json", jsonPath, "--junit", junitPath, app}, extra...)
		if code := Main(args, strings.NewReader(""), &out, &errOut); code != ExitOK {
			t.Fatalf("exit %d, want 0\n%s%s", code, out.String(), errOut.String())
		}
		data, err := os.ReadFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		validateReport(t, sch, t.Name(), data)
		if err := json.Unmarshal(data, &report); err != nil {
			t.Fatal(err)
		}
		if x, err := os.ReadFile(junitPath); err == nil {
			junit = string(x)
		}
		md, err := os.ReadFile(summaryPath)
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), report, junit, string(md)
	}
	wantPins := []eval.ModelPin{
		{Role: eval.RoleTarget, Alias: "small", Model: "fake-chat-2024-06-01", Provider: "fake"},
		{Role: eval.RoleJudge, Alias: "judge", Model: "fake-judge-2024-06-01", Provider: "grader"},
	}

	_, rep, _, _ := run(t, "--update-baseline", "--allow-failures")
	written, err := eval.ReadBaseline(baselinePath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantPins, written.Pins); diff != "" {
		t.Fatalf("--update-baseline wrote pins (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantPins, rep.Evals[0].PinnedModels); diff != "" {
		t.Errorf("report pinnedModels (-want +got):\n%s", diff)
	}
	// Rewriting a baseline from before pins lists the pins it adds.
	old := *written
	old.Pins = nil
	if err := eval.WriteBaselineFile(baselinePath, &old); err != nil {
		t.Fatal(err)
	}
	out, _, _, _ := run(t, "--update-baseline", "--allow-failures")
	if !strings.Contains(out, "  pinnedModels.target.small: (none) → fake-chat-2024-06-01 (fake)\n  pinnedModels.judge.judge: (none) → fake-judge-2024-06-01 (grader)\n") {
		t.Errorf("the update does not list the pins it adds:\n%s", out)
	}

	t.Run("same models", func(t *testing.T) {
		out, rep, junit, md := run(t)
		for format, text := range map[string]string{"text": out, "junit": junit, "markdown": md} {
			if strings.Contains(text, "models changed") || strings.Contains(text, "does not record") {
				t.Errorf("%s talks about models that did not change:\n%s", format, text)
			}
		}
		if rep.Evals[0].ModelChanges != nil || rep.Evals[0].BaselineModelsUnrecorded {
			t.Errorf("report %+v, want no model changes", rep.Evals[0])
		}
	})

	t.Run("target model changed", func(t *testing.T) {
		b := *written
		b.Pins = slices.Clone(written.Pins)
		b.Pins[0].Model = "fake-chat-2024-01-01"
		if err := eval.WriteBaselineFile(baselinePath, &b); err != nil {
			t.Fatal(err)
		}
		const line = "models changed since the baseline: small: fake-chat-2024-01-01 → fake-chat-2024-06-01"
		out, rep, junit, md := run(t) // exit 0: the scores are the baseline's, so the verdict stays pass
		if lines := strings.Split(out, "\n"); len(lines) < 3 || lines[1] != line || !strings.HasPrefix(lines[2], "metric ") {
			t.Errorf("the change is not the line before the table:\n%s", out)
		}
		if !strings.Contains(out, "verdict: pass") {
			t.Errorf("the model change moved the verdict:\n%s", out)
		}
		want := []eval.ModelChange{{Kind: eval.ModelChanged, Role: eval.RoleTarget, Alias: "small",
			OldModel: "fake-chat-2024-01-01", OldProvider: "fake", NewModel: "fake-chat-2024-06-01", NewProvider: "fake"}}
		if diff := cmp.Diff(want, rep.Evals[0].ModelChanges); diff != "" {
			t.Errorf("JSON modelChanges (-want +got):\n%s", diff)
		}
		if !strings.Contains(junit, `<property name="modelChanges" value="`+line+`">`) || strings.Count(junit, line) != 2 {
			t.Errorf("JUnit lacks the change as a property and in the test case's output:\n%s", junit)
		}
		if !strings.Contains(md, "> [!WARNING]\n> "+mdEscape(line)+"\n") {
			t.Errorf("step summary lacks the warning:\n%s", md)
		}
	})

	t.Run("baseline without models", func(t *testing.T) {
		b := *written
		b.Pins = nil
		if err := eval.WriteBaselineFile(baselinePath, &b); err != nil {
			t.Fatal(err)
		}
		out, rep, junit, md := run(t)
		for format, text := range map[string]string{"text": out, "markdown": md} {
			if n := strings.Count(text, "the baseline does not record its models"); n != 1 {
				t.Errorf("%s says %d times that the baseline does not record its models, want once:\n%s", format, n, text)
			}
			if strings.Contains(text, "models changed") {
				t.Errorf("%s reports a baseline without models as a change:\n%s", format, text)
			}
		}
		if !strings.Contains(junit, `<property name="baselineModelsUnrecorded"`) {
			t.Errorf("JUnit lacks the note:\n%s", junit)
		}
		if !rep.Evals[0].BaselineModelsUnrecorded || rep.Evals[0].ModelChanges != nil {
			t.Errorf("report %+v, want the baseline marked as not recording its models", rep.Evals[0])
		}
	})
}

// evalReportModels is the part of a JSON report TestEvalReportsModelChanges
// reads back.
type evalReportModels struct {
	Evals []struct {
		PinnedModels             []eval.ModelPin    `json:"pinnedModels"`
		ModelChanges             []eval.ModelChange `json:"modelChanges"`
		BaselineModelsUnrecorded bool               `json:"baselineModelsUnrecorded"`
	} `json:"evals"`
}

// TestEvalReportsRegressedAnswers: a gate that regressed shows, for each
// case whose mean fell, the baseline's answers beside the current ones,
// in the JSON report (caseResults: regressedMetrics, baselineAnswers) and
// under -v; every case carries its expected value, answers and scores.
func TestEvalReportsRegressedAnswers(t *testing.T) {
	t.Chdir("../..")
	path := filepath.Join(t.TempDir(), "report.json")
	var out, errOut bytes.Buffer
	if code := Main([]string{"eval", "--progress", "none", "-v", "--json", path, "testdata/eval/capitals-worse.cue"}, strings.NewReader(""), &out, &errOut); code != ExitRegression {
		t.Fatalf("exit %d, want %d\n%s%s", code, ExitRegression, out.String(), errOut.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Evals []struct {
			Runs        int `json:"runs"`
			CaseResults []struct {
				ID, Expected    string
				Regressed       []string `json:"regressedMetrics"`
				BaselineAnswers []string `json:"baselineAnswers"`
				Runs            []struct {
					Answer      string             `json:"answer"`
					AnswerBytes int                `json:"answerBytes"`
					Scores      map[string]float64 `json:"scores"`
				} `json:"runs"`
			} `json:"caseResults"`
		} `json:"evals"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	e := r.Evals[0]
	regressed := 0
	for _, c := range e.CaseResults {
		if c.Expected == "" || len(c.Runs) != e.Runs {
			t.Fatalf("case %s: expected %q, %d runs; want both", c.ID, c.Expected, len(c.Runs))
		}
		for _, run := range c.Runs {
			if run.AnswerBytes != len(run.Answer) || len(run.Scores) != 2 {
				t.Fatalf("case %s: run %+v, want its answer whole and two scores", c.ID, run)
			}
		}
		if len(c.Regressed) == 0 {
			if c.BaselineAnswers != nil {
				t.Errorf("case %s did not regress but carries the baseline's answers", c.ID)
			}
			continue
		}
		regressed++
		if len(c.BaselineAnswers) != 10 {
			t.Errorf("case %s regressed on %v with %d baseline answers, want the baseline's 10", c.ID, c.Regressed, len(c.BaselineAnswers))
		}
	}
	if regressed == 0 {
		t.Fatal("no case regressed in a regression")
	}
	if !regexp.MustCompile(`(?m)^    regressed on \S+.* since the baseline; the baseline answered:\n    baseline run 1: answer "`).MatchString(out.String()) {
		t.Errorf("-v does not show the baseline's answers of a regressed case:\n%s", out.String())
	}
}
