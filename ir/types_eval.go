package ir

// The evals section's types: an eval, where its cases come from, what
// answers them, how they are judged and gated.

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Eval is a sampled evaluation.
type Eval struct {
	// Name is the eval's key in the IR.
	Name string `json:"name"`
	// Source is where the cases come from: SourceDataset (the Dataset
	// file) or SourceRuns (recorded runs, as FromRuns says).
	Source string `json:"source"`
	// Dataset is the dataset file, relative to the IR file's directory;
	// empty when Source is SourceRuns.
	Dataset string `json:"dataset,omitempty"`
	// FromRuns selects and cleans the recorded runs a SourceRuns eval
	// samples; nil for SourceDataset.
	FromRuns *FromRuns `json:"fromRuns,omitempty"`
	// Target is what answers each case.
	Target Target `json:"target"`
	// Runs is how many times each case is sampled.
	Runs int `json:"runs"`
	// Concurrency bounds the samples in flight.
	Concurrency int `json:"concurrency"`
	// Metrics are the metric names computed for every sample.
	Metrics []string `json:"metrics"`
	// Judge configures the llm_judge metric; nil when it is not used.
	Judge *Judge `json:"judge,omitempty"`
	// Schema is the JSON Schema json_schema_valid checks; when the IR leaves
	// it out and the target is an agent with an output schema, Load copies
	// that schema here.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Budget names the budget the eval's calls are charged to.
	Budget string `json:"budget,omitempty"`
	// Baseline is the baseline file, relative to the IR file's directory;
	// empty means the eval reports without gating.
	Baseline string `json:"baseline,omitempty"`
	// Thresholds are the gates.
	Thresholds []Threshold `json:"thresholds"`
	// Approvals decides the calls that pause a sample's run for approval:
	// "approve" or "reject"; empty leaves a paused run to fail its sample.
	Approvals string `json:"approvals,omitempty"`
	// Tools says what the tools of an agent target do in the eval, by
	// declared tool name.
	Tools map[string]EvalTool `json:"tools,omitempty"`
}

// The sources of an eval's cases.
const (
	SourceDataset = "dataset"
	SourceRuns    = "runs"
)

// FromRuns selects and cleans the recorded runs an eval samples its cases
// from. Exactly one of File and DSNEnv is set.
type FromRuns struct {
	// File holds recorded runs (aidgen run --record logs, concatenated),
	// relative to the IR file's directory.
	File string `json:"file,omitempty"`
	// DSNEnv names the environment variable holding the DSN of the
	// PostgreSQL run store.
	DSNEnv string `json:"dsnEnv,omitempty"`
	// Tenant keeps one tenant's runs of the run store; empty keeps all.
	Tenant string `json:"tenant,omitempty"`
	// Agent keeps the runs that started on this agent; empty keeps all.
	Agent string `json:"agent,omitempty"`
	// Statuses keeps the runs that ended with these statuses; empty keeps
	// completed runs.
	Statuses []string `json:"statuses,omitempty"`
	// Since and Until keep the runs last written in [Since, Until), RFC
	// 3339 times; empty is open.
	Since string `json:"since,omitempty"`
	Until string `json:"until,omitempty"`
	// Sample keeps at most this many runs, drawn with Seed; 0 keeps all.
	Sample int `json:"sample,omitempty"`
	// Seed draws the sample.
	Seed int64 `json:"seed"`
	// Redact are the regular expressions replaced in every text before a
	// case exists.
	Redact []string `json:"redact,omitempty"`
}

// EvalTool is what one tool does in an eval.
type EvalTool struct {
	// Mode is "live", "stub" or "replay".
	Mode string `json:"mode"`
	// Fixture is a stub's rows file, relative to the IR file's directory.
	Fixture string `json:"fixture,omitempty"`
	// Result is a stub's answer to every call, any JSON value.
	Result json.RawMessage `json:"result,omitempty"`
}

// Target is what answers an eval's cases: an agent, a model alias with a
// prompt template, or a retriever.
type Target struct {
	// Agent names the answering agent; empty for a model target.
	Agent string `json:"agent,omitempty"`
	// Model is the answering alias; empty for an agent target.
	Model string `json:"model,omitempty"`
	// Retriever names the retriever searched with each case's input; its
	// ranking of source files is scored by ranked metrics (recall@K,
	// mrr@K, ndcg@K) against the source paths a case expects.
	Retriever string `json:"retriever,omitempty"`
	// K is how many chunks a retriever target retrieves; zero means the
	// retriever's TopK.
	K int `json:"k,omitempty"`
	// Fallbacks are the aliases tried, in order, when Model fails with a
	// provider error; always empty for an agent target, which uses the
	// agent's fallbacks.
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Prompt is the text/template rendering a case as the user message.
	Prompt string `json:"prompt,omitempty"`
	// System is the system message of a model target.
	System string `json:"system,omitempty"`
}

// Judge configures the llm_judge metric.
type Judge struct {
	// Model is the alias of the judging model.
	Model string `json:"model"`
	// Fallbacks are the aliases tried, in order, when Model fails with a
	// provider error.
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Rubric tells the judge how to score.
	Rubric string `json:"rubric"`
	// Calibration, when set, lets the judge gate: its agreement with
	// human labels is measured before the eval's gate.
	Calibration *JudgeCalibration `json:"calibration,omitempty"`
}

// JudgeCalibration declares the human labels a judge is measured against.
type JudgeCalibration struct {
	// Labels is the file of labelled answers, relative to the IR file's
	// directory.
	Labels string `json:"labels"`
	// MinYouden is the floor on the lower confidence bound of the judge's
	// sensitivity + specificity − 1, in (0, 1].
	MinYouden float64 `json:"minYouden"`
}

// Threshold gates one metric against the baseline.
type Threshold struct {
	// Metric names the gated metric.
	Metric string `json:"metric"`
	// MinMean passes the threshold outright when the current mean reaches it (unless
	// it is below FailBelow); nil means no such rule.
	MinMean *float64 `json:"minMean,omitempty"`
	// FailBelow fails the threshold whenever the current mean is below it, whatever
	// the baseline says: a floor; nil means no floor.
	FailBelow *float64 `json:"failBelow,omitempty"`
	// MaxRegression is the largest accepted drop from the baseline mean.
	MaxRegression float64 `json:"maxRegression"`
	// Alpha is the false-alarm rate of the regression test.
	Alpha float64 `json:"alpha"`
}

// Metric names.
const (
	MetricExactMatch         = "exact_match"
	MetricNormalizedContains = "normalized_contains"
	MetricJSONSchemaValid    = "json_schema_valid"
	MetricLLMJudge           = "llm_judge"
)

// RankedMetric parses the name of a ranked-set retrieval metric, such as
// "recall@4", into its kind ("recall", "mrr" or "ndcg") and cutoff. It
// reports false for every other metric. The schema's #RankedMetricName
// admits only these names, so a name it reports false for is not ranked.
func RankedMetric(name string) (kind string, k int, ok bool) {
	kind, cut, found := strings.Cut(name, "@")
	if !found {
		return "", 0, false
	}
	switch kind {
	case "recall", "mrr", "ndcg":
	default:
		return "", 0, false
	}
	k, err := strconv.Atoi(cut)
	if err != nil || k < 1 || strconv.Itoa(k) != cut {
		return "", 0, false
	}
	return kind, k, true
}

// ModelDerivedMetric reports whether a metric's score comes from a model
// (an LLM judge). Such a metric gates only when its judge declares a
// calibration: its noise and bias are not the application's.
func ModelDerivedMetric(name string) bool { return name == MetricLLMJudge }
