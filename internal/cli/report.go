package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/aidgen/aid/runtime/eval"
)

// printTable writes one eval's gate as a table: every gated metric with
// the baseline and current means ± standard error, the difference, the
// Holm-adjusted p-value, the minimum detectable effect and the verdict;
// then the metrics that are only reported; then why anything did not pass.
func printTable(s *streams, o *evalOutcome, baseline *eval.Baseline) {
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tbaseline\tcurrent\tdiff\tp(Holm)\tMDE\tverdict")
	gated := map[string]bool{}
	for _, r := range o.Gate.Results {
		gated[r.Threshold.Metric] = true
		base, diff, p, mde := "-", "-", "-", "-"
		if r.Tested {
			base = meanSE(r.BaselineMean, r.BaselineSE)
			diff = signed(-r.Regression)
			p = fmt.Sprintf("%.3g", r.AdjustedPValue)
			mde = fmt.Sprintf("%.3f", r.MDE)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Threshold.Metric, base, meanSE(r.CurrentMean, r.CurrentSE), diff, p, mde, r.Verdict)
	}
	for _, m := range o.Metrics {
		if gated[m] {
			continue
		}
		st := o.Stats[m]
		base := "-"
		if baseline != nil {
			if b, ok := baseline.Metrics[m]; ok {
				base = meanSE(b.Mean, b.StdErr)
			}
		}
		why := "reported"
		if o.Derived[m] {
			why = "reported (model-derived, never gates)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\n", m, base, meanSE(st.Mean, st.StdErr), why)
	}
	tw.Flush()
	for _, r := range o.Gate.Results {
		if r.Verdict == eval.Pass {
			continue
		}
		fmt.Fprintf(s.out, "  %s: %s\n", r.Threshold.Metric, r.Reason)
		if r.Advice != "" {
			fmt.Fprintf(s.out, "  %s: %s\n", r.Threshold.Metric, r.Advice)
		}
	}
	printFailures(s, o)
	fmt.Fprintf(s.out, "cost: $%.6f over %d model calls (ledger)\n", o.CostUSD, o.Calls)
	fmt.Fprintf(s.out, "verdict: %s\n\n", o.Gate.Verdict)
}

func printFailures(s *streams, o *evalOutcome) {
	if len(o.Errors) == 0 {
		return
	}
	fmt.Fprintf(s.out, "%d failed samples or scores (each scored 0):\n", len(o.Errors))
	for i, e := range o.Errors {
		if i == 5 {
			fmt.Fprintf(s.out, "  ... and %d more (see --json)\n", len(o.Errors)-5)
			break
		}
		fmt.Fprintf(s.out, "  %s\n", e)
	}
}

// signed formats a difference with its sign, without printing -0.000.
func signed(x float64) string {
	s := fmt.Sprintf("%+.3f", x)
	if s == "-0.000" {
		return "+0.000"
	}
	return s
}

func meanSE(mean, se float64) string { return fmt.Sprintf("%.3f ± %.3f", mean, se) }

func printBaselineUpdate(s *streams, o *evalOutcome, created bool) {
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tmean\tSE\truns\tcases")
	for _, m := range o.Metrics {
		st := o.Stats[m]
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%d\t%d\n", m, st.Mean, st.StdErr, st.Runs, st.Cases)
	}
	tw.Flush()
	printFailures(s, o)
	switch {
	case created:
		fmt.Fprintf(s.out, "wrote new baseline %s\n\n", o.Baseline)
	case len(o.Changes) == 0:
		fmt.Fprintf(s.out, "baseline %s is unchanged\n\n", o.Baseline)
	default:
		fmt.Fprintf(s.out, "updated baseline %s; %d changes:\n", o.Baseline, len(o.Changes))
		for i, c := range o.Changes {
			if i == 20 {
				fmt.Fprintf(s.out, "  ... and %d more (git diff shows them all)\n", len(o.Changes)-20)
				break
			}
			fmt.Fprintf(s.out, "  %s\n", c)
		}
		fmt.Fprintln(s.out)
	}
}

// writeJSONReport writes every outcome, with the per-metric statistics and
// the full gate report, for tools that post-process an eval.
func writeJSONReport(path, app string, outcomes []*evalOutcome) error {
	b, err := json.MarshalIndent(struct {
		App   string         `json:"app"`
		Evals []*evalOutcome `json:"evals"`
	}{app, outcomes}, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the JSON report: %w", err)
	}
	return writeFile(path, append(b, '\n'))
}

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Class   string        `xml:"classname,attr"`
	Name    string        `xml:"name,attr"`
	Failure *junitMessage `xml:"failure,omitempty"`
	Skipped *junitMessage `xml:"skipped,omitempty"`
	Output  string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnitReport writes one test case per threshold: a regression is a
// failure, an inconclusive gate is skipped with its advice.
func writeJUnitReport(path string, outcomes []*evalOutcome) error {
	var doc junitSuites
	for _, o := range outcomes {
		suite := junitSuite{Name: "aidgen eval " + o.Name}
		if o.Gate != nil {
			for _, r := range o.Gate.Results {
				c := junitCase{Class: o.Name, Name: r.Threshold.Metric, Output: r.Reason}
				switch r.Verdict {
				case eval.Regression:
					c.Failure = &junitMessage{Message: r.Reason, Text: r.Reason}
					suite.Failures++
				case eval.Inconclusive:
					c.Skipped = &junitMessage{Message: "inconclusive: " + r.Advice, Text: r.Reason}
					suite.Skipped++
				}
				suite.Cases = append(suite.Cases, c)
			}
		}
		suite.Tests = len(suite.Cases)
		doc.Suites = append(doc.Suites, suite)
	}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the JUnit report: %w", err)
	}
	return writeFile(path, append([]byte(xml.Header), append(b, '\n')...))
}

// appendMarkdownSummary appends a summary to GitHub's step summary file.
func appendMarkdownSummary(path, app string, outcomes []*evalOutcome, update bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "## aidgen eval `%s`\n\n", app)
	for _, o := range outcomes {
		fmt.Fprintf(&b, "### %s: %d cases × %d runs, $%.4f\n\n", o.Name, o.Cases, o.Runs, o.CostUSD)
		if update {
			fmt.Fprintf(&b, "Baseline `%s` updated (%d changes).\n\n", o.Baseline, len(o.Changes))
			continue
		}
		b.WriteString("| metric | baseline | current | diff | p (Holm) | MDE | verdict |\n|---|---|---|---|---|---|---|\n")
		for _, r := range o.Gate.Results {
			base, diff, p, mde := "–", "–", "–", "–"
			if r.Tested {
				base, diff = meanSE(r.BaselineMean, r.BaselineSE), signed(-r.Regression)
				p, mde = fmt.Sprintf("%.3g", r.AdjustedPValue), fmt.Sprintf("%.3f", r.MDE)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.Threshold.Metric, base, meanSE(r.CurrentMean, r.CurrentSE), diff, p, mde, verdictMark(r.Verdict))
		}
		for _, r := range o.Gate.Results {
			if r.Verdict != eval.Pass {
				fmt.Fprintf(&b, "\n- **%s**: %s %s", r.Threshold.Metric, r.Reason, r.Advice)
			}
		}
		fmt.Fprintf(&b, "\n\n**Verdict: %s**\n\n", o.Gate.Verdict)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func verdictMark(v eval.Verdict) string {
	switch v {
	case eval.Pass:
		return "✅ pass"
	case eval.Regression:
		return "❌ regression"
	}
	return "⚠️ " + v.String()
}

// writeFile writes a report file whole or not at all.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
