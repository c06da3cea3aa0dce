package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aidgen/aid/runtime/gateway"
)

// buildRequest builds the model call of the current step: the agent's
// instructions, stored memory as one extra system message, and the thread
// trimmed to its budget. It is written to req, for the caller's frame
// holds it (see drive). request calls it, and compacts the thread.
func (r *Runtime) buildRequest(ctx context.Context, st *runState, req *gateway.Request) error {
	d := st.agent
	if d.spec.Memory == nil {
		// No trimming and no injection: the request is the system message
		// and the thread, kept up to date by appendMsg rather than copied at
		// every step. The provider gets a clipped slice, so later appends
		// never reach what it holds.
		if st.reqAgent != d {
			// Room for the system message and the thread's, as long as
			// runs of this agent grow it (newRun), at least a step's
			// answer and observation; appendMsg grows it when a step
			// needs more.
			st.req = make([]gateway.Message, 0, max(cap(st.msgs), len(st.msgs)+2)+1)
			if d.spec.Instructions != "" {
				st.req = append(st.req, gateway.Message{Role: gateway.RoleSystem, Content: d.spec.Instructions})
			}
			st.req = append(st.req, st.msgs...)
			st.reqAgent = d
		}
		*req = gateway.Request{Messages: slices.Clip(st.req), Tools: d.defs, ResponseFormat: d.format, Temperature: d.spec.Temperature, Cache: promptCache(d, st)}
		st.applyClient(req)
		return nil
	}
	thread := trimThread(st.msgs, d.spec.Memory.ThreadTokenBudget, st.turn)
	msgs := make([]gateway.Message, 0, len(thread)+2)
	if d.spec.Instructions != "" {
		msgs = append(msgs, gateway.Message{Role: gateway.RoleSystem, Content: d.spec.Instructions})
	}
	st.reqMemory = false
	switch {
	case r.replay != nil && (d.userMem != nil || d.globalMem != nil):
		// The memory the recorded step was given, not the store's today.
		if m, ok := r.replay.memory(st); ok {
			msgs = append(msgs, m)
			st.reqMemory = true
		}
	case d.userMem != nil || d.globalMem != nil:
		var user, global []MemoryEntry
		var err error
		if d.userMem != nil {
			if st.userID == "" {
				return fmt.Errorf("run %s: %w", st.id, &UserIDRequiredError{Agent: d.spec.Name})
			}
			if user, err = d.userMem.Memories(ctx, MemoryUser, st.userID); err != nil {
				return fmt.Errorf("run %s: read user memory: %w", st.id, err)
			}
		}
		if d.globalMem != nil {
			// The run's tenant's: another tenant's global memory does not
			// exist for it.
			if global, err = d.globalMem.Memories(ctx, MemoryGlobal, st.caller.Tenant); err != nil {
				return fmt.Errorf("run %s: read global memory: %w", st.id, err)
			}
		}
		if m, ok := renderMemory(user, global, d.userBudget, d.globalBudget); ok {
			msgs = append(msgs, m)
			st.reqMemory = true
		}
	}
	msgs = append(msgs, thread...)
	*req = gateway.Request{Messages: msgs, Tools: d.defs, ResponseFormat: d.format, Temperature: d.spec.Temperature, Cache: promptCache(d, st)}
	st.applyClient(req)
	return nil
}

// callModel makes the step's model call. On a budget breach an agent that
// degrades steps exactly one rung down its ladder, once per agent in a run,
// and tries once more; it returns the rung it stepped down from. The
// answer is written to res, which the caller holds, rather than returned,
// so that it is not copied through the frames the run waits with (see
// drive).
func (r *Runtime) callModel(ctx context.Context, st *runState, req *gateway.Request, res *gateway.Result) (from string, err error) {
	ctx = gateway.WithCallInfo(ctx, gateway.CallInfo{Agent: st.agent.spec.Name, Step: st.agentSteps + 1, RunID: st.id})
	if err = r.generate(ctx, st, req, res, callOptions(ctx, st)); err == nil {
		return "", nil
	}
	from, ok := r.degrade(ctx, st, err)
	if !ok {
		return "", err
	}
	return from, r.generate(ctx, st, req, res, callOptions(ctx, st))
}

// callOptions are the options of a model call on st.alias: the budgets it
// is charged to and its fallbacks. They are built per call: the fallbacks
// leave out the alias called, which differs after a step down the ladder.
// It is not inlined, to keep its temporaries out of callModel's frame,
// which is on the stack while the run waits on the model (see drive).
//
//go:noinline
func callOptions(ctx context.Context, st *runState) []gateway.CallOption {
	d := st.agent
	fb := fallbacksFor(d.spec.Fallbacks, st.alias)
	if d.budget == "" && len(fb) == 0 {
		return nil
	}
	var opts []gateway.CallOption
	if d.budget != "" {
		opts = append(opts, gateway.WithBudget(d.budget, budgetKey(st)))
		// WithBudget replaces the budgets on the context; those belong to
		// whoever started the run (an eval, a service request) and cap the
		// agent's calls too, so they are named again beside its own.
		for _, ref := range gateway.BudgetsFromContext(ctx) {
			opts = append(opts, gateway.WithBudget(ref.Name, ref.Key))
		}
	}
	if len(fb) > 0 {
		opts = append(opts, gateway.WithFallbacks(fb...))
	}
	return opts
}

// degrade steps st one rung down its agent's ladder after a call failed
// with err, when the agent degrades on a budget breach, err is one, and
// the agent has not stepped down in this run yet. It returns the rung it
// stepped down from.
//
//go:noinline
func (r *Runtime) degrade(ctx context.Context, st *runState, err error) (string, bool) {
	d := st.agent
	if _, ok := errors.AsType[*gateway.BudgetExceededError](err); !ok || d.spec.OnBudgetExhausted != BudgetDegrade || st.degraded {
		return "", false
	}
	i := slices.Index(d.spec.Ladder, st.alias)
	if i < 0 || i == len(d.spec.Ladder)-1 {
		return "", false
	}
	from := st.alias
	st.alias, st.degraded = d.spec.Ladder[i+1], true
	r.logger.InfoContext(ctx, "degrading after budget breach", "run", st.id, "agent", d.spec.Name, "from", from, "to", st.alias)
	return from, true
}

// fallbacksFor returns the agent's fallbacks for a call on alias, without
// alias itself: an agent that degraded onto a rung that is also one of its
// fallbacks would otherwise try the failing alias twice.
func fallbacksFor(fallbacks []string, alias string) []string {
	if !slices.Contains(fallbacks, alias) {
		return fallbacks
	}
	return slices.DeleteFunc(slices.Clone(fallbacks), func(f string) bool { return f == alias })
}
