package gateway

import (
	"context"
	"sync"

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

// spanStarts are what every span of an alias starts with, built once in New
// rather than on every attempt: the client kind as the start option, and
// the attributes fixed per alias, which the span gets when it ends, together
// with the rest, in one SetAttributes call. Setting them once keeps a
// sampled span to one copy of one list; the price is that a sampler sees
// only the span's name ("chat <model id>") and kind, not its attributes.
type spanStarts struct {
	kind             []trace.SpanStartOption
	chat, embeddings [4]attribute.KeyValue
}

func newSpanStarts(alias, model, provider string) spanStarts {
	fixed := func(op attribute.KeyValue) [4]attribute.KeyValue {
		return [4]attribute.KeyValue{op, semconv.GenAIProviderNameKey.String(provider), semconv.GenAIRequestModel(model), AttrAlias.String(alias)}
	}
	return spanStarts{
		kind:       []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)},
		chat:       fixed(semconv.GenAIOperationNameChat),
		embeddings: fixed(semconv.GenAIOperationNameEmbeddings),
	}
}

// attemptSpan is the span of one attempt and what it will report when it
// ends. The attributes that vary per attempt are set once, when it ends, and
// only if the span is recording, so that a span nobody samples costs no
// attribute building.
type attemptSpan struct {
	trace.Span
	fixed    *[4]attribute.KeyValue
	attempt  int
	fellBack bool
	limits   []Limit
	// The request's sampling settings; zero for embeddings. They are
	// copied rather than pointed to, so that the request stays on the
	// caller's stack.
	maxTokens         int
	temperature, topP *float64
}

// startSpan opens the span of one attempt as s. With a no-op tracer it
// passes no options at all, so that tracing switched off costs one context
// value. s is the caller's, rather than a result, to keep a copy of it out
// of the frame a chat call waits with.
func (g *Gateway) startSpan(ctx context.Context, s *attemptSpan, e *entry, op operation, attempt int, fellBack bool, limits []Limit, req *Request) context.Context {
	name, fixed := e.chatSpan, &e.starts.chat
	if op == opEmbeddings {
		name, fixed = e.embedSpan, &e.starts.embeddings
	}
	if !g.tracing {
		ctx, span := g.tracer.Start(ctx, name)
		*s = attemptSpan{Span: span}
		return ctx
	}
	ctx, span := g.tracer.Start(ctx, name, e.starts.kind...)
	*s = attemptSpan{Span: span, fixed: fixed, attempt: attempt, fellBack: fellBack, limits: limits}
	if req != nil {
		s.maxTokens, s.temperature, s.topP = req.MaxOutputTokens, req.Temperature, req.TopP
	}
	return ctx
}

// appendAttempt appends the attributes of the attempt as it started.
func (g *Gateway) appendAttempt(attrs []attribute.KeyValue, s *attemptSpan) []attribute.KeyValue {
	attrs = append(attrs, s.fixed[:]...)
	attrs = append(attrs, AttrAttempt.Int(s.attempt), AttrFellBack.Bool(s.fellBack))
	if s.maxTokens > 0 {
		attrs = append(attrs, semconv.GenAIRequestMaxTokens(s.maxTokens))
	}
	if s.temperature != nil {
		attrs = append(attrs, semconv.GenAIRequestTemperature(*s.temperature))
	}
	if s.topP != nil {
		attrs = append(attrs, semconv.GenAIRequestTopP(*s.topP))
	}
	switch len(s.limits) {
	case 0:
	case 1:
		// The common case: the budget's name and scope are built once in
		// New; only the key is the call's own.
		l := s.limits[0]
		b := g.budgets[l.Account.Budget]
		attrs = append(attrs, b.nameAttr, b.scopeAttr, AttrBudgetKey.StringSlice([]string{l.Account.Key}))
	default:
		names := make([]string, len(s.limits))
		scopes := make([]string, len(s.limits))
		keys := make([]string, len(s.limits))
		for i, l := range s.limits {
			names[i], scopes[i], keys[i] = l.Account.Budget, string(l.Account.Scope), l.Account.Key
		}
		attrs = append(attrs, AttrBudgetName.StringSlice(names), AttrBudgetScope.StringSlice(scopes), AttrBudgetKey.StringSlice(keys))
	}
	return attrs
}

// maxSpanAttrs bounds the attributes an attempt sets when it ends, so that
// one buffer holds them: the 4 fixed per alias, the attempt and whether it
// fell back, 3 sampling settings, 3 budget lists, the response model, the
// input, cached input and output tokens, the cost and the finish reason.
const maxSpanAttrs = 18

// attrBuffers recycles the attribute lists handed to SetAttributes. A span
// copies what it is given and keeps no reference to the list (the SDK
// appends the values to its own; OpenTelemetry's generated semconv helpers
// pool the lists they pass for the same reason), so that a sampled span
// costs no list of its own.
type attrBuffers struct{ pool sync.Pool }

func (b *attrBuffers) get() *[]attribute.KeyValue {
	if p, ok := b.pool.Get().(*[]attribute.KeyValue); ok {
		return p
	}
	buf := make([]attribute.KeyValue, 0, maxSpanAttrs)
	return &buf
}

// put returns a buffer once the span has copied attrs out of it, dropping
// its references so that the pool pins no strings.
func (b *attrBuffers) put(p *[]attribute.KeyValue, attrs []attribute.KeyValue) {
	clear(attrs)
	*p = attrs[:0]
	b.pool.Put(p)
}

// endSpanOK closes the span of an attempt that answered.
func (g *Gateway) endSpanOK(s *attemptSpan, model string, u Usage, finish FinishReason, cost Amount) {
	if s.IsRecording() {
		buf := g.attrs.get()
		attrs := g.appendAttempt(*buf, s)
		if model != "" {
			attrs = append(attrs, semconv.GenAIResponseModel(model))
		}
		attrs = append(attrs,
			semconv.GenAIUsageInputTokens(int(u.InputTokens)),
			AttrCostUSD.Float64(cost.USD()),
		)
		if u.CachedInputTokens > 0 {
			attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(int(u.CachedInputTokens)))
		}
		if w := u.CacheWriteInputTokens(); w > 0 {
			attrs = append(attrs, semconv.GenAIUsageCacheCreationInputTokens(int(w)))
		}
		if u.OutputTokens > 0 || finish != "" {
			attrs = append(attrs, semconv.GenAIUsageOutputTokens(int(u.OutputTokens)))
		}
		if finish != "" {
			attrs = append(attrs, finishAttr(finish))
		}
		s.SetAttributes(attrs...)
		g.attrs.put(buf, attrs)
	}
	s.End()
}

// The finish-reason attributes of the known reasons, built once: they are
// immutable values.
var (
	finishStopAttr          = semconv.GenAIResponseFinishReasons(string(FinishStop))
	finishLengthAttr        = semconv.GenAIResponseFinishReasons(string(FinishLength))
	finishToolCallsAttr     = semconv.GenAIResponseFinishReasons(string(FinishToolCalls))
	finishContentFilterAttr = semconv.GenAIResponseFinishReasons(string(FinishContentFilter))
)

func finishAttr(f FinishReason) attribute.KeyValue {
	switch f {
	case FinishStop:
		return finishStopAttr
	case FinishLength:
		return finishLengthAttr
	case FinishToolCalls:
		return finishToolCallsAttr
	case FinishContentFilter:
		return finishContentFilterAttr
	}
	return semconv.GenAIResponseFinishReasons(string(f))
}

// endSpanError closes the span of a failed attempt. The error is recorded
// exactly once, as an exception event, with the status and error.type set.
func (g *Gateway) endSpanError(s *attemptSpan, err error) {
	if s.IsRecording() {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
		buf := g.attrs.get()
		attrs := append(g.appendAttempt(*buf, s), semconv.ErrorTypeKey.String(errorTypeOf(err)))
		s.SetAttributes(attrs...)
		g.attrs.put(buf, attrs)
	}
	s.End()
}
