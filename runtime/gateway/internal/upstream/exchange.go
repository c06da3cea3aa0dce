package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// MaxErrorBody bounds how much of an error answer is read for the error.
const MaxErrorBody = 64 << 10

// Exchange is what a provider's client saw of one request's answer, for
// its classification: the status, headers and start of the body of an
// error answer, which an SDK keeps only inside an error that also holds
// the request (whose headers carry the key), or loses when it cannot
// decode the body; and whether the answer broke a bound the adapter sets.
type Exchange struct {
	// Status is the error answer's HTTP status; zero for none.
	Status int
	// Header is the error answer's headers (Retry-After).
	Header http.Header
	// Body is the first MaxErrorBody bytes of the error answer.
	Body []byte
	// TooLong, when set, is why the answer was cut off: it broke its
	// bound.
	TooLong error
}

type exchangeKey struct{}

// WithExchange returns a context under which CaptureErrorAnswer records the
// answer of the request sent under it into the returned Exchange.
func WithExchange(ctx context.Context) (context.Context, *Exchange) {
	x := &Exchange{}
	return context.WithValue(ctx, exchangeKey{}, x), x
}

// ExchangeOf returns the Exchange of the request's context, or a new one
// that nobody reads when it has none.
func ExchangeOf(req *http.Request) *Exchange {
	if x, _ := req.Context().Value(exchangeKey{}).(*Exchange); x != nil {
		return x
	}
	return &Exchange{}
}

// CaptureErrorAnswer is an SDK client's middleware: for an answer with an
// error status it records the status, the headers and the first
// MaxErrorBody bytes of the body into the request's Exchange
// (WithExchange), and hands the SDK those bytes, so that neither reads
// more of an error answer than that.
func CaptureErrorAnswer(req *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
	res, err := next(req)
	if err != nil || res == nil || res.StatusCode < 400 {
		return res, err
	}
	ReadErrorAnswer(res, ExchangeOf(req))
	return res, nil
}

// ReadErrorAnswer records an answer with an error status into x (its
// status, headers and first MaxErrorBody bytes) and replaces its body by
// those bytes.
func ReadErrorAnswer(res *http.Response, x *Exchange) {
	body, _ := io.ReadAll(io.LimitReader(res.Body, MaxErrorBody))
	res.Body.Close()
	x.Status, x.Header, x.Body = res.StatusCode, res.Header, body
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
}
