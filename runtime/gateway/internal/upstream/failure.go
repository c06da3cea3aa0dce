package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"

	"github.com/aidgen/aid/runtime/gateway"
)

// RetryableStatus reports the HTTP statuses worth retrying: request
// timeout, conflict, rate limit and server errors (529, a service
// overloaded, among them).
func RetryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict || code == http.StatusTooManyRequests || code >= 500
}

// Transient reports connection failures that a new attempt may not meet:
// a connection reset, refused or cut short, or a network error.
func Transient(err error) bool {
	var ne net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

// Malformed reports an answer that arrived whole but is not valid JSON:
// asking again would get the same. The official SDKs read the whole body
// before decoding it, so a body cut short surfaces as a read error
// instead, and a decoding error is one they say they failed to parse.
func Malformed(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te) || strings.HasPrefix(err.Error(), "error parsing response json")
}

// Failure is the gateway.ProviderFailure of a call that failed with err
// and no answer an adapter read: a malformed answer, a connection that
// failed, or none it can tell.
func Failure(err error) gateway.ProviderFailure {
	switch {
	case Malformed(err):
		return gateway.FailureMalformed
	case Transient(err):
		return gateway.FailureUnreachable
	}
	return ""
}
