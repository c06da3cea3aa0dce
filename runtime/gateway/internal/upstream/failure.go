package upstream

import (
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
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
