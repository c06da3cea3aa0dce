package appeval

import (
	"encoding/json"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/eval"
)

// Eval is one sampled evaluation.
type Eval struct {
	// Name is the eval's name.
	Name string
	// Dataset is the dataset file; empty when FromRuns is set.
	Dataset string
	// FromRuns, when set, says which recorded runs the cases are sampled
	// from instead of a dataset file (its File relative to the
	// description's directory); App.Eval leaves the run's Dataset nil
	// for the caller (aidgen eval) to sample with runtime/eval/fromruns.
	FromRuns *eval.RunsSource
	// Target is what answers each case.
	Target EvalTarget
	// Runs is how many times each case is sampled.
	Runs int
	// Concurrency bounds the samples in flight.
	Concurrency int
	// Metrics are the metric names computed for every sample.
	Metrics []string
	// Judge configures the llm_judge metric; nil when unused.
	Judge *Judge
	// Schema is the JSON Schema json_schema_valid checks.
	Schema json.RawMessage
	// Budget names the budget the eval's calls are charged to; empty means
	// none.
	Budget string
	// Baseline is the baseline file; empty means the eval reports without
	// gating.
	Baseline string
	// Thresholds are the gates.
	Thresholds []eval.Threshold
	// Approvals decides the calls that pause a sample's run for approval
	// (an agent target only): approve or reject each, up to
	// eval.MaxSampleDecisions per sample; a case's own approvals override
	// it. Empty leaves a paused run without an answer, and its sample
	// fails.
	Approvals eval.Approvals
	// Tools declares what the tools an agent target can call do in the
	// eval (eval.ToolMode): a tool left out is live when it reads and a
	// stub when it writes, and App.Eval refuses an eval whose target can
	// reach a tool that writes without a declared mode.
	Tools []EvalTool
}

// EvalTool declares what one tool does in an eval.
type EvalTool struct {
	// Tool names a declared tool: for a declaration that imports a
	// server's tools whole, the plan is every imported tool's.
	Tool string
	// Mode is the tool's mode.
	Mode eval.ToolMode
	// Stub, for a stub that answers from rows matched by argument, is the
	// configuration of the tool kind whose tool answers in the real
	// tool's place (fixture.Kind, whose file holds the rows); nil for
	// none.
	Stub agents.ToolKind
	// Result, for a stub without Stub, answers every call the case does
	// not answer (a JSON string is the observation as is, anything else
	// its compact JSON).
	Result json.RawMessage
}

// EvalTarget is what answers an eval's cases: exactly one of Agent, Model
// and Retriever.
type EvalTarget struct {
	// Agent names the agent that answers each case, one run per sample.
	Agent string
	// Model is the alias that answers each case.
	Model string
	// Retriever names the retriever searched with each case's input. The
	// answer is the ranking of the hits' source files, scored by ranked
	// metrics (recall@K, mrr@K, ndcg@K, see eval.ParseRetrievalMetric)
	// against the source paths the case expects. A retriever whose store is
	// in memory is ingested before the first search; a persistent store is
	// searched as it was last indexed.
	Retriever string
	// K is how many chunks a retriever target retrieves; zero means the
	// retriever's TopK.
	K int
	// Prompt is the text/template rendering a case as a model target's
	// user message; empty sends the input as is.
	Prompt string
	// System is a model target's system message.
	System string
	// Fallbacks are the aliases a model target's calls fall back to, in
	// order (an agent target uses its agent's own fallbacks).
	Fallbacks []string
}

// Judge configures the llm_judge metric.
type Judge struct {
	// Model is the judging alias.
	Model string
	// Rubric tells the judge how to score.
	Rubric string
	// Fallbacks are the aliases the judge's calls fall back to, in order.
	Fallbacks []string
	// Calibration, when set, declares the human labels the judge is
	// measured against (its Labels relative to the description's
	// directory); the judge then scores verdicts and may gate.
	Calibration *eval.CalibrationSource
}
