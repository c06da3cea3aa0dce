package appeval

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// App is an application assembled with its evals: its runtime (app.App)
// and what each eval needs of it, checked when it is assembled.
type App struct {
	*app.App

	desc  app.Description
	evals []Eval
	tools *toolIndex // the tools an eval plans; nil without an agent eval
}

// Assemble assembles the application desc describes (app.Assemble, with
// opts) with its evals: when one targets an agent, every tool's
// implementation is wrapped, outermost, so that an eval sample's calls go
// as its plan says (see interceptTool); then every eval's target,
// metrics, judge, budget and thresholds are built, so that App.Eval fails
// only on reading its dataset (read there, so that an application run
// without evals needs no dataset file). Every problem found is reported,
// joined.
func Assemble(ctx context.Context, desc app.Description, evals []Eval, opts app.Options) (*App, error) {
	agentEval := hasAgentEval(evals)
	if agentEval {
		// Outermost, so that a stubbed call reaches neither the tool nor
		// what wraps it.
		wrap := opts.WrapTool
		opts.WrapTool = func(name string, impl agents.Implementation) agents.Implementation {
			if wrap != nil {
				impl = wrap(name, impl)
			}
			return interceptTool(name, impl)
		}
	}
	base, err := app.Assemble(ctx, desc, opts)
	if err != nil {
		return nil, err
	}
	a := &App{App: base, desc: desc, evals: evals}
	if agentEval && base.Agents != nil {
		a.tools = &toolIndex{tools: map[string]agents.Tool{}, agents: map[string]agents.Agent{}}
		for _, t := range base.Tools() {
			a.tools.tools[t.Name] = t
		}
		for _, name := range base.Agents.Agents() {
			a.tools.agents[name], _ = base.Agents.Agent(name)
		}
	}
	var errs []error
	for _, e := range evals {
		if _, err := a.newEval(e, "check"); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.Join(fmt.Errorf("assembling %s: %w", desc.Name, err), base.Close())
	}
	return a, nil
}

// EvalRun is one run of an eval of an application, ready to go: its
// dataset loaded, its target, metrics and thresholds built, its budget
// account named.
type EvalRun struct {
	// Name is the eval's name.
	Name string
	// Dataset holds the cases.
	Dataset *eval.Dataset
	// Runner answers each case.
	Runner eval.Runner
	// Metrics score each answer, in the description's order.
	Metrics []eval.Metric
	// Thresholds are the gates, in the description's order.
	Thresholds []eval.Threshold
	// Baseline is the baseline file's path, resolved against the
	// description's directory; empty when the eval has none.
	Baseline string
	// Runs is how many times each case is sampled.
	Runs int
	// Concurrency bounds the samples in flight.
	Concurrency int
	// Calibration, when the eval's judge declares one, is its calibration set
	// with Labels resolved against the description's directory; the caller
	// measures the judge on it (eval.MeasureJudge) before gating.
	Calibration *eval.CalibrationSource
	// RunID names this run of the eval in its budget's ledger accounts. The
	// target and the judge are charged to one account, "eval/<name>/<RunID>"
	// under a run- or global-scoped budget (with "/<case>/<sample>" appended
	// under a thread-scoped one), so a budget caps what one run spends in
	// all. App.Eval draws a fresh id, so that a persistent ledger does not
	// add up every run of the eval against one cap; set it before running to
	// name the run (a CI job id, say).
	RunID string

	agent *agentRunner // the runner of an agent target, nil for another
}

// EvalNames returns the names of the application's evals, in the
// description's order.
func (a *App) EvalNames() []string {
	names := make([]string, len(a.evals))
	for i, e := range a.evals {
		names[i] = e.Name
	}
	return names
}

// Eval builds the named eval, loading its dataset, under a fresh RunID.
// Each call is a new run of the eval with its own budget account. An eval
// whose cases come from recorded runs (Eval.FromRuns) has no dataset to
// load: sample its cases and build it with EvalOn.
func (a *App) Eval(name string) (*EvalRun, error) { return a.evalOn(name, nil) }

// EvalOn builds the named eval over the given cases instead of its dataset
// file: cases sampled from recorded runs (runtime/eval/fromruns), as the
// eval's RunsSource or aidgen eval --from-runs says.
func (a *App) EvalOn(name string, ds *eval.Dataset) (*EvalRun, error) {
	if ds == nil {
		return nil, fmt.Errorf("eval %q: no cases given", name)
	}
	return a.evalOn(name, ds)
}

// RunsSource returns the recorded runs the named eval samples its cases
// from, its File resolved against the description's directory; false when
// the eval reads a dataset file (or does not exist).
func (a *App) RunsSource(name string) (eval.RunsSource, bool) {
	for _, e := range a.evals {
		if e.Name == name && e.FromRuns != nil {
			src := *e.FromRuns
			src.File = a.desc.Path(src.File)
			return src, true
		}
	}
	return eval.RunsSource{}, false
}

func (a *App) evalOn(name string, ds *eval.Dataset) (*EvalRun, error) {
	for _, e := range a.evals {
		if e.Name != name {
			continue
		}
		out, err := a.newEval(e, newRunID())
		if err != nil {
			return nil, err
		}
		switch {
		case ds != nil:
			out.Dataset = ds
		case e.FromRuns != nil:
			return nil, fmt.Errorf("eval %q samples its cases from recorded runs (source \"runs\"), which only aidgen eval samples; it cannot run from a dataset file here", name)
		default:
			if out.Dataset, err = eval.ReadDataset(a.Files(), e.Dataset); err != nil {
				return nil, fmt.Errorf("eval %q: %w", name, err)
			}
		}
		if r := out.agent; r != nil {
			if r.tools, err = a.planTools(e); err != nil {
				return nil, err
			}
		} else if len(e.Tools) > 0 {
			return nil, fmt.Errorf("eval %q: tools apply to an agent target, whose runs call them", name)
		}
		if e.Target.Retriever != "" {
			if err := a.checkJudgements(e, out.Dataset); err != nil {
				return nil, fmt.Errorf("eval %q: %w", name, err)
			}
		}
		if err := a.checkTripped(e, out.Dataset); err != nil {
			return nil, fmt.Errorf("eval %q: %w", name, err)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown eval %q; known evals: %v", name, a.EvalNames())
}

// newEval builds an eval without its dataset: Assemble calls it to check
// every eval, App.Eval to run one.
func (a *App) newEval(e Eval, runID string) (*EvalRun, error) {
	out := &EvalRun{
		Name:        e.Name,
		Runs:        e.Runs,
		Concurrency: e.Concurrency,
		Baseline:    a.desc.Path(e.Baseline),
		Thresholds:  append([]eval.Threshold(nil), e.Thresholds...),
		RunID:       runID,
	}
	if err := e.Approvals.Check(); err != nil {
		return nil, fmt.Errorf("eval %q: %w", e.Name, err)
	}
	if e.Approvals != eval.ApprovalsNone && e.Target.Agent == "" {
		return nil, fmt.Errorf("eval %q: approvals decide the calls that pause an agent's run; the target is not an agent", e.Name)
	}
	var budget *gateway.Budget
	if e.Budget != "" {
		for i := range a.desc.Budgets {
			if a.desc.Budgets[i].Name == e.Budget {
				budget = &a.desc.Budgets[i]
			}
		}
		if budget == nil {
			return nil, fmt.Errorf("eval %q: unknown budget %q", e.Name, e.Budget)
		}
	}
	switch t := e.Target; {
	case t.Agent != "" && t.Model != "":
		return nil, fmt.Errorf("eval %q: the target names both agent %q and model %q; name one", e.Name, t.Agent, t.Model)
	case t.Retriever != "" && (t.Agent != "" || t.Model != ""):
		return nil, fmt.Errorf("eval %q: the target names retriever %q and an agent or model too; name one", e.Name, t.Retriever)
	case t.Retriever != "":
		r, err := a.newRetrieverRunner(t)
		if err != nil {
			return nil, fmt.Errorf("eval %q: %w", e.Name, err)
		}
		out.Runner = out.budgetedRunner(r, budget)
	case t.Model != "":
		if _, err := a.Gateway.Resolve(t.Model); err != nil {
			return nil, fmt.Errorf("eval %q: %w", e.Name, err)
		}
		r := &eval.ModelRunner{Gateway: a.Gateway, Alias: t.Model, System: t.System, Fallbacks: t.Fallbacks}
		if t.Prompt != "" {
			p, err := eval.ParsePrompt(t.Prompt)
			if err != nil {
				return nil, fmt.Errorf("eval %q: %w", e.Name, err)
			}
			r.Prompt = p
		}
		out.Runner = out.budgetedRunner(r, budget)
	case t.Agent != "":
		if a.Agents == nil {
			return nil, fmt.Errorf("eval %q: the target agent %q is not an agent of the application, which has none", e.Name, t.Agent)
		}
		if known := a.Agents.Agents(); !slices.Contains(known, t.Agent) {
			return nil, fmt.Errorf("eval %q: %w", e.Name, &agents.UnknownAgentError{Agent: t.Agent, Known: known})
		}
		out.agent = &agentRunner{rt: a.Agents, gw: a.Gateway, agent: t.Agent, eval: out, approvals: e.Approvals}
		out.Runner = out.budgetedRunner(out.agent, budget)
	default:
		return nil, fmt.Errorf("eval %q names no target", e.Name)
	}

	reg := eval.NewRegistry()
	for _, m := range e.Metrics {
		if e.Target.Retriever != "" {
			// A retriever answers with a ranking, which only ranked
			// metrics read.
			metric, err := eval.ParseRetrievalMetric(m)
			if err != nil {
				return nil, fmt.Errorf("eval %q: the target is retriever %q: %w", e.Name, e.Target.Retriever, err)
			}
			out.Metrics = append(out.Metrics, metric)
			continue
		}
		if _, err := eval.ParseRetrievalMetric(m); err == nil {
			return nil, fmt.Errorf("eval %q: metric %q scores a retriever's ranking; the target must be a retriever", e.Name, m)
		}
		if (m == eval.MetricGuardrailBlocked || m == eval.MetricGuardrailTripped) && e.Target.Agent == "" {
			return nil, fmt.Errorf("eval %q: metric %q scores what guardrails did in an agent's run; the target must be an agent", e.Name, m)
		}
		cfg := eval.MetricConfig{Schema: e.Schema}
		if e.Judge != nil {
			cfg.Judge = out.budgetedJudge(&eval.GatewayJudge{Gateway: a.Gateway, Alias: e.Judge.Model, Fallbacks: e.Judge.Fallbacks}, budget)
			cfg.Rubric = e.Judge.Rubric
			if c := e.Judge.Calibration; c != nil {
				cfg.JudgeCalibrated = true
				cal := *c
				cal.Labels = a.desc.Path(cal.Labels)
				out.Calibration = &cal
			}
		}
		metric, err := reg.New(m, cfg)
		if err != nil {
			return nil, fmt.Errorf("eval %q: metric %q: %w", e.Name, m, err)
		}
		out.Metrics = append(out.Metrics, metric)
	}
	if err := eval.ValidateThresholds(out.Thresholds, out.Metrics); err != nil {
		return nil, fmt.Errorf("eval %q: %w", e.Name, err)
	}
	return out, nil
}

// sampleKey is the budget account of one sample: the run's, or under a
// thread-scoped budget the sample's own (each sample is its own thread).
func (e *EvalRun) sampleKey(scope gateway.Scope, s gateway.SampleKey) string {
	key := "eval/" + e.Name + "/" + e.RunID
	if scope == gateway.ScopeThread {
		key += "/" + s.Case + "/" + strconv.Itoa(s.Index)
	}
	return key
}

// budgetContext charges the calls made under ctx for one sample to the
// eval's budget. The target and the judge both charge through it, so they
// share one account and one cap.
func (e *EvalRun) budgetContext(ctx context.Context, b *gateway.Budget, s gateway.SampleKey) context.Context {
	return gateway.ContextWithBudget(ctx, b.Name, e.sampleKey(b.Scope, s))
}

// budgetedRunner charges every call of a runner to the eval's budget.
func (e *EvalRun) budgetedRunner(r eval.Runner, b *gateway.Budget) eval.Runner {
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
func (e *EvalRun) budgetedJudge(j eval.JudgeModel, b *gateway.Budget) eval.JudgeModel {
	if b == nil {
		return j
	}
	return eval.JudgeFunc(func(ctx context.Context, prompt string) (string, error) {
		s, _ := gateway.SampleFrom(ctx)
		return j.Judge(e.budgetContext(ctx, b, s), prompt)
	})
}

// agentRunner is the agent target of an eval: each sample is one run of
// the agent on the case's input, and the answer is the run's final answer.
type agentRunner struct {
	rt        *agents.Runtime
	gw        *gateway.Gateway
	agent     string
	eval      *EvalRun
	approvals eval.Approvals // the eval's; a case's own override it
	tools     *evalTools     // what each tool does in the eval's samples
}

// Run implements eval.Runner. The sample is put on the context, so a fake
// in answer-key mode answers the case; the run gets a user of its own, so
// that memory one sample writes is never read by another. Under an
// approval policy (the case's, or the eval's), a run that pauses for
// approval is resumed with the policy's decision, again each time it
// pauses, up to eval.MaxSampleDecisions; the answer lists the decisions.
func (r *agentRunner) Run(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
	ctx = gateway.WithSample(ctx, gateway.SampleKey{Case: c.ID, Index: sample})
	var calls *sampleTools
	if r.tools != nil {
		ctx, calls = withSampleTools(ctx, r.tools, c)
	}
	user := "eval/" + r.eval.Name + "/" + r.eval.RunID + "/" + c.ID + "/" + strconv.Itoa(sample)
	res, err := r.rt.Run(ctx, r.agent, c.Input, agents.RunOptions{UserID: user})
	policy := cmp.Or(c.Approvals, r.approvals)
	var decisions []eval.Decision
	for err == nil && res.Status == agents.StatusPaused && policy != eval.ApprovalsNone && len(decisions) < eval.MaxSampleDecisions {
		tool := pendingTool(res)
		d := agents.Decision{Action: agents.Reject, Feedback: "rejected by the eval's approval policy", By: "eval/" + r.eval.Name}
		if policy == eval.ApprovalsApprove {
			d = agents.Decision{Action: agents.Approve, By: "eval/" + r.eval.Name}
		}
		decisions = append(decisions, eval.Decision{Tool: tool, Approved: d.Action == agents.Approve})
		res, err = r.rt.Resume(ctx, res.RunID, d)
	}
	// A blocked run is an outcome the guardrail_blocked metric scores, not
	// a failed sample: its answer is the block's message.
	blocked, isBlocked := errors.AsType[*agents.BlockedError](err)
	if isBlocked && res.Status == agents.StatusBlocked {
		err, res.Answer = nil, blocked.Message
	}
	if err != nil {
		return eval.Answer{}, fmt.Errorf("agent %q: run %s ended %s: %w", r.agent, res.RunID, res.Status, err)
	}
	if res.Status != agents.StatusCompleted && res.Status != agents.StatusBlocked {
		return eval.Answer{}, &AgentSampleError{Agent: r.agent, RunID: res.RunID, Status: res.Status, Pending: pendingTool(res), Approvals: policy, Decisions: len(decisions)}
	}
	ans := eval.Answer{
		Text:         res.Answer,
		CostUSD:      res.CostUSD,
		InputTokens:  res.Usage.InputTokens,
		OutputTokens: res.Usage.OutputTokens,
		FellBack:     res.FellBack,
		Decisions:    decisions,
		Blocked:      res.Status == agents.StatusBlocked,
		Tripped:      trippedGuardrails(res.Verdicts),
	}
	if calls != nil {
		ans.ToolCalls = calls.recorded()
	}
	if n := len(res.Steps); n > 0 {
		ans.Model = res.Steps[n-1].Model
		ans.Alias = res.Steps[n-1].Alias
	}
	// Every model that answered a step is the target's, so a baseline pins
	// the whole run's models, handoffs and degraded rungs included.
	for _, st := range res.Steps {
		if st.Alias == "" {
			continue
		}
		pm, err := r.gw.Resolve(st.Alias)
		if err != nil {
			return eval.Answer{}, fmt.Errorf("agent %q: run %s: %w", r.agent, res.RunID, err)
		}
		if err := eval.RecordPin(ctx, eval.ModelPin{Role: eval.RoleTarget, Alias: st.Alias, Model: pm.Spec.ID, Provider: pm.Spec.Provider}); err != nil {
			return eval.Answer{}, err
		}
	}
	return ans, nil
}

// checkTripped refuses a case that expects a guardrail to trip which the
// application does not declare: its guardrail_tripped score could never
// be 1.
func (a *App) checkTripped(e Eval, ds *eval.Dataset) error {
	if !slices.Contains(e.Metrics, eval.MetricGuardrailTripped) {
		return nil
	}
	var known []string
	for _, g := range a.desc.Guardrails {
		known = append(known, g.Name)
	}
	for _, c := range ds.Cases {
		for _, g := range c.Tripped {
			if !slices.Contains(known, g) {
				if len(known) == 0 {
					return fmt.Errorf("case %q expects guardrail %q to trip, and the application declares no guardrails", c.ID, g)
				}
				return fmt.Errorf("case %q expects guardrail %q to trip, which the application does not declare (it declares %s)", c.ID, g, strings.Join(known, ", "))
			}
		}
	}
	return nil
}

// trippedGuardrails names the guardrails whose verdicts did something, each
// once, in the order they first did; a recorded pass (a model guardrail's
// call that found nothing) is not a trip.
func trippedGuardrails(vs []agents.VerdictRecord) []string {
	var out []string
	for _, v := range vs {
		if v.Action != agents.HookPass && !slices.Contains(out, v.Guardrail) {
			out = append(out, v.Guardrail)
		}
	}
	return out
}

func pendingTool(res agents.RunResult) string {
	if res.Checkpoint == nil || res.Checkpoint.Pending == nil {
		return ""
	}
	c, _ := res.Checkpoint.Pending.Call()
	return c.Name
}

// AgentSampleError is a sample of an agent target whose run ended without
// an answer and without an error: it paused. Without an approval policy an
// eval has no one to decide, so the sample fails, and says which call
// waited; with one, the run still paused after eval.MaxSampleDecisions.
type AgentSampleError struct {
	// Agent is the eval's target agent.
	Agent string
	// RunID is the sample's run.
	RunID string
	// Status is how the run ended.
	Status agents.Status
	// Pending is the tool whose call waits for a decision, when known.
	Pending string
	// Approvals is the sample's approval policy; Decisions how many
	// decisions it took before giving up.
	Approvals eval.Approvals
	Decisions int
}

// Error implements error.
func (e *AgentSampleError) Error() string {
	if e.Status == agents.StatusPaused && e.Pending != "" && e.Approvals != eval.ApprovalsNone {
		return fmt.Sprintf("agent %q: run %s still paused for a decision on %s after %d decisions (approvals: %s), the most a sample takes", e.Agent, e.RunID, e.Pending, e.Decisions, e.Approvals)
	}
	if e.Status == agents.StatusPaused && e.Pending != "" {
		return fmt.Sprintf("agent %q: run %s paused for a decision on %s; an eval has no one to approve it (give the eval, or the case, approvals: \"approve\" or \"reject\"), so the sample has no answer", e.Agent, e.RunID, e.Pending)
	}
	return fmt.Sprintf("agent %q: run %s ended %s without an answer", e.Agent, e.RunID, e.Status)
}

// newRunID returns a random id for one run of an eval.
func newRunID() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// retrieverRunner is the retriever target of an eval: eval.RetrievalRunner
// judging by source file, after ingesting a store that lives in memory (it
// starts empty in every process), and answering with the pinned embedding
// model, so that reports and baselines name the model the ranking came
// from.
type retrieverRunner struct {
	search *eval.RetrievalRunner
	r      *retrieval.Retriever
	model  string // the pinned embedding model
	alias  string

	ingest   bool // the store is in memory
	mu       sync.Mutex
	ingested bool
}

// newRetrieverRunner builds the runner of a retriever target.
func (a *App) newRetrieverRunner(t EvalTarget) (*retrieverRunner, error) {
	r, ok := a.Retrievers[t.Retriever]
	if !ok {
		return nil, fmt.Errorf("the target retriever %q is not a retriever of the application (retrievers: %v)", t.Retriever, slices.Sorted(maps.Keys(a.Retrievers)))
	}
	if t.K < 0 {
		return nil, fmt.Errorf("the target retrieves k=%d chunks; want at least 1, or 0 for the retriever's topK", t.K)
	}
	cfg, _ := a.retrieverConfig(t.Retriever)
	m, err := a.Gateway.Resolve(cfg.EmbedModel)
	if err != nil {
		return nil, fmt.Errorf("retriever %q: %w", t.Retriever, err)
	}
	return &retrieverRunner{
		search: &eval.RetrievalRunner{Searcher: r, K: t.K, BySource: true},
		r:      r,
		model:  m.Spec.ID,
		alias:  cfg.EmbedModel,
		ingest: a.storeInMemory(cfg.Store),
	}, nil
}

// Run implements eval.Runner.
func (r *retrieverRunner) Run(ctx context.Context, c eval.Case, sample int) (eval.Answer, error) {
	if err := r.ensureIngested(ctx); err != nil {
		return eval.Answer{}, err
	}
	ans, err := r.search.Run(ctx, c, sample)
	if err != nil {
		return eval.Answer{}, fmt.Errorf("retriever %q: %w", r.r.Name(), err)
	}
	ans.Model, ans.Alias = r.model, r.alias
	return ans, nil
}

// ensureIngested ingests a memory store once, before the first search; the
// other samples wait for it. A failed ingest is tried again by the next
// sample (Ingest resumes where it stopped), so a cancelled first sample
// does not fail the rest.
func (r *retrieverRunner) ensureIngested(ctx context.Context) error {
	if !r.ingest {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ingested {
		return nil
	}
	if _, err := r.r.Ingest(ctx); err != nil {
		return fmt.Errorf("ingesting retriever %q before searching it: %w", r.r.Name(), err)
	}
	r.ingested = true
	return nil
}

// retrieverConfig returns the description of a retriever.
func (a *App) retrieverConfig(name string) (retrieval.Config, bool) {
	for _, r := range a.desc.Retrievers {
		if r.Name == name {
			return r, true
		}
	}
	return retrieval.Config{}, false
}

// storeInMemory reports whether the named store keeps its vectors in this
// process only.
func (a *App) storeInMemory(name string) bool {
	for _, s := range a.desc.Stores {
		if s.Name == name {
			return s.InMemory()
		}
	}
	return false
}

// checkJudgements checks a retriever target's dataset before anything is
// searched: every case's expected field must be a judgement (an array of
// relevant source paths, or an object of path to grade) naming only files
// the retriever ingests. A misspelt or renamed path would otherwise score
// 0 on every sample, a regression that is really a typo.
func (a *App) checkJudgements(e Eval, ds *eval.Dataset) error {
	cfg, ok := a.retrieverConfig(e.Target.Retriever)
	if !ok {
		return fmt.Errorf("unknown retriever %q", e.Target.Retriever)
	}
	// LoadFiles only reads the application's files; it takes a context for
	// sources that would not, which are not built.
	docs, err := cfg.Source.LoadFiles(context.Background(), a.Files())
	if err != nil {
		return fmt.Errorf("reading the sources of retriever %q: %w", cfg.Name, err)
	}
	known := make(map[string]bool, len(docs))
	for _, d := range docs {
		known[d.Path] = true
	}
	var errs []error
	for _, c := range ds.Cases {
		j, err := retrieval.ParseJudgement([]byte(c.Expected))
		if err != nil {
			errs = append(errs, fmt.Errorf("case %q: expected must be the relevant source paths, such as [\"docs/refunds.md\"]: %w", c.ID, err))
			continue
		}
		if j.Relevant() == 0 {
			errs = append(errs, fmt.Errorf("case %q: expected names no relevant source, so every metric scores it 0; name at least one", c.ID))
		}
		for _, id := range slices.Sorted(maps.Keys(j)) {
			if !known[id] {
				errs = append(errs, fmt.Errorf("case %q: expected names %q, which retriever %q does not ingest; its sources are %s", c.ID, id, cfg.Name, strings.Join(slices.Sorted(maps.Keys(known)), ", ")))
			}
		}
	}
	return errors.Join(errs...)
}
