package gateway

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
	"time"
)

// Stream makes one streaming chat call on alias and returns its chunks: the
// pieces of the answer as they arrive, then one last chunk whose Result
// carries the whole answer, its usage and its cost. An error ends the
// sequence.
//
// Retries and fallbacks happen as in Generate, but only before the first
// piece reaches the caller: once text has been delivered, a failure ends the
// stream with the error. The ledger is settled exactly once, when the stream
// ends, fails or is abandoned (the caller breaks out of the loop); an
// abandoned or broken stream is charged the estimated input plus the output
// received so far, unless the provider reported usage. No goroutine
// outlives the loop. Each range over the sequence makes a new call.
func (g *Gateway) Stream(ctx context.Context, alias string, req Request, opts ...CallOption) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		g.stream(ctx, alias, req, opts, yield)
	}
}

func (g *Gateway) stream(ctx context.Context, alias string, req Request, opts []CallOption, yield func(Chunk, error) bool) {
	var o callOptions
	for _, opt := range opts {
		opt(&o)
	}
	var capBuf [3]Capability
	caps := append(req.requiredCapabilities(capBuf[:0]), CapabilityStreaming)
	chain, err := g.chain(alias, o.fallbacks, caps)
	if err != nil {
		yield(Chunk{}, err)
		return
	}
	limits, err := g.limits(ctx, &o)
	if err != nil {
		yield(Chunk{}, err)
		return
	}
	var attempts []Attempt
	var lastErr error
	for i, e := range chain {
		spec := e.pinned.Spec
		r := req
		r.MaxOutputTokens = maxOutput(spec, req)
		id, err := g.reserve(ctx, e, Price(spec.Cost, WorstCaseUsage(spec, r)), limits)
		if err != nil {
			yield(Chunk{}, g.callError("stream", alias, attempts, err))
			return
		}
		for retry := 0; ; retry++ {
			start := time.Now()
			st, resp, cost, err := g.streamOnce(ctx, e, r, limits, id, len(attempts), i > 0, yield)
			attempts = append(attempts, Attempt{Alias: e.pinned.Alias, Model: spec.ID, Retry: retry, Duration: time.Since(start), Err: err})
			switch st {
			case streamFinished:
				res := e.result(resp, cost, attempts, i > 0)
				yield(Chunk{Result: &res}, nil)
				return
			case streamAbandoned:
				return
			case streamFailedLate:
				yield(Chunk{}, g.callError("stream", alias, attempts, err))
				return
			}
			lastErr = err
			if !g.shouldRetry(ctx, e, retry, err) {
				break
			}
		}
		g.release(ctx, id)
		if ctx.Err() != nil || !IsFallbackEligible(lastErr) {
			break
		}
		g.logFallback(ctx, chain, i, lastErr)
	}
	yield(Chunk{}, g.callError("stream", alias, attempts, lastErr))
}

type streamState uint8

const (
	// streamFailedEarly: nothing reached the caller; the hold is still
	// there and the call may be retried or fall back.
	streamFailedEarly streamState = iota
	// streamFinished: the stream ended normally and was settled.
	streamFinished
	// streamFailedLate: the stream broke after delivering text; it was
	// settled and the error must reach the caller.
	streamFailedLate
	// streamAbandoned: the caller stopped; the stream was settled.
	streamAbandoned
)

// errStreamCut reports a stream that ended without the model saying it had
// finished, which is how a connection cut between events looks.
var errStreamCut = errors.New("stream ended before the model finished")

// streamOnce runs one traced streaming attempt, forwarding pieces to yield,
// and settles the reservation unless the attempt failed before delivering
// anything.
func (g *Gateway) streamOnce(ctx context.Context, e *entry, req Request, limits []Limit, id string, attempt int, fellBack bool, yield func(Chunk, error) bool) (streamState, Response, Amount, error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sctx, span := g.startSpan(sctx, e, opChat, attempt, fellBack, limits, &req)
	spec := e.pinned.Spec
	ds, err := e.provider.Stream(sctx, spec, req)
	if err != nil {
		err = asProviderError(ctx, e.providerKind, spec.ID, err)
		g.endSpanError(span, err)
		return streamFailedEarly, Response{}, Amount{}, err
	}
	defer ds.Close()
	var acc streamAccumulator
	// settle charges what the stream delivered so far, however it ended.
	settle := func() (Response, Amount) {
		resp := acc.response(req)
		cost := Price(spec.Cost, resp.Usage)
		g.settle(ctx, id, cost)
		return resp, cost
	}
	for {
		d, err := ds.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			err = asProviderError(ctx, e.providerKind, spec.ID, err)
			if !acc.delivered {
				g.endSpanError(span, err)
				return streamFailedEarly, Response{}, Amount{}, err
			}
			resp, cost := settle()
			g.endSpanError(span, err)
			return streamFailedLate, resp, cost, err
		}
		acc.add(d)
		if d.Text == "" && len(d.ToolCalls) == 0 {
			continue
		}
		acc.delivered = true
		if !yield(Chunk{Text: d.Text, ToolCalls: d.ToolCalls}, nil) {
			resp, cost := settle()
			g.endSpanOK(span, resp.Model, resp.Usage, resp.FinishReason, cost)
			return streamAbandoned, resp, cost, nil
		}
	}
	if acc.finish == "" {
		err := &ProviderError{Provider: e.providerKind, Model: spec.ID, Retryable: !acc.delivered, Err: errStreamCut}
		if !acc.delivered {
			g.endSpanError(span, err)
			return streamFailedEarly, Response{}, Amount{}, err
		}
		resp, cost := settle()
		g.endSpanError(span, err)
		return streamFailedLate, resp, cost, err
	}
	resp, cost := settle()
	g.endSpanOK(span, resp.Model, resp.Usage, resp.FinishReason, cost)
	return streamFinished, resp, cost, nil
}

// streamAccumulator builds the whole answer from a stream's deltas.
type streamAccumulator struct {
	text      strings.Builder
	calls     []toolCallBuilder
	finish    FinishReason
	usage     *Usage
	model     string
	delivered bool
}

type toolCallBuilder struct {
	id, name string
	args     strings.Builder
}

func (a *streamAccumulator) add(d Delta) {
	a.text.WriteString(d.Text)
	for _, tc := range d.ToolCalls {
		if tc.Index < 0 || tc.Index > 1024 {
			continue
		}
		for len(a.calls) <= tc.Index {
			a.calls = append(a.calls, toolCallBuilder{})
		}
		b := &a.calls[tc.Index]
		if tc.ID != "" {
			b.id = tc.ID
		}
		if tc.Name != "" {
			b.name = tc.Name
		}
		b.args.WriteString(tc.Arguments)
	}
	if d.FinishReason != "" {
		a.finish = d.FinishReason
	}
	if d.Usage != nil {
		u := *d.Usage
		a.usage = &u
	}
	if d.Model != "" {
		a.model = d.Model
	}
}

// response returns the answer so far, with the provider's usage or, when it
// reported none, an estimate of what was received.
func (a *streamAccumulator) response(req Request) Response {
	resp := Response{Text: a.text.String(), FinishReason: a.finish, Model: a.model}
	for i := range a.calls {
		c := &a.calls[i]
		if c.id == "" && c.name == "" && c.args.Len() == 0 {
			continue
		}
		resp.ToolCalls = append(resp.ToolCalls, ToolCall{ID: c.id, Name: c.name, Arguments: []byte(c.args.String())})
	}
	if a.usage != nil && *a.usage != (Usage{}) {
		resp.Usage = *a.usage
	} else {
		resp.Usage = estimateActual(req, resp.Text, resp.ToolCalls)
	}
	return resp
}

// Collect drains a stream from Stream and returns its final Result, for
// callers that want streaming's transport but one answer.
func Collect(seq iter.Seq2[Chunk, error]) (Result, error) {
	for c, err := range seq {
		if err != nil {
			return Result{}, err
		}
		if c.Result != nil {
			return *c.Result, nil
		}
	}
	return Result{}, errors.New("collect: stream ended without a result")
}
