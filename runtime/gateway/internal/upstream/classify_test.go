package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// TestClassify checks the skeleton every provider shares, case by case:
// the caller's cancellation passes through; an error answer's status,
// retryability and Retry-After come from the answer, its error and
// failure from the provider's reading; a broken bound is too large; the
// provider's SDK errors are its own; an attempt out of time is a
// retryable timeout; a failed connection is unreachable and retryable;
// anything else is the provider's redaction, not retried.
func TestClassify(t *testing.T) {
	c := &Classifier{
		Timeout: 3 * time.Second,
		Answer: func(status int, body []byte) (gateway.ProviderFailure, error) {
			return gateway.FailureOverloaded, errors.New("answer " + string(body))
		},
		SDK: func(pe *gateway.ProviderError, err error) bool {
			if err.Error() != "sdk event" {
				return false
			}
			pe.Failure = gateway.FailureErrorEvent
			pe.Err = errors.New("event")
			return true
		},
		Other: func(err error) error { return errors.New("redacted " + err.Error()) },
	}
	model := gateway.ModelSpec{ID: "m-1"}
	live := context.Background()
	timedOut, cancel := Attempt(live, time.Nanosecond)
	defer cancel()
	<-timedOut.Done()

	cancelled, stop := context.WithCancel(live)
	stop()
	if err := c.Classify(cancelled, cancelled, "p", model, errors.New("x"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("the caller's cancellation: %v, want it untouched", err)
	}
	tests := []struct {
		name string
		actx context.Context
		err  error
		x    *Exchange
		want gateway.ProviderError
		text string
	}{
		{"error answer", live, errors.New("status"), &Exchange{Status: 429, Header: http.Header{"Retry-After": {"7"}}, Body: []byte("slow down")},
			gateway.ProviderError{StatusCode: 429, Retryable: true, RetryAfter: 7 * time.Second, Failure: gateway.FailureOverloaded}, "answer slow down"},
		{"client error answer", live, errors.New("status"), &Exchange{Status: 400, Body: []byte("bad")},
			gateway.ProviderError{StatusCode: 400, Failure: gateway.FailureOverloaded}, "answer bad"},
		{"too long", live, errors.New("read"), &Exchange{TooLong: errors.New("answer is longer than 8 bytes")},
			gateway.ProviderError{Failure: gateway.FailureTooLarge}, "answer is longer than 8 bytes"},
		{"sdk", live, errors.New("sdk event"), &Exchange{}, gateway.ProviderError{Failure: gateway.FailureErrorEvent}, "event"},
		{"timeout", timedOut, context.DeadlineExceeded, nil, gateway.ProviderError{Timeout: true, Retryable: true}, "no answer within 3s"},
		{"unreachable", live, io.ErrUnexpectedEOF, nil, gateway.ProviderError{Failure: gateway.FailureUnreachable, Retryable: true}, "redacted unexpected EOF"},
		{"other", live, errors.New("odd"), nil, gateway.ProviderError{}, "redacted odd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Classify(live, tt.actx, "p", model, tt.err, tt.x)
			pe, ok := errors.AsType[*gateway.ProviderError](err)
			if !ok {
				t.Fatalf("%v, want a *gateway.ProviderError", err)
			}
			if pe.Provider != "p" || pe.Model != "m-1" || pe.StatusCode != tt.want.StatusCode || pe.Retryable != tt.want.Retryable ||
				pe.RetryAfter != tt.want.RetryAfter || pe.Failure != tt.want.Failure || pe.Timeout != tt.want.Timeout {
				t.Errorf("%+v, want %+v", *pe, tt.want)
			}
			if pe.Err == nil || pe.Err.Error() != tt.text {
				t.Errorf("cause %v, want %q", pe.Err, tt.text)
			}
		})
	}
}

// TestCaptureErrorAnswer checks that an error answer is recorded into the
// request's Exchange and handed on cut to MaxErrorBody bytes, that a
// success is handed on untouched, and that a request without an Exchange
// still gets its answer.
func TestCaptureErrorAnswer(t *testing.T) {
	long := strings.Repeat("e", MaxErrorBody+10)
	answer := func(status int, body string) func(*http.Request) (*http.Response, error) {
		return func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: status, Header: http.Header{"X": {"y"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
		}
	}
	ctx, x := WithExchange(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/", nil)
	res, err := CaptureErrorAnswer(req, answer(503, long))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	if x.Status != 503 || x.Header.Get("X") != "y" || len(x.Body) != MaxErrorBody || string(got) != string(x.Body) || res.ContentLength != MaxErrorBody {
		t.Errorf("exchange %d %v %d bytes, handed on %d bytes (length %d); want 503, the headers, %d bytes both", x.Status, x.Header, len(x.Body), len(got), res.ContentLength, MaxErrorBody)
	}
	ctx, x = WithExchange(context.Background())
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/", nil)
	res, _ = CaptureErrorAnswer(req, answer(200, long))
	if got, _ := io.ReadAll(res.Body); x.Status != 0 || len(got) != len(long) {
		t.Errorf("a success: exchange status %d, %d bytes handed on; want 0 and all %d", x.Status, len(got), len(long))
	}
	req, _ = http.NewRequest(http.MethodPost, "http://upstream.test/", nil)
	if res, err := CaptureErrorAnswer(req, answer(500, "boom")); err != nil || res.StatusCode != 500 {
		t.Errorf("without an exchange: %v, %v", res, err)
	}
}

// TestStreamAttempt checks that a streamed attempt times out when no event
// comes within the timeout, with ErrAttemptTimeout as the cause, and that
// Close cancels without a timeout.
func TestStreamAttempt(t *testing.T) {
	at := NewStreamAttempt(context.Background(), time.Millisecond)
	at.Next()
	<-at.Ctx.Done()
	if !TimedOut(at.Ctx) {
		t.Errorf("cause %v, want ErrAttemptTimeout", context.Cause(at.Ctx))
	}
	at.Close()

	at = NewStreamAttempt(context.Background(), time.Hour)
	at.Close()
	if at.Ctx.Err() == nil || TimedOut(at.Ctx) {
		t.Errorf("after Close: %v (cause %v), want cancelled, not timed out", at.Ctx.Err(), context.Cause(at.Ctx))
	}
	at = NewStreamAttempt(context.Background(), time.Hour)
	closed := errors.New("closed")
	if err := at.CloseStream(closer{closed}); err != closed || at.Ctx.Err() == nil {
		t.Errorf("CloseStream: %v, context %v; want the stream's error and a cancelled attempt", err, at.Ctx.Err())
	}
}

// closer is a stream whose Close returns err.
type closer struct{ err error }

func (c closer) Close() error { return c.err }
