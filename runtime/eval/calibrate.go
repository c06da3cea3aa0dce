package eval

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat/distuv"
)

// MinCalibrationLabels is the fewest items of each human label (pass and fail) a judge's
// calibration set must hold. Sensitivity is measured on the items people passed and
// specificity on those they failed; with fewer, an interval of either spans most of
// [0, 1] and no judge could clear a useful floor.
const MinCalibrationLabels = 10

// CalibrationLevel is the two-sided confidence of the reported intervals of sensitivity
// and specificity. The lower bound of Youden's J is the sum of their lower bounds minus
// one, so it holds with at least 1 − 2·(1 − CalibrationLevel)/2 = CalibrationLevel.
const CalibrationLevel = 0.95

// JudgeVerdictCut is the score at and above which a calibrated judge's answer counts as a
// pass: a calibrated judge is scored as a verdict (1 or 0), because sensitivity and
// specificity are properties of verdicts, not of scores.
const JudgeVerdictCut = 0.5

// JudgeCalibration is how well a judge agrees with people on a labelled calibration set:
// of the items people passed (Positives), how many the judge passed (TruePositives); of
// the items people failed (Negatives), how many the judge failed (TrueNegatives).
// [NewJudgeCalibration] fills the derived figures; the counts are the record.
type JudgeCalibration struct {
	// Positives is the number of calibration items people labelled pass.
	Positives int `json:"positives"`
	// TruePositives is how many of them the judge passed.
	TruePositives int `json:"truePositives"`
	// Negatives is the number of calibration items people labelled fail.
	Negatives int `json:"negatives"`
	// TrueNegatives is how many of them the judge failed.
	TrueNegatives int `json:"trueNegatives"`

	// Sensitivity is TruePositives/Positives: how often the judge passes what people pass.
	Sensitivity float64 `json:"sensitivity"`
	// SensitivityInterval is its Wilson interval at CalibrationLevel.
	SensitivityInterval [2]float64 `json:"sensitivityInterval"`
	// Specificity is TrueNegatives/Negatives: how often the judge fails what people fail.
	Specificity float64 `json:"specificity"`
	// SpecificityInterval is its Wilson interval at CalibrationLevel.
	SpecificityInterval [2]float64 `json:"specificityInterval"`
	// Youden is sensitivity + specificity − 1 (Youden's J): 1 for a perfect judge, 0 for
	// one whose verdict says nothing about the answer.
	Youden float64 `json:"youden"`
	// YoudenLower is the lower bound of Youden at CalibrationLevel (the sum of the two
	// intervals' lower bounds, minus one).
	YoudenLower float64 `json:"youdenLower"`
}

// NewJudgeCalibration measures a judge from its counts on a calibration set (see
// [JudgeCalibration]). It refuses a set with fewer than MinCalibrationLabels items of
// either label (all of one label included), counts that do not fit, and a judge whose
// Youden's J is not above 0: Rogan–Gladen's correction divides by J, and a judge no
// better than a coin says nothing to correct.
func NewJudgeCalibration(truePositives, positives, trueNegatives, negatives int) (JudgeCalibration, error) {
	c := JudgeCalibration{Positives: positives, TruePositives: truePositives, Negatives: negatives, TrueNegatives: trueNegatives}
	if err := c.fill(); err != nil {
		return JudgeCalibration{}, err
	}
	return c, nil
}

// CalibrateJudge measures a judge from paired verdicts: human[i] is whether people
// passed item i, score[i] the judge's score of it (a pass at JudgeVerdictCut and above).
func CalibrateJudge(human []bool, score []float64) (JudgeCalibration, error) {
	if len(human) != len(score) {
		return JudgeCalibration{}, fmt.Errorf("judge calibration: %d human labels for %d judge scores", len(human), len(score))
	}
	var tp, p, tn, n int
	for i, h := range human {
		if !inUnit(score[i]) {
			return JudgeCalibration{}, fmt.Errorf("judge calibration: item %d: the judge's score %v is not a finite number in [0, 1]", i, score[i])
		}
		pass := score[i] >= JudgeVerdictCut
		if h {
			p++
			if pass {
				tp++
			}
		} else {
			n++
			if !pass {
				tn++
			}
		}
	}
	return NewJudgeCalibration(tp, p, tn, n)
}

// fill checks the counts and computes the derived figures.
func (c *JudgeCalibration) fill() error {
	switch {
	case c.Positives < 0 || c.Negatives < 0 || c.TruePositives < 0 || c.TrueNegatives < 0 ||
		c.TruePositives > c.Positives || c.TrueNegatives > c.Negatives:
		return fmt.Errorf("judge calibration: counts %d of %d passed and %d of %d failed do not fit", c.TruePositives, c.Positives, c.TrueNegatives, c.Negatives)
	case c.Positives < MinCalibrationLabels || c.Negatives < MinCalibrationLabels:
		return fmt.Errorf("judge calibration: the set holds %d items people passed and %d they failed; each label needs at least %d, so that both the judge's sensitivity and its specificity can be measured: label more items",
			c.Positives, c.Negatives, MinCalibrationLabels)
	}
	z := distuv.UnitNormal.Quantile(1 - (1-CalibrationLevel)/2)
	c.Sensitivity = float64(c.TruePositives) / float64(c.Positives)
	c.Specificity = float64(c.TrueNegatives) / float64(c.Negatives)
	c.SensitivityInterval = wilson(c.TruePositives, c.Positives, z)
	c.SpecificityInterval = wilson(c.TrueNegatives, c.Negatives, z)
	c.Youden = c.Sensitivity + c.Specificity - 1
	c.YoudenLower = c.SensitivityInterval[0] + c.SpecificityInterval[0] - 1
	if !(c.Youden > 0) {
		return &JudgeRefusedError{Calibration: *c, Reason: fmt.Sprintf("sensitivity %.3f + specificity %.3f − 1 = %.3f is not above 0: the judge's verdict does not tell a good answer from a bad one, and its pass rate cannot be corrected", c.Sensitivity, c.Specificity, c.Youden)}
	}
	return nil
}

// Check returns the calibration with its derived figures recomputed from its counts (a
// calibration read from a file is trusted for its counts only), or why it cannot be used.
func (c JudgeCalibration) Check() (JudgeCalibration, error) {
	out := JudgeCalibration{Positives: c.Positives, TruePositives: c.TruePositives, Negatives: c.Negatives, TrueNegatives: c.TrueNegatives}
	if err := out.fill(); err != nil {
		return JudgeCalibration{}, err
	}
	return out, nil
}

// RequireFloor refuses a judge whose lower bound of Youden's J is below floor, in (0, 1].
func (c JudgeCalibration) RequireFloor(floor float64) error {
	if !(floor > 0 && floor <= 1) {
		return fmt.Errorf("judge calibration: floor %v must be in (0, 1]", floor)
	}
	if c.YoudenLower < floor {
		return &JudgeRefusedError{Calibration: c, Reason: fmt.Sprintf("the %g%% lower bound of sensitivity + specificity − 1 is %.3f (sensitivity %.3f [%.3f, %.3f] on %d items passed by people, specificity %.3f [%.3f, %.3f] on %d failed), below the floor %g: label more items to narrow the bounds, or improve the judge's rubric or model",
			100*CalibrationLevel, c.YoudenLower, c.Sensitivity, c.SensitivityInterval[0], c.SensitivityInterval[1], c.Positives,
			c.Specificity, c.SpecificityInterval[0], c.SpecificityInterval[1], c.Negatives, floor)}
	}
	return nil
}

// JudgeRefusedError says that a judge's calibration does not allow it to gate.
type JudgeRefusedError struct {
	// Calibration is the judge's measured calibration.
	Calibration JudgeCalibration
	// Reason says why, with the figures.
	Reason string
}

// Error formats the refusal.
func (e *JudgeRefusedError) Error() string { return "the judge may not gate: " + e.Reason }

// errorVariances returns the variances of the sensitivity and specificity estimates,
// computed at the Agresti–Coull adjusted proportions ((x+2)/(n+4)) so that a judge that
// agreed on every item still carries the uncertainty its finite set leaves.
func (c JudgeCalibration) errorVariances() (se, sp float64) {
	v := func(x, n int) float64 {
		p := (float64(x) + 2) / (float64(n) + 4)
		return p * (1 - p) / float64(n)
	}
	return v(c.TruePositives, c.Positives), v(c.TrueNegatives, c.Negatives)
}

// youdenVariance is the variance of the estimate of Youden's J.
func (c JudgeCalibration) youdenVariance() float64 {
	se, sp := c.errorVariances()
	return se + sp
}

// RoganGladen corrects a judged pass rate p for the judge's error: the true rate π
// satisfies p = Se·π + (1 − Sp)(1 − π), so π = (p + Sp − 1)/(Se + Sp − 1), clamped to
// [0, 1] (Rogan and Gladen, 1978). It refuses p, se or sp that is not a finite number in
// [0, 1], and se + sp − 1 ≤ 0, where the formula has no meaning.
func RoganGladen(p, se, sp float64) (float64, error) {
	for _, f := range []struct {
		name string
		v    float64
	}{{"pass rate", p}, {"sensitivity", se}, {"specificity", sp}} {
		if !inUnit(f.v) {
			return 0, fmt.Errorf("rogan-gladen: %s %v is not a finite number in [0, 1]", f.name, f.v)
		}
	}
	j := se + sp - 1
	if !(j > 0) {
		return 0, fmt.Errorf("rogan-gladen: sensitivity %v + specificity %v − 1 = %v is not above 0: a judge no better than chance cannot be corrected", se, sp, j)
	}
	return clampUnit((p + sp - 1) / j), nil
}

// CorrectedRate is a judged pass rate corrected for the judge's error, with its interval.
type CorrectedRate struct {
	// Raw is the judged pass rate.
	Raw float64 `json:"raw"`
	// Corrected is the Rogan–Gladen estimate, clamped to [0, 1].
	Corrected float64 `json:"corrected"`
	// SE is the standard error of the (unclamped) corrected estimate: the sampling error
	// of Raw and the calibration's error in sensitivity and specificity, by the delta
	// method.
	SE float64 `json:"se"`
	// Lower and Upper are the two-sided interval at the requested level, clamped to [0, 1].
	Lower float64 `json:"lower"`
	Upper float64 `json:"upper"`
}

// Correct corrects a judged pass rate p measured with standard error pSE for the judge's
// error, with a two-sided interval at level. The variance of the estimate is
//
//	Var(π̂) = (Var(p) + π²·Var(Se) + (1 − π)²·Var(Sp)) / J²,
//
// with π the unclamped estimate (Greenland 1988; Lang and Reiczigel 2014), so the
// calibration's uncertainty widens the interval. With a binary verdict per item and n
// items, pSE = √(p(1 − p)/n).
func (c JudgeCalibration) Correct(p, pSE, level float64) (CorrectedRate, error) {
	cal, err := c.Check()
	if err != nil {
		return CorrectedRate{}, err
	}
	if !inUnit(p) {
		return CorrectedRate{}, fmt.Errorf("rogan-gladen: pass rate %v is not a finite number in [0, 1]", p)
	}
	if !finite(pSE) || pSE < 0 {
		return CorrectedRate{}, fmt.Errorf("rogan-gladen: standard error %v is not a finite number at least 0", pSE)
	}
	if !(level > 0 && level < 1) {
		return CorrectedRate{}, fmt.Errorf("rogan-gladen: level %v must be in (0, 1)", level)
	}
	j := cal.Youden
	pi := (p + cal.Specificity - 1) / j
	vse, vsp := cal.errorVariances()
	se := math.Sqrt((pSE*pSE + pi*pi*vse + (1-pi)*(1-pi)*vsp) / (j * j))
	z := distuv.UnitNormal.Quantile(1 - (1-level)/2)
	return CorrectedRate{Raw: p, Corrected: clampUnit(pi), SE: se, Lower: clampUnit(pi - z*se), Upper: clampUnit(pi + z*se)}, nil
}

// wilson returns the Wilson score interval of x successes in n trials at normal quantile z.
func wilson(x, n int, z float64) [2]float64 {
	nf, p := float64(n), float64(x)/float64(n)
	den := 1 + z*z/nf
	mid := (p + z*z/(2*nf)) / den
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / den
	return [2]float64{clampUnit(mid - half), clampUnit(mid + half)}
}

func clampUnit(x float64) float64 { return min(1, max(0, x)) }

// errUncalibrated is the refusal of a model-derived metric in a gate without calibration.
var errUncalibrated = errors.New("metric is model-derived (an LLM judge) and gates only when calibrated against human labels: declare the judge's calibration set, or remove the threshold")

// corrected turns a comparison of a calibrated judge's verdict rates into one of the true
// pass rates (see the package documentation, "Calibrated judges"): the Rogan–Gladen
// correction is linear in the rate with slope 1/J, so the regression and every variance
// component scale by 1/J and 1/J², and the calibration's own error adds D'²·Var(Ĵ)/J²,
// where D' is the corrected regression. It sets the result's means to the corrected ones
// and returns why no comparison can be made, or "".
func corrected(r *ThresholdResult, c *comparison, cur, base MetricStats) string {
	cal, err := cur.Calibration.Check()
	if err != nil {
		return err.Error()
	}
	if b := base.Calibration; b != nil && (b.Positives != cal.Positives || b.TruePositives != cal.TruePositives ||
		b.Negatives != cal.Negatives || b.TrueNegatives != cal.TrueNegatives) {
		c.advice = "regenerate the baseline with --update-baseline, so that both sides are corrected with one calibration"
		return "the baseline was corrected with another calibration of the judge"
	}
	j := cal.Youden
	fix := func(p float64) float64 { return clampUnit((p + cal.Specificity - 1) / j) }
	r.CurrentMean, r.BaselineMean = fix(cur.Mean), fix(base.Mean)
	r.CurrentSE, r.BaselineSE = cur.StdErr/j, base.StdErr/j
	j2 := j * j
	c.regression /= j
	c.calib = c.regression * c.regression * cal.youdenVariance() / j2
	c.se = math.Sqrt(c.se*c.se/j2 + c.calib)
	c.a, c.wc, c.wb, c.aUpper, c.v = c.a/j2, c.wc/j2, c.wb/j2, c.aUpper/j2, c.v/j2
	c.design, c.point = c.design.scaled(1/j2), c.point.scaled(1/j2)
	c.design.Fixed, c.point.Fixed = c.calib, c.calib
	c.basis += fmt.Sprintf("; judge-error-corrected (Rogan–Gladen: sensitivity %.3f, specificity %.3f on %d labelled items)",
		cal.Sensitivity, cal.Specificity, cal.Positives+cal.Negatives)
	return ""
}
