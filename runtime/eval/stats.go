package eval

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
)

// MetricStats summarises one metric over a sampled evaluation, with what the gate needs:
// cases are clusters, so every spread here is computed from per-case means.
type MetricStats struct {
	// ModelDerived is the metric's ModelDerived value; such a metric cannot gate.
	ModelDerived bool `json:"modelDerived"`
	// Runs is the number of samples per case.
	Runs int `json:"runs"`
	// Cases is the number of cases.
	Cases int `json:"cases"`
	// Mean is the mean of the per-case means (each case weighs the same).
	Mean float64 `json:"mean"`
	// StdDev is the sample standard deviation of the per-case means (n−1 denominator).
	StdDev float64 `json:"stdDev"`
	// StdErr is the clustered standard error of Mean: StdDev/√Cases.
	StdErr float64 `json:"stdErr"`
	// WithinCaseVariance is the mean over cases of the sample variance of a case's scores
	// across its runs, an unbiased estimate of the within-case (resampling) variance σ²_w.
	// It is 0 when Runs < 2, where it cannot be estimated.
	WithinCaseVariance float64 `json:"withinCaseVariance"`
	// Errors counts samples that scored 0 because the runner or this metric failed.
	Errors int `json:"errors"`
	// CaseMeans maps each case id to the mean of its runs; the gate pairs cases on it.
	CaseMeans map[string]float64 `json:"caseMeans"`
	// Groups maps the id of each case that belongs to a group (see [Case]) to its group;
	// the gate clusters its standard error on them. Cases not in the map are their own
	// cluster; nil means no case declared a group.
	Groups map[string]string `json:"groups,omitempty"`
	// Calibration, set on a model-derived metric (a calibrated LLM judge's verdicts), is
	// the judge's agreement with human labels: the gate then tests the judge-error-corrected
	// means (see the package documentation, "Calibrated judges"). nil for other metrics.
	Calibration *JudgeCalibration `json:"calibration,omitempty"`
}

// NewMetricStats summarises per-case per-run scores: scores[i][k] is run k of the case
// ids[i]. Every case must have the same number of runs, at least one, and every score must
// be a finite number in [0, 1]: the gate's bounds rest on that range, and a NaN would
// reach every reported figure.
func NewMetricStats(ids []string, scores [][]float64) (MetricStats, error) {
	if len(ids) == 0 || len(ids) != len(scores) {
		return MetricStats{}, errors.New("need one score row per case and at least one case")
	}
	runs := len(scores[0])
	if runs == 0 {
		return MetricStats{}, errors.New("need at least one run per case")
	}
	st := MetricStats{Runs: runs, Cases: len(ids), CaseMeans: make(map[string]float64, len(ids))}
	means := make([]float64, len(ids))
	var within float64
	for i, row := range scores {
		if len(row) != runs {
			return MetricStats{}, fmt.Errorf("case %q has %d runs, case %q has %d", ids[i], len(row), ids[0], runs)
		}
		if _, dup := st.CaseMeans[ids[i]]; dup {
			return MetricStats{}, fmt.Errorf("case id %q repeated", ids[i])
		}
		for k, v := range row {
			if !inUnit(v) {
				return MetricStats{}, fmt.Errorf("case %q run %d: score %v is not a finite number in [0, 1]", ids[i], k, v)
			}
		}
		m, v := meanVar(row)
		means[i] = m
		st.CaseMeans[ids[i]] = m
		within += v
	}
	if runs > 1 {
		st.WithinCaseVariance = within / float64(len(ids))
	}
	m, v := meanVar(means)
	st.Mean, st.StdDev = m, math.Sqrt(v)
	st.StdErr = st.StdDev / math.Sqrt(float64(len(ids)))
	return st, nil
}

// meanVar returns the mean and the sample variance (n−1 denominator, 0 for one value).
func meanVar(xs []float64) (mean, variance float64) {
	if len(xs) < 2 {
		return stat.Mean(xs, nil), 0
	}
	mean, variance = stat.MeanVariance(xs, nil)
	return mean, max(0, variance) // rounding can leave −1e-18 for constant data
}

// inUnit reports whether v is a finite number in [0, 1]; NaN is not.
func inUnit(v float64) bool { return v >= 0 && v <= 1 }

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
