package gateway

import (
	"context"
	"errors"
	"io"
	"iter"
	"strings"
)

// Stream makes one streaming chat call on alias and returns its chunks: the
// pieces of the answer as they arrive, then one last chunk whose Result
// carries the whole answer, its usage and its cost. An error ends the
// sequence.
//
// Requests are checked, budgets reserved, retries made and fallbacks tried
// as in Generate, but only before the first piece reaches the caller: once
// text has been delivered, a failure ends the stream with the error. The
// ledger is settled exactly once, when the stream ends, fails or is
// abandoned (the caller breaks out of the loop, or its loop body panics);
// an abandoned or broken stream is charged the estimated input plus the
// output received so far, unless the provider reported usage. No goroutine
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
	c := call{op: "stream", kind: opChat, alias: alias}
	var capBuf [3]Capability
	caps := append(req.requiredCapabilities(capBuf[:0]), CapabilityStreaming)
	if err := g.newCall(ctx, &c, &req, o.fallbacks, &o, caps); err != nil {
		yield(Chunk{}, err)
		return
	}
	var (
		finished bool
		resp     Response
		cost     Amount
	)
	i, err := g.run(ctx, &c, &req, func(ctx context.Context, e *entry, n int, fellBack bool) (bool, error) {
		var st streamState
		var err error
		st, resp, cost, err = g.streamOnce(ctx, e, req, &c, n, fellBack, yield)
		finished = st == streamFinished
		return st != streamFailedEarly, err
	})
	switch {
	case err != nil:
		yield(Chunk{}, err)
	case finished:
		var res Result
		c.chain[i].result(&res, &resp, cost, c.attempts, i > 0)
		yield(Chunk{Result: &res}, nil)
	}
}

type streamState uint8

const (
	// streamFailedEarly: nothing reached the caller and nothing was
	// charged; the hold is still there and the call may be retried or
	// fall back.
	streamFailedEarly streamState = iota
	// streamFinished: the stream ended normally and was settled.
	streamFinished
	// streamFailedLate: the stream broke after delivering text; it was
	// settled and the error must reach the caller.
	streamFailedLate
	// streamAbandoned: the caller stopped, by breaking out of its loop or
	// by panicking in it; the stream was settled.
	streamAbandoned
)

// errStreamCut reports a stream that ended without the model saying it had
// finished, which is how a connection cut between events looks.
var errStreamCut = errors.New("stream ended before the model finished")

// streamOnce runs one traced streaming attempt, forwarding pieces to yield.
// Unless the attempt failed before delivering anything, it settles the
// call's hold with what the stream delivered, in a defer, so that the hold
// is settled even when the consumer's loop body panics inside yield.
func (g *Gateway) streamOnce(ctx context.Context, e *entry, req Request, c *call, attempt int, fellBack bool, yield func(Chunk, error) bool) (st streamState, resp Response, cost Amount, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var span attemptSpan
	sctx = g.startSpan(sctx, &span, e, opChat, attempt, fellBack, c.limits, &req)
	spec := e.pinned.Spec
	ds, err := e.provider.Stream(sctx, spec, req)
	if err != nil {
		err = asProviderError(ctx, e.providerKind, spec.ID, err)
		g.endSpanError(&span, err)
		return streamFailedEarly, Response{}, Amount{}, err
	}
	defer ds.Close()
	var acc streamAccumulator
	// st is streamFailedEarly until a piece is handed to yield, and
	// streamAbandoned from then on until the stream ends another way: a
	// panic in yield leaves it so, and is charged like a break.
	defer func() {
		if st == streamFailedEarly {
			if err != nil {
				g.endSpanError(&span, err)
			} else {
				span.End()
			}
			return
		}
		resp = acc.response(req)
		g.checkCached(ctx, e, &resp.Usage)
		cost = Price(spec.Cost, resp.Usage)
		g.settle(ctx, &c.hold, cost)
		if err != nil {
			g.endSpanError(&span, err)
		} else {
			g.endSpanOK(&span, resp.Model, resp.Usage, resp.FinishReason, cost)
		}
	}()
	for {
		d, err := ds.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			err = asProviderError(ctx, e.providerKind, spec.ID, err)
			if !acc.delivered {
				return streamFailedEarly, Response{}, Amount{}, err
			}
			return streamFailedLate, Response{}, Amount{}, err
		}
		acc.add(d)
		if d.Text == "" && len(d.ToolCalls) == 0 {
			continue
		}
		acc.delivered = true
		st = streamAbandoned
		if !yield(Chunk{Text: d.Text, ToolCalls: d.ToolCalls}, nil) {
			return streamAbandoned, Response{}, Amount{}, nil
		}
	}
	if acc.finish == "" {
		err := &ProviderError{Provider: e.providerKind, Model: spec.ID, Retryable: !acc.delivered, Err: errStreamCut}
		if !acc.delivered {
			return streamFailedEarly, Response{}, Amount{}, err
		}
		return streamFailedLate, Response{}, Amount{}, err
	}
	return streamFinished, Response{}, Amount{}, nil
}

// streamAccumulator builds the whole answer from a stream's deltas.
type streamAccumulator struct {
	text strings.Builder
	// calls are pointers so that growing the slice, when a call arrives
	// while an earlier one is still being written, moves no builder.
	calls     []*toolCallBuilder
	finish    FinishReason
	usage     *Usage
	model     string
	reasoning []byte
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
			a.calls = append(a.calls, &toolCallBuilder{})
		}
		b := a.calls[tc.Index]
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
	if d.Reasoning != nil {
		a.reasoning = d.Reasoning
	}
}

// response returns the answer so far, with the provider's usage or, when it
// reported none, an estimate of what was received.
func (a *streamAccumulator) response(req Request) Response {
	resp := Response{Text: a.text.String(), FinishReason: a.finish, Model: a.model, Reasoning: a.reasoning}
	for i := range a.calls {
		c := a.calls[i]
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
