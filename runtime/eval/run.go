package eval

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// Runner produces one answer for one case. It is the extension point for eval targets: a
// gateway model with a prompt template is the first, agents come later, a test fake is
// another. The sample index (0 ≤ sample < Options.Runs) lets a seeded fake draw a
// different but reproducible answer per run, for example by putting the case id and the
// index on the context it passes to its provider.
//
// Run calls a Runner from several goroutines at once, so it must be safe for concurrent
// use, and it must return promptly once ctx is done.
type Runner interface {
	// Run answers case c for the given sample index.
	Run(ctx context.Context, c Case, sample int) (Answer, error)
}

// RunnerFunc adapts a function to [Runner].
type RunnerFunc func(ctx context.Context, c Case, sample int) (Answer, error)

// Run calls f.
func (f RunnerFunc) Run(ctx context.Context, c Case, sample int) (Answer, error) {
	return f(ctx, c, sample)
}

// Answer is what a runner returns for one sample.
type Answer struct {
	// Text is the answer the metrics score.
	Text string
	// Model is the pinned model id that produced the answer, when known; baselines record
	// the set of models seen.
	Model string
	// Alias is the alias that answered, when the runner knows it.
	Alias string
	// FellBack is true when the answer came from a fallback alias rather than the one the
	// runner asked for: the score is then partly the fallback's, which a report must show.
	FellBack bool
	// CostUSD is what the sample cost, as priced by the runner (the gateway's ledger).
	CostUSD float64
	// InputTokens is the sample's prompt token count, when known.
	InputTokens int64
	// OutputTokens is the sample's completion token count, when known.
	OutputTokens int64
	// Decisions are the decisions the runner took on calls that paused the
	// sample's run for approval, in order (see [Approvals]).
	Decisions []Decision
	// ToolCalls are the calls of declared tools the sample's run made, in
	// the order they finished, each with its mode (see [ToolMode]).
	ToolCalls []ToolCall
	// Blocked is true when a guardrail or hook blocked the sample's run: the
	// run ended with status blocked, and Text is the block's message.
	Blocked bool
	// Tripped names the guardrails whose verdicts did something in the
	// sample's run (blocked, redacted, asked or logged), each once, in the
	// order they first did.
	Tripped []string
}

// MaxSampleDecisions bounds the decisions an eval takes in one sample's
// run: a run that still pauses after them fails its sample, so that an
// agent that asks again and again cannot hold an eval forever.
const MaxSampleDecisions = 16

// Decision is one decision an eval took on a call that paused a sample's
// run.
type Decision struct {
	// Tool is the tool of the paused call.
	Tool string `json:"tool"`
	// Approved is true for an approval, false for a rejection.
	Approved bool `json:"approved"`
}

// Options controls [Run].
type Options struct {
	// Runs is how many times each case is sampled; values below 1 mean 1.
	Runs int
	// Concurrency bounds how many samples run at once; values below 1 mean 1.
	Concurrency int
	// Progress, when set, is called after each finished sample with the number done and
	// the total. It is called from the goroutine that called Run, never concurrently.
	Progress func(done, total int)
}

// Sample is the outcome of one run of one case.
type Sample struct {
	// Index is the sample index passed to the runner.
	Index int
	// Answer is the runner's answer; zero when Err is set.
	Answer Answer
	// Err is the runner's failure as a [*SampleError], or nil. A failed sample stays in the
	// result and scores 0 on every metric.
	Err error
	// Scores holds one score per metric, in the order of Result.Metrics.
	Scores []float64
	// MetricErrs holds, per metric, the metric's failure as a [*SampleError], or nil; a
	// metric failure scores that metric 0 for this sample.
	MetricErrs []error
	// Latency is how long the runner took.
	Latency time.Duration
}

// CaseResult holds every sample of one case, in sample-index order.
type CaseResult struct {
	// CaseID is the case's id.
	CaseID string
	// Samples holds Options.Runs samples; Samples[k].Index == k.
	Samples []Sample
	// Group is the case's group (see [Case]); empty when the case is its own cluster.
	Group string
}

// MetricInfo names a metric of a result and says whether it is model-derived.
type MetricInfo struct {
	// Name is the metric's name.
	Name string
	// ModelDerived is the metric's ModelDerived value.
	ModelDerived bool
}

// Result is a complete sampled evaluation. Its order never depends on scheduling: cases
// are in dataset order and samples in index order.
type Result struct {
	// Dataset is the dataset's name.
	Dataset string
	// DatasetVersion is the dataset's version.
	DatasetVersion string
	// Runs is the number of samples per case.
	Runs int
	// Metrics lists the metrics in the order of every Sample.Scores.
	Metrics []MetricInfo
	// Cases holds one entry per dataset case, in dataset order.
	Cases []CaseResult
	// CostUSD is the sum of the samples' reported costs.
	CostUSD float64
	// InputTokens is the summed prompt token count.
	InputTokens int64
	// OutputTokens is the summed completion token count.
	OutputTokens int64
	// Models lists the distinct model ids the runner reported, sorted.
	Models []string
	// FallbackAnswers counts the samples answered by a fallback alias rather than the one
	// the runner asked for (Answer.FellBack). Non-zero means the scores are not the asked-for
	// model's alone.
	FallbackAnswers int
	// Pins lists every model the runner and the metrics reported through [RecordPin]
	// (role, alias, pinned id, provider), sorted target first; a baseline records them so
	// that a later run against other models says so.
	Pins []ModelPin
}

// SampleError is the cause of a failed sample or of a metric that could not score it.
type SampleError struct {
	// CaseID is the id of the sample's case.
	CaseID string
	// Sample is the sample index.
	Sample int
	// Metric names the metric that failed, or is empty when the runner failed.
	Metric string
	// Err is the cause.
	Err error
}

// Error formats the failure with its location.
func (e *SampleError) Error() string {
	if e.Metric != "" {
		return fmt.Sprintf("case %q sample %d: metric %s: %v", e.CaseID, e.Sample, e.Metric, e.Err)
	}
	return fmt.Sprintf("case %q sample %d: %v", e.CaseID, e.Sample, e.Err)
}

// Unwrap returns the cause.
func (e *SampleError) Unwrap() error { return e.Err }

// Run samples every case of the dataset opts.Runs times through runner, scores each answer
// with every metric, and returns the results in dataset and sample order.
//
// At most opts.Concurrency samples are in flight. A runner or metric failure is recorded
// on its sample (scoring 0, see [Sample]) and does not stop the run. When ctx is done, Run
// stops starting samples, waits for those in flight (runners must honour ctx) and returns
// the context's error; it leaves no goroutine behind.
func Run(ctx context.Context, ds *Dataset, runner Runner, metrics []Metric, opts Options) (*Result, error) {
	if err := ds.Validate(); err != nil {
		return nil, fmt.Errorf("run eval: %w", err)
	}
	if len(ds.Cases) == 0 {
		return nil, fmt.Errorf("run eval %q: dataset has no cases", ds.Name)
	}
	if runner == nil {
		return nil, fmt.Errorf("run eval %q: no runner", ds.Name)
	}
	if len(metrics) == 0 {
		return nil, fmt.Errorf("run eval %q: no metrics", ds.Name)
	}
	res := &Result{Dataset: ds.Name, DatasetVersion: ds.Version, Runs: max(1, opts.Runs)}
	for _, m := range metrics {
		if slices.ContainsFunc(res.Metrics, func(mi MetricInfo) bool { return mi.Name == m.Name() }) {
			return nil, fmt.Errorf("run eval %q: metric %q given twice", ds.Name, m.Name())
		}
		res.Metrics = append(res.Metrics, MetricInfo{Name: m.Name(), ModelDerived: m.ModelDerived()})
	}
	res.Cases = make([]CaseResult, len(ds.Cases))
	for i, c := range ds.Cases {
		res.Cases[i] = CaseResult{CaseID: c.ID, Samples: make([]Sample, res.Runs), Group: c.Group}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pins := &pinRecorder{pins: map[ModelPin]bool{}}
	ctx = withPinRecorder(ctx, pins)
	type job struct{ ci, k int }
	jobs := make(chan job)
	done := make(chan struct{})
	go func() {
		defer close(jobs)
		// Sample-major order: every case gets its first sample before any gets a second,
		// so a slow or cancelled run still covers the whole dataset evenly.
		for k := range res.Runs {
			for ci := range ds.Cases {
				select {
				case jobs <- job{ci, k}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for range max(1, opts.Concurrency) {
		wg.Go(func() {
			for j := range jobs {
				if ctx.Err() != nil {
					return
				}
				// Each job owns its slot, so writes need no lock; wg.Wait orders them
				// before the reads below.
				res.Cases[j.ci].Samples[j.k] = runSample(ctx, ds.Cases[j.ci], j.k, runner, metrics)
				select {
				case done <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	total, n := len(ds.Cases)*res.Runs, 0
	for range done {
		n++
		if opts.Progress != nil {
			opts.Progress(n, total)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run eval %q: %w", ds.Name, context.Cause(ctx))
	}
	if n != total {
		return nil, fmt.Errorf("run eval %q: %d of %d samples finished", ds.Name, n, total)
	}
	res.total(pins.sorted())
	return res, nil
}

// total sums the samples' costs, tokens, models and fallbacks into the
// result, whose pins are pins.
func (res *Result) total(pins []ModelPin) {
	models := map[string]bool{}
	for _, cr := range res.Cases {
		for _, s := range cr.Samples {
			res.CostUSD += s.Answer.CostUSD
			res.InputTokens += s.Answer.InputTokens
			res.OutputTokens += s.Answer.OutputTokens
			if s.Err == nil && s.Answer.FellBack {
				res.FallbackAnswers++
			}
			if s.Answer.Model != "" && !models[s.Answer.Model] {
				models[s.Answer.Model] = true
				res.Models = append(res.Models, s.Answer.Model)
			}
		}
	}
	slices.Sort(res.Models)
	res.Pins = pins
}

// RunSample runs one sample of a case, as Run does for each: the runner's
// answer scored by every metric, and the pins the runner and the metrics
// reported (RecordPin). It is what a worker of a distributed eval calls
// for one job; Gather puts the samples back together.
func RunSample(ctx context.Context, c Case, k int, runner Runner, metrics []Metric) (Sample, []ModelPin) {
	pins := &pinRecorder{pins: map[ModelPin]bool{}}
	s := runSample(withPinRecorder(ctx, pins), c, k, runner, metrics)
	return s, pins.sorted()
}

// Gather builds the result of an eval whose samples ran elsewhere (one
// RunSample each, in any order, on any process): samples[i][k] is sample
// k of case i of the dataset, and pins the union of their pins. The result
// is the one Run returns for the same samples.
func Gather(ds *Dataset, metrics []Metric, samples [][]Sample, pins []ModelPin) (*Result, error) {
	if len(samples) != len(ds.Cases) || len(samples) == 0 {
		return nil, fmt.Errorf("gather eval %q: %d cases of samples for %d cases", ds.Name, len(samples), len(ds.Cases))
	}
	res := &Result{Dataset: ds.Name, DatasetVersion: ds.Version, Runs: len(samples[0])}
	for _, m := range metrics {
		res.Metrics = append(res.Metrics, MetricInfo{Name: m.Name(), ModelDerived: m.ModelDerived()})
	}
	for i, c := range ds.Cases {
		if len(samples[i]) != res.Runs {
			return nil, fmt.Errorf("gather eval %q: case %q has %d samples, want %d", ds.Name, c.ID, len(samples[i]), res.Runs)
		}
		for k, s := range samples[i] {
			if s.Index != k || len(s.Scores) != len(metrics) || len(s.MetricErrs) != len(metrics) {
				return nil, fmt.Errorf("gather eval %q: case %q sample %d is not sample %d of %d metrics", ds.Name, c.ID, s.Index, k, len(metrics))
			}
		}
		res.Cases = append(res.Cases, CaseResult{CaseID: c.ID, Samples: samples[i], Group: c.Group})
	}
	set := map[ModelPin]bool{}
	for _, p := range pins {
		set[p] = true
	}
	res.total((&pinRecorder{pins: set}).sorted())
	return res, nil
}

func runSample(ctx context.Context, c Case, k int, runner Runner, metrics []Metric) Sample {
	s := Sample{Index: k, Scores: make([]float64, len(metrics)), MetricErrs: make([]error, len(metrics))}
	// The sample travels on the context to the runner and to every metric, so that a
	// metric's own model calls (a judge) can be charged to the sample's budget account.
	ctx = gateway.WithSample(ctx, gateway.SampleKey{Case: c.ID, Index: k})
	start := time.Now()
	ans, err := runner.Run(ctx, c, k)
	s.Latency = time.Since(start)
	if err != nil {
		s.Err = &SampleError{CaseID: c.ID, Sample: k, Err: err}
		return s
	}
	s.Answer = ans
	for i, m := range metrics {
		var v float64
		var err error
		if am, ok := m.(AnswerMetric); ok {
			v, err = am.ScoreAnswer(ctx, c, ans)
		} else {
			v, err = m.Score(ctx, c, ans.Text)
		}
		switch {
		case err != nil:
			s.MetricErrs[i] = &SampleError{CaseID: c.ID, Sample: k, Metric: m.Name(), Err: err}
		case v < 0 || v > 1 || v != v:
			s.MetricErrs[i] = &SampleError{CaseID: c.ID, Sample: k, Metric: m.Name(),
				Err: fmt.Errorf("score %v is outside [0, 1]", v)}
		default:
			s.Scores[i] = v
		}
	}
	return s
}

// Errors returns every sample and metric failure in result order.
func (r *Result) Errors() []error {
	var out []error
	for _, cr := range r.Cases {
		for _, s := range cr.Samples {
			if s.Err != nil {
				out = append(out, s.Err)
			}
			for _, e := range s.MetricErrs {
				if e != nil {
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// Stats summarises every metric of the result; see [MetricStats]. It fails only for a
// hand-built result whose cases have different numbers of samples or repeated ids.
func (r *Result) Stats() (map[string]MetricStats, error) {
	out := make(map[string]MetricStats, len(r.Metrics))
	ids := make([]string, len(r.Cases))
	var groups map[string]string
	for i, cr := range r.Cases {
		ids[i] = cr.CaseID
		if cr.Group != "" {
			if groups == nil {
				groups = map[string]string{}
			}
			groups[cr.CaseID] = cr.Group
		}
	}
	for mi, m := range r.Metrics {
		scores := make([][]float64, len(r.Cases))
		errs := 0
		for ci, cr := range r.Cases {
			scores[ci] = make([]float64, len(cr.Samples))
			for k, s := range cr.Samples {
				if len(s.Scores) != len(r.Metrics) || len(s.MetricErrs) != len(r.Metrics) {
					return nil, fmt.Errorf("case %q sample %d has %d scores for %d metrics", cr.CaseID, k, len(s.Scores), len(r.Metrics))
				}
				scores[ci][k] = s.Scores[mi]
				if s.Err != nil || s.MetricErrs[mi] != nil {
					errs++
				}
			}
		}
		st, err := NewMetricStats(ids, scores)
		if err != nil {
			return nil, fmt.Errorf("summarise metric %q: %w", m.Name, err)
		}
		st.ModelDerived = m.ModelDerived
		st.Errors = errs
		st.Groups = groups
		out[m.Name] = st
	}
	return out, nil
}
