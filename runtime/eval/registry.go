package eval

import (
	"errors"
	"fmt"
	"sort"
)

// MetricConfig carries what a metric factory may need; each factory reads only its part.
type MetricConfig struct {
	// Schema is the JSON Schema text for "json_schema_valid".
	Schema []byte
	// Judge is the grading model for "llm_judge".
	Judge JudgeModel
	// Rubric is the grading rubric for "llm_judge"; empty means DefaultRubric.
	Rubric string
	// JudgeScale is the scale the judge answers on.
	JudgeScale JudgeScale
	// JudgeCalibrated builds a calibrated "llm_judge" (see [LLMJudge.Calibrated]).
	JudgeCalibrated bool
}

// MetricFactory builds a metric by name and says, before building it, whether it is
// model-derived, so that thresholds can be checked without a model client.
type MetricFactory struct {
	// ModelDerived is what the built metric's ModelDerived method returns.
	ModelDerived bool
	// New builds the metric.
	New func(cfg MetricConfig) (Metric, error)
}

// Registry maps metric names to factories. A Registry is a value the caller owns: there is
// no global registry, so tests and programs never see each other's registrations.
type Registry struct {
	factories map[string]MetricFactory
}

// NewRegistry returns a registry holding the built-in metrics: "exact_match",
// "normalized_contains", "json_schema_valid", "guardrail_blocked", "guardrail_tripped" and
// "llm_judge".
func NewRegistry() *Registry {
	r := &Registry{factories: map[string]MetricFactory{}}
	r.factories[MetricExactMatch] = MetricFactory{New: func(MetricConfig) (Metric, error) { return ExactMatch{}, nil }}
	r.factories[MetricNormalizedContains] = MetricFactory{New: func(MetricConfig) (Metric, error) { return NormalizedContains{}, nil }}
	r.factories[MetricJSONSchemaValid] = MetricFactory{New: func(cfg MetricConfig) (Metric, error) {
		if len(cfg.Schema) == 0 {
			return nil, errors.New("json_schema_valid needs a schema")
		}
		return NewJSONSchemaValid(cfg.Schema)
	}}
	r.factories[MetricGuardrailBlocked] = MetricFactory{New: func(MetricConfig) (Metric, error) { return GuardrailBlocked{}, nil }}
	r.factories[MetricGuardrailTripped] = MetricFactory{New: func(MetricConfig) (Metric, error) { return GuardrailTripped{}, nil }}
	r.factories[MetricLLMJudge] = MetricFactory{ModelDerived: true, New: func(cfg MetricConfig) (Metric, error) {
		if cfg.Judge == nil {
			return nil, errors.New("llm_judge needs a judge model")
		}
		return &LLMJudge{Model: cfg.Judge, Rubric: cfg.Rubric, Scale: cfg.JudgeScale, Calibrated: cfg.JudgeCalibrated}, nil
	}}
	return r
}

// Register adds a metric factory; a name may be registered once.
func (r *Registry) Register(name string, f MetricFactory) error {
	if name == "" || f.New == nil {
		return errors.New("register metric: a name and a New function are required")
	}
	if _, dup := r.factories[name]; dup {
		return fmt.Errorf("register metric %q: already registered", name)
	}
	r.factories[name] = f
	return nil
}

// New builds the named metric.
func (r *Registry) New(name string, cfg MetricConfig) (Metric, error) {
	f, ok := r.factories[name]
	if !ok {
		return nil, fmt.Errorf("unknown metric %q (known: %v)", name, r.Names())
	}
	m, err := f.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("metric %q: %w", name, err)
	}
	return m, nil
}

// ModelDerived reports whether the named metric is model-derived and whether it is known.
func (r *Registry) ModelDerived(name string) (modelDerived, known bool) {
	f, ok := r.factories[name]
	return f.ModelDerived, ok
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GateConfigurationError says why a threshold cannot be used for gating: it names a
// model-derived metric, a metric that was not measured, or has an out-of-range parameter.
// It is a configuration error (exit code 2 for the CLI), never a verdict.
type GateConfigurationError struct {
	// Metric is the metric the threshold names.
	Metric string
	// Reason says what is wrong and what to change.
	Reason string
}

// Error formats the problem.
func (e *GateConfigurationError) Error() string {
	return fmt.Sprintf("gate threshold on %q: %s", e.Metric, e.Reason)
}

// ValidateThresholds checks thresholds against the metrics an evaluation will measure, so
// that a bad configuration fails before any sample is paid for. Every problem is
// reported, each as a [*GateConfigurationError], joined with errors.Join.
func ValidateThresholds(thresholds []Threshold, metrics []Metric) error {
	info := map[string]bool{}
	for _, m := range metrics {
		c, ok := m.(interface{ IsCalibrated() bool })
		info[m.Name()] = m.ModelDerived() && !(ok && c.IsCalibrated())
	}
	return checkThresholds(thresholds, func(name string) (bool, bool) {
		md, ok := info[name]
		return md, ok
	})
}

// checkThresholds validates thresholds; lookup returns (model-derived and uncalibrated,
// measured).
func checkThresholds(thresholds []Threshold, lookup func(string) (bool, bool)) error {
	var errs []error
	bad := func(metric, format string, args ...any) {
		errs = append(errs, &GateConfigurationError{Metric: metric, Reason: fmt.Sprintf(format, args...)})
	}
	seen := map[string]bool{}
	for _, t := range thresholds {
		if seen[t.Metric] {
			bad(t.Metric, "metric has more than one threshold; merge them")
		}
		seen[t.Metric] = true
		modelDerived, measured := lookup(t.Metric)
		switch {
		case !measured:
			bad(t.Metric, "metric is not measured by this eval; add it to the eval's metrics or remove the threshold")
		case modelDerived:
			bad(t.Metric, "%s", errUncalibrated)
		}
		if !(t.Alpha > 0 && t.Alpha <= 0.5) {
			bad(t.Metric, "alpha %v must be in (0, 0.5], typically 0.05", t.Alpha)
		}
		if !(t.MaxRegression > 0 && t.MaxRegression < 1) {
			bad(t.Metric, "maxRegression %v must be in (0, 1): the gate needs a regression size it is meant to detect, "+
				"and no finite sample can show a regression of exactly 0", t.MaxRegression)
		}
		if t.MinMean != nil && !(*t.MinMean >= 0 && *t.MinMean <= 1) {
			bad(t.Metric, "minMean %v must be in [0, 1]", *t.MinMean)
		}
		if t.FailBelow != nil && !(*t.FailBelow > 0 && *t.FailBelow <= 1) {
			bad(t.Metric, "failBelow %v must be in (0, 1]: a mean is never below 0", *t.FailBelow)
		}
		if t.MinMean != nil && t.FailBelow != nil && *t.FailBelow > *t.MinMean {
			bad(t.Metric, "failBelow %v is above minMean %v: a mean between them would both pass outright and fail; lower failBelow or raise minMean", *t.FailBelow, *t.MinMean)
		}
	}
	return errors.Join(errs...)
}
