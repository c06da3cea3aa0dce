package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/aidgen/aid/runtime/gateway"
)

// delegate runs target in an isolated [system, user] context and makes its
// answer the call's observation. The caller's agent and path do not change.
func (r *Runtime) delegate(ctx context.Context, st *runState, target *agentDef, args json.RawMessage, c *ToolCallRecord) error {
	name := target.spec.Name
	switch {
	case slices.Contains(st.path, name):
		c.observe("error: "+(&ReentryError{Target: name, Path: st.path}).Error(), KindReentry)
		return nil
	case st.depth+1 > r.maxDepth:
		c.observe(fmt.Sprintf("error: cannot delegate to %q: delegations may nest at most %d deep", name, r.maxDepth), KindDelegationLimit)
		return nil
	case *st.delegations >= r.maxDeleg:
		c.observe(fmt.Sprintf("error: cannot delegate to %q: the run has used its %d delegations", name, r.maxDeleg), KindDelegationLimit)
		return nil
	}
	var in struct {
		Input string `json:"input"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		c.observe(fmt.Sprintf("error: invalid arguments for %s: %v", c.Name, err), KindInvalidArguments)
		return nil
	}
	*st.delegations++
	sub := &runState{
		id: st.id, sub: true, depth: st.depth + 1, agent: target,
		path: append(slices.Clone(st.path), name), alias: target.spec.Model,
		threadID: st.threadID, userID: st.userID, delegations: st.delegations, events: st.events, glog: st.glog,
	}
	if r.replay != nil {
		sub.replaySteps = r.replay.delegated(st, c)
	}
	if st.events != nil {
		st.event(Event{Kind: EventDelegate, Step: len(st.steps) + 1, Target: name})
	}
	sub.appendMsg(gateway.Message{Role: gateway.RoleUser, Content: in.Input})
	var res RunResult
	err := r.drive(ctx, sub, &res)
	st.usage = st.usage.add(sub.usage)
	st.cost += sub.cost
	c.Delegate = &DelegateRecord{Agent: res.Agent, Status: res.Status, Steps: res.Steps, Usage: sub.usage, CostUSD: sub.cost}
	switch {
	case err == nil:
		c.observe(res.Answer, "")
		return nil
	case res.Status == StatusBudgetExceeded || ctx.Err() != nil:
		return err
	default:
		c.observe(fmt.Sprintf("error: agent %q could not complete the task: %v", name, err), KindDelegateFailed)
		return nil
	}
}
