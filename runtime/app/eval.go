package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
)

// Eval is one eval of an application, ready to run: its dataset loaded, its
// target, metrics and thresholds built.
type Eval struct {
	// Name is the eval's name in the IR.
	Name string
	// Dataset holds the cases.
	Dataset *eval.Dataset
	// Runner answers each case.
	Runner eval.Runner
	// Metrics score each answer, in the IR's order.
	Metrics []eval.Metric
	// Thresholds are the gates, in the IR's order.
	Thresholds []eval.Threshold
	// Baseline is the baseline file's path (the IR's, joined to the IR's
	// directory); empty when the eval has none.
	Baseline string
	// Runs is how many times each case is sampled.
	Runs int
	// Concurrency bounds the samples in flight.
	Concurrency int
	// RunID names this run of the eval in its budget's ledger accounts. The
	// target and the judge are charged to one account, "eval/<name>/<RunID>"
	// under a run-scoped budget (with "/<case>/<sample>" appended under a
	// thread-scoped one), so a budget caps what one run spends in all. NewEval
	// draws a fresh id, so that a persistent ledger does not add up every
	// run of the eval against one cap; set it before running to name the run
	// (a CI job id, say).
	RunID string
}

// NewEval builds the named eval of doc over the gateway g (built by
// NewGateway from the same document).
func NewEval(doc *ir.Document, g *gateway.Gateway, name string) (*Eval, error) {
	e, ok := doc.Eval(name)
	if !ok {
		return nil, fmt.Errorf("unknown eval %q; known evals: %v", name, doc.EvalNames())
	}
	ds, err := eval.LoadDataset(filepath.Join(doc.Dir, filepath.FromSlash(e.Dataset)))
	if err != nil {
		return nil, fmt.Errorf("eval %q: %w", name, err)
	}
	out := &Eval{
		Name:        name,
		Dataset:     ds,
		Runs:        e.Runs,
		Concurrency: e.Concurrency,
		RunID:       newRunID(),
	}
	if e.Baseline != "" {
		out.Baseline = filepath.Join(doc.Dir, filepath.FromSlash(e.Baseline))
	}

	var budget *ir.Budget
	if e.Budget != "" {
		budget, _ = doc.Budget(e.Budget)
	}
	switch {
	case e.Target.Model != "":
		r := &eval.ModelRunner{Gateway: g, Alias: e.Target.Model, System: e.Target.System}
		if e.Target.Prompt != "" {
			if r.Prompt, err = eval.ParsePrompt(e.Target.Prompt); err != nil {
				return nil, fmt.Errorf("eval %q: %w", name, err)
			}
		}
		out.Runner = out.budgetedRunner(r, budget)
	case e.Target.Agent != "":
		return nil, fmt.Errorf("eval %q: %w", name, &gateway.DeferredError{Feature: "an eval targeting an agent (runtime/agents)"})
	default:
		return nil, fmt.Errorf("eval %q names no target", name)
	}

	reg := eval.NewRegistry()
	for _, m := range e.Metrics {
		cfg := eval.MetricConfig{Schema: e.Schema}
		if e.Judge != nil {
			cfg.Judge = out.budgetedJudge(&eval.GatewayJudge{Gateway: g, Alias: e.Judge.Model}, budget)
			cfg.Rubric = e.Judge.Rubric
		}
		metric, err := reg.New(m, cfg)
		if err != nil {
			return nil, fmt.Errorf("eval %q: metric %q: %w", name, m, err)
		}
		out.Metrics = append(out.Metrics, metric)
	}
	for _, t := range e.Thresholds {
		out.Thresholds = append(out.Thresholds, eval.Threshold{
			Metric:        t.Metric,
			MinMean:       t.MinMean,
			MaxRegression: t.MaxRegression,
			Alpha:         t.Alpha,
		})
	}
	if err := eval.ValidateThresholds(out.Thresholds, out.Metrics); err != nil {
		return nil, fmt.Errorf("eval %q: %w", name, err)
	}
	return out, nil
}

// budgetContext charges the calls made under ctx for one sample to the
// eval's budget: the account of this run, or of the sample under a
// thread-scoped budget (each sample is its own thread). The target and the
// judge both charge through it, so they share one account and one cap.
func (e *Eval) budgetContext(ctx context.Context, b *ir.Budget, s gateway.SampleKey) context.Context {
	key := "eval/" + e.Name + "/" + e.RunID
	if b.Scope == string(gateway.ScopeThread) {
		key += "/" + s.Case + "/" + strconv.Itoa(s.Index)
	}
	return gateway.ContextWithBudget(ctx, b.Name, key)
}

// budgetedRunner charges every call of a runner to the eval's budget.
func (e *Eval) budgetedRunner(r eval.Runner, b *ir.Budget) eval.Runner {
	if b == nil {
		return r
	}
	return eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		return r.Run(e.budgetContext(ctx, b, gateway.SampleKey{Case: c.ID, Index: sample}), c, sample)
	})
}

// budgetedJudge charges every call of the judge to the eval's budget, on
// the account of the sample it grades (eval.Run puts the sample on the
// context of every metric).
func (e *Eval) budgetedJudge(j eval.JudgeModel, b *ir.Budget) eval.JudgeModel {
	if b == nil {
		return j
	}
	return eval.JudgeFunc(func(ctx context.Context, prompt string) (string, error) {
		s, _ := gateway.SampleFrom(ctx)
		return j.Judge(e.budgetContext(ctx, b, s), prompt)
	})
}

// newRunID returns a random id for one run of an eval.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
