package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/eval/fromruns"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/jobs/pgqueue/evalqueue"
	"github.com/aidgen/aid/runtime/kind"
)

// Exit codes of aidgen eval beyond the shared ones: 1 (ExitInvalid) is a
// regression, 2 (ExitUsage) a configuration error.
const (
	ExitRegression   = 1
	ExitInconclusive = 3
)

type evalFlags struct {
	tags           []string
	evals          []string
	runs           int
	concurrency    int
	updateBaseline bool
	note           string
	jsonFile       string
	junitFile      string
	htmlFile       string
	onInconclusive string
	allowFailures  bool
	seed           int64
	seedSet        bool
	progress       string
	queue          string
	verbose        bool
	fromRuns       string
	runsTenant     string
	runsAgent      string
	runsStatus     []string
	runsSince      string
	runsUntil      string
	runsSample     int
	redact         []string
	datasetOut     string
}

func newEval(s *streams) *cobra.Command {
	var f evalFlags
	cmd := &cobra.Command{
		Use:   "eval FILE",
		Short: "Sample an application's evals and gate them against their baselines",
		Long: `Eval runs every eval of an application (or those named with --eval): each case
of the dataset is answered --runs times, every answer is scored by each metric,
and each threshold is decided against the eval's committed baseline with a
paired test on per-case means (see the runtime/eval package documentation for
the statistics).

A threshold fails when the mean is below failBelow (a floor, whatever the
baseline says) and passes outright when the mean reaches minMean; otherwise it
passes when the drop from the baseline is within maxRegression, or the drop
beyond maxRegression is within sampling noise at level alpha. When the runs and
cases are too few to tell a drop of maxRegression from noise, the verdict is
inconclusive: the table shows the minimum detectable effect and the advice says
what would do (more runs, more cases, or more groups of cases).

The table's "regression" is baseline − current: positive when the metric got
worse, negative when it improved. Every ± is one standard error. Under the
table, each threshold's reason says what decided it, on which cases the
comparison rests, and which cases dropped most; then come the cases whose
samples failed.

Exit status: 0 pass, 1 regression, 2 configuration error (invalid IR, missing
baseline or dataset, a feature that is not built), 3 inconclusive (see
--on-inconclusive).

--html writes one self-contained HTML file (no network; figures are inline
SVG): per threshold the means with their intervals, the regression against
maxRegression with its one-sided bound, and the paired per-case differences,
with the cases that moved most and the errored ones linked to their inputs and
answers; then the advice, model changes, fallbacks and cost. It reads on a
phone and prints. With GITHUB_STEP_SUMMARY set, the summary names it (upload
it as an artifact).

-v prints, after each eval, every case: its expected answer and each run's
answer, scores and calls of declared tools, each call with its mode (live,
stub or replay; see the eval's tools in the schema). Every text is cut at
2048 bytes and then says how long it was; the JSON report's caseResults
hold the same.

--from-runs FILE samples the cases from recorded runs (aidgen run --record
logs, concatenated) instead of the eval's dataset: each run's input, its
answer as the expected value, its tool calls as the case's tool answers;
--redact patterns are replaced before any case exists, and --dataset-out
writes the cases for committing.

--json writes the same results for tools: its shape is the JSON Schema
` + ReportSchemaPath + ` in the aid repository (draft 2020-12), and its
schemaVersion field changes only when a field is removed or changes meaning.

--update-baseline writes each eval's baseline instead of gating (atomically,
beside the old one) and prints what changed. A run whose samples or scores
failed would record each failure as a score of 0 in the reference, so it is
refused (exit 1, the baseline untouched, the failed samples named) unless
--allow-failures is given; so is a run whose mean of a gated metric is below
its threshold's failBelow (naming the metric). When GITHUB_STEP_SUMMARY is set,
a markdown summary is appended to that file.`,
		Example: `  # Gate every eval against its baseline.
  aidgen eval examples/capitals/app.cue

  # Record a new baseline after an intended change.
  aidgen eval examples/capitals/app.cue --update-baseline --note "prompt v2"

  # A quicker, noisier run; inconclusive fails CI instead of exiting 3.
  aidgen eval app.cue --runs 3 --on-inconclusive fail --junit eval.xml`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(errors.New("eval needs exactly one application file; usage: aidgen eval FILE"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Unset, --runs and --concurrency mean the eval's own values;
			// set, they must be usable, so a 0 is refused rather than
			// quietly read as "unset".
			for _, pf := range []struct {
				name  string
				value int
			}{{"runs", f.runs}, {"concurrency", f.concurrency}} {
				if cmd.Flags().Changed(pf.name) && pf.value < 1 {
					return usageErr(fmt.Errorf("--%s must be at least 1, not %d; leave it out to use the eval's %s", pf.name, pf.value, pf.name))
				}
			}
			f.seedSet = cmd.Flags().Changed("seed")
			return runEval(cmd.Context(), s, args[0], f)
		},
	}
	fl := cmd.Flags()
	tagFlag(cmd, &f.tags)
	fl.StringSliceVar(&f.evals, "eval", nil, "run only the named evals (repeatable or comma-separated)")
	fl.IntVar(&f.runs, "runs", 0, "samples per case, at least 1 (default: the eval's runs)")
	fl.IntVar(&f.concurrency, "concurrency", 0, "samples in flight, at least 1 (default: the eval's concurrency)")
	fl.BoolVar(&f.updateBaseline, "update-baseline", false, "write the baselines from this run instead of gating")
	fl.BoolVar(&f.allowFailures, "allow-failures", false, "with --update-baseline: write a baseline even from a run whose samples or scores failed (each recorded as 0), or whose mean is below a threshold's failBelow")
	fl.StringVar(&f.note, "note", "", "note recorded in baselines written by --update-baseline")
	fl.StringVar(&f.jsonFile, "json", "", "write the full results as JSON to `FILE`")
	fl.StringVar(&f.junitFile, "junit", "", "write one JUnit test case per threshold to `FILE`")
	fl.StringVar(&f.htmlFile, "html", "", "write a self-contained HTML report (figures, advice, the cases that moved most) to `FILE`")
	fl.StringVar(&f.onInconclusive, "on-inconclusive", "inconclusive", "what an inconclusive gate exits as: inconclusive (3), pass (0) or fail (1)")
	fl.Int64Var(&f.seed, "seed", 0, "replace the seed of every fake provider, to draw a fresh sample")
	fl.StringVar(&f.progress, "progress", "auto", "progress display: auto (a bar on a terminal), bar, lines or none")
	fl.StringVar(&f.fromRuns, "from-runs", "", "sample the cases from the recorded runs in `FILE` (aidgen run --record logs, concatenated) or in the run store a postgres:// DSN names instead of the eval's dataset: each run's input, its answer as the expected value, its tool calls as the case's tool answers (for replay)")
	fl.StringVar(&f.runsTenant, "runs-tenant", "", "with --from-runs postgres://...: keep the runs of this tenant (default every tenant's)")
	fl.StringVar(&f.runsAgent, "runs-agent", "", "with --from-runs: keep the runs that started on this agent")
	fl.StringSliceVar(&f.runsStatus, "runs-status", nil, "with --from-runs: keep the runs that ended with these statuses (default completed)")
	fl.StringVar(&f.runsSince, "runs-since", "", "with --from-runs: keep the runs last written at or after this RFC 3339 time")
	fl.StringVar(&f.runsUntil, "runs-until", "", "with --from-runs: keep the runs last written before this RFC 3339 time")
	fl.IntVar(&f.runsSample, "runs-sample", 0, "with --from-runs: sample at most this many runs (seeded by --seed; default all)")
	fl.StringArrayVar(&f.redact, "redact", nil, "with --from-runs: a regular expression replaced with [redacted] in every input, answer, tool argument and result before any case exists (repeatable)")
	fl.StringVar(&f.datasetOut, "dataset-out", "", "with --from-runs: write the sampled, redacted cases to `FILE` (JSON Lines) for committing")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "after each eval, print every case: its expected answer and each run's answer, scores and tool calls with their modes")
	fl.StringVar(&f.queue, "queue", "", "enqueue the samples as jobs in the PostgreSQL database `DSN` for aidgen worker processes to run, and gather their results")
	return cmd
}

// evalOutcome is what one eval produced, for every report format. Its JSON
// form is an element of the report's evals, described by ReportSchemaPath;
// a field added here must be added there too (TestEvalJSONReportSchema
// fails otherwise).
type evalOutcome struct {
	Name    string   `json:"name"`
	Dataset string   `json:"dataset"`
	Version string   `json:"datasetVersion"`
	Cases   int      `json:"cases"`
	Runs    int      `json:"runs"`
	Models  []string `json:"models"`
	CostUSD float64  `json:"costUSD"`
	Calls   int64    `json:"calls"`
	// CacheReadTokens and CacheWriteTokens are the prompt tokens the
	// provider read from and wrote to its prompt cache, from the ledger:
	// each priced at its own rate in CostUSD.
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty"`
	Failed           int   `json:"failedSamples"`
	// Fallbacks counts the samples a fallback alias answered instead of
	// the one the target asked for.
	Fallbacks int                         `json:"fallbackAnswers"`
	Metrics   []string                    `json:"metrics"`
	Stats     map[string]eval.MetricStats `json:"stats"`
	Gate      *eval.GateReport            `json:"gate,omitempty"`
	Drops     []metricDrops               `json:"largestDrops,omitempty"`
	Baseline  string                      `json:"baseline,omitempty"`
	Changes   []eval.BaselineChange       `json:"baselineChanges,omitempty"`
	Errors    []string                    `json:"sampleErrors,omitempty"`
	// ErroredCases counts the failed samples and scores per case.
	ErroredCases []caseErrors `json:"erroredCases,omitempty"`
	// Approvals lists, per sample whose run paused for approval, the
	// decisions the eval's approval policy took.
	Approvals   []sampleApprovals `json:"approvals,omitempty"`
	modelReport                   // pinnedModels, modelChanges, baselineModelsUnrecorded

	// Details are every case's input, expected answer and runs (answers,
	// scores, tool calls with their modes).
	Details []caseDetail `json:"caseResults,omitempty"`

	baseline *eval.Baseline // the baseline gated against, for the reported metrics' column
}

func runEval(ctx context.Context, s *streams, path string, f evalFlags) error {
	switch f.onInconclusive {
	case "inconclusive", "pass", "fail":
	default:
		return usageErr(fmt.Errorf("--on-inconclusive must be inconclusive, pass or fail, not %q", f.onInconclusive))
	}
	if err := checkProgressFlag(f.progress); err != nil {
		return err
	}
	if f.runsTenant != "" && !isRunStoreDSN(f.fromRuns) {
		return usageErr(errors.New("--runs-tenant applies with --from-runs postgres://...: an event log does not record its run's tenant"))
	}
	if f.fromRuns == "" && (f.runsAgent != "" || len(f.runsStatus) > 0 || f.runsSince != "" || f.runsUntil != "" || f.runsSample != 0 || len(f.redact) > 0) {
		return usageErr(errors.New("--runs-agent, --runs-status, --runs-since, --runs-until, --runs-sample and --redact apply with --from-runs (an eval whose source is \"runs\" declares its own in fromRuns)"))
	}
	if f.allowFailures && !f.updateBaseline {
		return usageErr(errors.New("--allow-failures only applies with --update-baseline"))
	}

	var load []ir.Option
	if f.fromRuns != "" {
		load = append(load, ir.CasesFromRuns()) // the flag replaces every dataset file
	}
	desc, evals, err := loadWithEvals(s, path, f.tags, load...)
	if err != nil {
		return err
	}
	var names []string // sorted, as ir keeps the evals
	for _, e := range evals {
		names = append(names, e.Name)
	}
	if len(f.evals) > 0 {
		for _, n := range f.evals {
			if !slices.Contains(names, n) {
				return usageErr(fmt.Errorf("%s has no eval %q; evals: %s", path, n, strings.Join(names, ", ")))
			}
		}
		names = f.evals
	}
	if len(names) == 0 {
		return usageErr(fmt.Errorf("%s defines no evals", path))
	}

	var outcomes []*evalOutcome
	for _, name := range names {
		o, err := runOneEval(ctx, s, desc, evals, name, f)
		if err != nil {
			return err
		}
		outcomes = append(outcomes, o)
	}

	if f.jsonFile != "" {
		if err := writeJSONReport(f.jsonFile, path, outcomes); err != nil {
			return &exitError{code: ExitUsage, err: err}
		}
	}
	if f.junitFile != "" && !f.updateBaseline {
		if err := writeJUnitReport(f.junitFile, outcomes); err != nil {
			return &exitError{code: ExitUsage, err: err}
		}
	}
	if f.htmlFile != "" {
		if err := writeHTMLReport(f.htmlFile, path, outcomes, f.updateBaseline); err != nil {
			return &exitError{code: ExitUsage, err: err}
		}
	}
	if summary := os.Getenv("GITHUB_STEP_SUMMARY"); summary != "" {
		if err := appendMarkdownSummary(summary, path, outcomes, f.updateBaseline, htmlSummaryLine(f.htmlFile)); err != nil {
			fmt.Fprintf(s.err, "aidgen: writing GITHUB_STEP_SUMMARY: %v\n", err)
		}
	}
	if f.updateBaseline {
		return nil
	}
	return verdictExit(outcomes, f.onInconclusive)
}

// verdictExit folds the gates into one exit: any regression fails, then
// any inconclusive gate (unless mapped by --on-inconclusive), else pass.
func verdictExit(outcomes []*evalOutcome, onInconclusive string) error {
	code := ExitOK
	for _, o := range outcomes {
		if o.Gate == nil {
			continue
		}
		c := exitCode(o.Gate.Verdict, onInconclusive)
		if c == ExitRegression || code == ExitOK {
			code = c
		}
	}
	if code == ExitOK {
		return nil
	}
	return &exitError{code: code}
}

// exitCode is the one place a verdict becomes an exit status: 0 pass,
// 1 regression, 3 inconclusive, or what --on-inconclusive maps it to.
func exitCode(v eval.Verdict, onInconclusive string) int {
	switch v {
	case eval.Pass:
		return ExitOK
	case eval.Regression:
		return ExitRegression
	}
	switch onInconclusive {
	case "pass":
		return ExitOK
	case "fail":
		return ExitRegression
	}
	return ExitInconclusive
}

func runOneEval(ctx context.Context, s *streams, desc app.Description, evals []appeval.Eval, name string, f evalFlags) (*evalOutcome, error) {
	// An application per eval, so each eval's cost is its own in the
	// ledger. Evals keep runs and spend in memory, whatever the service's
	// state says: an eval is not a replica of the service.
	// Retrievers' pgvector stores are the service's own: a retrieval eval
	// searches the index aidgen index keeps there.
	opts, closeCache := commandOptions(s, desc)
	defer closeCache()
	if f.seedSet {
		opts.Seed = &f.seed
	}
	a, err := appeval.Assemble(ctx, desc, evals, opts)
	if err != nil {
		return nil, usageErr(err)
	}
	defer a.Close()
	g := a.Gateway
	var runs *runsFrom
	if f.fromRuns != "" {
		r := flagRuns(f)
		runs = &r
	} else if src, ok := a.RunsSource(name); ok {
		r, err := declaredRuns(src, f)
		if err != nil {
			return nil, usageErr(fmt.Errorf("eval %q: %w", name, err))
		}
		runs = &r
	} else if f.datasetOut != "" {
		return nil, usageErr(fmt.Errorf("eval %q: --dataset-out writes cases sampled from recorded runs, and this eval reads its dataset file", name))
	}
	var e *appeval.EvalRun
	if runs != nil {
		if f.queue != "" {
			return nil, usageErr(fmt.Errorf("eval %q: cases sampled from recorded runs cannot go to --queue: the workers read the eval's dataset file; write the cases with --dataset-out, commit them as the eval's dataset, and queue that", name))
		}
		ds, err := datasetFromRuns(ctx, name, *runs)
		if err != nil {
			return nil, usageErr(fmt.Errorf("eval %q: %w", name, err))
		}
		e, err = a.EvalOn(name, ds)
		if err != nil {
			return nil, usageErr(err)
		}
	} else if e, err = a.Eval(name); err != nil {
		return nil, usageErr(err)
	}
	if f.runs > 0 {
		e.Runs = f.runs
	}
	if f.concurrency > 0 {
		e.Concurrency = f.concurrency
	}

	var baseline *eval.Baseline
	if !f.updateBaseline {
		if e.Baseline == "" && len(e.Thresholds) > 0 {
			return nil, usageErr(fmt.Errorf("eval %q has thresholds but no baseline", name))
		}
		if e.Baseline != "" {
			baseline, err = eval.ReadBaseline(e.Baseline)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usageErr(fmt.Errorf("eval %q: no baseline at %s; record one with aidgen eval --update-baseline", name, e.Baseline))
			}
			if err != nil {
				return nil, usageErr(fmt.Errorf("eval %q: %w", name, err))
			}
		}
	} else if e.Baseline == "" {
		return nil, usageErr(fmt.Errorf("eval %q names no baseline file to update; set baseline in the IR", name))
	}

	var cal *eval.JudgeCalibration
	if e.Calibration != nil {
		if cal, err = judgeCalibration(ctx, s, e, baseline); err != nil {
			return nil, usageErr(fmt.Errorf("eval %q: %w", name, err))
		}
	}

	total := len(e.Dataset.Cases) * e.Runs
	where := fmt.Sprintf("concurrency %d", e.Concurrency)
	if f.queue != "" {
		where = "queued for aidgen worker"
	}
	fmt.Fprintf(s.out, "eval %s: %s × %s = %s, %s\n", name,
		plural(len(e.Dataset.Cases), "case", "cases"), plural(e.Runs, "run", "runs"), plural(total, "sample", "samples"), where)
	prog := newProgress(s.err, f.progress, name, total)
	var res *eval.Result
	var spend gateway.SpendSummary
	if f.queue != "" {
		res, spend, err = runQueued(ctx, s.err, desc, evals, e, f, prog.update)
	} else {
		res, err = eval.Run(ctx, e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: e.Runs, Concurrency: e.Concurrency, Progress: prog.update})
	}
	prog.done()
	if err != nil {
		return nil, &exitError{code: ExitUsage, err: fmt.Errorf("eval %q: %w", name, err)}
	}
	stats, err := res.Stats()
	if err != nil {
		return nil, &exitError{code: ExitUsage, err: fmt.Errorf("eval %q: %w", name, err)}
	}
	if st, ok := stats[eval.MetricLLMJudge]; ok && cal != nil {
		st.Calibration = cal
		stats[eval.MetricLLMJudge] = st
	}
	if f.queue == "" {
		if spend, err = g.Spend(ctx); err != nil {
			return nil, &exitError{code: ExitUsage, err: fmt.Errorf("eval %q: reading the ledger: %w", name, err)}
		}
	}
	o := &evalOutcome{
		Name:    name,
		Dataset: res.Dataset,
		Version: res.DatasetVersion,
		Cases:   len(res.Cases),
		Runs:    res.Runs,
		Models:  append([]string{}, res.Models...),
		CostUSD: spend.Total.USD(),
		Calls:   spend.Calls,
		Stats:   stats,

		CacheReadTokens:  spend.Total.CachedInputTokens,
		CacheWriteTokens: spend.Total.CacheWriteInputTokens,
		Fallbacks:        res.FallbackAnswers,
		Baseline:         e.Baseline,
		baseline:         baseline,
	}
	o.Approvals = approvalsOf(res)
	o.Details = caseDetails(e.Dataset, res)
	o.pinModels(res.Pins, baseline)
	for _, m := range e.Metrics {
		o.Metrics = append(o.Metrics, m.Name())
	}
	var errored []string
	for _, err := range res.Errors() {
		// A sample that failed because a feature is not built is a
		// configuration problem, not a regression to gate.
		var d *kind.DeferredError
		if errors.As(err, &d) {
			return nil, usageErr(fmt.Errorf("eval %q: %w", name, d))
		}
		var se *eval.SampleError
		if errors.As(err, &se) {
			errored = append(errored, se.CaseID)
			if se.Metric == "" {
				o.Failed++
			}
		}
		o.Errors = append(o.Errors, err.Error())
	}
	if len(errored) > 0 {
		o.ErroredCases = erroredCases(errored)
	}

	if f.updateBaseline {
		if len(o.Errors) > 0 && !f.allowFailures {
			return nil, &exitError{code: ExitRegression, err: failedBaselineError(name, o)}
		}
		if err := belowFloorError(name, o, e.Thresholds); err != nil && !f.allowFailures {
			return nil, &exitError{code: ExitRegression, err: err}
		}
		nb, err := eval.NewBaseline(res, aid.Version, f.note)
		if err != nil {
			return nil, &exitError{code: ExitUsage, err: err}
		}
		if st, ok := nb.Metrics[eval.MetricLLMJudge]; ok && cal != nil {
			st.Calibration = cal // later gates correct both sides with it
			nb.Metrics[eval.MetricLLMJudge] = st
		}
		old, err := eval.ReadBaseline(e.Baseline)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(s.err, "aidgen: the old baseline cannot be read (%v); writing a new one\n", err)
		}
		o.Changes = eval.DiffBaselines(old, nb)
		if err := eval.WriteBaselineFile(e.Baseline, nb); err != nil {
			return nil, &exitError{code: ExitUsage, err: fmt.Errorf("eval %q: writing the baseline: %w", name, err)}
		}
		printBaselineUpdate(s, o, old == nil)
		printApprovals(s, o)
		if f.verbose {
			printCases(s, o)
		}
		return o, nil
	}

	gate, err := eval.Gate(e.Thresholds, stats, baseline)
	if err != nil {
		return nil, usageErr(fmt.Errorf("eval %q: %w", name, err))
	}
	o.Gate = gate
	o.Drops = gateDrops(gate, stats, baseline)
	markRegressions(o)
	printTable(s, o)
	if f.verbose {
		printCases(s, o)
	}
	return o, nil
}

// failedBaselineError is why --update-baseline refuses a run whose samples
// or scores failed: each would be a 0 in the reference every later gate
// compares with. It names the cases and the first failures.
func failedBaselineError(name string, o *evalOutcome) error {
	var b strings.Builder
	fmt.Fprintf(&b, "eval %q: not writing baseline %s: %s; each would be recorded as a score of 0 in the reference. Fix the failures, or pass --allow-failures to write it anyway", name, o.Baseline, failureSummary(o))
	for _, l := range failureLines(o, "") {
		fmt.Fprintf(&b, "\n  %s", l)
	}
	return errors.New(b.String())
}

// judgeCalibration is the calibration of the eval's judge: the one its
// baseline was written with, so that both sides of the gate are corrected
// alike, or else measured now on the declared labels. A judge below the
// declared floor is refused.
func judgeCalibration(ctx context.Context, s *streams, e *appeval.EvalRun, baseline *eval.Baseline) (*eval.JudgeCalibration, error) {
	var cal eval.JudgeCalibration
	from := "measured on " + e.Calibration.Labels
	var kept *eval.JudgeCalibration
	if baseline != nil {
		kept = baseline.Metrics[eval.MetricLLMJudge].Calibration
	}
	if kept != nil {
		cal, from = *kept, "the baseline's"
	} else {
		var judge *eval.LLMJudge
		for _, m := range e.Metrics {
			if j, ok := m.(*eval.LLMJudge); ok {
				judge = j
			}
		}
		items, err := eval.ReadLabels(e.Calibration.Labels)
		if err != nil {
			return nil, err
		}
		if cal, err = eval.MeasureJudge(ctx, judge, items, e.Concurrency); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(s.out, "judge calibration (%s): sensitivity %.3f [%.3f, %.3f] on %d labelled pass, specificity %.3f [%.3f, %.3f] on %d labelled fail; sensitivity + specificity − 1 ≥ %.3f (floor %g)\n",
		from, cal.Sensitivity, cal.SensitivityInterval[0], cal.SensitivityInterval[1], cal.Positives,
		cal.Specificity, cal.SpecificityInterval[0], cal.SpecificityInterval[1], cal.Negatives, cal.YoudenLower, e.Calibration.MinYouden)
	if err := cal.RequireFloor(e.Calibration.MinYouden); err != nil {
		return nil, err
	}
	return &cal, nil
}

// runsFrom is where the runs of a dataset sampled from recorded runs come
// from: a file of event logs, or the DSN of a PostgreSQL run store, with
// the filters and redaction to apply.
type runsFrom struct {
	src      eval.RunsSource // File or the DSN's tenant; filters; redaction
	dsn      string          // the run store's DSN when the runs come from one
	out      string          // --dataset-out, or empty
	describe string          // where the runs come from, for messages (never a DSN)
}

// flagRuns is the source --from-runs and its companion flags name.
func flagRuns(f evalFlags) runsFrom {
	src := eval.RunsSource{Tenant: f.runsTenant, Agent: f.runsAgent, Statuses: f.runsStatus, Since: f.runsSince, Until: f.runsUntil,
		Sample: f.runsSample, Seed: uint64(f.seed), Redact: f.redact}
	r := runsFrom{src: src, out: f.datasetOut, describe: "--from-runs"}
	if isRunStoreDSN(f.fromRuns) {
		r.dsn = f.fromRuns
	} else {
		r.src.File = f.fromRuns
	}
	return r
}

// declaredRuns is the source an eval's fromRuns declares (source: "runs"),
// its DSN read from the environment variable it names.
func declaredRuns(src eval.RunsSource, f evalFlags) (runsFrom, error) {
	r := runsFrom{src: src, out: f.datasetOut, describe: "fromRuns"}
	if f.seedSet {
		r.src.Seed = uint64(f.seed)
	}
	if src.DSNEnv != "" {
		r.dsn = os.Getenv(src.DSNEnv)
		if r.dsn == "" {
			return runsFrom{}, fmt.Errorf("fromRuns: the environment variable %s, which names the run store, is not set", src.DSNEnv)
		}
	}
	return r, nil
}

// datasetFromRuns samples the cases of eval name from recorded runs,
// filtered, sampled and redacted as r says, and writes them to r.out when
// set.
func datasetFromRuns(ctx context.Context, name string, r runsFrom) (*eval.Dataset, error) {
	opts, err := fromruns.OptionsFor(r.src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.describe, err)
	}
	recs, source, err := readRuns(ctx, r)
	if err != nil {
		return nil, err
	}
	ds, err := fromruns.Dataset(name+"-runs", recs, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if r.out != "" {
		var buf bytes.Buffer
		if err := fromruns.WriteJSONL(&buf, ds); err != nil {
			return nil, err
		}
		if err := writeFile(r.out, buf.Bytes()); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// isRunStoreDSN reports whether --from-runs names a PostgreSQL run store
// rather than a file of event logs.
func isRunStoreDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// readRuns reads the runs r names: the event logs of a file, or the runs a
// PostgreSQL run store holds (the tenant's, or every tenant's). source
// names where they came from for messages, never with the DSN's password.
func readRuns(ctx context.Context, r runsFrom) ([]*agents.Recording, string, error) {
	if r.dsn == "" {
		file, err := os.Open(r.src.File)
		if err != nil {
			return nil, "", fmt.Errorf("reading recorded runs: %w", err)
		}
		defer file.Close()
		recs, err := fromruns.Read(r.src.File, file)
		return recs, r.src.File, err
	}
	store, err := pgstore.Open(ctx, r.dsn)
	if err != nil {
		return nil, "", fmt.Errorf("opening the run store: %w", err)
	}
	defer store.Close()
	filter := agents.RunFilter{Tenant: r.src.Tenant, AllTenants: r.src.Tenant == ""}
	recs, err := fromruns.List(ctx, store, filter)
	return recs, "the run store", err
}

// belowFloorError is why --update-baseline refuses a run whose mean of a
// gated metric is below the threshold's failBelow: every later gate would
// fail against its own floor, and a baseline that low is a mistake far
// more often than an intent. It names each such metric; nil when none.
func belowFloorError(name string, o *evalOutcome, thresholds []eval.Threshold) error {
	var below []string
	for _, th := range thresholds {
		st, ok := o.Stats[th.Metric]
		if th.FailBelow == nil || !ok || st.Mean >= *th.FailBelow {
			continue
		}
		below = append(below, fmt.Sprintf("%s mean %.3f is below its failBelow %g", th.Metric, st.Mean, *th.FailBelow))
	}
	if len(below) == 0 {
		return nil
	}
	return fmt.Errorf("eval %q: not writing baseline %s: %s; the baseline would be below the eval's own floor. Fix the run, or pass --allow-failures to write it anyway", name, o.Baseline, strings.Join(below, "; "))
}

// queueHintAfter is how long an eval through the queue waits for its first
// result before it says that no worker may be running.
const queueHintAfter = 15 * time.Second

// runQueued runs an eval's samples as jobs of the queue f.queue names, one
// per (case, sample), for aidgen worker processes, and gathers their
// results into the result eval.Run would give; the spend is the samples'
// as the workers' ledger settled it.
func runQueued(ctx context.Context, warn io.Writer, desc app.Description, evals []appeval.Eval, e *appeval.EvalRun, f evalFlags, progress func(done, total int)) (*eval.Result, gateway.SpendSummary, error) {
	digest, err := descriptionDigest(desc, evals)
	if err != nil {
		return nil, gateway.SpendSummary{}, err
	}
	pool, err := openQueuePool(ctx, f.queue)
	if err != nil {
		return nil, gateway.SpendSummary{}, err
	}
	defer pool.Close()
	q, err := evalqueue.OpenEvals(ctx, pool, evalqueue.EvalsConfig{})
	if err != nil {
		return nil, gateway.SpendSummary{}, err
	}
	var seed *int64
	if f.seedSet {
		seed = &f.seed
	}
	cases := e.Dataset.Cases
	args := make([]evalqueue.SampleArgs, 0, len(cases)*e.Runs)
	// Sample-major, as eval.Run: every case's first sample is queued
	// before any case's second.
	for k := range e.Runs {
		for i, c := range cases {
			args = append(args, evalqueue.SampleArgs{Batch: e.RunID, App: desc.Name, Digest: digest, Eval: e.Name, Seed: seed, Case: i, CaseID: c.ID, Sample: k})
		}
	}
	if err := q.Enqueue(ctx, args); err != nil {
		return nil, gateway.SpendSummary{}, err
	}
	// Nobody may be working the queue: say so once, rather than wait in
	// silence.
	var stored atomic.Int64
	hint := time.AfterFunc(queueHintAfter, func() {
		if stored.Load() == 0 {
			fmt.Fprintf(warn, "aidgen: no sample of eval %s has a result after %v: is an aidgen worker running on this application with --queue and the same DSN?\n", e.Name, queueHintAfter)
		}
	})
	defer hint.Stop()
	results, err := q.Wait(ctx, e.RunID, len(args), func(n int) {
		stored.Store(int64(n))
		progress(n, len(args))
	})
	if err != nil {
		return nil, gateway.SpendSummary{}, err
	}
	samples := make([][]eval.Sample, len(cases))
	for i := range samples {
		samples[i] = make([]eval.Sample, e.Runs)
	}
	var pins []eval.ModelPin
	var spend gateway.SpendSummary
	for _, r := range results {
		if r.Case < 0 || r.Case >= len(cases) || r.Sample < 0 || r.Sample >= e.Runs {
			return nil, spend, fmt.Errorf("a worker stored sample %d of case %d, which the eval does not have", r.Sample, r.Case)
		}
		samples[r.Case][r.Sample] = r.EvalSample(cases[r.Case].ID, e.Metrics)
		pins = append(pins, r.Pins...)
		spend.Total = spend.Total.Add(r.Spend)
		spend.Calls += r.Calls
	}
	res, err := eval.Gather(e.Dataset, e.Metrics, samples, pins)
	return res, spend, err
}
