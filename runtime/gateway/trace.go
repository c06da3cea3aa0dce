package gateway

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// The aid-specific span attributes. GenAI attributes follow the OpenTelemetry
// semantic conventions v1.41; everything the conventions do not cover lives
// under aid.*.
const (
	// AttrAlias is the alias the attempt called.
	AttrAlias = attribute.Key("aid.alias")
	// AttrAttempt is the attempt's index within the call, from zero,
	// counting retries and fallbacks.
	AttrAttempt = attribute.Key("aid.attempt")
	// AttrFellBack is true on attempts of a fallback alias.
	AttrFellBack = attribute.Key("aid.fell_back")
	// AttrCostUSD is the price charged for the attempt.
	AttrCostUSD = attribute.Key("aid.cost_usd")
	// AttrBudgetName lists the budgets the call is charged to.
	AttrBudgetName = attribute.Key("aid.budget.name")
	// AttrBudgetScope lists their scopes, in the same order.
	AttrBudgetScope = attribute.Key("aid.budget.scope")
	// AttrBudgetKey lists their scope keys, in the same order.
	AttrBudgetKey = attribute.Key("aid.budget.key")
)

type operation uint8

const (
	opChat operation = iota
	opEmbeddings
)

// startSpan opens the span of one attempt. With a no-op tracer it builds no
// attributes at all, so that tracing switched off costs one context value.
func (g *Gateway) startSpan(ctx context.Context, e *entry, op operation, attempt int, fellBack bool, limits []Limit, req *Request) (context.Context, trace.Span) {
	name, opAttr := e.chatSpan, semconv.GenAIOperationNameChat
	if op == opEmbeddings {
		name, opAttr = e.embedSpan, semconv.GenAIOperationNameEmbeddings
	}
	if !g.tracing {
		return g.tracer.Start(ctx, name)
	}
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs,
		opAttr,
		semconv.GenAIProviderNameKey.String(e.providerKind),
		semconv.GenAIRequestModel(e.pinned.Spec.ID),
		AttrAlias.String(e.pinned.Alias),
		AttrAttempt.Int(attempt),
		AttrFellBack.Bool(fellBack),
	)
	if req != nil {
		if req.MaxOutputTokens > 0 {
			attrs = append(attrs, semconv.GenAIRequestMaxTokens(req.MaxOutputTokens))
		}
		if req.Temperature != nil {
			attrs = append(attrs, semconv.GenAIRequestTemperature(*req.Temperature))
		}
		if req.TopP != nil {
			attrs = append(attrs, semconv.GenAIRequestTopP(*req.TopP))
		}
	}
	if len(limits) > 0 {
		names := make([]string, len(limits))
		scopes := make([]string, len(limits))
		keys := make([]string, len(limits))
		for i, l := range limits {
			names[i], scopes[i], keys[i] = l.Account.Budget, string(l.Account.Scope), l.Account.Key
		}
		attrs = append(attrs, AttrBudgetName.StringSlice(names), AttrBudgetScope.StringSlice(scopes), AttrBudgetKey.StringSlice(keys))
	}
	return g.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpanOK closes the span of an attempt that answered.
func (g *Gateway) endSpanOK(span trace.Span, model string, u Usage, finish FinishReason, cost Amount) {
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 5)
		if model != "" {
			attrs = append(attrs, semconv.GenAIResponseModel(model))
		}
		attrs = append(attrs,
			semconv.GenAIUsageInputTokens(int(u.InputTokens)),
			AttrCostUSD.Float64(cost.USD()),
		)
		if u.OutputTokens > 0 || finish != "" {
			attrs = append(attrs, semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
		}
		if finish != "" {
			attrs = append(attrs, semconv.GenAIResponseFinishReasons(string(finish)))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}

// endSpanError closes the span of a failed attempt. The error is recorded
// exactly once, as an exception event, with the status and error.type set.
func (g *Gateway) endSpanError(span trace.Span, err error) {
	if span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.SetAttributes(semconv.ErrorTypeKey.String(errorTypeOf(err)))
	}
	span.End()
}
