package upstream

import (
	"context"
	"errors"
	"io"
	"time"
)

// ErrAttemptTimeout is the cancellation cause of an attempt that ran out of
// its timeout; Classifier.Classify reports it as a retryable timeout.
var ErrAttemptTimeout = errors.New("attempt timed out")

// Attempt bounds one call's attempt (a request and its whole answer) by
// timeout, with ErrAttemptTimeout as the cause when it runs out.
func Attempt(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, timeout, ErrAttemptTimeout)
}

// TimedOut reports whether the attempt of actx ran out of its timeout.
func TimedOut(actx context.Context) bool {
	return errors.Is(context.Cause(actx), ErrAttemptTimeout)
}

// StreamAttempt bounds a streamed attempt: the wait for the answer, then
// the wait for each next event, each by the timeout, so that a hung
// upstream ends the stream with a retryable timeout rather than holding
// it. A stream holds it by value.
type StreamAttempt struct {
	// Ctx is the attempt's context, which the request is sent under.
	Ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer
	timeout time.Duration
}

// NewStreamAttempt starts a streamed attempt under ctx: its Ctx is
// cancelled with ErrAttemptTimeout when timeout passes before Next is
// called again (or, at first, before the answer arrives).
func NewStreamAttempt(ctx context.Context, timeout time.Duration) StreamAttempt {
	actx, cancel := context.WithCancelCause(ctx)
	return StreamAttempt{Ctx: actx, cancel: cancel, timer: time.AfterFunc(timeout, func() { cancel(ErrAttemptTimeout) }), timeout: timeout}
}

// Next restarts the wait, before the stream waits for its next event.
func (a *StreamAttempt) Next() { a.timer.Reset(a.timeout) }

// Stop stops the wait, when the stream ended or failed; the attempt's
// context stays as it is for the classification of its failure.
func (a *StreamAttempt) Stop() { a.timer.Stop() }

// Close stops the wait and cancels the attempt's context.
func (a *StreamAttempt) Close() {
	a.timer.Stop()
	a.cancel(nil)
}

// CloseStream closes a stream's events (the SDK's stream, c) and then the
// attempt: a stream's Close.
func (a *StreamAttempt) CloseStream(c io.Closer) error {
	a.timer.Stop()
	err := c.Close()
	a.cancel(nil)
	return err
}
