package openaicompat

import (
	"context"
	"io"

	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/internal/upstream"
)

// sse is a streamed attempt's events, for the chat and the Responses
// streams alike: the attempt's per-event timeout, and how a stream that
// fails to open or ends early is classified.
type sse[T any] struct {
	p     *Provider
	model gateway.ModelSpec
	ctx   context.Context
	actx  context.Context
	at    upstream.StreamAttempt
	s     *ssestream.Stream[T]
}

// openSSE returns s, opened in the attempt at under actx, or, when it
// failed to open, the classified error (answer holds the error answer the
// middleware captured) with the stream and the attempt closed.
func openSSE[T any](p *Provider, ctx context.Context, model gateway.ModelSpec, at upstream.StreamAttempt, actx context.Context, answer *upstream.Exchange, s *ssestream.Stream[T]) (sse[T], error) {
	if err := s.Err(); err != nil {
		at.Stop()
		cerr := p.classify(ctx, actx, model, err, answer)
		_ = s.Close()
		at.Close()
		return sse[T]{}, cerr
	}
	return sse[T]{p: p, model: model, ctx: ctx, actx: actx, at: at, s: s}, nil
}

// next returns the stream's next event, io.EOF at its end, or the
// classified error that ended it (a transport error, or the attempt's
// timeout or cancellation).
func (s *sse[T]) next() (T, error) {
	s.at.Next()
	if !s.s.Next() {
		s.at.Stop()
		var zero T
		err := s.s.Err()
		if err == nil {
			err = context.Cause(s.actx)
		}
		if err != nil {
			return zero, s.p.classify(s.ctx, s.actx, s.model, err, nil)
		}
		return zero, io.EOF
	}
	return s.s.Current(), nil
}

// Close implements gateway.DeltaStream.
func (s *sse[T]) Close() error { return s.at.CloseStream(s.s) }
