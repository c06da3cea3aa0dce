package cli

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/aidgen/aid/runtime/eval"
)

// The one rendering of an eval: text on stdout, the JSON report, JUnit and
// GitHub's step summary are all built here from an evalOutcome, with one
// sign convention: "regression" is baseline − current, positive when the
// metric got worse, as in eval.ThresholdResult.Regression and the gate's
// reasons. Every ± is one standard error.

// ReportSchemaVersion is the version of the JSON report's shape, written
// into every report as schemaVersion. It changes only when a field is
// removed or changes meaning; the report is described by the JSON Schema
// schemas/eval-report.schema.json.
const ReportSchemaVersion = 2

// ReportSchemaPath is where the JSON report's schema lives in the
// repository, as the help text tells users.
const ReportSchemaPath = "schemas/eval-report.schema.json"

// topDrops is how many of the cases that dropped most each report lists
// per gated metric.
const topDrops = 5

// legend explains the table's columns under every text and markdown table.
const legend = "regression = baseline − current, positive is worse; ± is one standard error; p is Holm-adjusted; MDE is the minimum detectable effect"

// caseDrop is one case whose mean fell from the baseline to this run.
type caseDrop struct {
	ID           string  `json:"id"`
	BaselineMean float64 `json:"baselineMean"`
	CurrentMean  float64 `json:"currentMean"`
	Regression   float64 `json:"regression"`
}

// metricDrops lists, for one gated metric, the cases that dropped most.
type metricDrops struct {
	Metric string `json:"metric"`
	// Dropped counts the cases present on both sides whose mean fell.
	Dropped int `json:"dropped"`
	// Largest are the topDrops largest drops, largest first, ties by id.
	Largest []caseDrop `json:"largest"`
}

// caseErrors counts the failed samples and scores of one case.
type caseErrors struct {
	ID     string `json:"id"`
	Errors int    `json:"errors"`
}

// modelReport is what an eval says about its models: those it was sampled
// with and how they differ from the baseline's. It is embedded in
// evalOutcome, so its fields are the eval's in the JSON report. A change of
// model never changes a verdict; every format shows it before the scores,
// so that a re-pinned alias is never read as noise.
type modelReport struct {
	// PinnedModels are the models this run was sampled with, target first.
	PinnedModels []eval.ModelPin `json:"pinnedModels"`
	// ModelChanges lists how they differ from the baseline's.
	ModelChanges []eval.ModelChange `json:"modelChanges,omitempty"`
	// BaselineModelsUnrecorded is set when the baseline predates pinned
	// models, so a change of model cannot be seen.
	BaselineModelsUnrecorded bool `json:"baselineModelsUnrecorded,omitempty"`
}

// pinModels records the run's pinned models and compares them with the
// baseline's; baseline is nil when there is none to compare with (or when
// the baseline is being rewritten, whose diff lists the models instead).
func (o *evalOutcome) pinModels(pins []eval.ModelPin, baseline *eval.Baseline) {
	o.PinnedModels = append([]eval.ModelPin{}, pins...)
	o.ModelChanges = eval.CompareModels(baseline, pins)
	o.BaselineModelsUnrecorded = baseline != nil && len(baseline.Pins) == 0 && len(pins) > 0
}

// modelChangeText is the one line every format shows when the models
// changed: "models changed since the baseline: small: a → b; ...".
func modelChangeText(o *evalOutcome) string {
	if len(o.ModelChanges) == 0 {
		return ""
	}
	parts := make([]string, len(o.ModelChanges))
	for i, c := range o.ModelChanges {
		parts[i] = c.String()
	}
	return "models changed since the baseline: " + strings.Join(parts, "; ")
}

// unrecordedModelsText is the note every format shows, once, when the
// baseline does not record its models.
const unrecordedModelsText = "the baseline does not record its models; aidgen eval --update-baseline records them"

// modelLines are the lines about models that precede an eval's scores in
// every format: the change, or the note that it cannot be seen; none when
// the models are the baseline's.
func modelLines(o *evalOutcome) []string {
	var out []string
	if t := modelChangeText(o); t != "" {
		out = append(out, t)
	}
	if o.BaselineModelsUnrecorded {
		out = append(out, unrecordedModelsText)
	}
	return out
}

// largestDrops compares per-case means of one metric: the cases in both
// the baseline and this run whose mean fell, the n largest first.
func largestDrops(metric string, cur eval.MetricStats, base *eval.MetricStats, n int) metricDrops {
	d := metricDrops{Metric: metric, Largest: []caseDrop{}}
	if base == nil {
		return d
	}
	var all []caseDrop
	for id, c := range cur.CaseMeans {
		b, ok := base.CaseMeans[id]
		if !ok {
			continue
		}
		// A baseline keeps six decimals: compare on that grid, so that 1/3 read back as
		// 0.333333 is no drop, and equal drops tie exactly (then sort by id).
		if r := round6(b) - round6(c); round6(r) > 0 {
			all = append(all, caseDrop{ID: id, BaselineMean: b, CurrentMean: c, Regression: round6(r)})
		}
	}
	slices.SortFunc(all, func(x, y caseDrop) int {
		return cmp.Or(cmp.Compare(y.Regression, x.Regression), cmp.Compare(x.ID, y.ID))
	})
	d.Dropped = len(all)
	d.Largest = append(d.Largest, all[:min(n, len(all))]...)
	return d
}

// round6 rounds to six decimals, the precision of a baseline file.
func round6(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// gateDrops lists the largest drops of every gated metric, in threshold
// order, each metric once.
func gateDrops(gate *eval.GateReport, stats map[string]eval.MetricStats, baseline *eval.Baseline) []metricDrops {
	var out []metricDrops
	for _, r := range gate.Results {
		m := r.Threshold.Metric
		if slices.ContainsFunc(out, func(d metricDrops) bool { return d.Metric == m }) {
			continue
		}
		var base *eval.MetricStats
		if baseline != nil {
			if b, ok := baseline.Metrics[m]; ok {
				base = &b
			}
		}
		out = append(out, largestDrops(m, stats[m], base, topDrops))
	}
	return out
}

// erroredCases counts failures per case id, the most failures first.
func erroredCases(ids []string) []caseErrors {
	counts := map[string]int{}
	for _, id := range ids {
		counts[id]++
	}
	out := make([]caseErrors, 0, len(counts))
	for id, n := range counts {
		out = append(out, caseErrors{ID: id, Errors: n})
	}
	slices.SortFunc(out, func(a, b caseErrors) int { return cmp.Or(cmp.Compare(b.Errors, a.Errors), cmp.Compare(a.ID, b.ID)) })
	return out
}

func (o *evalOutcome) dropsFor(metric string) *metricDrops {
	for i := range o.Drops {
		if o.Drops[i].Metric == metric {
			return &o.Drops[i]
		}
	}
	return nil
}

// plural writes n with the singular or plural noun: "1 run", "2 runs".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
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

// showID prints a case id as is when it is plain, quoted when it has
// spaces or control characters that would blur a list.
func showID(id string) string {
	for _, r := range id {
		if !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == ',' {
			return strconv.Quote(id)
		}
	}
	return id
}

// firstOf lists the first n items and how many more there are.
func firstOf(items []string, n int) string {
	s := strings.Join(items[:min(n, len(items))], ", ")
	if len(items) > n {
		s += fmt.Sprintf(" and %d more", len(items)-n)
	}
	return s
}

// idList lists the first n case ids and how many more there are.
func idList(ids []string, n int) string {
	shown := make([]string, 0, min(n, len(ids)))
	for _, id := range ids[:min(n, len(ids))] {
		shown = append(shown, showID(id))
	}
	return firstOf(append(shown, ids[len(shown):]...), n)
}

// gateTable is the gate as rows of cells, the header first: every gated
// metric, then the metrics that are only reported. verdict renders the
// verdict cell (plain for text, marked for markdown).
func gateTable(o *evalOutcome, verdict func(eval.Verdict) string) [][]string {
	rows := [][]string{{"metric", "baseline ± s.e.", "current ± s.e.", "regression", "p (Holm)", "MDE", "verdict"}}
	gated := map[string]bool{}
	for _, r := range o.Gate.Results {
		gated[r.Threshold.Metric] = true
		base, reg, p, mde := "-", "-", "-", "-"
		if r.Tested {
			base = meanSE(r.BaselineMean, r.BaselineSE)
			reg = signed(r.Regression)
			p = fmt.Sprintf("%.3g", r.AdjustedPValue)
			mde = fmt.Sprintf("%.3f", r.MDE)
		}
		rows = append(rows, []string{r.Threshold.Metric, base, meanSE(r.CurrentMean, r.CurrentSE), reg, p, mde, verdict(r.Verdict)})
	}
	for _, m := range o.Metrics {
		if gated[m] {
			continue
		}
		st := o.Stats[m]
		base := "-"
		if o.baseline != nil {
			if b, ok := o.baseline.Metrics[m]; ok {
				base = meanSE(b.Mean, b.StdErr)
			}
		}
		why := "reported"
		switch {
		case st.ModelDerived && st.Calibration != nil:
			why = "reported (calibrated judge, not gated)"
		case st.ModelDerived:
			why = "reported (model-derived, gates only when calibrated)"
		}
		rows = append(rows, []string{m, base, meanSE(st.Mean, st.StdErr), "-", "-", "-", why})
	}
	return rows
}

// thresholdDetails are the lines under a threshold's reason: what the
// comparison rests on, which cases were not compared, the advice and the
// cases that dropped most.
func thresholdDetails(r eval.ThresholdResult, d *metricDrops) []string {
	var out []string
	if r.Basis != "" {
		out = append(out, "basis: "+r.Basis)
	}
	if len(r.AddedCases) > 0 {
		out = append(out, fmt.Sprintf("%s not in the baseline: %s", plural(len(r.AddedCases), "added case", "added cases"), idList(r.AddedCases, topDrops)))
	}
	if len(r.RemovedCases) > 0 {
		out = append(out, fmt.Sprintf("%s not in this run: %s", plural(len(r.RemovedCases), "removed case", "removed cases"), idList(r.RemovedCases, topDrops)))
	}
	if r.Advice != "" {
		out = append(out, "advice: "+r.Advice)
	}
	if d != nil && len(d.Largest) > 0 {
		out = append(out, fmt.Sprintf("largest drops (%d of %s that dropped), baseline → current:", len(d.Largest), plural(d.Dropped, "case", "cases")))
		w := 0
		for _, c := range d.Largest {
			w = max(w, len(showID(c.ID)))
		}
		for _, c := range d.Largest {
			out = append(out, fmt.Sprintf("  %-*s  %.3f → %.3f  regression %s", w, showID(c.ID), c.BaselineMean, c.CurrentMean, signed(c.Regression)))
		}
	}
	return out
}

// failureSummary says how many samples or scores failed and in which
// cases; empty when none did.
func failureSummary(o *evalOutcome) string {
	if len(o.Errors) == 0 {
		return ""
	}
	ids := make([]string, 0, len(o.ErroredCases))
	for _, c := range o.ErroredCases {
		ids = append(ids, fmt.Sprintf("%s (%d)", showID(c.ID), c.Errors))
	}
	return fmt.Sprintf("%s (each scored 0) in %s: %s", plural(len(o.Errors), "failed sample or score", "failed samples or scores"),
		plural(len(o.ErroredCases), "case", "cases"), firstOf(ids, topDrops))
}

// printTable writes one eval's gate: the table of every gated and
// reported metric, what each column means, each threshold's reason with
// its details, the failures, the cost and the verdict; first, when the
// models differ from the baseline's, what changed.
func printTable(s *streams, o *evalOutcome) {
	for _, l := range modelLines(o) {
		fmt.Fprintln(s.out, l)
	}
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	for _, row := range gateTable(o, eval.Verdict.String) {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
	fmt.Fprintln(s.out, legend)
	for _, r := range o.Gate.Results {
		fmt.Fprintf(s.out, "%s: %s\n", r.Threshold.Metric, r.Reason)
		for _, l := range thresholdDetails(r, o.dropsFor(r.Threshold.Metric)) {
			fmt.Fprintf(s.out, "  %s\n", l)
		}
	}
	printFailures(s, o)
	printApprovals(s, o)
	if l := fallbackLine(o); l != "" {
		fmt.Fprintln(s.out, l)
	}
	fmt.Fprintf(s.out, "cost: $%.6f over %s (ledger)%s\n", o.CostUSD, plural(int(o.Calls), "model call", "model calls"), cacheNote(o.CacheReadTokens, o.CacheWriteTokens))
	fmt.Fprintf(s.out, "verdict: %s\n\n", o.Gate.Verdict)
}

// sampleApprovals is what an eval's approval policy decided in one
// sample's run.
type sampleApprovals struct {
	Case     string `json:"case"`
	Sample   int    `json:"sample"`
	Approved int    `json:"approved"`
	Rejected int    `json:"rejected"`
	// Decisions are the decisions in order, each naming its tool.
	Decisions []eval.Decision `json:"decisions"`
}

// approvalsOf collects the decisions of every sample that took any, in
// dataset and sample order.
func approvalsOf(res *eval.Result) []sampleApprovals {
	var out []sampleApprovals
	for _, cr := range res.Cases {
		for _, smp := range cr.Samples {
			if len(smp.Answer.Decisions) == 0 {
				continue
			}
			a := sampleApprovals{Case: cr.CaseID, Sample: smp.Index, Decisions: smp.Answer.Decisions}
			for _, d := range smp.Answer.Decisions {
				if d.Approved {
					a.Approved++
				} else {
					a.Rejected++
				}
			}
			out = append(out, a)
		}
	}
	return out
}

// decisionsText says what was decided in a sample: "approved 1
// (reset_user_password), rejected 0".
func decisionsText(a sampleApprovals) string {
	var approved, rejected []string
	for _, d := range a.Decisions {
		if d.Approved {
			approved = append(approved, d.Tool)
		} else {
			rejected = append(rejected, d.Tool)
		}
	}
	part := func(verb string, tools []string) string {
		if len(tools) == 0 {
			return verb + " 0"
		}
		return fmt.Sprintf("%s %d (%s)", verb, len(tools), strings.Join(tools, ", "))
	}
	return part("approved", approved) + ", " + part("rejected", rejected)
}

// approvalLines are the report's lines on the approval policy's
// decisions: a total, then one line per sample that took any.
func approvalLines(o *evalOutcome) []string {
	if len(o.Approvals) == 0 {
		return nil
	}
	var approved, rejected int
	for _, a := range o.Approvals {
		approved, rejected = approved+a.Approved, rejected+a.Rejected
	}
	out := []string{fmt.Sprintf("approvals: %s in %s: %d approved, %d rejected",
		plural(approved+rejected, "call decided", "calls decided"), plural(len(o.Approvals), "sample", "samples"), approved, rejected)}
	for _, a := range o.Approvals {
		out = append(out, fmt.Sprintf("  case %s run %d: %s", showID(a.Case), a.Sample+1, decisionsText(a)))
	}
	return out
}

func printApprovals(s *streams, o *evalOutcome) {
	for _, l := range approvalLines(o) {
		fmt.Fprintln(s.out, l)
	}
}

func printFailures(s *streams, o *evalOutcome) {
	if len(o.Errors) == 0 {
		return
	}
	fmt.Fprintln(s.out, failureSummary(o))
	for _, l := range failureLines(o, " (see --json)") {
		fmt.Fprintf(s.out, "  %s\n", l)
	}
}

// failureLines are the first failed samples or scores, one a line, and how
// many more there are, followed by where.
func failureLines(o *evalOutcome, where string) []string {
	const shown = 5
	out := slices.Clone(o.Errors[:min(shown, len(o.Errors))])
	if len(o.Errors) > shown {
		out = append(out, fmt.Sprintf("... and %d more%s", len(o.Errors)-shown, where))
	}
	return out
}

func printBaselineUpdate(s *streams, o *evalOutcome, created bool) {
	tw := tabwriter.NewWriter(s.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "metric\tmean ± s.e.\truns\tcases")
	for _, m := range o.Metrics {
		st := o.Stats[m]
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", m, meanSE(st.Mean, st.StdErr), st.Runs, st.Cases)
	}
	tw.Flush()
	printFailures(s, o)
	switch {
	case created:
		fmt.Fprintf(s.out, "wrote new baseline %s\n\n", o.Baseline)
	case len(o.Changes) == 0:
		fmt.Fprintf(s.out, "baseline %s is unchanged\n\n", o.Baseline)
	default:
		fmt.Fprintf(s.out, "updated baseline %s; %s:\n", o.Baseline, plural(len(o.Changes), "change", "changes"))
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

// jsonReport is the JSON report's top level, described by
// schemas/eval-report.schema.json.
type jsonReport struct {
	SchemaVersion int            `json:"schemaVersion"`
	App           string         `json:"app"`
	Evals         []*evalOutcome `json:"evals"`
}

// writeJSONReport writes every outcome, with the per-metric statistics and
// the full gate report, for tools that post-process an eval.
func writeJSONReport(path, app string, outcomes []*evalOutcome) error {
	b, err := json.MarshalIndent(jsonReport{SchemaVersion: ReportSchemaVersion, App: app, Evals: outcomes}, "", "  ")
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
	Name       string           `xml:"name,attr"`
	Tests      int              `xml:"tests,attr"`
	Failures   int              `xml:"failures,attr"`
	Skipped    int              `xml:"skipped,attr"`
	Properties *junitProperties `xml:"properties,omitempty"`
	Cases      []junitCase      `xml:"testcase"`
}

// junitProperties are a suite's properties: what changed in its models.
type junitProperties struct {
	Property []junitProperty `xml:"property"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
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
	Text    string `xml:",cdata"`
}

// junitText is a threshold's reason with the eval's model changes, the
// threshold's details and the eval's failures, the body of its JUnit
// failure or skip.
func junitText(o *evalOutcome, r eval.ThresholdResult) string {
	lines := append([]string{r.Reason}, modelLines(o)...)
	lines = append(lines, thresholdDetails(r, o.dropsFor(r.Threshold.Metric))...)
	if f := failureSummary(o); f != "" {
		lines = append(lines, f)
	}
	return strings.Join(lines, "\n")
}

// writeJUnitReport writes one test case per threshold: a regression is a
// failure, an inconclusive gate is skipped with its advice; the reason and
// its details are the failure's or skip's body, or a pass's output. A
// change of models is a suite property and a line of every body.
func writeJUnitReport(path string, outcomes []*evalOutcome) error {
	var doc junitSuites
	for _, o := range outcomes {
		suite := junitSuite{Name: "aidgen eval " + o.Name}
		var props []junitProperty
		if t := modelChangeText(o); t != "" {
			props = append(props, junitProperty{Name: "modelChanges", Value: t})
		}
		if o.BaselineModelsUnrecorded {
			props = append(props, junitProperty{Name: "baselineModelsUnrecorded", Value: unrecordedModelsText})
		}
		if len(props) > 0 {
			suite.Properties = &junitProperties{Property: props}
		}
		if o.Gate != nil {
			for _, r := range o.Gate.Results {
				c := junitCase{Class: o.Name, Name: r.Threshold.Metric}
				switch r.Verdict {
				case eval.Pass:
					c.Output = junitText(o, r)
				case eval.Regression:
					c.Failure = &junitMessage{Message: r.Reason, Text: junitText(o, r)}
					suite.Failures++
				case eval.Inconclusive:
					c.Skipped = &junitMessage{Message: "inconclusive: " + r.Advice, Text: junitText(o, r)}
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

// mdEscape keeps text from a dataset or a reason from breaking a markdown
// table or list: pipes and markdown punctuation are escaped, line breaks
// become spaces.
func mdEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r':
			b.WriteByte(' ')
		case strings.ContainsRune("\\`*_[]<>|#", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdCode puts a name in a code span that survives a markdown table: a
// backtick inside widens the fence, a pipe is escaped.
func mdCode(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\n", " "), "|", "\\|")
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || fence != "`" {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// markdownSummary renders the outcomes for GitHub's step summary; html,
// when not empty, is the line that points to the HTML report.
func markdownSummary(app string, outcomes []*evalOutcome, update bool, html string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## aidgen eval %s\n\n", mdCode(app))
	if html != "" {
		fmt.Fprintf(&b, "%s\n\n", html)
	}
	for _, o := range outcomes {
		fmt.Fprintf(&b, "### %s: %s × %s, $%.4f\n\n", mdEscape(o.Name), plural(o.Cases, "case", "cases"), plural(o.Runs, "run", "runs"), o.CostUSD)
		if update || o.Gate == nil {
			fmt.Fprintf(&b, "Baseline %s updated (%s).\n\n", mdCode(o.Baseline), plural(len(o.Changes), "change", "changes"))
			continue
		}
		if l := fallbackLine(o); l != "" {
			fmt.Fprintf(&b, "> [!WARNING]\n> %s\n\n", mdEscape(l))
		}
		if t := modelChangeText(o); t != "" {
			fmt.Fprintf(&b, "> [!WARNING]\n> %s\n\n", mdEscape(t))
		}
		if o.BaselineModelsUnrecorded {
			fmt.Fprintf(&b, "> [!NOTE]\n> %s\n\n", mdEscape(unrecordedModelsText))
		}
		for i, row := range gateTable(o, verdictMark) {
			cells := make([]string, len(row))
			for j, c := range row {
				cells[j] = mdEscape(c)
			}
			if i > 0 {
				cells[0] = mdCode(row[0])
			}
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
			if i == 0 {
				b.WriteString(strings.Repeat("|---", len(row)) + "|\n")
			}
		}
		fmt.Fprintf(&b, "\n%s\n\n", mdEscape(legend))
		for _, r := range o.Gate.Results {
			fmt.Fprintf(&b, "- %s (%s): %s\n", mdCode(r.Threshold.Metric), r.Verdict, mdEscape(r.Reason))
			for _, l := range thresholdDetails(r, o.dropsFor(r.Threshold.Metric)) {
				indent := "  "
				if strings.HasPrefix(l, "  ") { // a case under "largest drops"
					indent = "    "
				}
				fmt.Fprintf(&b, "%s- %s\n", indent, mdEscape(strings.TrimSpace(l)))
			}
		}
		if f := failureSummary(o); f != "" {
			fmt.Fprintf(&b, "\n%s\n", mdEscape(f))
		}
		fmt.Fprintf(&b, "\n**Verdict: %s**\n\n", o.Gate.Verdict)
	}
	return b.String()
}

// htmlSummaryLine is the step summary's line about the HTML report at path: its
// name, and in a GitHub Actions run a link to the run's page, whose
// artifacts hold it when the workflow uploads it. Empty without a report.
func htmlSummaryLine(path string) string {
	if path == "" {
		return ""
	}
	line := fmt.Sprintf("HTML report: %s", mdCode(filepath.Base(path)))
	server, repo, id := os.Getenv("GITHUB_SERVER_URL"), os.Getenv("GITHUB_REPOSITORY"), os.Getenv("GITHUB_RUN_ID")
	if server != "" && repo != "" && id != "" {
		line += fmt.Sprintf(" — in the [artifacts of this run](%s/%s/actions/runs/%s#artifacts) when the workflow uploads it", server, repo, url.PathEscape(id))
	} else {
		line += " — upload it as an artifact to keep it with the run"
	}
	return line
}

// appendMarkdownSummary appends a summary to GitHub's step summary file.
func appendMarkdownSummary(path, app string, outcomes []*evalOutcome, update bool, html string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(f, markdownSummary(app, outcomes, update, html)); err != nil {
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

// fallbackLine says how many samples a fallback alias answered, so that
// scores that are not the asked-for model's alone never pass silently; it
// is empty when none did.
func fallbackLine(o *evalOutcome) string {
	if o.Fallbacks == 0 {
		return ""
	}
	return fmt.Sprintf("fallbacks: %s of %d answered by a fallback alias, not the one asked for", plural(o.Fallbacks, "sample", "samples"), o.Cases*o.Runs)
}

// printCases writes every case of an eval (-v): its expected answer, then
// each run's scores, answer and tool calls with their modes, one a line.
func printCases(s *streams, o *evalOutcome) {
	fmt.Fprintf(s.out, "cases of %s:\n", o.Name)
	for _, c := range o.Details {
		fmt.Fprintf(s.out, "  %s: expected %s\n", showID(c.ID), strconv.Quote(c.Expected))
		for k, r := range c.Runs {
			var scores []string
			for _, m := range o.Metrics {
				if v, ok := r.Scores[m]; ok {
					scores = append(scores, fmt.Sprintf("%s %.3g", m, v))
				}
			}
			fmt.Fprintf(s.out, "    run %d: %s; answer %s\n", k+1, strings.Join(scores, ", "), strconv.Quote(r.Answer))
			if r.Err != "" {
				fmt.Fprintf(s.out, "      error: %s\n", r.Err)
			}
			if g := guardrailsText(r); g != "" {
				fmt.Fprintf(s.out, "      %s\n", g)
			}
			for _, tc := range r.ToolCalls {
				fmt.Fprintf(s.out, "      %s\n", toolCallText(tc))
			}
		}
		if len(c.Regressed) > 0 {
			fmt.Fprintf(s.out, "    regressed on %s since the baseline", strings.Join(c.Regressed, ", "))
			if len(c.BaselineAnswers) == 0 {
				fmt.Fprintln(s.out, ", whose answers are not recorded (aidgen eval --update-baseline records them)")
			} else {
				fmt.Fprintln(s.out, "; the baseline answered:")
			}
			for k, a := range c.BaselineAnswers {
				fmt.Fprintf(s.out, "    baseline run %d: answer %s\n", k+1, strconv.Quote(a))
			}
		}
	}
	fmt.Fprintln(s.out)
}

// guardrailsText says what the guardrails did in a run, for the reports:
// "guardrails: blocked; tripped no-injection, no-card-numbers", or "" when
// none tripped.
func guardrailsText(r runDetail) string {
	if !r.Blocked && len(r.Tripped) == 0 {
		return ""
	}
	var parts []string
	if r.Blocked {
		parts = append(parts, "blocked")
	}
	if len(r.Tripped) > 0 {
		parts = append(parts, "tripped "+strings.Join(r.Tripped, ", "))
	}
	return "guardrails: " + strings.Join(parts, "; ")
}

// toolCallText is one tool call as the text report shows it:
// "tool issue_refund [stub] {"order_id":"A"} → {"status":"issued"}".
func toolCallText(tc eval.ToolCall) string {
	out := tc.Result
	if tc.Error != "" {
		out = "error: " + tc.Error
	}
	return fmt.Sprintf("tool %s [%s] %s → %s", tc.Tool, tc.Mode, tc.Args, strconv.Quote(out))
}

// cacheNote is what a cost line says of the prompt cache: nothing when it
// was not used, else the tokens read from and written to it.
func cacheNote(read, write int64) string {
	if read == 0 && write == 0 {
		return ""
	}
	return fmt.Sprintf("; prompt cache: %s read, %s written", plural(int(read), "token", "tokens"), plural(int(write), "token", "tokens"))
}
