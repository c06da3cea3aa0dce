package app

import (
	"context"
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
		out.Runner = budgeted(r, budget, name)
	case e.Target.Agent != "":
		return nil, fmt.Errorf("eval %q: %w", name, &gateway.DeferredError{Feature: "an eval targeting an agent (runtime/agents)"})
	default:
		return nil, fmt.Errorf("eval %q names no target", name)
	}

	reg := eval.NewRegistry()
	for _, m := range e.Metrics {
		cfg := eval.MetricConfig{Schema: e.Schema}
		if e.Judge != nil {
			j := &eval.GatewayJudge{Gateway: g, Alias: e.Judge.Model}
			if budget != nil {
				// The judge's calls are part of the eval's spend.
				j.Options = []gateway.CallOption{gateway.WithBudget(budget.Name, "eval/"+name+"/judge")}
			}
			cfg.Judge = j
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

// budgeted charges every call of a runner to the eval's budget. One
// invocation of an eval is one run; with a thread-scoped budget each sample
// is its own thread.
func budgeted(r eval.Runner, b *ir.Budget, evalName string) eval.Runner {
	if b == nil {
		return r
	}
	return eval.RunnerFunc(func(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
		key := "eval/" + evalName
		if b.Scope == string(gateway.ScopeThread) {
			key += "/" + c.ID + "/" + strconv.Itoa(sample)
		}
		return r.Run(gateway.ContextWithBudget(ctx, b.Name, key), c, sample)
	})
}
