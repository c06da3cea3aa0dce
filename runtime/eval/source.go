package eval

// RunsSource says which recorded runs an eval samples its cases from, as app.cue's
// fromRuns declares it (runtime/eval/fromruns samples them). Exactly one of File and
// DSNEnv is set.
type RunsSource struct {
	// File holds recorded runs (aidgen run --record logs, concatenated).
	File string
	// DSNEnv names the environment variable holding the DSN of the PostgreSQL run store.
	DSNEnv string
	// Tenant keeps one tenant's runs of the run store; empty keeps every tenant's.
	Tenant string
	// Agent keeps the runs that started on this agent; empty keeps all.
	Agent string
	// Statuses keeps the runs that ended with these statuses; empty keeps completed runs.
	Statuses []string
	// Since and Until keep the runs last written in [Since, Until), RFC 3339 times;
	// empty is open.
	Since, Until string
	// Sample keeps at most this many runs, drawn with Seed; 0 keeps all.
	Sample int
	// Seed draws the sample.
	Seed uint64
	// Redact are regular expressions replaced in every text before a case exists.
	Redact []string
}

// CalibrationSource declares the human labels a judge is measured against before it may
// gate (see [JudgeCalibration]).
type CalibrationSource struct {
	// Labels is the file of labelled answers: a JSON array or JSON Lines of
	// [LabelledAnswer].
	Labels string
	// MinYouden is the floor on the lower confidence bound of the judge's sensitivity +
	// specificity − 1, in (0, 1].
	MinYouden float64
}
