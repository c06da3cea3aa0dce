package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// checkpoint snapshots the state. Saved slices are capped, so later appends
// never write into what a store holds.
func (st *runState) checkpoint() Checkpoint {
	cp := Checkpoint{
		Version: CheckpointVersion, RunID: st.id, Agent: st.agent.spec.Name,
		Path: slices.Clip(st.path), Alias: st.alias, Degraded: st.degraded,
		ThreadID: st.threadID, UserID: st.userID, Key: st.caller.Key, Tenant: st.caller.Tenant,
		Messages: slices.Clip(st.saved), Turn: st.turn, Steps: slices.Clip(st.steps),
		AgentSteps: st.agentSteps, StepLimit: st.stepLimit, Delegations: *st.delegations, Repaired: st.repaired,
		Usage: st.usage, CostUSD: st.cost, Continuations: slices.Clip(st.continuations), Cancel: st.cancel,
		Grants: slices.Clip(st.grants), App: st.app, AppVersion: st.ver, InputChecked: st.inputChecked,
	}
	if st.client != nil {
		c := st.client.req
		cp.Client = &c
	}
	if st.glog != nil {
		st.glog.mu.Lock()
		cp.Verdicts = slices.Clone(st.glog.verdicts)
		st.glog.mu.Unlock()
	}
	if st.pending != nil {
		p := *st.pending
		p.Step.ToolCalls = slices.Clone(p.Step.ToolCalls)
		cp.Pending = &p
	}
	return cp
}

// callKey is a call's key in the store: step number and position.
func callKey(step, i int) string {
	return strconv.Itoa(step) + "." + strconv.Itoa(i)
}

// recordCall records call i of step before it runs. A call recorded
// earlier (recovery of an interrupted step) is not recorded again; one that
// has a result there already is done, and is not run again.
//
//go:noinline
func (r *Runtime) recordCall(ctx context.Context, st *runState, t *tool, step, i int, c *ToolCallRecord) (done bool, err error) {
	err = r.store.RecordCall(ctx, callRecord(st, t, step, i, c))
	if _, exists := errors.AsType[*CallExistsError](err); exists {
		key := callKey(step, i)
		prev, lerr := r.store.Call(ctx, st.id, key)
		if lerr != nil {
			return false, fmt.Errorf("run %s: read tool call %s: %w", st.id, key, lerr)
		}
		if prev.Result != nil {
			c.observe(prev.Result.Observation, prev.Result.ErrorKind)
			return true, nil
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("run %s: record tool call %s: %w", st.id, callKey(step, i), err)
	}
	return false, nil
}

// callRecord is the record of call i of step as the store keeps it.
func callRecord(st *runState, t *tool, step, i int, c *ToolCallRecord) CallRecord {
	rec := CallRecord{RunID: st.id, Key: callKey(step, i), CallID: c.ID, Tool: c.Name, Effects: EffectsRead, Arguments: c.Arguments}
	if t != nil {
		rec.Effects = t.effects
	}
	return rec
}

// saveStep checkpoints the run with its new pending step. With a StepStore
// the calls that will run at once and may run again after a crash (all of
// a parallel step's, or a sequential step's first) are recorded in the
// same write, saving a round trip each: recovery treats such a call alike
// recorded or not, so recording it a moment early changes nothing.
func (r *Runtime) saveStep(ctx context.Context, st *runState) error {
	ss, ok := r.store.(StepStore)
	if !ok || st.sub {
		return r.save(ctx, st, StatusRunning)
	}
	p := st.pending
	calls := p.Step.ToolCalls
	n := 0
	// Only calls the approval policy lets through whatever their arguments
	// run at once: one it may deny never runs, one it may ask about waits.
	switch {
	case len(calls) > 1 && r.maxParallel > 1 && readOnly(st.agent, calls) && r.allowed(st.agent, calls...):
		n = len(calls)
	case len(calls) > 0 && r.rerunnable(st.agent, calls[0].Name) && r.allowed(st.agent, calls[0]):
		n = 1
	}
	if n == 0 {
		return r.save(ctx, st, StatusRunning)
	}
	return r.saveStepCalls(ctx, st, ss, n)
}

// saveStepCalls is saveStep with the step's first n calls recorded in the
// same write. It is not inlined, to keep its records out of the frame that
// a run's later model calls wait under when it does not record any.
//
//go:noinline
func (r *Runtime) saveStepCalls(ctx context.Context, st *runState, ss StepStore, n int) error {
	p := st.pending
	calls := p.Step.ToolCalls
	recs := make([]CallRecord, n)
	for i := range n {
		recs[i] = callRecord(st, st.agent.tools[calls[i].Name], p.Step.Number, i, &calls[i])
	}
	rec, err := ss.UpdateRunRecordCalls(context.WithoutCancel(ctx), RunRecord{RunID: st.id, Agent: st.agent.spec.Name, Status: StatusRunning, Version: st.version, Checkpoint: st.checkpoint()}, recs)
	if err != nil {
		return fmt.Errorf("run %s: save %s run: %w", st.id, StatusRunning, err)
	}
	st.version, st.prerecorded = rec.Version, n
	return nil
}

// save writes the run's record with status.
func (r *Runtime) save(ctx context.Context, st *runState, status Status) error {
	if st.sub {
		return nil
	}
	rec, err := r.store.UpdateRun(context.WithoutCancel(ctx), RunRecord{RunID: st.id, Agent: st.agent.spec.Name, Status: status, Version: st.version, Checkpoint: st.checkpoint()})
	if err != nil {
		return fmt.Errorf("run %s: save %s run: %w", st.id, status, err)
	}
	st.version = rec.Version
	return nil
}
