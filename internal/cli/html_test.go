package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromiumBin is where Debian's chromium package installs the browser.
const chromiumBin = "/usr/bin/chromium"

// screenshotDoc is the committed screenshot of the HTML report that the
// README shows; go test ./internal/cli -run TestHTMLReportInChromium -update
// rewrites it from the "regression" case.
const screenshotDoc = "docs/eval-report.png"

// needChromium returns the browser, or skips the test with what to install;
// with CI set a missing browser fails the test instead.
func needChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing and CI is set: install Debian's chromium (scripts/test.sh does so when run as root)", chromiumBin)
		}
		t.Skipf("%s is missing: install Debian's chromium (apt-get install -y chromium) to render the HTML report as a person would", chromiumBin)
	}
	return chromiumBin
}

// chromium runs the headless browser on a fresh profile, with nothing that
// reaches the network, and returns what it printed on stdout.
func chromium(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
		"--user-data-dir=" + t.TempDir(),
		// Any host the page might name resolves nowhere: a report that fetched
		// something would render without it, and the DOM checks would see.
		"--host-resolver-rules=MAP * ~NOTFOUND",
	}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes()
}

// groupedApp writes a copy of the capitals app whose cases come in six
// groups, and returns its path.
func groupedApp(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile("fixtures/capitals.json")
	if err != nil {
		t.Fatal(err)
	}
	var ds map[string]any
	if err := json.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	for i, c := range ds["cases"].([]any) {
		c.(map[string]any)["group"] = fmt.Sprintf("region-%d", i%6)
	}
	if data, err = json.Marshal(ds); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "grouped.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return variantApp(t, filepath.Join(dir, "grouped.cue"), "grouped", "grouped.json", "grouped.json", `runs: 6
	metrics: ["exact_match", "normalized_contains"]
	baseline: "grouped-baseline.json"
	thresholds: [{metric: "exact_match", maxRegression: 0.1}, {metric: "normalized_contains", failBelow: 0.3, maxRegression: 0.1}]`)
}

// variantApp writes a variant of the capitals app to path: the fake answers
// from the answer key in key, right 70% of the time, and the eval samples
// dataset with the rest of its fields in body.
func variantApp(t *testing.T, path, name, key, dataset, body string) string {
	t.Helper()
	src := `name: "` + name + `"
version: "0.1.0"
providers: fake: {kind: "fake", answerKey: {dataset: "` + key + `", accuracy: 0.7}}
models: "fake-chat-2024-06-01": {provider: "fake", contextWindow: 8192, maxOutputTokens: 64, cost: {inputPer1kUSD: 0.00015, outputPer1kUSD: 0.0006}}
aliases: small: "fake-chat-2024-06-01"
evals: capitals: {
	dataset: "` + dataset + `"
	target: {model: "small", prompt: "{{.Input}}"}
	` + body + `
}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// erroredApps writes two copies of the capitals app into dir that share a
// baseline: the first answers every case; the second's answer key lacks
// three cases, whose samples therefore fail. It returns their paths.
func erroredApps(t *testing.T, dir string) (clean, errored string) {
	t.Helper()
	data, err := os.ReadFile("fixtures/capitals.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "errors.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	var ds map[string]any
	if err := json.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	ds["cases"] = ds["cases"].([]any)[3:] // fr, de and it are missing from the key
	if data, err = json.Marshal(ds); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "partial-key.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	app := func(name, key string) string {
		return variantApp(t, filepath.Join(dir, name), "errors", key, "errors.json", `runs: 4
	metrics: ["exact_match"]
	baseline: "errors-baseline.json"
	thresholds: [{metric: "exact_match", maxRegression: 0.1}]`)
	}
	return app("errors-clean.cue", "errors.json"), app("errors.cue", "partial-key.json")
}

// textFigures lists what the text report says, as the HTML report must
// say it too: every cell of the table, and every other line but the
// sampling header, with runs of spaces made one.
func textFigures(stdout string) []string {
	var out []string
	inTable := false
	for _, l := range strings.Split(stdout, "\n") {
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "eval ") && strings.Contains(l, "concurrency"):
		case strings.HasPrefix(l, "metric  "):
			inTable = true
			out = append(out, cells(l)...)
		case strings.HasPrefix(l, "regression = baseline"):
			inTable = false
			out = append(out, squash(l))
		case inTable:
			out = append(out, cells(l)...)
		default:
			out = append(out, squash(l))
		}
	}
	return out
}

func cells(l string) []string { return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1) }

func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// domText is the text of a dumped DOM: tags removed, entities decoded,
// runs of white space made one.
func domText(dom string) string {
	dom = regexp.MustCompile(`(?s)<style.*?</style>`).ReplaceAllString(dom, " ")
	dom = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(dom, " ")
	return squash(html.UnescapeString(dom))
}

// TestHTMLReportInChromium renders real reports (pass, regression,
// inconclusive, grouped, with errors) in Debian's headless Chromium, as a
// person would open them: the DOM must hold every figure the text report
// has, the figures of each tested threshold and working links to the cases,
// and nothing may be fetched. A desktop and a phone screenshot and a print
// (PDF) of each are kept in the test's artifact directory for review
// (go test -artifacts -outputdir DIR keeps them).
func TestHTMLReportInChromium(t *testing.T) {
	bin := needChromium(t)
	t.Chdir("../..")
	dir := t.TempDir()
	clean, errored := erroredApps(t, dir)
	grouped := groupedApp(t, dir)
	for _, setup := range [][]string{
		{clean, "--update-baseline"},
		{grouped, "--update-baseline"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(append([]string{"eval", "--progress", "none"}, setup...), strings.NewReader(""), &out, &errOut); code != ExitOK {
			t.Fatalf("%v: exit %d\n%s%s", setup, code, out.String(), errOut.String())
		}
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		tested int // thresholds compared with the baseline
	}{
		{"pass", []string{"examples/capitals/app.cue"}, ExitOK, 1},
		{"regression", []string{"testdata/eval/capitals-worse.cue"}, ExitRegression, 2},
		{"inconclusive", []string{"examples/capitals/app.cue", "--runs", "1", "--seed", "2"}, ExitInconclusive, 1},
		{"grouped", []string{grouped, "--seed", "4"}, -1, 2},
		{"errors", []string{errored}, -1, 1},
	}
	// The evals run here, one after the other (they read paths relative to
	// the repository); the browser renders their reports in parallel.
	artifacts := t.ArtifactDir()
	stdout := map[string]string{}
	for _, tt := range tests {
		path := filepath.Join(artifacts, tt.name+".html")
		var out, errOut bytes.Buffer
		code := Main(append([]string{"eval", "--progress", "none", "--html", path}, tt.args...), strings.NewReader(""), &out, &errOut)
		if tt.code >= 0 && code != tt.code {
			t.Fatalf("%s: exit %d, want %d\n%s%s", tt.name, code, tt.code, out.String(), errOut.String())
		}
		stdout[tt.name] = out.String()
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(artifacts, tt.name+".html")
			page, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Self-contained: no resource is named outside the file.
			for _, bad := range []string{`src=`, `url(`, `@import`, `<script`, `<link`} {
				if bytes.Contains(page, []byte(bad)) {
					t.Errorf("the report contains %q: it must not load anything", bad)
				}
			}
			for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllSubmatch(page, -1) {
				target := string(m[1])
				if !strings.HasPrefix(target, "#") {
					t.Errorf("link %q leaves the report", target)
				} else if !bytes.Contains(page, []byte(`id="`+target[1:]+`"`)) {
					t.Errorf("link %q has no target", target)
				}
			}

			url := "file://" + path
			desktop := filepath.Join(artifacts, tt.name+"-desktop.png")
			dom := string(chromium(t, bin, "--window-size=1100,1400", "--screenshot="+desktop, "--dump-dom", url))
			text := domText(dom)
			for _, want := range textFigures(stdout[tt.name]) {
				if !strings.Contains(text, want) {
					t.Errorf("the rendered report lacks %q, which the text report has", want)
				}
			}
			// Each figure is drawn twice, for wide screens and for phones.
			if n := strings.Count(dom, `<svg class="fig"`); n < 2*3*tt.tested {
				t.Errorf("%d figures, want at least 3 (at two widths) for each of %d compared thresholds", n, tt.tested)
			}
			for _, want := range []string{"upper bound", "maxRegression", "per-case regression"} {
				if !strings.Contains(dom, want) {
					t.Errorf("the figures lack %q", want)
				}
			}
			switch tt.name {
			case "errors":
				// The three cases the key lacks failed every sample: red, labelled and
				// linked to their inputs and failures.
				if n := len(regexp.MustCompile(`<a href="#e1-case-\d+"><circle class="case errored labelled"`).FindAllString(dom, -1)); n != 2*3 {
					t.Errorf("%d labelled red dots, want the 3 errored cases at two widths", n)
				}
				for _, id := range []string{"fr", "de", "it"} {
					if !strings.Contains(text, "case "+id+" errored") || !strings.Contains(text, `answer key has no case "`+id+`"`) {
						t.Errorf("errored case %s is not shown with its failure", id)
					}
				}
				if !strings.Contains(text, "What is the capital of France?") {
					t.Error("the errored case's input is not shown")
				}
			case "regression":
				// A case that regressed shows the baseline's answer beside
				// this run's, run by run.
				if n, m := strings.Count(dom, `class="baseline-answer"`), strings.Count(dom, `class="current-answer"`); n == 0 || n != m {
					t.Errorf("%d baseline answers beside %d current ones, want as many and some", n, m)
				}
				if !strings.Contains(text, "baseline's run 1") || !strings.Contains(text, "this run") {
					t.Error("the regressed cases do not label the baseline's answers")
				}
			case "grouped":
				if !strings.Contains(text, "clustered over 6 groups (CR2") {
					t.Error("the grouped report does not say its standard error is clustered")
				}
			case "inconclusive":
				if !strings.Contains(text, "advice: ") {
					t.Error("the inconclusive report gives no advice")
				}
			}

			phone := filepath.Join(artifacts, tt.name+"-phone.png")
			pdf := filepath.Join(artifacts, tt.name+".pdf")
			chromium(t, bin, "--window-size=390,1600", "--force-device-scale-factor=2", "--screenshot="+phone, url)
			chromium(t, bin, "--no-pdf-header-footer", "--print-to-pdf="+pdf, url)
			for _, f := range []struct{ path, magic string }{{desktop, "\x89PNG"}, {phone, "\x89PNG"}, {pdf, "%PDF"}} {
				b, err := os.ReadFile(f.path)
				if err != nil || len(b) < 10_000 || !bytes.HasPrefix(b, []byte(f.magic)) {
					t.Errorf("%s: %d bytes, %v", f.path, len(b), err)
				}
			}
			t.Logf("rendered %s: %s, %s, %s", path, desktop, phone, pdf)
			if *update && tt.name == "regression" {
				b, err := os.ReadFile(desktop)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Dir(screenshotDoc), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(screenshotDoc, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestHTMLReportEscapes renders the hand-built outcome, whose case ids and
// texts hold markup, without a browser: the same outcome gives the same
// bytes, every text is escaped, and the figures are there.
func TestHTMLReportEscapes(t *testing.T) {
	o := handBuilt(t)
	o.Details = []caseDetail{{
		ID: "x|y]]>", Input: `<script>alert("input")</script>`, Expected: "a & b",
		Runs: []runDetail{{Answer: `<img src=x onerror="alert(1)">`, Scores: map[string]float64{"exact_match": 0}}},
	}}
	a, err := renderHTML("app <b>.cue", []*evalOutcome{o}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := renderHTML("app <b>.cue", []*evalOutcome{o}, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("the same outcome renders to different bytes")
	}
	page := string(a)
	for _, bad := range []string{"<script", "<img", "<b>.cue", "x|y]]>"} {
		if strings.Contains(page, bad) {
			t.Errorf("the report holds %q unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;", "&lt;img src=x", "a &amp; b", "app &lt;b&gt;.cue", `class="fig"`, "upper bound"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestHTMLSummaryLine: the step summary names the HTML report, and in a
// GitHub Actions run links to the run's artifacts.
func TestHTMLSummaryLine(t *testing.T) {
	t.Setenv("GITHUB_SERVER_URL", "")
	if got := htmlSummaryLine(""); got != "" {
		t.Errorf("without --html: %q", got)
	}
	if got := htmlSummaryLine("out/eval.html"); got != "HTML report: `eval.html` — upload it as an artifact to keep it with the run" {
		t.Errorf("outside Actions: %q", got)
	}
	t.Setenv("GITHUB_SERVER_URL", "https://github.com")
	t.Setenv("GITHUB_REPOSITORY", "acme/app")
	t.Setenv("GITHUB_RUN_ID", "42")
	got := htmlSummaryLine("out/eval.html")
	if !strings.Contains(got, "[artifacts of this run](https://github.com/acme/app/actions/runs/42#artifacts)") {
		t.Errorf("in Actions: %q", got)
	}
	md := markdownSummary("app.cue", []*evalOutcome{handBuilt(t)}, false, got)
	if !strings.HasPrefix(md, "## aidgen eval `app.cue`\n\n"+got+"\n\n") {
		t.Errorf("the summary does not start with the report's line:\n%s", md)
	}
}
