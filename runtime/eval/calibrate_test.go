package eval_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/eval"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestRoganGladen checks the estimator against values computed by hand:
// π = (p + Sp − 1)/(Se + Sp − 1), clamped to [0, 1].
func TestRoganGladen(t *testing.T) {
	for _, tt := range []struct {
		p, se, sp, want float64
	}{
		{0.6, 0.9, 0.8, 0.4 / 0.7},    // 0.571428…
		{0.655, 0.85, 0.8, 0.7},       // the simulation's setting: 0.85·0.7 + 0.2·0.3
		{0.05, 0.9, 0.8, 0},           // (0.05 − 0.2)/0.7 < 0: clamped
		{0.95, 0.9, 0.8, 1},           // 0.75/0.7 > 1: clamped
		{0.3, 1, 1, 0.3},              // a perfect judge changes nothing
		{0.5, 0.75, 0.75, 0.25 / 0.5}, // 0.5
	} {
		got, err := eval.RoganGladen(tt.p, tt.se, tt.sp)
		if err != nil || !near(got, tt.want, 1e-12) {
			t.Errorf("RoganGladen(%v, %v, %v) = %v, %v; want %v", tt.p, tt.se, tt.sp, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		p, se, sp float64
		want      string
	}{
		{0.5, 0.5, 0.5, "not above 0"},
		{0.5, 0.3, 0.6, "not above 0"},
		{math.NaN(), 0.9, 0.9, "pass rate NaN"},
		{0.5, math.Inf(1), 0.9, "sensitivity +Inf"},
		{0.5, 0.9, 1.2, "specificity 1.2"},
	} {
		got, err := eval.RoganGladen(tt.p, tt.se, tt.sp)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("RoganGladen(%v, %v, %v) = %v, %v; want an error with %q", tt.p, tt.se, tt.sp, got, err, tt.want)
		}
	}
}

// TestJudgeCalibrationFigures checks the calibration's intervals and the corrected rate's
// interval against values computed by hand (Wilson intervals at 95%; the delta-method
// variance with Agresti–Coull adjusted proportions for the calibration's error).
func TestJudgeCalibrationFigures(t *testing.T) {
	c, err := eval.NewJudgeCalibration(45, 50, 40, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"sensitivity", c.Sensitivity, 0.9},
		{"specificity", c.Specificity, 0.8},
		{"sensitivity lower", c.SensitivityInterval[0], 0.7863976856252035},
		{"sensitivity upper", c.SensitivityInterval[1], 0.9565242350681096},
		{"specificity lower", c.SpecificityInterval[0], 0.6696289406777459},
		{"specificity upper", c.SpecificityInterval[1], 0.887562499842239},
		{"youden", c.Youden, 0.7},
		{"youden lower", c.YoudenLower, 0.45602662630294954},
	} {
		if !near(f.got, f.want, 1e-9) {
			t.Errorf("%s = %.12f, want %.12f", f.name, f.got, f.want)
		}
	}
	// p = 0.6 over 200 binary verdicts.
	r, err := c.Correct(0.6, math.Sqrt(0.6*0.4/200), 0.95)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"corrected", r.Corrected, 0.5714285714285712},
		{"se", r.SE, 0.07244620963709097},
		{"lower", r.Lower, 0.4294366097234343},
		{"upper", r.Upper, 0.713420533133708},
	} {
		if !near(f.got, f.want, 1e-9) {
			t.Errorf("%s = %.12f, want %.12f", f.name, f.got, f.want)
		}
	}
	// The interval is clamped to [0, 1].
	r, err = c.Correct(0.97, 0.01, 0.95)
	if err != nil || r.Corrected != 1 || r.Upper != 1 || !(r.Lower <= 1) {
		t.Errorf("Correct(0.97) = %+v, %v; want clamped to 1", r, err)
	}
	if err := c.RequireFloor(0.4); err != nil {
		t.Errorf("floor 0.4 below the lower bound 0.456: %v", err)
	}
	var refused *eval.JudgeRefusedError
	if err := c.RequireFloor(0.5); !errors.As(err, &refused) || !strings.Contains(err.Error(), "0.456") || !strings.Contains(err.Error(), "below the floor 0.5") {
		t.Errorf("floor 0.5 above the lower bound 0.456: %v", err)
	}
}

// TestJudgeCalibrationDegenerate: degenerate sets and inputs give clear errors, never NaN.
func TestJudgeCalibrationDegenerate(t *testing.T) {
	yes := func(n int) []bool { return make([]bool, n) }
	allPass := make([]bool, 40)
	for i := range allPass {
		allPass[i] = true
	}
	scores := func(n int, v float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = v
		}
		return s
	}
	for _, tt := range []struct {
		name  string
		human []bool
		score []float64
		want  string
	}{
		{"all labels pass", allPass, scores(40, 1), "0 they failed"},
		{"all labels fail", yes(40), scores(40, 0), "0 items people passed"},
		{"empty", nil, nil, "0 items people passed and 0 they failed"},
		{"tiny", append(allPass[:3:3], yes(3)...), scores(6, 1), "3 items people passed and 3 they failed"},
		{"NaN score", append(allPass[:20:20], yes(20)...), append(scores(39, 1), math.NaN()), "score NaN"},
		{"mismatched", allPass[:3], scores(2, 1), "3 human labels for 2 judge scores"},
		{"coin", append(allPass[:20:20], yes(20)...), scores(40, 1), "not above 0"}, // passes everything: J = 0
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := eval.CalibrateJudge(tt.human, tt.score)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CalibrateJudge = %+v, %v; want an error with %q", c, err, tt.want)
			}
		})
	}
	if _, err := eval.NewJudgeCalibration(11, 10, 10, 10); err == nil || !strings.Contains(err.Error(), "do not fit") {
		t.Errorf("11 of 10: %v", err)
	}
	c, err := eval.NewJudgeCalibration(18, 20, 17, 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ p, se, level float64 }{{math.NaN(), 0.1, 0.95}, {0.5, math.NaN(), 0.95}, {0.5, -1, 0.95}, {0.5, 0.1, 1}} {
		if r, err := c.Correct(bad.p, bad.se, bad.level); err == nil {
			t.Errorf("Correct(%v, %v, %v) = %+v; want an error", bad.p, bad.se, bad.level, r)
		}
	}
	for _, floor := range []float64{0, math.NaN(), 1.5} {
		if err := c.RequireFloor(floor); err == nil || !strings.Contains(err.Error(), "must be in (0, 1]") {
			t.Errorf("RequireFloor(%v) = %v", floor, err)
		}
	}
}

// judgeWorld draws verdicts of a judge with known sensitivity and specificity.
type judgeWorld struct {
	se, sp float64
	rng    *rand.Rand
}

func (w judgeWorld) verdict(truth bool) bool {
	if truth {
		return w.rng.Float64() < w.se
	}
	return w.rng.Float64() >= w.sp
}

// calibrate labels pos items people passed and neg they failed, and measures the judge.
func (w judgeWorld) calibrate(pos, neg int) (eval.JudgeCalibration, error) {
	var tp, tn int
	for range pos {
		if w.verdict(true) {
			tp++
		}
	}
	for range neg {
		if !w.verdict(false) {
			tn++
		}
	}
	return eval.NewJudgeCalibration(tp, pos, tn, neg)
}

// TestRoganGladenUnbiased simulates judges of known error: the raw judged pass rate is
// biased, the Rogan–Gladen rate (with sensitivity and specificity measured afresh on a
// calibration set each time) is not, within 0.01, and its 95% interval covers the truth
// about 95% of the time.
//
//	AID_CALIBRATION=full go test -run TestRoganGladenUnbiased -v ./runtime/eval/
func TestRoganGladenUnbiased(t *testing.T) {
	t.Parallel()
	n := gatesPerFigure()
	for i, tt := range []struct{ pi, se, sp float64 }{
		{0.7, 0.85, 0.8},
		{0.3, 0.95, 0.7},
		{0.9, 0.7, 0.95},
	} {
		t.Run(fmt.Sprintf("pi%.1f-se%.2f-sp%.2f", tt.pi, tt.se, tt.sp), func(t *testing.T) {
			t.Parallel()
			w := judgeWorld{se: tt.se, sp: tt.sp, rng: rand.New(rand.NewPCG(11, uint64(i)))}
			const items = 400
			var raw, corr, covered float64
			for range n {
				c, err := w.calibrate(150, 150)
				if err != nil {
					t.Fatal(err)
				}
				pass := 0
				for range items {
					if w.verdict(w.rng.Float64() < tt.pi) {
						pass++
					}
				}
				p := float64(pass) / items
				r, err := c.Correct(p, math.Sqrt(p*(1-p)/items), 0.95)
				if err != nil {
					t.Fatal(err)
				}
				raw += p
				corr += r.Corrected
				if r.Lower <= tt.pi && tt.pi <= r.Upper {
					covered++
				}
			}
			nf := float64(n)
			rawBias, corrBias, coverage := raw/nf-tt.pi, corr/nf-tt.pi, covered/nf
			t.Logf("Se %.2f Sp %.2f π %.1f, %d simulations: raw bias %+.4f, corrected bias %+.4f, 95%% interval coverage %.3f", tt.se, tt.sp, tt.pi, n, rawBias, corrBias, coverage)
			if math.Abs(corrBias) > 0.01 {
				t.Errorf("corrected bias %+.4f, want within 0.01", corrBias)
			}
			if math.Abs(rawBias) < 0.03 {
				t.Errorf("raw bias %+.4f: the setting should show the raw rate biased", rawBias)
			}
			if lim := 0.95 - 2*math.Sqrt(0.95*0.05/nf); coverage < lim {
				t.Errorf("coverage %.3f below 0.95 − 2 MC-SE = %.3f", coverage, lim)
			}
		})
	}
}

// judgedStats runs a judge of world w over cases whose true pass probabilities are q,
// runs times each, and summarises its verdicts as a calibrated judge's statistics.
func (w judgeWorld) judgedStats(t *testing.T, q []float64, runs int, cal eval.JudgeCalibration) eval.MetricStats {
	ids := make([]string, len(q))
	scores := make([][]float64, len(q))
	for i, qi := range q {
		ids[i] = fmt.Sprintf("c%03d", i)
		scores[i] = make([]float64, runs)
		for k := range runs {
			if w.verdict(w.rng.Float64() < qi) {
				scores[i][k] = 1
			}
		}
	}
	st, err := eval.NewMetricStats(ids, scores)
	if err != nil {
		t.Fatal(err)
	}
	st.ModelDerived, st.Calibration = true, &cal
	return st
}

// TestCalibratedJudgeGate simulates gates on a judge of known error: at a true regression
// of exactly maxRegression (of the true pass rate, which the judge's verdicts shrink by
// J) the gate raises false alarms at most α + 2 MC-SE of the time, with the judge
// measured afresh on a calibration set each time; at 2×maxRegression it passes rarely.
//
//	AID_CALIBRATION=full go test -run TestCalibratedJudgeGate -v ./runtime/eval/
func TestCalibratedJudgeGate(t *testing.T) {
	t.Parallel()
	n := gatesPerFigure()
	const delta, alpha, cases = 0.1, 0.05, 120
	for i, tt := range []struct{ se, sp float64 }{{0.85, 0.8}, {0.95, 0.9}} {
		t.Run(fmt.Sprintf("se%.2f-sp%.2f", tt.se, tt.sp), func(t *testing.T) {
			t.Parallel()
			w := judgeWorld{se: tt.se, sp: tt.sp, rng: rand.New(rand.NewPCG(23, uint64(i)))}
			th := []eval.Threshold{{Metric: eval.MetricLLMJudge, MaxRegression: delta, Alpha: alpha}}
			rate := func(regression float64) (fail, pass float64) {
				for range n {
					cal, err := w.calibrate(150, 150)
					if err != nil {
						t.Fatal(err)
					}
					qb, qc := make([]float64, cases), make([]float64, cases)
					for j := range qb {
						qb[j] = 0.25 + 0.7*w.rng.Float64()
						qc[j] = qb[j] - regression
					}
					base := &eval.Baseline{Metrics: map[string]eval.MetricStats{eval.MetricLLMJudge: w.judgedStats(t, qb, 10, cal)}}
					cur := map[string]eval.MetricStats{eval.MetricLLMJudge: w.judgedStats(t, qc, 5, cal)}
					rep, err := eval.Gate(th, cur, base)
					if err != nil {
						t.Fatal(err)
					}
					switch rep.Verdict {
					case eval.Regression:
						fail++
					case eval.Pass:
						pass++
					}
				}
				return fail / float64(n), pass / float64(n)
			}
			edge, _ := rate(delta)
			fail2, pass2 := rate(2 * delta)
			lim := alpha + 2*math.Sqrt(alpha*(1-alpha)/float64(n))
			t.Logf("Se %.2f Sp %.2f, %d gates per figure: false alarms at R=δ %.4f (limit %.4f); at R=2δ fail %.3f, pass %.3f", tt.se, tt.sp, n, edge, lim, fail2, pass2)
			if edge > lim {
				t.Errorf("false alarms %.4f > α + 2 MC-SE = %.4f", edge, lim)
			}
			if pass2 > 0.2 {
				t.Errorf("a true regression of 2δ passes %.3f of the time", pass2)
			}
		})
	}
}

// TestGateJudgeNeedsCalibration: a threshold on a judge without calibration is refused;
// with one it is tested on the corrected means, and its basis says so.
func TestGateJudgeNeedsCalibration(t *testing.T) {
	w := judgeWorld{se: 0.9, sp: 0.9, rng: rand.New(rand.NewPCG(5, 5))}
	cal, err := w.calibrate(100, 100)
	if err != nil {
		t.Fatal(err)
	}
	q := make([]float64, 60)
	for i := range q {
		q[i] = 0.7
	}
	st := w.judgedStats(t, q, 3, cal)
	base := &eval.Baseline{Metrics: map[string]eval.MetricStats{eval.MetricLLMJudge: w.judgedStats(t, q, 3, cal)}}
	th := []eval.Threshold{{Metric: eval.MetricLLMJudge, MaxRegression: 0.1, Alpha: 0.05}}
	raw := st
	raw.Calibration = nil
	var ge *eval.GateConfigurationError
	if _, err := eval.Gate(th, map[string]eval.MetricStats{eval.MetricLLMJudge: raw}, base); !errors.As(err, &ge) || !strings.Contains(err.Error(), "calibrated against human labels") {
		t.Fatalf("uncalibrated judge: %v", err)
	}
	rep, err := eval.Gate(th, map[string]eval.MetricStats{eval.MetricLLMJudge: st}, base)
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Results[0]
	want, _ := eval.RoganGladen(st.Mean, cal.Sensitivity, cal.Specificity)
	if !r.Tested || !strings.Contains(r.Basis, "Rogan–Gladen") || !near(r.CurrentMean, want, 1e-12) {
		t.Fatalf("calibrated judge: tested %v, current mean %v (want %v), basis %q", r.Tested, r.CurrentMean, want, r.Basis)
	}
	// The regression is the raw one divided by J.
	if rawDrop := base.Metrics[eval.MetricLLMJudge].Mean - st.Mean; !near(r.Regression, rawDrop/cal.Youden, 1e-9) {
		t.Errorf("regression %v, want raw %v / J %v", r.Regression, rawDrop, cal.Youden)
	}
	// A baseline corrected with another calibration is not compared.
	other, err := eval.NewJudgeCalibration(cal.TruePositives-1, cal.Positives, cal.TrueNegatives, cal.Negatives)
	if err != nil {
		t.Fatal(err)
	}
	b2 := base.Metrics[eval.MetricLLMJudge]
	b2.Calibration = &other
	rep, err = eval.Gate(th, map[string]eval.MetricStats{eval.MetricLLMJudge: st}, &eval.Baseline{Metrics: map[string]eval.MetricStats{eval.MetricLLMJudge: b2}})
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Results[0]; r.Tested || r.Verdict != eval.Inconclusive || !strings.Contains(r.Reason, "another calibration") {
		t.Errorf("other calibration: tested %v, %v: %s", r.Tested, r.Verdict, r.Reason)
	}
}

// TestBaselineKeepsCalibration: a baseline keeps a calibrated judge's counts, and a
// baseline whose counts describe an unusable judge is refused when read.
func TestBaselineKeepsCalibration(t *testing.T) {
	cal, err := eval.NewJudgeCalibration(45, 50, 40, 50)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eval.NewMetricStats([]string{"a", "b"}, [][]float64{{1, 0}, {1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	st.ModelDerived, st.Calibration = true, &cal
	data, err := eval.MarshalBaseline(&eval.Baseline{Dataset: "d", Metrics: map[string]eval.MetricStats{eval.MetricLLMJudge: st}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := eval.ParseBaseline("b.json", data)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Metrics[eval.MetricLLMJudge].Calibration; got == nil || *got != cal {
		t.Fatalf("read back %+v, want %+v", got, cal)
	}
	bad := strings.Replace(string(data), `"trueNegatives": 40`, `"trueNegatives": 5`, 1)
	if _, err := eval.ParseBaseline("b.json", []byte(bad)); err == nil || !strings.Contains(err.Error(), "not above 0") {
		t.Fatalf("a baseline with a coin-flip judge: %v", err)
	}
}
