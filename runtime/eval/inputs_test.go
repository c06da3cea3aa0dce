package eval_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/eval"
)

// gateOne gates one threshold on metric "m" and returns its result.
func gateOne(t *testing.T, th eval.Threshold, cur, base eval.MetricStats) eval.ThresholdResult {
	t.Helper()
	th.Metric = "m"
	rep, err := eval.Gate([]eval.Threshold{th}, map[string]eval.MetricStats{"m": cur},
		&eval.Baseline{Metrics: map[string]eval.MetricStats{"m": base}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report does not encode: %v", err)
	}
	return rep.Results[0]
}

// uniform returns statistics of n cases that all have the case mean v at runs runs,
// built as a run would build them.
func uniform(t *testing.T, n, runs int, v func(i int) float64) eval.MetricStats {
	t.Helper()
	ids := make([]string, n)
	scores := make([][]float64, n)
	for i := range n {
		ids[i] = string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		scores[i] = make([]float64, runs)
		for k := range runs {
			scores[i][k] = v(i)
		}
	}
	st, err := eval.NewMetricStats(ids, scores)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestGateBoundaryIsInclusive: cases moving 0.80 → 0.75 drop by 0.050000000000000044 in
// floating point; with maxRegression 0.05 that is a drop equal to the allowance, which is
// allowed. Before the tolerance the gate called it a regression (p = 0 with SE 0), and a
// rounding-sized spread of the differences (SE ≈ 1e-17) gave p ≈ 0.007.
func TestGateBoundaryIsInclusive(t *testing.T) {
	th := eval.Threshold{MaxRegression: 0.05, Alpha: 0.05}
	for _, tt := range []struct {
		name      string
		base, cur func(int) float64
	}{
		{"every case 0.80 → 0.75", func(int) float64 { return 0.80 }, func(int) float64 { return 0.75 }},
		{"rounding-sized spread", func(i int) float64 { return []float64{0.80, 0.70, 0.30}[i%3] }, func(i int) float64 { return []float64{0.75, 0.65, 0.25}[i%3] }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := gateOne(t, th, uniform(t, 30, 10, tt.cur), uniform(t, 30, 10, tt.base))
			if r.Verdict == eval.Regression || r.PValue < 0.5 || strings.Contains(r.Reason, "exceeds") {
				t.Errorf("a drop equal to the allowance: verdict %v, p %v, regression %v, SE %v: %s", r.Verdict, r.PValue, r.Regression, r.SE, r.Reason)
			}
		})
	}
}

func TestNonFiniteScoresAreRefused(t *testing.T) {
	for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1.5, -0.25} {
		if _, err := eval.NewMetricStats([]string{"a", "b"}, [][]float64{{0.5, 1}, {v, 0}}); err == nil ||
			!strings.Contains(err.Error(), `case "b" run 0`) {
			t.Errorf("score %v: err %v", v, err)
		}
	}
	good := synth(1, "c", 10, 2, constant(0.5))
	th := []eval.Threshold{{Metric: "m", MaxRegression: 0.05, Alpha: 0.05}}
	for name, bad := range map[string]func(*eval.MetricStats){
		"NaN mean":      func(s *eval.MetricStats) { s.Mean = math.NaN() },
		"+Inf SE":       func(s *eval.MetricStats) { s.StdErr = math.Inf(1) },
		"NaN within":    func(s *eval.MetricStats) { s.WithinCaseVariance = math.NaN() },
		"NaN case mean": func(s *eval.MetricStats) { s.CaseMeans = map[string]float64{"c000": math.NaN()}; s.Cases = 1 },
	} {
		cur := good
		cur.CaseMeans = map[string]float64{}
		for k, v := range good.CaseMeans {
			cur.CaseMeans[k] = v
		}
		bad(&cur)
		if _, err := eval.Gate(th, map[string]eval.MetricStats{"m": cur}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": good}}); err == nil ||
			!strings.Contains(err.Error(), "current run") {
			t.Errorf("%s in the current run: err %v", name, err)
		}
		if _, err := eval.Gate(th, map[string]eval.MetricStats{"m": good}, &eval.Baseline{Metrics: map[string]eval.MetricStats{"m": cur}}); err == nil ||
			!strings.Contains(err.Error(), "baseline") {
			t.Errorf("%s in the baseline: err %v", name, err)
		}
		if _, err := eval.MarshalBaseline(&eval.Baseline{Metrics: map[string]eval.MetricStats{"m": cur}}); err == nil {
			t.Errorf("%s: MarshalBaseline accepted it", name)
		}
	}
}

// TestBaselineWrittenIsReadable: what MarshalBaseline writes, ParseBaseline reads; what
// ParseBaseline would refuse, MarshalBaseline refuses to write, so that no CI run stops
// on a baseline the tool itself wrote.
func TestBaselineWrittenIsReadable(t *testing.T) {
	good := synth(1, "c", 10, 2, constant(0.5))
	for name, mod := range map[string]func(*eval.MetricStats){
		"valid":             func(*eval.MetricStats) {},
		"mean above 1":      func(s *eval.MetricStats) { s.Mean = 1.5 },
		"negative mean":     func(s *eval.MetricStats) { s.Mean = -0.1 },
		"case mean above 1": func(s *eval.MetricStats) { s.CaseMeans = map[string]float64{"a": 1.2}; s.Cases = 1 },
		"no runs":           func(s *eval.MetricStats) { s.Runs = 0 },
		"negative spread":   func(s *eval.MetricStats) { s.StdDev = -1 },
		"case count":        func(s *eval.MetricStats) { s.Cases = 3 },
	} {
		st := good
		mod(&st)
		b := &eval.Baseline{Dataset: "d", Metrics: map[string]eval.MetricStats{"m": st}}
		data, werr := eval.MarshalBaseline(b)
		if werr != nil {
			if name == "valid" {
				t.Errorf("%s: %v", name, werr)
			}
			continue
		}
		if name != "valid" {
			t.Errorf("%s: MarshalBaseline accepted it", name)
		}
		if _, err := eval.ParseBaseline("b.json", data); err != nil {
			t.Errorf("%s: written but unreadable: %v", name, err)
		}
	}
	// NewBaseline refuses a result whose scores are out of range.
	res := &eval.Result{Dataset: "d", Runs: 1, Metrics: []eval.MetricInfo{{Name: "m"}},
		Cases: []eval.CaseResult{{CaseID: "a", Samples: []eval.Sample{{Scores: []float64{1.5}, MetricErrs: []error{nil}}}}}}
	if _, err := eval.NewBaseline(res, "v", ""); err == nil || !strings.Contains(err.Error(), "[0, 1]") {
		t.Errorf("NewBaseline: err %v", err)
	}
}
