package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/kind"
)

// pause pauses the run at the pending step's call i, which waits for a
// person's decision.
//
//go:noinline
func (r *Runtime) pause(ctx context.Context, st *runState, span trace.Span, i int) (bool, *agentDef, error) {
	p := st.pending
	c := &p.Step.ToolCalls[i]
	if st.sub {
		return false, nil, &kind.DeferredError{Feature: "human decisions inside a delegated run"}
	}
	if p.Reason == "" {
		p.Reason = PauseApproval
	}
	p.Next = i
	if span.IsRecording() {
		span.AddEvent("aid.run.paused", trace.WithAttributes(attrToolName(c.Name), attrToolCallID(c.ID), attrPauseReason(string(p.Reason))))
	}
	r.logger.InfoContext(ctx, "run paused", "run", st.id, "agent", st.agent.spec.Name, "tool", c.Name, "reason", p.Reason)
	if st.events != nil {
		st.event(Event{Kind: EventPause, Step: p.Step.Number, Reason: p.Reason, Calls: p.Step.ToolCalls[i : i+1 : i+1]})
	}
	return true, nil, nil
}

// allowed reports whether the approval policy lets every one of the calls
// run whatever its arguments: tools it does not govern, and declared tools
// it always allows.
func (r *Runtime) allowed(d *agentDef, calls ...ToolCallRecord) bool {
	for _, c := range calls {
		if t := d.tools[c.Name]; t != nil && t.kind == kindPlain && !t.allowed {
			return false
		}
		if c.Policy != nil && c.Policy.Source == policy.SourceGuardrail {
			return false // a guardrail asks about it
		}
	}
	return true
}

// judge applies the approval policy to a call of a declared tool that has
// not been judged yet, records the decision on the call and in the span,
// and finds the grant (of the run, or of its thread in the store) that
// answers an ask. Calls the policy does not govern, calls a person decided
// before policies were recorded, and calls whose arguments the tool would
// refuse (runTool says why; nobody need be asked) are not judged.
func (r *Runtime) judge(ctx context.Context, st *runState, span trace.Span, c *ToolCallRecord) error {
	t := st.agent.tools[c.Name]
	if c.Policy != nil || c.Approval != nil || t == nil || t.kind != kindPlain || t.unruled {
		// A tool the policy has nothing to decide about is allowed by its
		// default, and its calls carry no record of it.
		return nil
	}
	args := callArguments(c)
	if !t.allowed && checkJSON(t.schema, t.shape, args) != nil {
		// A call a person might be asked about is judged only once its
		// arguments are known good; one the policy always allows is
		// judged whatever they are, and runTool refuses it.
		return nil
	}
	d := r.policy.Decide(policy.Input{Tool: c.Name, Arguments: json.RawMessage(args), Agent: st.agent.spec.Name, User: st.userID, Thread: st.threadID})
	rec := &PolicyRecord{Action: d.Action, Source: d.Source, Rule: d.Rule, Reason: d.Reason, At: time.Now().UTC()}
	if d.Action == policy.Ask {
		g, err := r.grantFor(ctx, st, c.Name)
		if err != nil {
			return err
		}
		rec.Grant = g
	}
	c.Policy = rec
	if span.IsRecording() {
		attrs := []attribute.KeyValue{attrToolName(c.Name), attrToolCallID(c.ID), AttrApprovalAction.String(string(d.Action)), AttrApprovalSource.String(string(d.Source))}
		if d.Rule > 0 {
			attrs = append(attrs, AttrApprovalRule.Int(d.Rule))
		}
		if d.Reason != "" {
			attrs = append(attrs, AttrApprovalReason.String(d.Reason))
		}
		if g := rec.Grant; g != nil {
			attrs = append(attrs, AttrApprovalGrant.String(string(g.Scope)), AttrApprovalBy.String(g.By))
		}
		span.AddEvent(EventApprovalDecision, trace.WithAttributes(attrs...))
	}
	return nil
}

// grantFor returns a grant of the tool: one given in the run, or one kept
// for the run's thread.
func (r *Runtime) grantFor(ctx context.Context, st *runState, tool string) (*Grant, error) {
	for _, g := range st.grants {
		if g.Tool == tool {
			return &g, nil
		}
	}
	if st.threadID == "" {
		return nil, nil
	}
	gs, err := r.store.Grants(ctx, st.threadID)
	if err != nil {
		return nil, fmt.Errorf("run %s: read the grants of thread %s: %w", st.id, st.threadID, err)
	}
	for _, g := range gs {
		if g.Tool == tool {
			return &g, nil
		}
	}
	return nil, nil
}

// denied reports whether the policy denied a call no person decided.
func denied(c *ToolCallRecord) bool {
	return c.Policy != nil && c.Policy.Action == policy.Deny && c.Approval == nil
}

// deny gives a denied call its observation: the rule and its reason. The
// call never runs, so it is not recorded in the store.
func (r *Runtime) deny(st *runState, step int, c *ToolCallRecord) {
	obs := "error: the approval policy denies this call"
	switch c.Policy.Source {
	case policy.SourceRule:
		obs += fmt.Sprintf(" (rule %d)", c.Policy.Rule)
	case policy.SourceTool:
		obs += " (the tool's approval)"
	case policy.SourceDefault:
		obs += " (the policy's default)"
	}
	if c.Policy.Reason != "" {
		obs += ": " + c.Policy.Reason
	}
	c.observe(obs, KindDenied)
	if st.events != nil {
		st.event(Event{Kind: EventToolResult, Step: step, Calls: []ToolCallRecord{*c}})
	}
}

// personDecided records a person's decision on a call in the span, as the
// call it decided runs or is rejected.
func personDecided(span trace.Span, c *ToolCallRecord) {
	if !span.IsRecording() {
		return
	}
	a := c.Approval
	action := "reject"
	if a.Approved {
		action = "approve"
	}
	attrs := []attribute.KeyValue{attrToolName(c.Name), attrToolCallID(c.ID), AttrApprovalAction.String(action), AttrApprovalSource.String("person")}
	if a.By != "" {
		attrs = append(attrs, AttrApprovalBy.String(a.By))
	}
	if a.Scope != "" {
		attrs = append(attrs, AttrApprovalGrant.String(string(a.Scope)))
	}
	span.AddEvent(EventApprovalDecision, trace.WithAttributes(attrs...))
}
