package cli

import (
	"bytes"
	"cmp"
	_ "embed"
	"fmt"
	"hash/fnv"
	"html/template"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/aidgen/aid/runtime/eval"
)

// The HTML report (aidgen eval --html FILE) is one self-contained file: the
// styles are inline, every figure is inline SVG drawn here, and nothing is
// fetched, so it can be uploaded as a CI artifact and opened anywhere. It
// shows what the text report shows (the same table, reasons, details,
// failures, fallbacks, cost and verdict, built by the same functions) and
// draws the decision: per threshold the two means with their intervals, the
// regression against maxRegression with its one-sided upper bound, and the
// paired per-case differences, with the cases that moved most and the
// errored ones linked to their inputs and answers.

//go:embed html.tmpl
var htmlTemplate string

// htmlLabelled is how many of the cases that moved most each gated metric
// labels in its strip plot and details.
const htmlLabelled = 5

// htmlMaxErrored bounds the errored cases whose samples the report lists.
const htmlMaxErrored = 20

// htmlMaxText bounds an input, expected answer or answer shown in the
// report, in runes; the JSON report and the dataset hold the whole text.
const htmlMaxText = 2000

// caseDetail is one case of the run as the reports show it (the JSON
// report's caseResults, the text report's -v, the HTML report's cases):
// its input, reference and every run's answer, scores, failure and tool
// calls. Every text is cut at eval.ReportTextBytes, saying how long it
// was, so that a report stays bounded.
type caseDetail struct {
	ID       string      `json:"id"`
	Group    string      `json:"group,omitempty"`
	Input    string      `json:"input"`
	Expected string      `json:"expected"`
	Runs     []runDetail `json:"runs"`
	// Regressed are the metrics whose mean of this case fell from the
	// baseline; BaselineAnswers the baseline's answers of a case that
	// regressed, when the baseline keeps them, for comparing side by side.
	Regressed       []string `json:"regressedMetrics,omitempty"`
	BaselineAnswers []string `json:"baselineAnswers,omitempty"`
}

// markRegressions marks, in every case of o, the metrics whose case mean
// fell from the baseline's, and puts the baseline's answers beside a case
// that regressed. A baseline keeps six decimals: means are compared on that
// grid, as largestDrops does.
func markRegressions(o *evalOutcome) {
	if o.baseline == nil {
		return
	}
	for i := range o.Details {
		d := &o.Details[i]
		for _, m := range o.Metrics {
			b, ok := o.baseline.Metrics[m].CaseMeans[d.ID]
			c, ok2 := o.Stats[m].CaseMeans[d.ID]
			if ok && ok2 && round6(round6(b)-round6(c)) > 0 {
				d.Regressed = append(d.Regressed, m)
			}
		}
		if len(d.Regressed) > 0 {
			d.BaselineAnswers = o.baseline.Answers[d.ID]
		}
	}
}

// runDetail is one run of a case.
type runDetail struct {
	// Answer is the run's answer, cut; AnswerBytes its whole length.
	Answer      string             `json:"answer"`
	AnswerBytes int                `json:"answerBytes"`
	Scores      map[string]float64 `json:"scores"`           // by metric name
	Failed      bool               `json:"failed,omitempty"` // the runner failed: every metric scored 0
	MetricErrs  map[string]bool    `json:"-"`                // the metrics that failed to score it
	Err         string             `json:"error,omitempty"`  // the runner's failure, or the metrics' failures, joined
	// ToolCalls are the calls of declared tools the run made, each with
	// its mode.
	ToolCalls []eval.ToolCall `json:"toolCalls,omitempty"`
	// Blocked is true when a guardrail blocked the run; Tripped names the
	// guardrails that tripped in it (blocked, redacted, asked or logged),
	// which guardrail_blocked and guardrail_tripped score.
	Blocked bool     `json:"blocked,omitempty"`
	Tripped []string `json:"tripped,omitempty"`
}

// caseDetails collects the cases of a result with their dataset entries.
func caseDetails(ds *eval.Dataset, res *eval.Result) []caseDetail {
	byID := make(map[string]eval.Case, len(ds.Cases))
	for _, c := range ds.Cases {
		byID[c.ID] = c
	}
	cut := func(s string) string { return eval.Clip(s, eval.ReportTextBytes) }
	out := make([]caseDetail, 0, len(res.Cases))
	for _, cr := range res.Cases {
		c := byID[cr.CaseID]
		d := caseDetail{ID: cr.CaseID, Input: cut(c.Input), Expected: cut(c.Expected), Group: cr.Group}
		for _, s := range cr.Samples {
			rd := runDetail{Answer: cut(s.Answer.Text), AnswerBytes: len(s.Answer.Text), Scores: map[string]float64{}, MetricErrs: map[string]bool{}, Failed: s.Err != nil, ToolCalls: s.Answer.ToolCalls, Blocked: s.Answer.Blocked, Tripped: s.Answer.Tripped}
			for j, m := range res.Metrics {
				if j < len(s.Scores) {
					rd.Scores[m.Name] = s.Scores[j]
				}
			}
			var errs []string
			if s.Err != nil {
				errs = append(errs, s.Err.Error())
			}
			for j, me := range s.MetricErrs {
				if me != nil {
					errs = append(errs, me.Error())
					if j < len(res.Metrics) {
						rd.MetricErrs[res.Metrics[j].Name] = true
					}
				}
			}
			rd.Err = cut(strings.Join(errs, "; "))
			d.Runs = append(d.Runs, rd)
		}
		out = append(out, d)
	}
	return out
}

// htmlReport is the template's data.
type htmlReport struct {
	App   string
	Evals []htmlEval
}

type htmlEval struct {
	Anchor     string
	Name       string
	Headline   string // dataset, cases × runs
	Verdict    string // "pass", "regression", "inconclusive"; empty for a baseline update
	Notes      []string
	Warnings   []string
	Table      [][]string // gateTable, header first
	Legend     string
	Thresholds []htmlThreshold
	Failures   string
	FailLines  []string
	Errored    []htmlLink
	Fallbacks  string
	Approvals  []string // approvalLines
	Cost       string
	Models     []string
	Baseline   string
	Update     bool
	Changes    []string
	Cases      []htmlCase
}

type htmlThreshold struct {
	Metric   string
	Verdict  string
	Reason   string
	Details  []htmlDetail // thresholdDetails, the advice apart
	Advice   string
	Means    template.HTML
	Decision template.HTML
	Strip    template.HTML
}

// htmlDetail is a line of a threshold's details; a case under "largest
// drops" links its id to the case's details.
type htmlDetail struct {
	Text      string
	Link      *htmlLink
	Indent    bool
	AfterLink string
}

type htmlLink struct{ Text, Anchor string }

type htmlCase struct {
	Anchor, ID, Group, Input, Expected string
	Means                              []string // per gated metric: "exact_match: 1.000 → 0.333"
	Runs                               []htmlRun
	Errored                            bool
}

type htmlRun struct {
	N      int
	Answer string
	Scores string
	Err    string
	// Guardrails says what the guardrails did in the run, when they did
	// anything (guardrailsText).
	Guardrails string
	// Baseline is the baseline's answer of the same run, shown beside this
	// one for a case that regressed (HasBaseline).
	Baseline    string
	HasBaseline bool
}

// writeHTMLReport renders every outcome into one self-contained HTML file.
func writeHTMLReport(path, app string, outcomes []*evalOutcome, update bool) error {
	b, err := renderHTML(app, outcomes, update)
	if err != nil {
		return err
	}
	return writeFile(path, b)
}

// renderHTML is the HTML report as bytes.
func renderHTML(app string, outcomes []*evalOutcome, update bool) ([]byte, error) {
	tmpl, err := template.New("report").Funcs(template.FuncMap{"verdictClass": verdictClass}).Parse(htmlTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing the HTML report template: %w", err)
	}
	data := htmlReport{App: app}
	for i, o := range outcomes {
		data.Evals = append(data.Evals, htmlEvalOf(i, o, update))
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("rendering the HTML report: %w", err)
	}
	return buf.Bytes(), nil
}

func verdictClass(v string) string {
	switch v {
	case "pass", "regression", "inconclusive":
		return v
	}
	return "none"
}

func htmlEvalOf(i int, o *evalOutcome, update bool) htmlEval {
	prefix := fmt.Sprintf("e%d", i+1)
	e := htmlEval{
		Anchor:    prefix,
		Name:      o.Name,
		Headline:  fmt.Sprintf("dataset %s (version %s): %s × %s", o.Dataset, o.Version, plural(o.Cases, "case", "cases"), plural(o.Runs, "run", "runs")),
		Notes:     nil,
		Fallbacks: fallbackLine(o),
		Cost:      fmt.Sprintf("cost: $%.6f over %s (ledger)", o.CostUSD, plural(int(o.Calls), "model call", "model calls")),
		Baseline:  o.Baseline,
		Update:    update || o.Gate == nil,
		Failures:  failureSummary(o),
		FailLines: failureLines(o, " (see --json)"),
		Approvals: approvalLines(o),
	}
	for _, p := range o.PinnedModels {
		e.Models = append(e.Models, fmt.Sprintf("%s %s: %s (%s)", p.Role, p.Alias, p.Model, p.Provider))
	}
	if t := modelChangeText(o); t != "" {
		e.Warnings = append(e.Warnings, t)
	}
	if e.Fallbacks != "" {
		e.Warnings = append(e.Warnings, e.Fallbacks)
	}
	if o.BaselineModelsUnrecorded {
		e.Notes = append(e.Notes, unrecordedModelsText)
	}

	// The cases worth showing whole: those that moved most per gated metric,
	// and the errored ones.
	anchors := map[string]string{}
	var shown []string
	show := func(id string) string {
		if a, ok := anchors[id]; ok {
			return a
		}
		a := fmt.Sprintf("%s-case-%d", prefix, len(shown)+1)
		anchors[id] = a
		shown = append(shown, id)
		return a
	}
	errored := map[string]bool{}
	for j, c := range o.ErroredCases {
		errored[c.ID] = true
		if j < htmlMaxErrored {
			e.Errored = append(e.Errored, htmlLink{Text: fmt.Sprintf("%s (%d)", showID(c.ID), c.Errors), Anchor: show(c.ID)})
		}
	}

	if update || o.Gate == nil {
		for _, c := range o.Changes {
			e.Changes = append(e.Changes, c.String())
		}
		e.Table = [][]string{{"metric", "mean ± s.e.", "runs", "cases"}}
		for _, m := range o.Metrics {
			st := o.Stats[m]
			e.Table = append(e.Table, []string{m, meanSE(st.Mean, st.StdErr), fmt.Sprint(st.Runs), fmt.Sprint(st.Cases)})
		}
	} else {
		e.Verdict = o.Gate.Verdict.String()
		e.Table = gateTable(o, eval.Verdict.String)
		e.Legend = legend
		for _, r := range o.Gate.Results {
			e.Thresholds = append(e.Thresholds, htmlThresholdOf(o, r, show))
		}
	}

	for _, id := range shown {
		e.Cases = append(e.Cases, htmlCaseOf(o, id, anchors[id], errored[id]))
	}
	return e
}

// paired returns the per-case regressions (baseline − current) of metric m
// over the cases on both sides, sorted by id.
func paired(o *evalOutcome, m string) (ids []string, d []float64) {
	if o.baseline == nil {
		return nil, nil
	}
	base, ok := o.baseline.Metrics[m]
	if !ok {
		return nil, nil
	}
	cur := o.Stats[m]
	for _, id := range slices.Sorted(maps.Keys(cur.CaseMeans)) {
		if b, ok := base.CaseMeans[id]; ok {
			ids = append(ids, id)
			d = append(d, round6(round6(b)-round6(cur.CaseMeans[id])))
		}
	}
	return ids, d
}

// erroredFor is the set of cases whose samples failed, or whose metric m
// failed to score a sample.
func erroredFor(o *evalOutcome, m string) map[string]bool {
	out := map[string]bool{}
	for _, c := range o.Details {
		for _, rd := range c.Runs {
			if rd.Failed || rd.MetricErrs[m] {
				out[c.ID] = true
			}
		}
	}
	return out
}

func htmlThresholdOf(o *evalOutcome, r eval.ThresholdResult, show func(string) string) htmlThreshold {
	m := r.Threshold.Metric
	errored := erroredFor(o, m)
	h := htmlThreshold{
		Metric:  m,
		Verdict: r.Verdict.String(),
		Reason:  r.Reason,
		Advice:  r.Advice,
	}
	ids, d := paired(o, m)
	// The cases that moved most, either way, then the errored ones.
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(math.Abs(d[b]), math.Abs(d[a])), cmp.Compare(ids[a], ids[b]))
	})
	labels := map[string]string{}
	for _, i := range order {
		if len(labels) == htmlLabelled || d[i] == 0 {
			break
		}
		labels[ids[i]] = show(ids[i])
	}
	erroredLabels := 0
	for _, id := range ids {
		if _, ok := labels[id]; errored[id] && !ok && erroredLabels < htmlLabelled {
			labels[id] = show(id)
			erroredLabels++
		}
	}
	// The details are the text report's lines; a largest drop's line starts
	// with its case's id, which links to the case.
	dr := o.dropsFor(m)
	next := 0
	for _, l := range thresholdDetails(r, dr) {
		switch {
		case strings.HasPrefix(l, "advice: "):
		case strings.HasPrefix(l, "  ") && dr != nil && next < len(dr.Largest):
			id := dr.Largest[next].ID
			next++
			rest := strings.TrimPrefix(strings.TrimSpace(l), showID(id))
			h.Details = append(h.Details, htmlDetail{Link: &htmlLink{Text: showID(id), Anchor: show(id)}, AfterLink: rest, Indent: true})
		default:
			h.Details = append(h.Details, htmlDetail{Text: l})
		}
	}
	cur := o.Stats[m]
	if r.Tested {
		h.Means = both(func(w float64) template.HTML { return meansFigure(r, w) })
		h.Decision = both(func(w float64) template.HTML { return decisionFigure(r, w) })
	} else {
		alone := eval.ThresholdResult{Threshold: r.Threshold, CurrentMean: cur.Mean, CurrentSE: cur.StdErr}
		h.Means = both(func(w float64) template.HTML { return meansFigure(alone, w) })
	}
	if len(ids) > 0 {
		h.Strip = both(func(w float64) template.HTML { return stripFigure(r, ids, d, labels, errored, w) })
	}
	return h
}

func htmlCaseOf(o *evalOutcome, id, anchor string, errored bool) htmlCase {
	c := htmlCase{Anchor: anchor, ID: id, Errored: errored}
	var det *caseDetail
	for i := range o.Details {
		if o.Details[i].ID == id {
			det = &o.Details[i]
			break
		}
	}
	for _, m := range o.Metrics {
		st, ok := o.Stats[m]
		if !ok {
			continue
		}
		cm, ok := st.CaseMeans[id]
		if !ok {
			continue
		}
		s := fmt.Sprintf("%s: %.3f", m, cm)
		if o.baseline != nil {
			if b, ok := o.baseline.Metrics[m].CaseMeans[id]; ok {
				s = fmt.Sprintf("%s: %.3f → %.3f", m, b, cm)
			}
		}
		c.Means = append(c.Means, s)
	}
	if det == nil {
		return c
	}
	c.Group, c.Input, c.Expected = det.Group, clip(det.Input), clip(det.Expected)
	for k, rd := range det.Runs {
		var scores []string
		for _, m := range o.Metrics {
			if v, ok := rd.Scores[m]; ok {
				scores = append(scores, fmt.Sprintf("%s %.3g", m, v))
			}
		}
		run := htmlRun{N: k + 1, Answer: clip(rd.Answer), Scores: strings.Join(scores, ", "), Err: clip(rd.Err), Guardrails: guardrailsText(rd)}
		if k < len(det.BaselineAnswers) {
			run.Baseline, run.HasBaseline = clip(det.BaselineAnswers[k]), true
		}
		c.Runs = append(c.Runs, run)
	}
	return c
}

// clip bounds a text shown in the report.
func clip(s string) string {
	r := []rune(s)
	if len(r) <= htmlMaxText {
		return s
	}
	return string(r[:htmlMaxText]) + fmt.Sprintf("… (%d more characters)", len(r)-htmlMaxText)
}

// svg builds one inline figure. Every text it writes is escaped.
type svg struct {
	b    strings.Builder
	w, h float64
}

func newSVG(w, h float64, title string) *svg {
	s := &svg{w: w, h: h}
	fmt.Fprintf(&s.b, `<svg class="fig" viewBox="0 0 %g %g" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg"><title>%s</title>`,
		w, h, template.HTMLEscapeString(title), template.HTMLEscapeString(title))
	return s
}

func (s *svg) line(x1, y1, x2, y2 float64, class string) {
	fmt.Fprintf(&s.b, `<line class="%s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, class, x1, y1, x2, y2)
}

func (s *svg) rect(x, y, w, h float64, class string) {
	fmt.Fprintf(&s.b, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, class, x, y, max(w, 0.5), h)
}

func (s *svg) circle(x, y, r float64, class string) {
	fmt.Fprintf(&s.b, `<circle class="%s" cx="%.1f" cy="%.1f" r="%.1f"/>`, class, x, y, r)
}

func (s *svg) text(x, y float64, anchor, class, text string) {
	fmt.Fprintf(&s.b, `<text class="%s" x="%.1f" y="%.1f" text-anchor="%s">%s</text>`, class, x, y, anchor, template.HTMLEscapeString(text))
}

func (s *svg) link(href string, inner func()) {
	fmt.Fprintf(&s.b, `<a href="#%s">`, template.HTMLEscapeString(href))
	inner()
	s.b.WriteString(`</a>`)
}

func (s *svg) html() template.HTML {
	s.b.WriteString(`</svg>`)
	return template.HTML(s.b.String()) // every text was escaped as it was written
}

// scale maps [lo, hi] onto [x0, x1].
type scale struct{ lo, hi, x0, x1 float64 }

func (c scale) at(v float64) float64 {
	if c.hi <= c.lo {
		return (c.x0 + c.x1) / 2
	}
	return c.x0 + (min(max(v, c.lo), c.hi)-c.lo)/(c.hi-c.lo)*(c.x1-c.x0)
}

// axis draws a horizontal axis at y with about n ticks.
func (s *svg) axis(c scale, y float64, n int, format string) {
	s.line(c.x0, y, c.x1, y, "axis")
	step := niceStep((c.hi - c.lo) / float64(n))
	first := math.Ceil(c.lo/step - 1e-9)
	for i := 0.0; ; i++ {
		v := (first + i) * step // by multiplication: repeated addition drifts
		if v > c.hi+1e-9 {
			break
		}
		if math.Abs(v) < step*1e-6 {
			v = 0 // not −0.00
		}
		x := c.at(v)
		s.line(x, y, x, y+4, "axis")
		s.text(x, y+16, "middle", "tick", fmt.Sprintf(format, v))
	}
}

// ticks is about how many ticks an axis of a figure w wide gets.
func ticks(w float64) int { return max(4, int(w/80)) }

// figureWidths are the widths figures are drawn at: one for screens and
// print, one for phones, whose text would be too small in the wide one
// scaled down. The page shows the one that fits.
var figureWidths = [2]float64{640, 360}

// both draws a figure at both widths.
func both(draw func(w float64) template.HTML) template.HTML {
	return template.HTML(`<div class="wide">`) + draw(figureWidths[0]) + template.HTML(`</div><div class="narrow">`) + draw(figureWidths[1]) + template.HTML(`</div>`)
}

// niceStep rounds a tick step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if !(raw > 0) {
		return 0.1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// meansFigure draws the baseline's and the current mean, each with ±1
// standard error (dark) and a 95% interval (±1.96 s.e., light).
func meansFigure(r eval.ThresholdResult, w float64) template.HTML {
	type row struct {
		name     string
		mean, se float64
		class    string
	}
	rows := []row{{"current", r.CurrentMean, r.CurrentSE, "cur"}}
	if r.Tested {
		rows = append([]row{{"baseline", r.BaselineMean, r.BaselineSE, "base"}}, rows...)
	}
	lo, hi := 1.0, 0.0
	for _, rw := range rows {
		lo, hi = min(lo, rw.mean-1.96*rw.se), max(hi, rw.mean+1.96*rw.se)
	}
	for _, v := range []*float64{r.Threshold.MinMean, r.Threshold.FailBelow} {
		if v != nil {
			lo, hi = min(lo, *v), max(hi, *v)
		}
	}
	pad := max(0.02, (hi-lo)*0.15)
	lo, hi = max(0, lo-pad), min(1, hi+pad)
	h := 40 + 34*float64(len(rows)) + 30
	s := newSVG(w, h, fmt.Sprintf("%s: means with ±1 standard error and 95%% intervals", r.Threshold.Metric))
	c := scale{lo, hi, 80, w - 30}
	for _, fl := range []struct {
		v     *float64
		name  string
		class string
	}{{r.Threshold.FailBelow, "failBelow", "floor"}, {r.Threshold.MinMean, "minMean", "minmean"}} {
		if fl.v != nil {
			x := c.at(*fl.v)
			s.line(x, 18, x, h-34, fl.class)
			s.text(x, 14, "middle", "note", fmt.Sprintf("%s %.3f", fl.name, *fl.v))
		}
	}
	for i, rw := range rows {
		y := 40 + 34*float64(i)
		s.text(72, y+4, "end", "label", rw.name)
		s.rect(c.at(rw.mean-1.96*rw.se), y-7, c.at(rw.mean+1.96*rw.se)-c.at(rw.mean-1.96*rw.se), 14, "ci95 "+rw.class)
		s.rect(c.at(rw.mean-rw.se), y-7, c.at(rw.mean+rw.se)-c.at(rw.mean-rw.se), 14, "ci1 "+rw.class)
		s.circle(c.at(rw.mean), y, 4.5, "dot "+rw.class)
		s.text(c.at(rw.mean), y-11, "middle", "value", meanSE(rw.mean, rw.se))
	}
	s.axis(c, h-30, ticks(w), "%.2f")
	return s.html()
}

// decisionFigure draws the decision: the estimated regression (baseline −
// current), its one-sided (1 − alpha) upper bound as a bar from the left,
// maxRegression with the allowed region shaded, and maxRegression + MDE,
// the regression the gate catches 80% of the time.
func decisionFigure(r eval.ThresholdResult, w float64) template.HTML {
	delta := r.Threshold.MaxRegression
	lo := min(0, r.Regression) - 0.02
	hi := max(r.UpperBound, delta+r.MDE, delta, r.Regression) + 0.02
	lo = min(lo, hi-3*delta)
	pad := (hi - lo) * 0.05
	lo, hi = max(-1, lo-pad), min(1, hi+pad)
	s := newSVG(w, 168, fmt.Sprintf("%s: regression %s against maxRegression %.3f, with its one-sided upper bound", r.Threshold.Metric, signed(r.Regression), delta))
	c := scale{lo, hi, 20, w - 20}
	top, bottom := 22.0, 112.0
	s.rect(c.at(lo), top, c.at(delta)-c.at(lo), bottom-top, "allowed")
	s.rect(c.at(delta), top, c.at(hi)-c.at(delta), bottom-top, "harmful")
	s.text(c.at(lo)+4, top+12, "start", "note", "allowed (≤ maxRegression)")
	s.text(c.at(hi)-4, top+12, "end", "note", "beyond maxRegression")
	s.line(c.at(0), top-4, c.at(0), bottom, "zero")
	s.text(c.at(0), top-8, edgeAnchor(c, 0), "note", "no change")
	s.line(c.at(delta), top-4, c.at(delta), bottom+4, "delta")
	s.text(c.at(delta), bottom+16, edgeAnchor(c, delta), "note", fmt.Sprintf("maxRegression %.3f", delta))
	if r.MDE > 0 && delta+r.MDE < hi {
		x := c.at(delta + r.MDE)
		s.line(x, bottom-18, x, bottom, "mde")
		label := fmt.Sprintf("caught 80%%: %.3f", delta+r.MDE)
		if x > c.x1-110 {
			s.text(x-4, bottom-6, "end", "note", label)
		} else {
			s.text(x+4, bottom-6, "start", "note", label)
		}
	}
	y := 66.0
	class := verdictClass(r.Verdict.String())
	s.line(c.at(lo), y, c.at(r.UpperBound), y, "bound "+class)
	s.line(c.at(r.UpperBound), y-8, c.at(r.UpperBound), y+8, "bound "+class)
	s.text(c.at(r.UpperBound), y-13, edgeAnchor(c, r.UpperBound), "value", fmt.Sprintf("%g%% upper bound %s", 100*(1-r.Threshold.Alpha), signed(r.UpperBound)))
	s.circle(c.at(r.Regression), y, 5, "dot "+class)
	s.text(c.at(r.Regression), y+22, edgeAnchor(c, r.Regression), "value", "regression "+signed(r.Regression))
	s.axis(c, 140, ticks(w), "%+.2f")
	return s.html()
}

// edgeAnchor anchors a label at v so that it stays inside the figure: at its
// start near the left edge, at its end near the right one.
func edgeAnchor(c scale, v float64) string {
	switch f := (c.at(v) - c.x0) / (c.x1 - c.x0); {
	case f < 0.2:
		return "start"
	case f > 0.8:
		return "end"
	}
	return "middle"
}

// stripFigure draws every matched case's regression (baseline − current)
// as a dot, jittered by a hash of its id, with the mean regression and
// maxRegression; the labelled cases link to their details.
func stripFigure(r eval.ThresholdResult, ids []string, d []float64, labels map[string]string, errored map[string]bool, w float64) template.HTML {
	delta := r.Threshold.MaxRegression
	lo, hi := min(0, slices.Min(d)), max(delta, slices.Max(d))
	pad := max(0.02, (hi-lo)*0.06)
	lo, hi = max(-1, lo-pad), min(1, hi+pad)
	h := 190.0
	s := newSVG(w, h, fmt.Sprintf("%s: per-case regression (baseline − current) of %s", r.Threshold.Metric, plural(len(ids), "matched case", "matched cases")))
	c := scale{lo, hi, 20, w - 20}
	top, bottom := 24.0, h-46
	s.line(c.at(0), top-6, c.at(0), bottom+6, "zero")
	s.line(c.at(delta), top-6, c.at(delta), bottom+6, "delta")
	s.text(c.at(delta), top-10, "middle", "note", "maxRegression")
	if r.Tested {
		s.line(c.at(r.Regression), top-6, c.at(r.Regression), bottom+6, "mean")
		s.text(c.at(r.Regression), bottom+18, "middle", "note", "mean "+signed(r.Regression))
	}
	type lab struct {
		x, y   float64
		id, to string
	}
	var labs []lab
	for i, id := range ids {
		hsh := fnv.New32a()
		hsh.Write([]byte(id))
		y := top + 8 + float64(hsh.Sum32()%1000)/1000*(bottom-top-16)
		x := c.at(d[i])
		class := "case"
		if errored[id] {
			class = "case errored"
		}
		if to, ok := labels[id]; ok {
			s.link(to, func() { s.circle(x, y, 4.5, class+" labelled") })
			labs = append(labs, lab{x, y, id, to})
			continue
		}
		s.circle(x, y, 3, class)
	}
	// Labels are placed beside their dot and moved down (or up) until they
	// overlap no other label; a moved label gets a leader line.
	slices.SortFunc(labs, func(a, b lab) int { return cmp.Or(cmp.Compare(a.y, b.y), cmp.Compare(a.id, b.id)) })
	type box struct{ x0, x1, y float64 }
	var placed []box
	overlaps := func(b box) bool {
		return slices.ContainsFunc(placed, func(p box) bool { return b.x0 < p.x1 && p.x0 < b.x1 && math.Abs(b.y-p.y) < 12 })
	}
	for _, l := range labs {
		text := showID(l.id)
		width := 6.5*float64(len([]rune(text))) + 2
		anchor, dx := "start", 7.0
		x0, x1 := l.x+dx, l.x+dx+width
		if l.x > 0.7*w {
			anchor, dx = "end", -7
			x0, x1 = l.x+dx-width, l.x+dx
		}
		b := box{x0, x1, l.y + 4}
		for step := 1; overlaps(b) && step < 40; step++ {
			off := float64((step+1)/2) * 12
			if step%2 == 0 {
				off = -off
			}
			b.y = min(max(l.y+4+off, top), bottom+4)
		}
		placed = append(placed, b)
		if math.Abs(b.y-(l.y+4)) > 1 {
			s.line(l.x, l.y, l.x+dx, b.y-4, "leader")
		}
		s.link(l.to, func() { s.text(l.x+dx, b.y, anchor, "caselabel", text) })
	}
	s.axis(c, h-26, ticks(w), "%+.2f")
	return s.html()
}
