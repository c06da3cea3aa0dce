package eval_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/aidgen/aid/runtime/eval"
)

// synth returns binary scores for n cases with runs runs, case i right with probability
// p(i), drawn from a fixed seed; idPrefix lets two sides use different case ids.
func synth(seed uint64, idPrefix string, n, runs int, p func(i int) float64) eval.MetricStats {
	r := rand.New(rand.NewPCG(seed, 1))
	ids := make([]string, n)
	scores := make([][]float64, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s%03d", idPrefix, i)
		scores[i] = make([]float64, runs)
		for k := range runs {
			if r.Float64() < p(i) {
				scores[i][k] = 1
			}
		}
	}
	st, err := eval.NewMetricStats(ids, scores)
	if err != nil {
		panic(err)
	}
	return st
}

func constant(v float64) func(int) float64 { return func(int) float64 { return v } }

// spread gives cases difficulties spread around mean.
func spread(mean float64) func(int) float64 {
	return func(i int) float64 { return min(1, max(0, mean+0.3*math.Sin(float64(i)))) }
}

func ptr(v float64) *float64 { return &v }

// noCaseMeans drops the per-case means, as in a baseline written by hand from summary
// figures: the gate can then only compare the two means unpaired.
func noCaseMeans(st eval.MetricStats) eval.MetricStats {
	st.CaseMeans = nil
	return st
}

// withFloor returns th with FailBelow (and MinMean, when not nil) set.
func withFloor(th eval.Threshold, failBelow float64, minMean *float64) eval.Threshold {
	th.FailBelow, th.MinMean = &failBelow, minMean
	return th
}

func TestGateVerdicts(t *testing.T) {
	th := eval.Threshold{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}
	withMin := th
	withMin.MinMean = ptr(0.7)
	tests := []struct {
		name       string
		th         eval.Threshold
		cur, base  eval.MetricStats
		noBaseline bool
		want       eval.Verdict
		paired     bool
		reason     string
	}{
		{name: "large regression", th: th, cur: synth(1, "c", 100, 10, spread(0.5)), base: synth(2, "c", 100, 10, spread(0.8)),
			want: eval.Regression, paired: true, reason: "exceeds maxRegression"},
		{name: "no change, enough data", th: th, cur: synth(3, "c", 200, 10, spread(0.6)), base: synth(4, "c", 200, 10, spread(0.6)),
			want: eval.Pass, paired: true},
		{name: "improvement with little data", th: th, cur: synth(5, "c", 10, 2, constant(0.95)), base: synth(6, "c", 10, 2, constant(0.3)),
			want: eval.Pass, paired: true, reason: "upper bound"},
		{name: "no change with little data", th: th, cur: synth(7, "c", 10, 2, constant(0.6)), base: synth(8, "c", 10, 2, constant(0.6)),
			want: eval.Inconclusive, paired: true, reason: "cannot see one of 2×maxRegression"},
		{name: "minMean cleared despite regression", th: withMin, cur: synth(1, "c", 100, 10, constant(0.75)), base: synth(2, "c", 100, 10, constant(0.95)),
			want: eval.Pass, paired: true, reason: "clears minMean"},
		{name: "below minMean without baseline", th: withMin, cur: synth(1, "c", 100, 10, constant(0.5)), noBaseline: true,
			want: eval.Regression, reason: "below minMean 0.7000 and there is no baseline"},
		{name: "no baseline", th: th, cur: synth(1, "c", 100, 10, constant(0.5)), noBaseline: true,
			want: eval.Inconclusive, reason: "no baseline"},
		// A floor that fails: the deterministic retriever, mean 0.733 under a floor
		// of 0.9, was inconclusive with advice to add runs.
		{name: "below failBelow, otherwise inconclusive", th: withFloor(th, 0.9, nil), cur: deterministic(15, 3, func(i int) bool { return i%15 < 11 }),
			base: deterministic(15, 3, func(i int) bool { return i%15 < 11 }),
			want: eval.Regression, paired: true, reason: "mean 0.7333 is below failBelow 0.9000 (without failBelow: inconclusive,"},
		{name: "below failBelow, otherwise pass", th: withFloor(th, 0.7, nil), cur: synth(3, "c", 200, 10, spread(0.6)), base: synth(4, "c", 200, 10, spread(0.6)),
			want: eval.Regression, paired: true, reason: "is below failBelow 0.7000 (without failBelow: pass, regression"},
		{name: "below failBelow without baseline", th: withFloor(th, 0.7, nil), cur: synth(1, "c", 100, 10, constant(0.5)), noBaseline: true,
			want: eval.Regression, reason: "is below failBelow 0.7000 (without failBelow: inconclusive, cannot compare"},
		{name: "at failBelow and minMean", th: withFloor(th, 0.5, ptr(0.5)), cur: deterministic(10, 2, func(i int) bool { return i%2 == 0 }), noBaseline: true,
			want: eval.Pass, reason: "mean 0.5000 clears minMean 0.5000"},
		{name: "above failBelow, large regression", th: withFloor(th, 0.3, nil), cur: synth(1, "c", 100, 10, spread(0.5)), base: synth(2, "c", 100, 10, spread(0.8)),
			want: eval.Regression, paired: true, reason: "exceeds maxRegression"},
		// Identical runs are not certainty: with discrete scores equal differences are a
		// chance event, and 30 cases × 5 runs cannot see a drop of 2×0.05 (before the
		// run-to-run floor this passed with MDE 0 and p 1).
		{name: "identical runs", th: th, cur: synth(9, "c", 30, 5, constant(0.6)), base: synth(9, "c", 30, 5, constant(0.6)),
			want: eval.Inconclusive, paired: true, reason: "cannot see one of 2×maxRegression"},
		{name: "disjoint case sets cannot be paired", th: eval.Threshold{Metric: "m", MaxRegression: 0.1, Alpha: 0.05},
			cur: synth(10, "new", 300, 10, spread(0.6)), base: synth(11, "old", 300, 10, spread(0.6)), want: eval.Inconclusive,
			reason: "only 0 of the current run's case ids are in the baseline (300 added, 300 removed)"},
		{name: "a baseline without case means is compared unpaired", th: eval.Threshold{Metric: "m", MaxRegression: 0.1, Alpha: 0.05},
			cur: synth(10, "new", 300, 10, spread(0.6)), base: noCaseMeans(synth(11, "old", 300, 10, spread(0.6))), want: eval.Pass, paired: false},
		{name: "unpaired regression", th: th, cur: synth(10, "new", 300, 10, spread(0.4)), base: noCaseMeans(synth(11, "old", 300, 10, spread(0.7))),
			want: eval.Regression, paired: false},
		{name: "one case cannot be compared", th: th, cur: synth(1, "c", 1, 10, constant(0.5)), base: synth(2, "c", 1, 10, constant(0.5)),
			want: eval.Inconclusive, reason: "needs at least 2 matched cases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var base *eval.Baseline
			if !tt.noBaseline {
				base = &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": tt.base}}
			}
			rep, err := eval.Gate([]eval.Threshold{tt.th}, map[string]eval.MetricStats{"m": tt.cur}, base)
			if err != nil {
				t.Fatal(err)
			}
			r := rep.Results[0]
			if r.Verdict != tt.want || rep.Verdict != tt.want || r.Paired != tt.paired {
				t.Errorf("verdict %v (report %v), paired %v; want %v, paired %v\nreason: %s", r.Verdict, rep.Verdict, r.Paired, tt.want, tt.paired, r.Reason)
			}
			if !strings.Contains(r.Reason, tt.reason) {
				t.Errorf("reason %q lacks %q", r.Reason, tt.reason)
			}
			if (r.Verdict == eval.Inconclusive) != (r.Advice != "") {
				t.Errorf("advice %q with verdict %v", r.Advice, r.Verdict)
			}
			if r.Tested && (r.PValue < 0 || r.PValue > 1 || r.AdjustedPValue < r.PValue || r.MDE < 0) {
				t.Errorf("p %v, adjusted %v, MDE %v", r.PValue, r.AdjustedPValue, r.MDE)
			}
		})
	}
}

func TestGatePairedStatistic(t *testing.T) {
	// Four cases; the per-case regressions are 0.1, 0.2, 0.3 and 0. With 2 runs and a small
	// run-to-run variance the spread of the differences sets the standard error.
	base := eval.MetricStats{Runs: 2, Cases: 4, Mean: 0.65, WithinCaseVariance: 0.001, CaseMeans: map[string]float64{"a": 0.6, "b": 0.7, "c": 0.8, "d": 0.5}}
	cur := eval.MetricStats{Runs: 2, Cases: 4, Mean: 0.5, WithinCaseVariance: 0.001, CaseMeans: map[string]float64{"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5}}
	th := []eval.Threshold{{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}
	gate := func(cur, base eval.MetricStats) eval.ThresholdResult {
		rep, err := eval.Gate(th, map[string]eval.MetricStats{"m": cur}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": base}})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Results[0]
	}
	check := func(r eval.ThresholdResult, se float64) {
		t.Helper()
		tdist := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: 3}
		wantP := tdist.Survival((0.15 - 0.05) / se)
		wantMDE := (tdist.Quantile(0.95) + tdist.Quantile(0.8)) * se
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"regression", r.Regression, 0.15}, {"SE", r.SE, se}, {"DF", r.DF, 3}, {"p", r.PValue, wantP},
			{"adjusted p", r.AdjustedPValue, wantP}, {"MDE", r.MDE, wantMDE},
			{"upper bound", r.UpperBound, 0.15 + tdist.Quantile(0.95)*se},
		} {
			if math.Abs(c.got-c.want) > 1e-12 {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if !r.Paired || r.Verdict != eval.Inconclusive || r.MatchedCases != 4 || r.Basis == "" {
			t.Errorf("paired %v verdict %v matched %d basis %q: %s", r.Paired, r.Verdict, r.MatchedCases, r.Basis, r.Reason)
		}
	}
	check(gate(cur, base), math.Sqrt(0.05/3)/2) // sd of {0.1, 0.2, 0.3, 0} over √4

	// With one run per case on both sides the run-to-run variance is unknown; the floor is
	// the bound of a [0, 1] metric, μ̃(1−μ̃) at μ̃ = (x̄ + ½)/2, averaged over cases.
	cur.Runs, base.Runs, cur.WithinCaseVariance, base.WithinCaseVariance = 1, 1, 0, 0
	bound := func(m float64) float64 { mu := (m + 0.5) / 2; return mu * (1 - mu) }
	wb := (bound(0.6) + bound(0.7) + bound(0.8) + bound(0.5)) / 4
	r := gate(cur, base)
	check(r, math.Sqrt((wb+bound(0.5))/4))
	if !strings.Contains(r.Basis, "run-to-run noise") {
		t.Errorf("basis %q does not say the SE was floored", r.Basis)
	}
	// Run-to-run noise cannot be separated from case spread: the advice says so.
	if r.RunsNeeded != 0 || !strings.Contains(r.Advice, "at least 2 runs per case") || r.CasesNeeded <= 4 {
		t.Errorf("runs %d, cases %d, advice %q", r.RunsNeeded, r.CasesNeeded, r.Advice)
	}
}

// deterministic returns the statistics of a system whose runs never vary: n cases, case i
// right on every one of its runs when right(i).
func deterministic(n, runs int, right func(i int) bool) eval.MetricStats {
	ids := make([]string, n)
	scores := make([][]float64, n)
	for i := range n {
		ids[i] = fmt.Sprintf("c%03d", i)
		scores[i] = make([]float64, runs)
		if right(i) {
			for k := range scores[i] {
				scores[i][k] = 1
			}
		}
	}
	st, err := eval.NewMetricStats(ids, scores)
	if err != nil {
		panic(err)
	}
	return st
}

// TestGateDeterministic: a deterministic system identical to its baseline, 30 cases × 3
// runs with every run equal on both sides, passes by maxRegression: 180 runs that never
// varied bound the run-to-run variance jointly (no case-side of 60 varied: π̄ ≤ 0.074 at
// 99%, a run's variance ≤ 0.025), where the case-by-case bound (SE 0.067 against δ = 0.05)
// left it inconclusive.
func TestGateDeterministic(t *testing.T) {
	th := eval.Threshold{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}
	right := func(i int) bool { return i%5 != 0 }
	st := deterministic(30, 3, right)
	r := gateOne(t, th, st, st)
	piU := 1 - math.Pow(0.01, 1.0/60)
	wantSE := math.Sqrt(2 * piU / 3 / 3 / 30) // w ≤ s_3·π̄_U = π̄_U/3 on each side, K = 3, n = 30
	if r.Verdict != eval.Pass || !strings.Contains(r.Reason, "within maxRegression") || math.Abs(r.SE-wantSE) > 1e-12 ||
		!strings.Contains(r.Basis, "bounded jointly: no run varied in any of 60 case-sides") {
		t.Errorf("verdict %v, SE %v (want %v): %s; basis %q", r.Verdict, r.SE, wantSE, r.Reason, r.Basis)
	}
	// A real change on a deterministic system is still seen.
	worse := deterministic(30, 3, func(i int) bool { return right(i) && i%3 != 0 })
	if r := gateOne(t, th, worse, st); r.Verdict != eval.Regression {
		t.Errorf("a drop of 0.27: verdict %v: %s", r.Verdict, r.Reason)
	}
	// The bound rests on the quiet side alone when the other side varied: fewer case-sides,
	// a looser bound, and the measured side keeps its own estimate.
	noisy := synth(3, "c", 30, 3, func(i int) float64 {
		if right(i) {
			return 0.97
		}
		return 0.03
	})
	if noisy.WithinCaseVariance == 0 {
		t.Fatal("the noisy side did not vary")
	}
	r = gateOne(t, th, noisy, st)
	wb := (1 - math.Pow(0.01, 1.0/30)) / 3
	if want := math.Sqrt((noisy.WithinCaseVariance/3 + wb/3) / 30); math.Abs(r.SE-want) > 1e-12 ||
		!strings.Contains(r.Basis, "no run varied in any of 30 case-sides, so a run's variance is at most 0.0474") {
		t.Errorf("one quiet side: SE %v, want %v; basis %q", r.SE, want, r.Basis)
	}
	// Five cases that never varied are too few to bound anything tightly: still inconclusive.
	few := deterministic(5, 3, right)
	if r := gateOne(t, th, few, few); r.Verdict != eval.Inconclusive {
		t.Errorf("5 deterministic cases: verdict %v: %s", r.Verdict, r.Reason)
	}
}

// TestGateNoData: statistics without cases never reach a verdict, on either side.
func TestGateNoData(t *testing.T) {
	th := []eval.Threshold{{Metric: "m", MaxRegression: 0.05, Alpha: 0.05, MinMean: ptr(0)}}
	some := synth(1, "c", 10, 3, constant(0.5))
	for name, tc := range map[string]struct{ cur, base eval.MetricStats }{
		"current without cases":  {eval.MetricStats{Runs: 3}, some},
		"baseline without cases": {some, eval.MetricStats{Runs: 3}},
		"empty case means":       {eval.MetricStats{Runs: 3, CaseMeans: map[string]float64{}}, some},
	} {
		rep, err := eval.Gate(th, map[string]eval.MetricStats{"m": tc.cur}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": tc.base}})
		if err == nil || !strings.Contains(err.Error(), "cases 0 must be at least 1") {
			t.Errorf("%s: report %+v, err %v", name, rep, err)
		}
	}
}

func TestGateAdvice(t *testing.T) {
	th := []eval.Threshold{{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}
	gate := func(cur, base eval.MetricStats) eval.ThresholdResult {
		rep, err := eval.Gate(th, map[string]eval.MetricStats{"m": cur}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": base}})
		if err != nil {
			t.Fatal(err)
		}
		return rep.Results[0]
	}
	// 100 cases, 10 baseline runs: more current runs reach the MDE.
	r := gate(synth(1, "c", 100, 2, spread(0.6)), synth(2, "c", 100, 10, spread(0.6)))
	if r.Verdict != eval.Inconclusive || r.RunsNeeded <= 2 || r.RunsNeeded > 20 || !strings.Contains(r.Advice, fmt.Sprintf("at least %d runs per case", r.RunsNeeded)) {
		t.Errorf("200 cases: verdict %v, runs needed %d, advice %q", r.Verdict, r.RunsNeeded, r.Advice)
	}
	// 200 binary cases with a 2-run baseline: the baseline's own noise already exceeds
	// the budget, so the baseline must be regenerated or cases added.
	r = gate(synth(3, "c", 200, 5, constant(0.6)), synth(4, "c", 200, 2, constant(0.6)))
	if r.Verdict != eval.Inconclusive || r.RunsNeeded != 0 || r.RunsNeededNewBaseline <= 2 || r.CasesNeeded <= 200 ||
		!strings.Contains(r.Advice, "regenerate") {
		t.Errorf("200 cases, 2-run baseline: verdict %v, runs %d/%d, cases %d, advice %q", r.Verdict, r.RunsNeeded, r.RunsNeededNewBaseline, r.CasesNeeded, r.Advice)
	}
	// 30 binary cases: at 5 runs the spread of the change from case to case is barely
	// known, and at its upper limit no number of runs would bring the MDE within 0.05,
	// so the advice is more cases, and says why.
	r = gate(synth(3, "c", 30, 5, constant(0.6)), synth(4, "c", 30, 10, constant(0.6)))
	if r.Verdict != eval.Inconclusive || r.RunsNeeded != 0 || r.RunsNeededNewBaseline != 0 || r.CasesNeeded <= 30 ||
		!strings.Contains(r.Advice, "more runs cannot be relied on") || !strings.Contains(r.Advice, fmt.Sprintf("use at least %d cases", r.CasesNeeded)) {
		t.Errorf("30 cases: verdict %v, runs %d/%d, cases %d, advice %q", r.Verdict, r.RunsNeeded, r.RunsNeededNewBaseline, r.CasesNeeded, r.Advice)
	}
	// Grouped, with one group holding 60% of 120 cases: the test rests on under 2 degrees
	// of freedom and the groups' shared change leaves a floor no number of runs passes,
	// so the advice is more groups, and not more cases in the largest one.
	sc := groupCell{groups: 5, dominated: true, icc: 0.5, binary: true}.scenario()
	r = newSimulator(sc, 3).gate(2, 2*sc.delta)
	if r.Verdict != eval.Inconclusive || r.RunsNeeded != 0 || r.GroupsNeeded <= 5 || r.CasesNeeded <= 120 || r.DF > 2 || r.PlannedPower < eval.GatePower ||
		!strings.HasPrefix(r.Advice, "no number of runs suffices") ||
		!strings.Contains(r.Advice, fmt.Sprintf("more groups of 12 cases (%d groups, %d cases) at 2 runs (the largest group holds 60%% of the cases", r.GroupsNeeded, r.CasesNeeded)) ||
		!strings.Contains(r.Advice, "add groups, not cases to it") {
		t.Errorf("dominated groups: verdict %v, df %v, runs %d, groups %d, cases %d, power %v, advice %q", r.Verdict, r.DF, r.RunsNeeded, r.GroupsNeeded, r.CasesNeeded, r.PlannedPower, r.Advice)
	}
	// Equal groups whose cases share little: runs come first, with the power they plan,
	// and the alternative names groups.
	sc = groupCell{groups: 40, icc: 0.1}.scenario()
	sc.delta = 0.04
	r = newSimulator(sc, 5).gate(2, 0)
	if r.Verdict != eval.Inconclusive || r.RunsNeeded <= 2 || !strings.HasPrefix(r.Advice, fmt.Sprintf("run at least %d runs per case (planned power %.2f", r.RunsNeeded, r.PlannedPower)) ||
		r.PlannedPower < eval.GatePower || r.GroupsNeeded <= 20 || !strings.Contains(r.Advice, fmt.Sprintf("(%d groups, %d cases)", r.GroupsNeeded, r.CasesNeeded)) || math.Abs(r.DF-39) > 1e-9 {
		t.Errorf("equal groups: verdict %v, df %v, runs %d, groups %d, power %v, advice %q", r.Verdict, r.DF, r.RunsNeeded, r.GroupsNeeded, r.PlannedPower, r.Advice)
	}
	// Unpaired, with cases that differ a lot: only more cases help.
	r = gate(synth(5, "new", 30, 10, spread(0.5)), noCaseMeans(synth(6, "old", 30, 10, spread(0.5))))
	if r.Verdict != eval.Inconclusive || r.RunsNeeded != 0 || r.RunsNeededNewBaseline != 0 || !strings.Contains(r.Advice, "no number of runs suffices") {
		t.Errorf("unpaired: verdict %v, runs %d/%d, advice %q", r.Verdict, r.RunsNeeded, r.RunsNeededNewBaseline, r.Advice)
	}
}

func TestGateConfigurationErrors(t *testing.T) {
	cur := map[string]eval.MetricStats{
		"exact_match": synth(1, "c", 10, 2, constant(0.5)),
		"llm_judge":   {ModelDerived: true, Runs: 2, Cases: 10, Mean: 0.5},
	}
	_, err := eval.Gate([]eval.Threshold{
		{Metric: "llm_judge", MaxRegression: 0.05, Alpha: 0.05},
		{Metric: "bleu", MaxRegression: 0.05, Alpha: 0.05},
		{Metric: "exact_match", MaxRegression: 0.05, Alpha: 0.9},
	}, cur, nil)
	var gce *eval.GateConfigurationError
	if !errors.As(err, &gce) || gce.Metric != "llm_judge" {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"model-derived", `"bleu": metric is not measured`, "alpha 0.9"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

func TestGateHolmAcrossMetrics(t *testing.T) {
	cur := synth(1, "c", 200, 10, spread(0.55))
	base := synth(2, "c", 200, 10, spread(0.6))
	gate := func(th []eval.Threshold, cur, base map[string]eval.MetricStats) *eval.GateReport {
		rep, err := eval.Gate(th, cur, &eval.Baseline{Metrics: base})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// Choose maxRegression so that metric a alone has p ≈ 0.03: it regresses at alpha
	// 0.05 on its own, but not once Holm doubles its p-value next to a second metric.
	probe := gate([]eval.Threshold{{Metric: "a", MaxRegression: 0.001, Alpha: 0.05}},
		map[string]eval.MetricStats{"a": cur}, map[string]eval.MetricStats{"a": base}).Results[0]
	delta := probe.Regression - distuv.StudentsT{Mu: 0, Sigma: 1, Nu: probe.DF}.Quantile(0.97)*probe.SE
	single := gate([]eval.Threshold{{Metric: "a", MaxRegression: delta, Alpha: 0.05}},
		map[string]eval.MetricStats{"a": cur}, map[string]eval.MetricStats{"a": base}).Results[0]
	if math.Abs(single.PValue-0.03) > 1e-9 || single.Verdict != eval.Regression {
		t.Fatalf("single metric: p %v, verdict %v", single.PValue, single.Verdict)
	}
	cur2, base2 := synth(3, "c", 200, 10, spread(0.9)), synth(4, "c", 200, 10, spread(0.9))
	rep := gate([]eval.Threshold{{Metric: "a", MaxRegression: delta, Alpha: 0.05}, {Metric: "b", MaxRegression: delta, Alpha: 0.05}},
		map[string]eval.MetricStats{"a": cur, "b": cur2}, map[string]eval.MetricStats{"a": base, "b": base2})
	ra, rb := rep.Results[0], rep.Results[1]
	if math.Abs(ra.AdjustedPValue-0.06) > 1e-9 || ra.Verdict == eval.Regression {
		t.Errorf("with Holm: p %v → adjusted %v, verdict %v", ra.PValue, ra.AdjustedPValue, ra.Verdict)
	}
	if rb.AdjustedPValue < ra.AdjustedPValue || rb.AdjustedPValue < rb.PValue {
		t.Errorf("b: p %v → adjusted %v", rb.PValue, rb.AdjustedPValue)
	}
	if ra.MDE <= single.MDE {
		t.Errorf("MDE at alpha/2 %v is not larger than at alpha %v", ra.MDE, single.MDE)
	}
}

func TestVerdict(t *testing.T) {
	for _, tt := range []struct {
		v eval.Verdict
		s string
	}{{eval.Pass, "pass"}, {eval.Regression, "regression"}, {eval.Inconclusive, "inconclusive"}} {
		b, _ := json.Marshal(tt.v)
		if tt.v.String() != tt.s || string(b) != `"`+tt.s+`"` {
			t.Errorf("%d: %s %s", tt.v, tt.v, b)
		}
	}
}

func TestNewMetricStats(t *testing.T) {
	st, err := eval.NewMetricStats([]string{"a", "b", "c"}, [][]float64{{1, 1, 0, 0}, {1, 1, 1, 1}, {0, 0, 0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	// Case means 0.5, 1, 0; within variances 1/3, 0, 0.
	if st.Mean != 0.5 || math.Abs(st.StdDev-0.5) > 1e-12 || math.Abs(st.StdErr-0.5/math.Sqrt(3)) > 1e-12 ||
		math.Abs(st.WithinCaseVariance-1.0/9) > 1e-12 || st.Runs != 4 || st.Cases != 3 || st.CaseMeans["a"] != 0.5 {
		t.Errorf("%+v", st)
	}
	one, err := eval.NewMetricStats([]string{"a"}, [][]float64{{0.25}})
	if err != nil || one.StdDev != 0 || one.WithinCaseVariance != 0 || one.Mean != 0.25 {
		t.Errorf("%+v %v", one, err)
	}
	for name, tc := range map[string]struct {
		ids    []string
		scores [][]float64
	}{
		"no cases": {nil, nil},
		"mismatch": {[]string{"a"}, [][]float64{{1}, {1}}},
		"no runs":  {[]string{"a"}, [][]float64{{}}},
		"ragged":   {[]string{"a", "b"}, [][]float64{{1, 0}, {1}}},
		"repeated": {[]string{"a", "a"}, [][]float64{{1}, {1}}},
		"NaN":      {[]string{"a"}, [][]float64{{nan()}}},
	} {
		if _, err := eval.NewMetricStats(tc.ids, tc.scores); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// BenchmarkGate gates two metrics over 1000 paired cases, the work one CI eval does.
func BenchmarkGate(b *testing.B) {
	cur := map[string]eval.MetricStats{"a": synth(1, "c", 1000, 10, spread(0.6)), "b": synth(2, "c", 1000, 10, spread(0.7))}
	base := &eval.Baseline{Metrics: map[string]eval.MetricStats{"a": synth(3, "c", 1000, 10, spread(0.6)), "b": synth(4, "c", 1000, 10, spread(0.7))}}
	th := []eval.Threshold{{Metric: "a", MaxRegression: 0.02, Alpha: 0.05}, {Metric: "b", MaxRegression: 0.02, Alpha: 0.05}}
	for b.Loop() {
		if _, err := eval.Gate(th, cur, base); err != nil {
			b.Fatal(err)
		}
	}
}

// TestGateReportJSON checks that a report encodes with the camelCase names the
// eval report's JSON Schema documents, down to the statistics.
func TestGateReportJSON(t *testing.T) {
	rep, err := eval.Gate([]eval.Threshold{
		{Metric: "exact_match", MaxRegression: 0.05, Alpha: 0.05},
		{Metric: "normalized_contains", MaxRegression: 0.05, Alpha: 0.05, MinMean: ptr(0.5)},
	}, map[string]eval.MetricStats{
		"exact_match":         synth(1, "c", 100, 10, spread(0.4)),
		"normalized_contains": synth(2, "c", 100, 10, spread(0.6)),
	}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"exact_match": synth(3, "c", 100, 10, spread(0.7))}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatalf("report does not encode as JSON: %v", err)
	}
	for _, want := range []string{`"verdict":"regression"`, `"regression":`, `"adjustedPValue":`, `"matchedCases":`, `"basis":`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("report JSON lacks %s:\n%s", want, b)
		}
	}
	st, err := json.Marshal(synth(1, "c", 2, 2, spread(0.5)))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(st, &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"modelDerived", "runs", "cases", "mean", "stdDev", "stdErr", "withinCaseVariance", "errors", "caseMeans"} {
		if _, ok := keys[k]; !ok || len(keys) != 9 {
			t.Errorf("MetricStats JSON lacks %q or has other keys: %s", k, st)
		}
	}
}

// TestGateGroupedDegenerate: grouped cases whose runs never vary and whose differences
// are all 0 (nothing to estimate a variance from) get a verdict and, when inconclusive,
// an advice with finite numbers; a NaN case mean is refused with an error that names it.
func TestGateGroupedDegenerate(t *testing.T) {
	th := []eval.Threshold{{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}
	grouped := func(runs int, score float64) eval.MetricStats {
		ids := make([]string, 12)
		rows := make([][]float64, 12)
		groups := map[string]string{}
		for i := range ids {
			ids[i] = fmt.Sprintf("c%02d", i)
			groups[ids[i]] = fmt.Sprintf("g%d", i%3)
			rows[i] = make([]float64, runs)
			for k := range rows[i] {
				rows[i][k] = score
			}
		}
		st, err := eval.NewMetricStats(ids, rows)
		if err != nil {
			t.Fatal(err)
		}
		st.Groups = groups
		return st
	}
	for _, c := range []struct {
		name      string
		cur, base eval.MetricStats
	}{
		{"deterministic", grouped(3, 1), grouped(3, 1)},
		{"one run each", grouped(1, 1), grouped(1, 1)},
		{"all zero", grouped(5, 0), grouped(5, 0)},
	} {
		rep, err := eval.Gate(th, map[string]eval.MetricStats{"m": c.cur}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": c.base}})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := rep.Results[0]
		if r.Reason == "" || (r.Verdict == eval.Inconclusive && (r.Advice == "" || strings.Contains(r.Advice, "NaN") || strings.Contains(r.Advice, "Inf"))) ||
			math.IsNaN(r.PlannedPower) || r.RunsNeeded < 0 || r.GroupsNeeded < 0 {
			t.Errorf("%s: verdict %v, reason %q, advice %q, power %v", c.name, r.Verdict, r.Reason, r.Advice, r.PlannedPower)
		}
		t.Logf("%s: %v: %s; %s", c.name, r.Verdict, r.Reason, r.Advice)
	}
	bad := grouped(3, 1)
	bad.CaseMeans["c00"] = math.NaN()
	_, err := eval.Gate(th, map[string]eval.MetricStats{"m": bad}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": grouped(3, 1)}})
	if err == nil || !strings.Contains(err.Error(), `case "c00": mean NaN is not a finite number in [0, 1]`) {
		t.Errorf("NaN case mean: error %v", err)
	}
}
