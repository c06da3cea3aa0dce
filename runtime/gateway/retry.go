package gateway

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy bounds how often and how long the gateway retries one alias
// after a retryable failure (429, 5xx, timeouts, broken connections) before
// it falls back. Provider clients' own retries must be off, so that every
// attempt is traced and bounded here. A zero field takes its value from
// DefaultRetryPolicy.
type RetryPolicy struct {
	// MaxAttempts is the number of tries of one alias, the first included;
	// 1 disables retries.
	MaxAttempts int
	// BaseDelay is the first backoff; each retry doubles it.
	BaseDelay time.Duration
	// MaxDelay caps a computed backoff.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the gateway waits for; a
	// provider asking for longer makes the gateway fall back instead.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy of a Config that sets none: three tries,
// backoff from 500ms doubling up to 8s, Retry-After honoured up to 30s.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxAttempts: 3, BaseDelay: 500 * time.Millisecond, MaxDelay: 8 * time.Second, MaxRetryAfter: 30 * time.Second}
}

// withDefaults fills each zero field from DefaultRetryPolicy.
func (p RetryPolicy) withDefaults() RetryPolicy {
	d := DefaultRetryPolicy()
	if p.MaxAttempts == 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.BaseDelay == 0 {
		p.BaseDelay = d.BaseDelay
	}
	if p.MaxDelay == 0 {
		p.MaxDelay = d.MaxDelay
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = d.MaxRetryAfter
	}
	return p
}

func (p RetryPolicy) validate() error {
	if p.MaxAttempts < 1 || p.BaseDelay < 0 || p.MaxDelay < 0 || p.MaxRetryAfter < 0 {
		return fmt.Errorf("gateway config: invalid retry policy %+v", p)
	}
	return nil
}

// delay returns the wait before retry number retry+1 and whether to retry
// at all. A provider's Retry-After wins over the backoff when it is within
// MaxRetryAfter; otherwise the backoff is exponential with "equal jitter":
// half fixed, half random, so that synchronized clients spread out.
func (p RetryPolicy) delay(retry int, retryAfter time.Duration) (time.Duration, bool) {
	if retryAfter > 0 {
		if retryAfter > p.MaxRetryAfter {
			return 0, false
		}
		return retryAfter, true
	}
	d := p.BaseDelay << min(retry, 30)
	if d > p.MaxDelay || d < p.BaseDelay {
		d = p.MaxDelay
	}
	if d <= 1 {
		return d, true
	}
	half := d / 2
	return half + rand.N(d-half+1), true
}

// ParseRetryAfter reads the wait a server asks for from response headers:
// retry-after-ms (milliseconds), or Retry-After as delta seconds or an HTTP
// date. It returns zero when there is none or it cannot be read. now is the
// clock HTTP dates are measured from.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 1e9 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
