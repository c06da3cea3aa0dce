package upstream

import (
	"context"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// Classifier turns a failed call of a provider into the gateway's terms,
// with what every provider shares: the caller's own cancellation passes
// through untouched; an error answer's status says whether to retry and
// when (Retry-After); an attempt that ran out of its timeout is a
// retryable timeout; a connection that failed is unreachable and
// retryable. What is the provider's own (how it reads an error answer,
// what its SDK's errors mean, how it redacts) it gives as functions.
// Everything else becomes a *gateway.ProviderError whose cause holds only
// what those functions made: never the SDK's error, which holds the
// request, whose headers carry the key.
type Classifier struct {
	// Timeout is an attempt's timeout, which a timeout's message names.
	Timeout time.Duration
	// Answer reads an error answer: the failure it is (empty for none the
	// gateway names) and the error the ProviderError holds, redacted.
	Answer func(status int, body []byte) (gateway.ProviderFailure, error)
	// SDK, when set, classifies the errors of the provider's SDK that are
	// none of the above (an error event in a stream that opened), filling
	// pe; it reports whether it did.
	SDK func(pe *gateway.ProviderError, err error) bool
	// Other redacts the error of a failure nothing above explains.
	Other func(err error) error
}

// Classify classifies err, the failure of an attempt under actx of a call
// under ctx to model of the provider named provider; x is what the client
// saw of the answer (nil when nothing was captured).
func (c *Classifier) Classify(ctx, actx context.Context, provider string, model gateway.ModelSpec, err error, x *Exchange) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	pe := &gateway.ProviderError{Provider: provider, Model: model.ID}
	switch {
	case x != nil && x.Status != 0:
		pe.StatusCode = x.Status
		pe.Retryable = RetryableStatus(x.Status)
		pe.RetryAfter = gateway.ParseRetryAfter(x.Header, time.Now())
		pe.Failure, pe.Err = c.Answer(x.Status, x.Body)
	case x != nil && x.TooLong != nil:
		pe.Failure, pe.Err = gateway.FailureTooLarge, x.TooLong
	case c.SDK != nil && c.SDK(pe, err):
	case TimedOut(actx):
		pe.Timeout, pe.Retryable = true, true
		pe.Err = &timeoutError{c.Timeout}
	default:
		pe.Failure = Failure(err)
		pe.Retryable = pe.Failure == gateway.FailureUnreachable
		pe.Err = c.Other(err)
	}
	return pe
}

// timeoutError is the cause of an attempt that ran out of its timeout.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return "no answer within " + e.d.String() }
