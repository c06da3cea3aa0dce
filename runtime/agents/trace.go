package agents

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The aid-specific attributes of agent spans. GenAI attributes follow the
// OpenTelemetry semantic conventions v1.41, like the gateway's.
const (
	// AttrRunID is the run's id.
	AttrRunID = attribute.Key("aid.run.id")
	// AttrRunStatus is how the agent's part of the run ended.
	AttrRunStatus = attribute.Key("aid.run.status")
	// AttrTransferredTo names the agent an invoke_agent span handed the
	// conversation to; such a span has no run status, the target's does.
	AttrTransferredTo = attribute.Key("aid.agent.transferred_to")
	// AttrPath is the run's path when the agent started.
	AttrPath = attribute.Key("aid.agent.path")
	// AttrPauseReason says why a run paused, on the aid.run.paused event.
	AttrPauseReason = attribute.Key("aid.pause.reason")
	// AttrToolErrorKind classifies a tool call that failed.
	AttrToolErrorKind = attribute.Key("aid.tool.error_kind")
	// AttrApprovalAction is what an approval decision decided: allow, deny
	// or ask for the policy, approve or reject for a person.
	AttrApprovalAction = attribute.Key("aid.approval.action")
	// AttrApprovalSource says who decided: rule, tool (its approval
	// shorthand), default, or person.
	AttrApprovalSource = attribute.Key("aid.approval.source")
	// AttrApprovalRule is the number of the deciding rule, from 1.
	AttrApprovalRule = attribute.Key("aid.approval.rule")
	// AttrApprovalReason is the deciding rule's reason.
	AttrApprovalReason = attribute.Key("aid.approval.reason")
	// AttrApprovalBy names who decided or granted.
	AttrApprovalBy = attribute.Key("aid.approval.by")
	// AttrApprovalGrant is the scope of a person's approval (call, run,
	// thread), or of the grant that answered an ask.
	AttrApprovalGrant = attribute.Key("aid.approval.scope")
	// AttrStopReason says why a run stopped early (a timeout, a
	// cancellation), on the aid.run.stopped event.
	AttrStopReason = attribute.Key("aid.run.stop_reason")
)

// EventApprovalDecision is the span event of every approval decision on a
// call: the policy's (with the rule or the grant that answered it) and a
// person's.
const EventApprovalDecision = "aid.approval.decision"

// EventGuardrailVerdict is the span event of every verdict of a hook or
// guardrail that did something (VerdictRecord), on the agent's span, or
// the tool's at the tool points.
const EventGuardrailVerdict = "aid.guardrail.verdict"

// The attributes of EventGuardrailVerdict.
const (
	// AttrGuardrail names the guardrail or hook.
	AttrGuardrail = attribute.Key("aid.guardrail.name")
	// AttrGuardrailPoint is where it judged.
	AttrGuardrailPoint = attribute.Key("aid.guardrail.point")
	// AttrGuardrailAction is what it decided: block, redact, ask or log.
	AttrGuardrailAction = attribute.Key("aid.guardrail.action")
	// AttrGuardrailMatched says what tripped it.
	AttrGuardrailMatched = attribute.Key("aid.guardrail.matched")
	// AttrGuardrailCost is what judging cost, in USD.
	AttrGuardrailCost = attribute.Key("aid.guardrail.cost_usd")
)

func attrToolName(n string) attribute.KeyValue   { return semconv.GenAIToolName(n) }
func attrToolCallID(n string) attribute.KeyValue { return semconv.GenAIToolCallID(n) }
func attrPauseReason(r string) attribute.KeyValue {
	return AttrPauseReason.String(r)
}

// startAgentSpan opens the invoke_agent span of the current agent. The
// gateway's chat spans are its children, because the loop passes the
// returned context to Generate.
func (r *Runtime) startAgentSpan(ctx context.Context, st *runState) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, noop.Span{}
	}
	name := "invoke_agent " + st.agent.spec.Name
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(st.agent.spec.Name),
		AttrRunID.String(st.id),
		AttrPath.StringSlice(st.path),
	}
	if st.agent.spec.Description != "" {
		attrs = append(attrs, semconv.GenAIAgentDescription(st.agent.spec.Description))
	}
	if st.threadID != "" {
		attrs = append(attrs, semconv.GenAIConversationID(st.threadID))
	}
	return r.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endAgentSpan closes an invoke_agent span with the run's status.
func endAgentSpan(span trace.Span, status Status, err error) {
	if span.IsRecording() {
		span.SetAttributes(AttrRunStatus.String(string(status)))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// startToolSpan opens the execute_tool span of one call.
func (r *Runtime) startToolSpan(ctx context.Context, st *runState, c *ToolCallRecord) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, noop.Span{}
	}
	name := "execute_tool " + c.Name
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(c.Name),
		semconv.GenAIToolCallID(c.ID),
		semconv.GenAIToolType("function"),
		semconv.GenAIAgentName(st.agent.spec.Name),
		AttrRunID.String(st.id),
	}
	if t := st.agent.tools[c.Name]; t != nil && t.kind == kindSearch {
		// A search is the GenAI conventions' datastore tool, over the
		// retriever as data source; search sets the documents it found.
		attrs[3] = semconv.GenAIToolType("datastore")
		attrs = append(attrs, semconv.GenAIDataSourceID(t.source))
	}
	return r.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endSpanToolError marks a tool span whose call produced an error
// observation.
func endSpanToolError(span trace.Span, c *ToolCallRecord) {
	if span.IsRecording() {
		span.SetAttributes(AttrToolErrorKind.String(string(c.ErrorKind)), semconv.ErrorTypeKey.String(string(c.ErrorKind)))
		span.SetStatus(codes.Error, c.Observation)
	}
}
