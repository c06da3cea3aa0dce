package cli_test

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
)

const capitals = "examples/capitals/app.cue"

// TestEvalCapitals is the walkthrough of the README: the example passes
// against its committed baseline, a deliberately worse model fails, and a
// run with too few samples cannot tell and says so.
func TestEvalCapitals(t *testing.T) {
	chdirRoot(t)
	tests := []struct {
		name string
		args []string
		code int
		out  []string
	}{
		{"committed baseline passes", []string{capitals}, cli.ExitOK,
			[]string{"30 cases × 10 runs", "exact_match", "0.623 ± 0.024", "baseline ± s.e.", "verdict: pass", "(ledger)"}},
		{"a fresh sample passes", []string{capitals, "--seed", "1"}, cli.ExitOK,
			[]string{"verdict: pass"}},
		{"worse model regresses", []string{"testdata/eval/capitals-worse.cue"}, cli.ExitRegression,
			[]string{"+0.300", "regression", "exceeds maxRegression", "largest drops (5 of 29 cases that dropped)"}},
		{"an agent target passes", []string{"testdata/eval/agent/app.cue"}, cli.ExitOK,
			[]string{"30 cases × 10 runs", "0.710 ± 0.027", "600 model calls", "verdict: pass"}},
		{"an agent target's fresh sample passes", []string{"testdata/eval/agent/app.cue", "--seed", "1"}, cli.ExitOK,
			[]string{"verdict: pass"}},
		{"too few runs is inconclusive", []string{capitals, "--runs", "1", "--seed", "2"}, cli.ExitInconclusive,
			[]string{"30 cases × 1 run = 30 samples", "inconclusive", "MDE", "runs per case", "cases at 1 run,"}},
		{"inconclusive mapped to pass", []string{capitals, "--runs", "1", "--seed", "2", "--on-inconclusive", "pass"}, cli.ExitOK,
			[]string{"verdict: inconclusive"}},
		{"inconclusive mapped to fail", []string{capitals, "--runs", "1", "--seed", "2", "--on-inconclusive", "fail"}, cli.ExitRegression,
			[]string{"verdict: inconclusive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"eval", "--progress", "none"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			for _, want := range tt.out {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// TestEvalSupportDesk runs the support-desk example's refunds eval, whose
// target is an agent (the researcher, which searches a retriever before it
// answers), against its committed baseline.
func TestEvalSupportDesk(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := run(t, "eval", "--progress", "none", "examples/support-desk/app.cue")
	if code != cli.ExitOK || !strings.Contains(out, "verdict: pass") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}

func TestEvalConfigurationErrors(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	noBaseline := writeApp(t, dir, "baseline.json")
	modelBlocked := filepath.Join(t.TempDir(), "app.cue")
	src, err := os.ReadFile(writeApp(t, filepath.Dir(modelBlocked), "baseline.json"))
	if err != nil {
		t.Fatal(err)
	}
	src = []byte(strings.Replace(string(src), `metrics: ["exact_match", "normalized_contains"]`, `metrics: ["exact_match", "guardrail_blocked"]`, 1))
	if err := os.WriteFile(modelBlocked, src, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		args     []string
		inStderr string
	}{
		{"invalid IR", []string{"testdata/cases/unknown-alias/app.cue"}, "not a valid application"},
		{"missing file", []string{"nope.cue"}, "no such file"},
		{"unknown eval", []string{capitals, "--eval", "nope"}, "has no eval \"nope\""},
		{"no evals", []string{"testdata/cases/minimal/app.cue"}, "defines no evals"},
		{"missing baseline", []string{noBaseline}, "--update-baseline"},
		{"bad flag value", []string{capitals, "--on-inconclusive", "maybe"}, "--on-inconclusive"},
		{"zero runs", []string{capitals, "--runs", "0"}, "--runs must be at least 1, not 0"},
		{"negative runs", []string{capitals, "--runs=-3"}, "--runs must be at least 1, not -3"},
		{"zero concurrency", []string{capitals, "--concurrency", "0"}, "--concurrency must be at least 1, not 0"},
		{"negative concurrency", []string{capitals, "--concurrency", "-1"}, "--concurrency must be at least 1, not -1"},
		{"non-numeric runs", []string{capitals, "--runs", "many"}, "invalid argument \"many\" for \"--runs\""},
		{"two files", []string{capitals, capitals}, "exactly one application file"},
		{"guardrail_blocked of a model", []string{modelBlocked}, "the target must be an agent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"eval", "--progress", "none"}, tt.args...)...)
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want %d", code, cli.ExitUsage)
			}
			if !strings.Contains(errOut, tt.inStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.inStderr, errOut)
			}
		})
	}
}

// writeApp writes a copy of the capitals app into dir, with its own copy
// of the dataset and the baseline at the given name, and returns its path.
func writeApp(t *testing.T, dir, baseline string) string {
	t.Helper()
	data, err := os.ReadFile("fixtures/capitals.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "capitals.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	src := `name: "capitals-copy"
version: "0.1.0"
providers: fake: {kind: "fake", answerKey: {dataset: "capitals.json", accuracy: 0.6}}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
aliases: small: "fake-chat-2024-06-01"
evals: capitals: {
	dataset: "capitals.json"
	target: {model: "small", prompt: "{{.Input}}"}
	runs: 4
	metrics: ["exact_match", "normalized_contains"]
	baseline: "` + baseline + `"
	thresholds: [{metric: "exact_match", maxRegression: 0.2}]
}
`
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEvalUpdateBaseline(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	app := writeApp(t, dir, "baseline.json")
	baseline := filepath.Join(dir, "baseline.json")

	code, out, errOut := run(t, "eval", "--progress", "none", "--update-baseline", "--note", "first", app)
	if code != cli.ExitOK || !strings.Contains(out, "wrote new baseline") {
		t.Fatalf("first update: exit %d\n%s%s", code, out, errOut)
	}
	first, err := os.ReadFile(baseline)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(first), `"note": "first"`) {
		t.Errorf("baseline lacks the note:\n%s", first)
	}

	code, out, _ = run(t, "eval", "--progress", "none", "--update-baseline", "--note", "first", app)
	if code != cli.ExitOK || !strings.Contains(out, "is unchanged") {
		t.Errorf("same sample again: exit %d\n%s", code, out)
	}

	code, out, _ = run(t, "eval", "--progress", "none", "--update-baseline", "--note", "first", "--seed", "9", app)
	if code != cli.ExitOK || !strings.Contains(out, "changes:") || !strings.Contains(out, "→") {
		t.Errorf("a fresh sample: exit %d\n%s", code, out)
	}
	if second, _ := os.ReadFile(baseline); string(second) == string(first) {
		t.Error("the baseline file did not change")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".baseline.json.tmp-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}

	code, out, _ = run(t, "eval", "--progress", "none", "--seed", "9", app)
	if code != cli.ExitOK || !strings.Contains(out, "verdict: pass") {
		t.Errorf("gating against the new baseline: exit %d\n%s", code, out)
	}
}

func TestEvalReports(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	jsonFile, junitFile, summary := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml"), filepath.Join(dir, "summary.md")
	if err := os.WriteFile(summary, []byte("# earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	code, _, errOut := run(t, "eval", "--progress", "lines", "--json", jsonFile, "--junit", junitFile, "testdata/eval/capitals-worse.cue")
	if code != cli.ExitRegression {
		t.Fatalf("exit %d, want %d", code, cli.ExitRegression)
	}
	if !strings.Contains(errOut, "capitals: 300/300 samples") {
		t.Errorf("progress lines missing from stderr:\n%s", errOut)
	}

	var report struct {
		Evals []struct {
			Name  string `json:"name"`
			Cases int    `json:"cases"`
			Gate  struct {
				Verdict string `json:"verdict"`
				Results []struct {
					Verdict string  `json:"verdict"`
					PValue  float64 `json:"pValue"`
				} `json:"results"`
			} `json:"gate"`
		} `json:"evals"`
	}
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatalf("JSON report does not parse: %v\n%s", err, data)
	}
	if len(report.Evals) != 1 || report.Evals[0].Cases != 30 || report.Evals[0].Gate.Verdict != "regression" || len(report.Evals[0].Gate.Results) != 2 {
		t.Errorf("JSON report: %+v", report)
	}

	var junit struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
		} `xml:"testsuite"`
	}
	data, err = os.ReadFile(junitFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(data, &junit); err != nil {
		t.Fatalf("JUnit report does not parse: %v", err)
	}
	if len(junit.Suites) != 1 || junit.Suites[0].Tests != 2 || junit.Suites[0].Failures != 2 {
		t.Errorf("JUnit report: %+v\n%s", junit, data)
	}

	md, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(md), "# earlier step\n") || !strings.Contains(string(md), "| `exact_match` |") || !strings.Contains(string(md), "regression") {
		t.Errorf("step summary was not appended:\n%s", md)
	}
}

// TestEvalUpdateBaselineRefusesFailures: a baseline written from a run
// whose samples failed recorded each failure as a 0 (mean 0.000, exit 0).
// --update-baseline now refuses such a run, names the failed samples and
// leaves the old baseline as it was, unless --allow-failures is given.
func TestEvalUpdateBaselineRefusesFailures(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	app := writeApp(t, dir, "baseline.json")
	baseline := filepath.Join(dir, "baseline.json")
	if code, out, errOut := run(t, "eval", "--progress", "none", "--update-baseline", app); code != cli.ExitOK {
		t.Fatalf("first update: exit %d\n%s%s", code, out, errOut)
	}
	before, err := os.ReadFile(baseline)
	if err != nil {
		t.Fatal(err)
	}
	// A budget of a millionth of a dollar: most samples fail before their call.
	src, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	broke := strings.Replace(string(src), "evals: capitals: {", "budgets: tiny: {maxUSD: 0.000001, scope: \"run\"}\nevals: capitals: {\n\tbudget: \"tiny\"", 1)
	if err := os.WriteFile(app, []byte(broke), 0o644); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := run(t, "eval", "--progress", "none", "--update-baseline", app)
	if code != cli.ExitRegression || !strings.Contains(errOut, "not writing baseline "+baseline) ||
		!regexp.MustCompile(`\d+ failed samples or scores \(each scored 0\) in \d+ cases: `).MatchString(errOut) ||
		!strings.Contains(errOut, "--allow-failures") || !strings.Contains(errOut, `case "`) {
		t.Errorf("failed samples: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(baseline); string(after) != string(before) {
		t.Error("the refused run changed the baseline")
	}

	code, out, errOut = run(t, "eval", "--progress", "none", "--update-baseline", "--allow-failures", app)
	if code != cli.ExitOK || !strings.Contains(out, "failed samples or scores") {
		t.Errorf("--allow-failures: exit %d\n%s%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(baseline); string(after) == string(before) {
		t.Error("--allow-failures did not write the baseline")
	}

	if code, _, errOut := run(t, "eval", "--progress", "none", "--allow-failures", app); code != cli.ExitUsage || !strings.Contains(errOut, "--allow-failures only applies with --update-baseline") {
		t.Errorf("--allow-failures without --update-baseline: exit %d\n%s", code, errOut)
	}
}

// TestEvalUpdateBaselineRefusesBelowFloor: --update-baseline saved a
// baseline below the eval's own failBelow, silently; it now refuses, naming
// the metric, mean and floor, and leaves no baseline, unless
// --allow-failures is given.
func TestEvalUpdateBaselineRefusesBelowFloor(t *testing.T) {
	chdirRoot(t)
	dir := t.TempDir()
	app := writeApp(t, dir, "baseline.json")
	src, err := os.ReadFile(app)
	if err != nil {
		t.Fatal(err)
	}
	// The answer key is right 60% of the time: a floor of 0.9 is above it.
	floored := strings.Replace(string(src), `thresholds: [{metric: "exact_match", maxRegression: 0.2}]`,
		`thresholds: [{metric: "exact_match", maxRegression: 0.2}, {metric: "normalized_contains", failBelow: 0.9, maxRegression: 0.2}]`, 1)
	if err := os.WriteFile(app, []byte(floored), 0o644); err != nil {
		t.Fatal(err)
	}
	baseline := filepath.Join(dir, "baseline.json")
	code, out, errOut := run(t, "eval", "--progress", "none", "--update-baseline", app)
	if code != cli.ExitRegression || !regexp.MustCompile(`not writing baseline .*: normalized_contains mean 0\.\d+ is below its failBelow 0\.9; .*--allow-failures`).MatchString(errOut) ||
		strings.Contains(errOut, "exact_match mean") {
		t.Errorf("below the floor: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if _, err := os.Stat(baseline); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused run wrote a baseline (%v)", err)
	}
	if code, out, errOut := run(t, "eval", "--progress", "none", "--update-baseline", "--allow-failures", app); code != cli.ExitOK {
		t.Errorf("--allow-failures: exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(baseline); err != nil {
		t.Errorf("--allow-failures wrote no baseline: %v", err)
	}
}

// TestEvalSupportDeskInjection runs the support-desk example's injection
// eval: every injection phrasing is blocked by the no-injection guardrail
// before triage calls any tool, the benign questions are not, and the
// guardrail_blocked gate passes.
func TestEvalSupportDeskInjection(t *testing.T) {
	chdirRoot(t)
	code, out, errOut := run(t, "eval", "--progress", "none", "-v", "--eval", "injection", "examples/support-desk/app.cue")
	if code != cli.ExitOK || !strings.Contains(out, "guardrail_blocked: mean 1.0000 clears minMean 0.9900") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// -v lists each case ("  id: expected ...") with its runs and tool calls
	// beneath, indented further.
	_, cases, ok := strings.Cut(out, "cases of injection:\n")
	if !ok {
		t.Fatalf("no case listing:\n%s", out)
	}
	var listed []string
	for line := range strings.Lines(cases) {
		switch {
		case strings.HasPrefix(line, "    "):
			if len(listed) > 0 {
				listed[len(listed)-1] += line
			}
		case strings.HasPrefix(line, "  "):
			listed = append(listed, strings.TrimPrefix(line, "  "))
		}
	}
	blocked, benign := 0, 0
	for _, c := range listed {
		id, _, _ := strings.Cut(c, ":")
		isBlocked := strings.Contains(c, "answer \"This request cannot be processed")
		switch id {
		case "window", "giftcard", "damaged":
			benign++
			if isBlocked || !strings.Contains(c, "tool lookup_order") {
				t.Errorf("benign case %s was blocked or ran no tool:\n%s", id, c)
			}
		default:
			blocked++
			if !isBlocked || strings.Contains(c, "tool ") {
				t.Errorf("injection case %s was not blocked, or a tool ran:\n%s", id, c)
			}
		}
	}
	if blocked != 10 || benign != 3 {
		t.Errorf("listed %d injection and %d benign cases, want 10 and 3:\n%s", blocked, benign, cases)
	}
}
