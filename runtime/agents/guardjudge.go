package agents

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// GuardrailCallAgent is the agent name a model guardrail's call carries
// (gateway.CallInfo.Agent), step 1, so that a fake provider's script can
// answer it: "guardrail:" and the guardrail's name, which no agent's name
// can be. A guardrail judged by an agent is answered as that agent's
// steps are.
func GuardrailCallAgent(guardrail string) string { return "guardrail:" + guardrail }

// judging is a model guardrail's call in flight, on its context: the run
// it judges for, and what the call used, which judgeHooks adds to the
// run's usage and records with the verdict.
type judging struct {
	st    *runState
	usage UsageRecord
}

type judgingKey struct{}

// judgeContext is ctx for a model guardrail's call in st's run: charged to
// the agent's budget beside those already on ctx (a service's, an
// eval's), with the call info of a turn of its own, and the judging the
// classifier reports its usage to.
func judgeContext(ctx context.Context, st *runState, h *Hook) (context.Context, *judging) {
	j := &judging{st: st}
	ctx = context.WithValue(ctx, judgingKey{}, j)
	return sideCallContext(ctx, st, gateway.CallInfo{Agent: GuardrailCallAgent(h.Name), Step: 1, RunID: st.id}), j
}

// sideCallContext is ctx for a model call st's run makes besides its
// steps (a model guardrail's, a compaction's summary): charged to the
// agent's budget beside those already on ctx, with the call info ci.
func sideCallContext(ctx context.Context, st *runState, ci gateway.CallInfo) context.Context {
	if d := st.agent; d.budget != "" {
		ctx = gateway.ContextWithBudget(ctx, d.budget, budgetKey(st))
	}
	return gateway.WithCallInfo(ctx, ci)
}

// classify is the model guardrails' classifier. A guardrail judged by an
// alias makes one call through the gateway, at temperature 0, asking for
// the verdict's JSON; one judged by an agent runs it (judgeByAgent). The
// context carries the run's budgets and call info (judgeContext), so the
// calls are priced, charged and traced like the agent's own.
func (r *Runtime) classify(ctx context.Context, c guard.ClassifierCall) (guard.ClassifierAnswer, error) {
	j, _ := ctx.Value(judgingKey{}).(*judging)
	if c.Agent != "" {
		return r.judgeByAgent(ctx, j, c)
	}
	var zero float64
	req := gateway.Request{
		Messages:        []gateway.Message{{Role: gateway.RoleSystem, Content: c.System}, {Role: gateway.RoleUser, Content: c.User}},
		ResponseFormat:  &gateway.JSONSchema{Name: "verdict", Description: "the guardrail's verdict on the user's message", Schema: c.Verdict, Strict: c.Strict},
		MaxOutputTokens: c.MaxOutputTokens,
		Temperature:     &zero,
	}
	res, err := r.gw.Generate(ctx, c.Alias, req)
	if j != nil {
		j.usage = usageRecord(res.Usage)
	}
	return guard.ClassifierAnswer{Text: res.Text, CostUSD: res.CostUSD}, err
}

// judgeByAgent runs the agent judging a model guardrail on the value, in
// a run of its own beside j's, as a delegate runs: an isolated [system,
// user] context, not stored, with the run's id, user and thread, its path
// grown by the agent (so that the agent cannot re-enter the run's). It
// streams nothing to the run's caller, and its own guardrails' verdicts
// stay its own. Its calls are charged to the run's budgets (on ctx) and to
// the agent's; its cost is the answer's and its tokens j's, both added to
// the run's. Its answer, checked against its output schema by its run, is
// the verdict.
func (r *Runtime) judgeByAgent(ctx context.Context, j *judging, c guard.ClassifierCall) (guard.ClassifierAnswer, error) {
	d := r.agents[c.Agent]
	if j == nil || d == nil {
		return guard.ClassifierAnswer{}, fmt.Errorf("guardrail %q: agent %q judges only inside a run of this runtime", c.Guardrail, c.Agent)
	}
	st := j.st
	sub := &runState{
		id: st.id, sub: true, depth: st.depth + 1, agent: d,
		path: append(slices.Clone(st.path), d.spec.Name), alias: d.spec.Model,
		threadID: st.threadID, userID: st.userID, caller: st.caller, delegations: st.delegations, glog: &guardLog{},
	}
	sub.appendMsg(gateway.Message{Role: gateway.RoleUser, Content: c.User})
	var res RunResult
	err := r.drive(ctx, sub, &res)
	j.usage = sub.usage
	ans := guard.ClassifierAnswer{Text: res.Answer, CostUSD: sub.cost}
	switch {
	case err != nil:
		return ans, fmt.Errorf("agent %q: %w", d.spec.Name, err)
	case res.Status != StatusCompleted:
		return ans, fmt.Errorf("agent %q ended %s without a verdict", d.spec.Name, res.Status)
	}
	return ans, nil
}

// agentDigest is guard.Deps.AgentDigest: a digest of the agent as
// declared (its model, instructions, tools, output schema and the rest),
// so that a replay tells a recorded verdict of another agent apart.
func (r *Runtime) agentDigest(name string) (string, bool) {
	d := r.agents[name]
	if d == nil {
		return "", false
	}
	b, err := json.Marshal(d.spec)
	if err != nil {
		return "", false
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6]), true
}

// agentViews describes cfg's agents for the rules of guardrails judged by
// agents (guard.CheckAgents).
func agentViews(cfg Config) []guard.AgentView {
	effects := make(map[string]Effects, len(cfg.Tools))
	for _, t := range cfg.Tools {
		effects[t.Name] = cmp.Or(t.Effects, EffectsRead)
	}
	out := make([]guard.AgentView, len(cfg.Agents))
	for i, a := range cfg.Agents {
		v := guard.AgentView{Name: a.Name, Output: a.Output, Calls: slices.Concat(a.Handoffs, a.Delegates), Guardrails: slices.Concat(cfg.DefaultGuardrails, a.Guardrails)}
		for _, t := range a.Tools {
			if e, ok := effects[t]; ok && e != EffectsRead {
				v.Writes = append(v.Writes, t)
			}
		}
		out[i] = v
	}
	return out
}

// addUsage adds a hook's usage to the run's.
func (st *runState) addUsage(u UsageRecord) {
	if u == (UsageRecord{}) {
		return
	}
	st.glog.mu.Lock()
	st.usage = st.usage.add(u)
	st.glog.mu.Unlock()
}

// checkJudgeApproval refuses an agent judging a guardrail that reaches a
// tool needing approval: its run, like a delegated one, cannot pause.
func (r *Runtime) checkJudgeApproval(gs []guard.Guardrail) []error {
	var errs []error
	for _, g := range gs {
		if g.Kind != guard.KindModel || r.agents[g.Agent] == nil {
			continue
		}
		for _, n := range r.reachable(r.agents[g.Agent]) {
			for _, t := range r.agents[n].tools {
				if t.kind == kindPlain && r.policy.MayAsk(t.name) {
					errs = append(errs, fmt.Errorf("guardrail %q is judged by agent %q, which reaches agent %q with approval tool %q: %w", g.Name, g.Agent, n, t.name, &kind.DeferredError{Feature: "human approval inside a guardrail's judging run"}))
				}
			}
		}
	}
	return errs
}
