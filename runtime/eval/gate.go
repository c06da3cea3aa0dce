package eval

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// GatePower is the power at which the gate's minimum detectable effect and its runs
// recommendation are computed.
const GatePower = 0.8

// Threshold is one gating rule on one metric.
type Threshold struct {
	// Metric names a measured, non-model-derived metric.
	Metric string `json:"metric"`
	// MinMean, when set, passes the threshold outright whenever the current mean is at
	// least this value, whatever the baseline says (unless the mean is below FailBelow).
	// It is compared with the observed mean, not tested.
	MinMean *float64 `json:"minMean,omitempty"`
	// FailBelow, when set, fails the threshold (a Regression) whenever the current mean
	// is below this value, whatever the baseline and the test say: a floor, as promptfoo's
	// and deepeval's thresholds are. It is compared with the observed mean, not tested, so
	// a mean within a few standard errors of it may fall either side from run to run. It is
	// in (0, 1], and at most MinMean when both are set.
	FailBelow *float64 `json:"failBelow,omitempty"`
	// MaxRegression is the allowed drop of the mean below the baseline, in (0, 1). It is
	// both the allowance and the size of excess regression the gate must be able to see.
	MaxRegression float64 `json:"maxRegression"`
	// Alpha bounds the probability that a threshold whose true regression is at most
	// MaxRegression fails, in (0, 0.5]; Holm's correction keeps that bound for all the
	// thresholds of one gate together.
	Alpha float64 `json:"alpha"`
}

// Verdict is the outcome of a threshold or of a whole gate.
type Verdict int

// The verdicts. How a verdict ends a process (its exit code) is the caller's business:
// aidgen eval maps them in internal/cli.
const (
	// Pass means no regression beyond the allowance, with enough evidence to say so.
	Pass Verdict = iota
	// Regression means the mean dropped by more than MaxRegression, beyond sampling noise.
	Regression
	// Inconclusive means the data cannot tell an allowed change from a harmful one at this
	// number of runs and cases; the report says what would be needed.
	Inconclusive
)

// String returns "pass", "regression" or "inconclusive".
func (v Verdict) String() string {
	switch v {
	case Pass:
		return "pass"
	case Regression:
		return "regression"
	case Inconclusive:
		return "inconclusive"
	default:
		return fmt.Sprintf("Verdict(%d)", int(v))
	}
}

// MarshalText encodes the verdict as its String form.
func (v Verdict) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// ThresholdResult is the gate's finding for one threshold.
type ThresholdResult struct {
	// Threshold is the rule evaluated.
	Threshold Threshold `json:"threshold"`
	// Verdict is the outcome.
	Verdict Verdict `json:"verdict"`
	// Reason explains the verdict in one sentence, with the numbers that decided it.
	Reason string `json:"reason"`
	// Tested reports whether a statistical comparison with the baseline was made; the
	// fields from Paired to CasesNeeded are meaningful only when it was.
	Tested bool `json:"tested"`
	// Paired reports whether the comparison paired the per-case means of the matched
	// cases (the ids on both sides) rather than comparing the two means as independent
	// samples (Welch), which happens only when a side has no per-case means.
	Paired bool `json:"paired"`
	// Cases is the number of cases compared: the matched cases when paired, the current
	// run's cases when unpaired.
	Cases int `json:"cases"`
	// BaselineMean is the baseline's mean (zero without a baseline).
	BaselineMean float64 `json:"baselineMean"`
	// BaselineSE is the baseline mean's clustered standard error.
	BaselineSE float64 `json:"baselineSE"`
	// CurrentMean is the current run's mean.
	CurrentMean float64 `json:"currentMean"`
	// CurrentSE is the current mean's clustered standard error.
	CurrentSE float64 `json:"currentSE"`
	// Regression is the estimated drop, baseline mean minus current mean (negative when
	// the metric improved).
	Regression float64 `json:"regression"`
	// SE is the standard error of Regression.
	SE float64 `json:"se"`
	// DF is the degrees of freedom of the t reference distribution.
	DF float64 `json:"df"`
	// PValue is the one-sided p-value of the null "true regression ≤ MaxRegression".
	PValue float64 `json:"pValue"`
	// AdjustedPValue is PValue after Holm's step-down correction across the tested
	// thresholds of the gate; the threshold fails when it is ≤ Alpha.
	AdjustedPValue float64 `json:"adjustedPValue"`
	// UpperBound is the one-sided (1−Alpha) upper confidence bound of the true regression.
	UpperBound float64 `json:"upperBound"`
	// MDE is the minimum detectable effect (t_{1−α/m} + t_{0.8})·SE: a true regression of
	// MaxRegression + MDE fails with 80% power. The gate is conclusive when MDE ≤
	// MaxRegression.
	MDE float64 `json:"mde"`
	// RunsNeeded is the smallest number of runs per case at which the planned MDE is at
	// most MaxRegression against this baseline, planning with the variances at their
	// PlanningAssurance upper confidence limit; 0 when no number of runs suffices (or the
	// variance components cannot be estimated, see Advice).
	RunsNeeded int `json:"runsNeeded"`
	// RunsNeededNewBaseline is the same when the baseline is also regenerated with that
	// many runs; 0 when no number of runs suffices and more cases are needed.
	RunsNeededNewBaseline int `json:"runsNeededNewBaseline"`
	// CasesNeeded is the number of cases at which the planned MDE is at most
	// MaxRegression at the current numbers of runs (a new baseline over the new cases).
	CasesNeeded int `json:"casesNeeded"`
	// GroupsNeeded is, when the cases are grouped, the number of groups CasesNeeded
	// spans at the current cases per group: the cases of one group move together, so
	// more groups, not more cases in the same groups, shrink the standard error.
	GroupsNeeded int `json:"groupsNeeded,omitempty"`
	// PlannedPower is, with grouped cases, the power at a true regression of
	// 2×maxRegression that the setting the advice leads with reaches as planned: the CR2
	// test with its Bell–McCaffrey degrees of freedom, the variance components (between
	// groups, between the cases of a group, run to run) at their PlanningAssurance upper
	// limits. It is 0 when the cases are not grouped or no plan was made.
	PlannedPower float64 `json:"plannedPower,omitempty"`
	// Advice says what to change when the verdict is inconclusive.
	Advice string `json:"advice"`
	// MatchedCases is the number of case ids present in both the baseline and the current run.
	MatchedCases int `json:"matchedCases"`
	// AddedCases are the current run's case ids the baseline lacks, sorted.
	AddedCases []string `json:"addedCases,omitempty"`
	// RemovedCases are the baseline's case ids the current run lacks, sorted.
	RemovedCases []string `json:"removedCases,omitempty"`
	// Basis says in one sentence what the verdict rests on (e.g. "paired over 90 matched cases; 10 added and 10 removed cases not compared").
	Basis string `json:"basis"`
	// Clusters is the number of groups the standard error was clustered on (see
	// [Case.Group]); 0 when no compared case declared a group.
	Clusters int `json:"clusters,omitempty"`

	tAlpha float64 // t_{1−α, DF}, kept so that plan need not recompute it
}

// GateReport is the gate's finding for one eval. It is data, encoded as JSON with
// camelCase names; rendering it (the table, JUnit, a summary) is left to the caller, so
// that one program, aidgen eval, owns one rendering with one sign convention: Regression
// is baseline − current, positive when the metric got worse.
type GateReport struct {
	// Verdict is Regression if any threshold regressed, else Inconclusive if any was
	// inconclusive, else Pass.
	Verdict Verdict `json:"verdict"`
	// Results holds one entry per threshold, in threshold order.
	Results []ThresholdResult `json:"results"`
}

// Gate decides every threshold for the current statistics against a baseline (nil when
// there is none yet). The statistics, the decision rule and their guarantees are described
// in the package documentation. A threshold that cannot be used at all (model-derived or
// unmeasured metric, bad parameter) makes Gate return a [*GateConfigurationError] (all of
// them, joined) and no report.
func Gate(thresholds []Threshold, current map[string]MetricStats, baseline *Baseline) (*GateReport, error) {
	err := checkThresholds(thresholds, func(name string) (bool, bool) {
		st, ok := current[name]
		return st.ModelDerived && st.Calibration == nil, ok
	})
	if err != nil {
		return nil, err
	}
	if err := checkGateInputs(thresholds, current, baseline); err != nil {
		return nil, err
	}
	results := make([]ThresholdResult, len(thresholds))
	comps := make([]comparison, len(thresholds))
	var tested []int
	for i, th := range thresholds {
		cur := current[th.Metric]
		r := &results[i]
		r.Threshold = th
		r.CurrentMean, r.CurrentSE, r.Cases = cur.Mean, cur.StdErr, cur.Cases
		if cal := cur.Calibration; cal != nil {
			// A calibrated judge's floors and minMean apply to the true pass rate.
			if fixed, err := cal.Check(); err == nil {
				r.CurrentMean = clampUnit((cur.Mean + fixed.Specificity - 1) / fixed.Youden)
			}
		}
		var base MetricStats
		var ok bool
		if baseline != nil {
			base, ok = baseline.Metrics[th.Metric]
		}
		if !ok {
			r.Reason = "there is no baseline for this metric"
			continue
		}
		r.BaselineMean, r.BaselineSE = base.Mean, base.StdErr
		if cal := cur.Calibration; cal != nil {
			if fixed, err := cal.Check(); err == nil {
				r.BaselineMean = clampUnit((base.Mean + fixed.Specificity - 1) / fixed.Youden)
			}
		}
		c, why := compare(cur, base)
		if why == "" && cur.Calibration != nil {
			why = corrected(r, &c, cur, base)
		}
		r.MatchedCases, r.AddedCases, r.RemovedCases, r.Basis, r.Clusters = c.matched, c.added, c.removed, c.basis, c.clusters
		if why != "" {
			r.Reason, r.Advice = why, c.advice
			continue
		}
		comps[i] = c
		r.Tested, r.Paired, r.Cases = true, c.paired, c.n
		r.Regression, r.SE, r.DF = c.regression, c.se, c.df
		// c.se > 0: compare floors it at the run-to-run noise (see the package
		// documentation), so equal differences are never read as certainty.
		r.PValue = tSurvival(excess(r.Regression, th.MaxRegression)/c.se, c.df)
		r.tAlpha = tQuantile(1-th.Alpha, c.df)
		r.UpperBound = r.Regression + r.tAlpha*c.se
		if !validP(r.PValue) || !finite(r.UpperBound) || !(c.se > 0) {
			// Inputs are checked above, so this is a numerical failure; it must never
			// count as evidence either way.
			r.Tested, r.PValue, r.UpperBound = false, 0, 0
			r.Reason = "the test produced no valid p-value"
			continue
		}
		tested = append(tested, i)
	}
	holm(results, tested)
	m := len(tested)
	report := &GateReport{Results: results}
	for i := range results {
		r := &results[i]
		if r.Tested {
			plan(r, comps[i], m)
		}
		decide(r)
		report.Verdict = worse(report.Verdict, r.Verdict)
	}
	return report, nil
}

// TieTolerance is how close two quantities on the [0, 1] scale of a metric must be to
// count as equal. Means of scores are sums of floating-point numbers: cases moving
// 0.80 → 0.75 give a drop of 0.050000000000000044, which must count as a drop of exactly
// 0.05, and an allowance is inclusive.
const TieTolerance = 1e-9

// excess returns regression − allowance, snapped to 0 when the two are equal within
// TieTolerance.
func excess(regression, allowance float64) float64 {
	d := regression - allowance
	if math.Abs(d) <= TieTolerance {
		return 0
	}
	return d
}

// atMost reports whether a ≤ b within TieTolerance.
func atMost(a, b float64) bool { return a <= b+TieTolerance }

// validP reports whether p is a probability.
func validP(p float64) bool { return p >= 0 && p <= 1 }

// checkGateInputs validates every statistic a threshold uses, current and baseline, with
// the one validation of [MetricStats].
func checkGateInputs(thresholds []Threshold, current map[string]MetricStats, baseline *Baseline) error {
	var errs []error
	seen := map[string]bool{}
	for _, th := range thresholds {
		if seen[th.Metric] {
			continue
		}
		seen[th.Metric] = true
		if err := checkStats(current[th.Metric]); err != nil {
			errs = append(errs, fmt.Errorf("metric %q: current run: %w", th.Metric, err))
		}
		if baseline == nil {
			continue
		}
		if st, ok := baseline.Metrics[th.Metric]; ok {
			if err := checkStats(st); err != nil {
				errs = append(errs, fmt.Errorf("metric %q: baseline: %w", th.Metric, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gate: invalid statistics: %w", err)
	}
	return nil
}

// worse returns the more severe verdict: a regression outweighs an inconclusive
// threshold, which outweighs a pass.
func worse(a, b Verdict) Verdict {
	if a == Regression || b == Regression {
		return Regression
	}
	if a == Inconclusive || b == Inconclusive {
		return Inconclusive
	}
	return Pass
}

// holm sets AdjustedPValue for the tested thresholds: sorted ascending, p_(j) becomes
// max over l ≤ j of min(1, (m−l+1)·p_(l)). A p-value that is not a probability (NaN)
// counts as 1: it sorts last, is never significant and cannot lower or poison the
// adjusted values of the others (cmp.Compare would sort NaN first, and max(x, NaN) is NaN).
func holm(results []ThresholdResult, tested []int) {
	p := func(i int) float64 {
		if v := results[i].PValue; validP(v) {
			return v
		}
		return 1
	}
	order := slices.Clone(tested)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p(a), p(b)) })
	m, running := len(order), 0.0
	for j, i := range order {
		running = max(running, min(1, float64(m-j)*p(i)))
		results[i].AdjustedPValue = running
	}
}

// decide applies the decision rule of the package documentation: a mean below FailBelow
// fails whatever the rest says, and the reason keeps what the rest said.
func decide(r *ThresholdResult) {
	decideRest(r)
	th := r.Threshold
	if th.FailBelow == nil || !(r.CurrentMean < *th.FailBelow-TieTolerance) {
		return
	}
	reason := fmt.Sprintf("mean %.4f is below failBelow %.4f", r.CurrentMean, *th.FailBelow)
	if r.Tested || r.Verdict != Pass {
		reason += fmt.Sprintf(" (without failBelow: %s, %s)", r.Verdict, r.Reason)
	}
	r.Verdict, r.Reason, r.Advice = Regression, reason, ""
}

// decideRest applies the rules that follow FailBelow.
func decideRest(r *ThresholdResult) {
	th := r.Threshold
	delta := th.MaxRegression
	switch {
	case th.MinMean != nil && atMost(*th.MinMean, r.CurrentMean):
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("mean %.4f clears minMean %.4f", r.CurrentMean, *th.MinMean)
	case !r.Tested && th.MinMean != nil:
		r.Verdict = Regression
		r.Reason = fmt.Sprintf("mean %.4f is below minMean %.4f and %s", r.CurrentMean, *th.MinMean, r.Reason)
	case !r.Tested:
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("cannot compare: %s", r.Reason)
		if r.Advice == "" {
			r.Advice = "write a baseline with --update-baseline from a run with at least 2 cases"
		}
	case !validP(r.PValue) || !validP(r.AdjustedPValue):
		r.Verdict = Inconclusive
		r.Reason = "the test produced no valid p-value"
		r.Advice = "report this as a bug in aid with the eval's statistics"
	case r.AdjustedPValue <= th.Alpha:
		r.Verdict = Regression
		r.Reason = fmt.Sprintf("regression %.4f exceeds maxRegression %.4f beyond sampling noise (p=%.3g, Holm-adjusted %.3g ≤ alpha %g)",
			r.Regression, delta, r.PValue, r.AdjustedPValue, th.Alpha)
	case atMost(r.UpperBound, delta):
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("regression %.4f is within maxRegression %.4f: its %g%% upper bound is %.4f",
			r.Regression, delta, 100*(1-th.Alpha), r.UpperBound)
	case atMost(r.MDE, delta):
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("no regression beyond maxRegression %.4f (p=%.3g); a true regression of %.4f would fail %g%% of the time",
			delta, r.PValue, delta+r.MDE, 100*GatePower)
	default:
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("regression %.4f is not significant (p=%.3g) but the gate cannot see one of 2×maxRegression: MDE %.4f > maxRegression %.4f",
			r.Regression, r.PValue, r.MDE, delta)
	}
	if r.Verdict != Inconclusive {
		r.Advice = ""
	}
}

// comparison is the estimated regression with its standard error and the variance
// components the runs recommendation needs. SE²(Kc, Kb) = deff·(a + wc/Kc + wb/Kb), with
// a, wc and wb already divided by the number of cases.
type comparison struct {
	paired         bool
	n              int // cases compared
	regression, se float64
	df             float64

	matched        int
	added, removed []string
	clusters       int
	basis          string
	advice         string // what would make a comparison possible, when none is

	a, wc, wb     float64
	calib         float64 // the judge calibration's share of SE², which neither runs nor cases shrink
	aUpper        float64 // a with the variance of the true per-case change at its PlanningAssurance upper limit
	kc, kb        float64
	deff          float64   // design effect of the clustering, ≥ 1
	sizes         []float64 // the clusters' sizes, when clustered
	rho           float64   // the clusters' working correlation
	largest       float64   // the largest cluster's share of the cases
	v             float64   // observed variance of the per-case differences (paired)
	withinUnknown bool
	// design is the clustered comparison's variance components at their planning upper
	// limits, the model of the grouped advice (see planGrouped), and point their
	// estimates; designErr is set when they cannot be estimated.
	design, point groupDesign
	designErr     error
}

// unbalanced reports whether the groups' sizes, not their number, limit a clustered
// comparison: its degrees of freedom are below half of G − 1, as when one group holds
// most of the cases.
func (c comparison) unbalanced() bool {
	return c.clusters > 0 && c.df < float64(c.clusters-1)/2
}

// compare estimates the regression of cur against base. When both sides have per-case
// means it pairs the case ids present on both (the matched cases) and reports the others
// as added or removed; it compares the two means as independent samples (Welch) only
// when a side has no per-case means, and says so in basis. It returns a reason instead
// when no comparison is possible.
func compare(cur, base MetricStats) (comparison, string) {
	c := comparison{kc: float64(cur.Runs), kb: float64(base.Runs), deff: 1}
	if len(cur.CaseMeans) == 0 || len(base.CaseMeans) == 0 {
		return compareUnpaired(c, cur, base)
	}
	grouped := len(cur.Groups) > 0 || len(base.Groups) > 0
	var ids []string // the matched ids, kept only when clustering needs them
	var d, curMeans, baseMeans []float64
	for id, x := range cur.CaseMeans {
		b, ok := base.CaseMeans[id]
		if !ok {
			c.added = append(c.added, id)
			continue
		}
		if grouped {
			ids = append(ids, id)
		}
		d = append(d, b-x)
		curMeans, baseMeans = append(curMeans, x), append(baseMeans, b)
	}
	for id := range base.CaseMeans {
		if _, ok := cur.CaseMeans[id]; !ok {
			c.removed = append(c.removed, id)
		}
	}
	slices.Sort(c.added)
	slices.Sort(c.removed)
	n := len(d)
	c.matched = n
	c.basis = fmt.Sprintf("paired over %d matched cases", n)
	if len(c.added) > 0 || len(c.removed) > 0 {
		c.basis += fmt.Sprintf("; %d added and %d removed cases not compared", len(c.added), len(c.removed))
	}
	if n < 2 {
		return c, fmt.Sprintf("only %d of the current run's case ids are in the baseline (%d added, %d removed); a paired comparison needs at least 2 matched cases",
			n, len(c.added), len(c.removed))
	}
	// Map order must not change the floating-point sums: sort by id when the ids are
	// needed for the clusters, else sort the values.
	if grouped {
		slices.Sort(ids)
		for i, id := range ids {
			curMeans[i], baseMeans[i] = cur.CaseMeans[id], base.CaseMeans[id]
			d[i] = baseMeans[i] - curMeans[i]
		}
	} else {
		slices.Sort(d)
		slices.Sort(curMeans)
		slices.Sort(baseMeans)
	}
	rn := within(cur, base, curMeans, baseMeans)
	wc, wb := rn.wc, rn.wb
	mean, v := meanVar(d)
	nf := float64(n)
	c.paired, c.n, c.withinUnknown, c.v = true, n, rn.unknown, v
	c.regression, c.df = mean, nf-1
	se2 := v / nf
	if fit, ok := clustered(ids, d, mean, cur.Groups, base.Groups); ok {
		c.clusters = fit.g
		if fit.g < MinClusters {
			c.basis += fmt.Sprintf("; standard error clustered over %s", plural(fit.g, "group", "groups"))
			c.advice = fmt.Sprintf("add cases from at least %s, so that the comparison spans %d or more groups, or record cases without a group if their scores do not move together",
				plural(MinClusters-fit.g, "more group", "more groups"), MinClusters)
			return c, fmt.Sprintf("the matched cases form %s; a clustered comparison needs at least %d groups",
				plural(fit.g, "group", "groups"), MinClusters)
		}
		c.df, c.sizes, c.rho, c.largest = fit.df, fit.sizes, fit.rho, fit.largest
		c.basis += fmt.Sprintf("; standard error clustered over %d groups (CR2, %.1f degrees of freedom", fit.g, fit.df)
		if fit.largest >= 0.5 {
			c.basis += fmt.Sprintf("; the largest group holds %.0f%% of the cases", 100*fit.largest)
		}
		c.basis += ")"
		if se2 > 0 {
			c.deff = max(1, fit.v/se2)
		}
		se2 = fit.v
		c.point, c.design, c.designErr = estimateDesign(fit.sizes, fit.ssb, fit.ssw, wc, wb, c.kc, c.kb)
	}
	// The run-to-run floor: the differences cannot vary less than the runs' own noise
	// says they must, Var(d_i) ≥ σ²_c/K_c + σ²_b/K_b. Equal differences with discrete
	// scores are a chance event, not certainty.
	floor := c.deff * (wc/c.kc + wb/c.kb) / nf
	if floor > se2 {
		se2 = floor
		c.basis += "; standard error raised to the run-to-run noise"
		if rn.quiet > 0 {
			c.basis += fmt.Sprintf(", bounded jointly: no run varied in any of %d case-sides, so a run's variance is at most %.4f (%g%% upper bound)",
				rn.quiet, rn.bound, 100*DeterminismAssurance)
		}
	}
	c.se = math.Sqrt(se2)
	// The variance of the differences rests on n − 1 degrees of freedom, or fewer when
	// the cases of a group move together: Satterthwaite's under the clusters' working
	// model, G − 1 when they move as one.
	vdf := nf - 1
	if c.clusters > 0 {
		vdf = varianceDF(c.sizes, c.rho)
	}
	tau2 := excessVariance(v, wc/c.kc+wb/c.kb, vdf) // variance of the true per-case change
	// Its upper limit: a few cases cannot tell a change that varies from case to case from
	// run-to-run noise, and runs do nothing against the former. The limit is the larger
	// of what the observed variance allows and what the runs' own noise can hide: the
	// limit the same data would give if the change were even (v equal to the noise), so
	// that a lucky low variance does not make the spread look measured when the noise
	// left no resolution to measure it.
	noise := wc/c.kc + wb/c.kb
	f := upperFactor(vdf, SpreadAssurance)
	tau2Upper := max(tau2, v*f-noise, noise*(f-1))
	c.a, c.wc, c.wb, c.aUpper = c.deff*tau2/nf, c.deff*wc/nf, c.deff*wb/nf, c.deff*tau2Upper/nf
	return c, ""
}

// compareUnpaired is Welch's comparison of the two means, used only when a side has no
// per-case means to pair on.
func compareUnpaired(c comparison, cur, base MetricStats) (comparison, string) {
	which := "the baseline has"
	if len(cur.CaseMeans) == 0 {
		which = "the current run has"
	}
	c.basis = fmt.Sprintf("unpaired (Welch) over %d current and %d baseline cases: %s no per-case means", cur.Cases, base.Cases, which)
	if cur.Cases < 2 || base.Cases < 2 {
		return c, "an unpaired comparison needs at least 2 cases on each side"
	}
	rn := within(cur, base, nil, nil)
	wc, wb := rn.wc, rn.wb
	c.withinUnknown = rn.unknown
	nc, nb := float64(cur.Cases), float64(base.Cases)
	sec2 := max(cur.StdDev*cur.StdDev, wc/c.kc) / nc // each side floored at its run-to-run noise
	seb2 := max(base.StdDev*base.StdDev, wb/c.kb) / nb
	c.n = cur.Cases
	c.regression = base.Mean - cur.Mean
	c.se = math.Sqrt(sec2 + seb2)
	// Welch–Satterthwaite degrees of freedom.
	c.df = (sec2 + seb2) * (sec2 + seb2) / (sec2*sec2/(nc-1) + seb2*seb2/(nb-1))
	tauC := excessVariance(cur.StdDev*cur.StdDev, wc/c.kc, nc-1) // between-case variance of true means
	tauB := excessVariance(base.StdDev*base.StdDev, wb/c.kb, nb-1)
	c.a, c.wc, c.wb = tauC/nc+tauB/nb, wc/nc, wb/nb
	c.aUpper = c.a
	return c, ""
}

// DeterminismAssurance is the confidence of the bound on the run-to-run variance that
// the gate uses when no case's runs varied: 1 − DeterminismAssurance is the probability
// that so many quiet cases are seen although the runs vary more often than the bound
// assumes.
const DeterminismAssurance = 0.99

// runNoise is the run-to-run (within-case) variance of one run of each side, as the floor
// and the plan use it.
type runNoise struct {
	wc, wb float64
	// unknown is set when neither side could measure it (one run each).
	unknown bool
	// quiet is the number of case-sides whose runs never varied behind a joint bound
	// (0 when none was used), and bound the variance that bound allows.
	quiet int
	bound float64
}

// within returns the run-to-run variances of the current side and the baseline over the
// compared cases (nc and nb of them). A side with at least 2 runs that varied uses its own
// estimate; a side with one run borrows the other side's.
//
// A side whose runs never varied is bounded jointly over all the quiet case-sides: if a
// case-side's K runs differ with probability π_j, the chance that none of m case-sides
// varied is Π(1 − π_j) ≤ (1 − π̄)^m, so π̄ ≤ π̄_U = 1 − (1 − DeterminismAssurance)^{1/m}
// with that confidence; and a score in [0, 1] whose K runs differ with probability π
// has a variance of at most s_K·π, s_K = 1/(4(1 − 2^{1−K})) (tight for binary scores:
// π = 1 − p^K − (1−p)^K). The bound is on the mean over case-sides, which is what the
// floor needs. Two sides with one run each, or a bound looser than the case-by-case one,
// use the bound of a metric in [0, 1]: a case with mean μ has a run-to-run variance of at
// most μ(1−μ) (Bhatia–Davis), evaluated at μ̃ = (K·x̄ + ½)/(K + 1), the case mean shrunk
// by half a pseudo-run towards ½ so that a case that scored 1 on all K runs still has the
// uncertainty K runs leave. The means are the compared cases' means (nil: use the side's
// overall mean).
func within(cur, base MetricStats, curMeans, baseMeans []float64) runNoise {
	measured := func(st MetricStats) bool { return st.Runs >= 2 && st.WithinCaseVariance > 0 }
	quiet := func(st MetricStats) bool { return st.Runs >= 2 && st.WithinCaseVariance == 0 }
	bound := func(st MetricStats, means []float64) float64 {
		if means == nil {
			means = []float64{st.Mean}
		}
		k := float64(st.Runs)
		var sum float64
		for _, m := range means {
			mu := (k*m + 0.5) / (k + 1)
			sum += mu * (1 - mu)
		}
		return sum / float64(len(means))
	}
	count := func(st MetricStats, means []float64) int {
		if means == nil {
			return st.Cases
		}
		return len(means)
	}
	rn := runNoise{wc: cur.WithinCaseVariance, wb: base.WithinCaseVariance, unknown: cur.Runs < 2 && base.Runs < 2}
	kc, kb := float64(cur.Runs), float64(base.Runs)
	switch {
	case rn.unknown:
		rn.wc, rn.wb = bound(cur, curMeans), bound(base, baseMeans)
		return rn
	case measured(cur) && measured(base):
		return rn
	case measured(cur) && base.Runs < 2:
		rn.wb = rn.wc // the baseline has one run: assume it was as noisy as the current run
		return rn
	case measured(base) && cur.Runs < 2:
		rn.wc = rn.wb
		return rn
	}
	// At least one side is quiet. The joint bound covers the quiet sides together:
	// a_j = s_K/K per case-side, and the sum Σ σ²_j/K_j over them is at most
	// max(a)·Σπ_j ≤ max(a)·m·π̄_U.
	var m int
	var a float64
	if quiet(cur) {
		m += count(cur, curMeans)
		a = max(a, quietFactor(cur.Runs)/kc)
	}
	if quiet(base) {
		m += count(base, baseMeans)
		a = max(a, quietFactor(base.Runs)/kb)
	}
	piU := 1 - math.Pow(1-DeterminismAssurance, 1/float64(m))
	jc, jb := kc*a*piU, kb*a*piU // each side's share, as a variance of one run
	bc, bb := bound(cur, curMeans), bound(base, baseMeans)
	switch {
	case quiet(cur) && quiet(base):
		if jc/kc+jb/kb < bc/kc+bb/kb {
			rn.wc, rn.wb, rn.quiet, rn.bound = jc, jb, m, jc
		} else {
			rn.wc, rn.wb = bc, bb
		}
	case quiet(cur):
		rn.wc = min(jc, bc)
		if jc < bc {
			rn.quiet, rn.bound = m, jc
		}
		if base.Runs < 2 {
			rn.wb = rn.wc // one baseline run borrows the current run's
		}
	default: // quiet(base)
		rn.wb = min(jb, bb)
		if jb < bb {
			rn.quiet, rn.bound = m, jb
		}
		if cur.Runs < 2 {
			rn.wc = rn.wb
		}
	}
	return rn
}

// quietFactor returns s_K = 1/(4(1 − 2^{1−K})), the largest ratio of the variance of a
// score in [0, 1] to the probability that K of its runs are not all equal (k ≥ 2).
func quietFactor(k int) float64 { return 1 / (4 * (1 - math.Pow(2, float64(1-k)))) }

// excessVariance estimates the part of an observed variance v (with df degrees of
// freedom) not explained by run-to-run noise of expected size e: v − e, but 0 unless v
// exceeds e significantly (a one-sided χ² test at 5%). Method-of-moments differences of
// variances are noisy; without the test, noise in v would make plans claim that no
// number of runs can suffice when nothing says so.
func excessVariance(v, e, df float64) float64 {
	if v <= e {
		return 0
	}
	if e > 0 && df >= 1 && (distuv.ChiSquared{K: df}).Survival(df*v/e) > 0.05 {
		return 0
	}
	return v - e
}

// plan sets MDE and the runs and cases recommendation; m is the number of tested
// thresholds, so the MDE is computed at the Bonferroni level α/m that Holm's first step
// uses, the level a lone true regression among m thresholds is tested at.
func plan(r *ThresholdResult, c comparison, m int) {
	th := r.Threshold
	delta := th.MaxRegression
	df := max(1, c.df)
	tAlpha := r.tAlpha
	if m > 1 || tAlpha == 0 {
		tAlpha = tQuantile(1-th.Alpha/float64(m), df)
	}
	lambda := tAlpha + tQuantile(GatePower, df)
	r.MDE = lambda * c.se
	// The largest SE² with MDE ≤ delta, shrunk by the planning assurance factor: the
	// variances are estimates, and a plan made from a lucky low estimate would fall short
	// of its power on the next run.
	target := (delta / lambda) * (delta / lambda) / assurance(df)

	// Cases: SE² scales as 1/n at fixed runs (grouped cases are planned by planGrouped).
	r.CasesNeeded = max(2, ceilInt(float64(r.Cases)*(c.se*c.se-c.calib)/(target-c.calib)))
	cases := fmt.Sprintf("at least %d cases", r.CasesNeeded)
	if c.calib > 0 && target <= c.calib {
		// The judge's calibration alone leaves the MDE above delta.
		r.CasesNeeded = 0
		r.Advice = fmt.Sprintf("the judge's calibration alone leaves the gate unable to see a regression of 2×maxRegression (MDE %.4f > %.4f): label more calibration items, so that its sensitivity and specificity are known more closely", r.MDE, delta)
		return
	}
	if c.clusters > 0 {
		planGrouped(r, c, th.Alpha/float64(m))
		return
	}
	if c.withinUnknown {
		r.Advice = fmt.Sprintf("use at least 2 runs per case so that run-to-run noise can be told from case-to-case spread, or %s", cases)
		return
	}
	r.RunsNeeded = runsFor(target-c.a-c.calib-c.wb/c.kb, c.wc)
	r.RunsNeededNewBaseline = runsFor(target-c.a-c.calib, c.wc+c.wb)
	// Runs shrink only the run-to-run part of SE²; the case-to-case spread of the change
	// stays. With few cases that spread is barely estimated, so runs are advised only if,
	// with the spread at its SpreadAssurance upper limit (aUpper), infinitely many runs
	// would bring the MDE within delta; otherwise only more cases help.
	budget := (delta / lambda) * (delta / lambda)
	measure := max(r.RunsNeeded, r.RunsNeededNewBaseline) // runs at which the spread would be measured
	spreadBound := c.aUpper > budget && measure > 0
	if spreadBound {
		r.RunsNeeded, r.RunsNeededNewBaseline = 0, 0
	}
	switch {
	case spreadBound:
		r.Advice = fmt.Sprintf("more runs cannot be relied on: with %d cases the change may vary from case to case by up to %.4f (standard deviation, %g%% upper limit), which no number of runs averages out; use %s at %s, or raise maxRegression above %.4f",
			c.n, math.Sqrt(c.aUpper*float64(c.n)/c.deff), 100*SpreadAssurance, cases, nRuns(int(c.kc)), r.MDE)
		if c.a == 0 {
			// Nothing shows such a spread yet; only the runs' own noise hides it.
			r.Advice += fmt.Sprintf(" (%s per case would show whether the spread is that large)", nRuns(measure))
		}
	case r.RunsNeeded > 0:
		r.Advice = fmt.Sprintf("run at least %s per case (MDE at %s: %.4f; needed: ≤ %.4f)", nRuns(r.RunsNeeded), nRuns(int(c.kc)), r.MDE, delta)
	case r.RunsNeededNewBaseline > 0:
		r.Advice = fmt.Sprintf("the baseline's own noise (%s per case) leaves no room: regenerate it and run, both with at least %s per case, or use %s",
			nRuns(int(c.kb)), nRuns(r.RunsNeededNewBaseline), cases)
	default:
		what := "the change varies too much from case to case"
		if !c.paired {
			what = "cases differ too much from each other"
		}
		r.Advice = fmt.Sprintf("no number of runs suffices (%s): use %s at %s, or raise maxRegression above %.4f",
			what, cases, nRuns(int(c.kc)), r.MDE)
	}
}

// PlanningAssurance is the confidence with which RunsNeeded and CasesNeeded reach the
// promised power despite estimating the variances from the same data: plans use the
// one-sided upper confidence limit of the variance at this level (Browne, 1995).
const PlanningAssurance = 0.8

// SpreadAssurance is the confidence with which the gate rules out that the change varies
// so much from case to case that no number of runs could reach the MDE before it advises
// runs: it plans with that variance at its one-sided upper confidence limit at this level.
const SpreadAssurance = 0.8

// upperFactor returns df/χ²_{1−level}(df), the factor by which the one-sided upper
// confidence limit at level of a variance with df degrees of freedom exceeds its estimate.
func upperFactor(df, level float64) float64 {
	return df / distuv.ChiSquared{K: df}.Quantile(1-level)
}

// assurance returns the factor df/χ²_{1−PlanningAssurance}(df) by which the one-sided
// upper confidence limit of a variance exceeds its estimate.
func assurance(df float64) float64 {
	return df / distuv.ChiSquared{K: df}.Quantile(1-PlanningAssurance)
}

// runsFor returns the smallest K ≥ 1 with w/K ≤ room, or 0 when there is no room.
func runsFor(room, w float64) int {
	if w <= 0 {
		if room >= 0 {
			return 1
		}
		return 0
	}
	if room <= 0 {
		return 0
	}
	return max(1, ceilInt(w/room))
}

func ceilInt(x float64) int {
	if x > 1e9 {
		return 1e9
	}
	return int(math.Ceil(x - 1e-9))
}

// tQuantile returns the p-quantile of Student's t with df degrees of freedom (the normal
// quantile when df is effectively infinite).
func tQuantile(p, df float64) float64 {
	if df > 1e7 || math.IsInf(df, 1) {
		return distuv.UnitNormal.Quantile(p)
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

// tSurvival returns P(T > x) for Student's t with df degrees of freedom.
func tSurvival(x, df float64) float64 {
	if df > 1e7 || math.IsInf(df, 1) {
		return distuv.UnitNormal.Survival(x)
	}
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Survival(x)
}

// nRuns writes a number of runs as English: "1 run", "3 runs".
func nRuns(n int) string { return plural(n, "run", "runs") }

// plural writes n with the singular or plural noun: "1 group", "2 groups".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
