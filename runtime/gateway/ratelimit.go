package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/kind"
)

// RateWindow is the span rate limits count over: a sliding minute. A call
// is admitted when the requests and tokens admitted in the minute before
// it, plus its own, fit in every limit that applies; so in any 60 seconds
// no more than the limit is ever admitted.
const RateWindow = time.Minute

// RateScope says what a rate limit is counted per.
type RateScope string

// The rate limit scopes.
const (
	// RateScopeKey counts per API key (kind.Caller.Key; a call with no
	// caller counts under the empty key).
	RateScopeKey RateScope = "key"
	// RateScopeTenant counts per tenant (kind.Caller.Tenant).
	RateScopeTenant RateScope = "tenant"
	// RateScopeModel counts per provider deployment of a model: the
	// provider's name and the pinned model id, so that the quota a
	// provider grants one key is respected by every replica together.
	RateScopeModel RateScope = "model"
)

// RateLimit caps the requests and tokens admitted per minute. A zero limit
// leaves that dimension unlimited; at least one must be set.
type RateLimit struct {
	// Name identifies the limit in errors and headers.
	Name string
	// Scope is what the limit is counted per.
	Scope RateScope
	// Model restricts a model-scoped limit to the calls of one pinned
	// model id; empty applies it to every model, each counted apart.
	Model string
	// RequestsPerMinute caps the calls admitted in any minute.
	RequestsPerMinute int64
	// TokensPerMinute caps the tokens admitted in any minute, each call
	// counting its worst case (the tokens its budget reservation holds:
	// the input estimate plus the output bound).
	TokensPerMinute int64
}

func (r RateLimit) validate() error {
	switch {
	case r.Name == "":
		return errors.New("rate limit has no name")
	case r.RequestsPerMinute < 0 || r.TokensPerMinute < 0:
		return fmt.Errorf("rate limit %q has a negative limit", r.Name)
	case r.RequestsPerMinute == 0 && r.TokensPerMinute == 0:
		return fmt.Errorf("rate limit %q sets neither requests nor tokens per minute", r.Name)
	case r.Model != "" && r.Scope != RateScopeModel:
		return fmt.Errorf("rate limit %q names model %q but is %s-scoped; only a model-scoped limit names a model", r.Name, r.Model, r.Scope)
	}
	switch r.Scope {
	case RateScopeKey, RateScopeTenant, RateScopeModel:
		return nil
	}
	return fmt.Errorf("rate limit %q has unknown scope %q (want key, tenant or model)", r.Name, r.Scope)
}

// RateCounter is one rate limit's count for one scope key, as handed to a
// Limiter.
type RateCounter struct {
	// Limit is the rate limit's name.
	Limit string
	// Scope is its scope.
	Scope RateScope
	// Key is the scope key: the caller's key or tenant, or
	// "provider/model-id".
	Key string
	// Requests and Tokens are the limits per RateWindow; zero is
	// unlimited.
	Requests, Tokens int64
}

// Limiter counts admissions against rate limits. Admit must be atomic as
// Ledger.Reserve is: the check that the call fits every counter and its
// recording happen as one step, for every process sharing the limiter.
type Limiter interface {
	// Admit records one request of tokens at now on every counter, or on
	// none: when one does not fit in the RateWindow before now it returns
	// a *RateLimitedError.
	Admit(ctx context.Context, now time.Time, counters []RateCounter, tokens int64) error
}

// RateStatus is one dimension of a rate limit as a refusal saw it: what
// OpenAI's x-ratelimit-* headers report.
type RateStatus struct {
	// Limit is the most admitted per RateWindow; zero when the dimension
	// is unlimited.
	Limit int64
	// Remaining is what is left of it now.
	Remaining int64
	// Reset is the time until the whole limit is free again: until the
	// newest admission counted leaves the window.
	Reset time.Duration
}

// RateLimitedError reports a call refused before it was sent because it
// did not fit a rate limit. Nothing was reserved or sent. A model-scoped
// refusal falls back to the next alias or deployment; a run waits for it
// instead (see Gateway.Generate).
type RateLimitedError struct {
	// Limit is the rate limit's name.
	Limit string
	// Scope is its scope.
	Scope RateScope
	// Key is the scope key counted on.
	Key string
	// Dimension is "requests" or "tokens": what did not fit.
	Dimension string
	// Requests and Tokens report both dimensions of the limit.
	Requests, Tokens RateStatus
	// RetryAfter is the wait until the call would fit, as things stand;
	// zero when it never will (a call larger than the limit).
	RetryAfter time.Duration
}

// Error implements error.
func (e *RateLimitedError) Error() string {
	st := e.Requests
	if e.Dimension == "tokens" {
		st = e.Tokens
	}
	if e.RetryAfter == 0 {
		return fmt.Sprintf("rate limit %q (%s %s): the call needs more %s than the %d per minute allowed", e.Limit, e.Scope, e.Key, e.Dimension, st.Limit)
	}
	return fmt.Sprintf("rate limit %q (%s %s) reached: %d %s per minute, %d left; retry in %s", e.Limit, e.Scope, e.Key, st.Limit, e.Dimension, st.Remaining, e.RetryAfter.Round(time.Millisecond))
}

// RateCheck decides whether a call of want tokens fits counter c at now,
// given the times and tokens of c's admissions within the window before
// now, oldest first, and used, the sum of those tokens. It returns nil, or
// the refusal. It is the one rule every Limiter applies; it reads the
// admissions only to refuse, so that admitting costs the same however many
// the window holds.
func RateCheck(c RateCounter, now time.Time, at []time.Time, tokens []int64, used, want int64) *RateLimitedError {
	if (c.Requests == 0 || int64(len(at)) < c.Requests) && (c.Tokens == 0 || used+want <= c.Tokens) {
		return nil
	}
	e := &RateLimitedError{Limit: c.Limit, Scope: c.Scope, Key: c.Key}
	reset := time.Duration(0)
	if len(at) > 0 {
		reset = at[len(at)-1].Add(RateWindow).Sub(now)
	}
	if c.Requests > 0 {
		e.Requests = RateStatus{Limit: c.Requests, Remaining: max(0, c.Requests-int64(len(at))), Reset: reset}
	}
	if c.Tokens > 0 {
		e.Tokens = RateStatus{Limit: c.Tokens, Remaining: max(0, c.Tokens-used), Reset: reset}
	}
	// The wait is until the oldest admissions that must leave have left.
	waitFor := func(n int) time.Duration { return at[n].Add(RateWindow).Sub(now) }
	switch {
	case c.Requests > 0 && int64(len(at))+1 > c.Requests:
		e.Dimension = "requests"
		e.RetryAfter = waitFor(len(at) - int(c.Requests))
	case c.Tokens > 0 && want > c.Tokens:
		e.Dimension = "tokens"
	default:
		e.Dimension = "tokens"
		over := used + want - c.Tokens
		n := 0
		for ; over > 0; n++ {
			over -= tokens[n]
		}
		e.RetryAfter = waitFor(n - 1)
	}
	e.RetryAfter = max(e.RetryAfter, time.Millisecond)
	if e.Dimension == "tokens" && want > c.Tokens {
		e.RetryAfter = 0
	}
	return e
}

// MemoryLimiter is the default Limiter: the admissions of the last minute
// in this process's memory, under one mutex. Its memory is bounded by the
// admissions of one minute; a counter idle for a minute is forgotten.
type MemoryLimiter struct {
	mu       sync.Mutex
	counters map[rateKey]*rateLog
	sweep    time.Time
}

type rateKey struct {
	limit, key string
}

// rateLog is a counter's admissions of the last minute, oldest first,
// and the sum of their tokens.
type rateLog struct {
	at     []time.Time
	tokens []int64
	used   int64
}

// NewMemoryLimiter returns an empty in-memory limiter.
func NewMemoryLimiter() *MemoryLimiter {
	return &MemoryLimiter{counters: make(map[rateKey]*rateLog)}
}

// Admit implements Limiter.
func (l *MemoryLimiter) Admit(ctx context.Context, now time.Time, counters []RateCounter, tokens int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	from := now.Add(-RateWindow)
	for _, c := range counters {
		lg := l.counters[rateKey{c.Limit, c.Key}]
		if lg == nil {
			continue
		}
		i := 0
		for i < len(lg.at) && !lg.at[i].After(from) {
			lg.used -= lg.tokens[i]
			i++
		}
		lg.at, lg.tokens = lg.at[i:], lg.tokens[i:]
		if err := RateCheck(c, now, lg.at, lg.tokens, lg.used, tokens); err != nil {
			return err
		}
	}
	for _, c := range counters {
		if c.Tokens > 0 && tokens > c.Tokens {
			return RateCheck(c, now, nil, nil, 0, tokens)
		}
	}
	for _, c := range counters {
		k := rateKey{c.Limit, c.Key}
		lg := l.counters[k]
		if lg == nil {
			lg = &rateLog{}
			l.counters[k] = lg
		}
		lg.at = append(lg.at, now)
		lg.tokens = append(lg.tokens, tokens)
		lg.used += tokens
	}
	if now.After(l.sweep) {
		// Forget counters idle for a window, once a window.
		for k, lg := range l.counters {
			if len(lg.at) == 0 || !lg.at[len(lg.at)-1].After(from) {
				delete(l.counters, k)
			}
		}
		l.sweep = now.Add(RateWindow)
	}
	return nil
}

// rateCounters returns the counters of the call's caller-scoped limits
// (first is true, the call's first alias) and of e's model-scoped limits.
func (g *Gateway) rateCounters(ctx context.Context, e *entry, first bool, buf []RateCounter) []RateCounter {
	out := buf[:0]
	var caller kind.Caller
	var read bool
	for _, r := range g.rateLimits {
		c := RateCounter{Limit: r.Name, Scope: r.Scope, Requests: r.RequestsPerMinute, Tokens: r.TokensPerMinute}
		switch r.Scope {
		case RateScopeModel:
			if r.Model != "" && r.Model != e.pinned.Spec.ID {
				continue
			}
			c.Key = e.providerName + "/" + e.pinned.Spec.ID
		default:
			if !first {
				continue
			}
			if !read {
				caller, _ = kind.CallerFrom(ctx)
				read = true
			}
			c.Key = caller.Key
			if r.Scope == RateScopeTenant {
				c.Key = caller.Tenant
			}
		}
		out = append(out, c)
	}
	// Canonical order, so that a limiter that locks counters locks them
	// in one order whatever the configuration's.
	slices.SortFunc(out, func(a, b RateCounter) int { return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Key, b.Key)) })
	return out
}

// admit counts a call of tokens on alias e against the rate limits that
// apply. A model-scoped refusal of a call made for a run (CallInfo with a
// RunID, as the agent runtime sets) waits until the quota has room, bounded
// by ctx, rather than failing the run: the run's step timeout bounds it.
func (g *Gateway) admit(ctx context.Context, e *entry, first bool, tokens int64) error {
	if len(g.rateLimits) == 0 {
		return nil
	}
	var buf [4]RateCounter
	counters := g.rateCounters(ctx, e, first, buf[:])
	if len(counters) == 0 {
		return nil
	}
	for {
		err := g.limiter.Admit(ctx, g.clock(), counters, tokens)
		rl, ok := errors.AsType[*RateLimitedError](err)
		if !ok {
			if err != nil {
				return fmt.Errorf("rate limit: %w", err)
			}
			return nil
		}
		ci, inRun := CallInfoFromContext(ctx)
		if rl.Scope != RateScopeModel || !inRun || ci.RunID == "" || rl.RetryAfter == 0 {
			return err
		}
		if dl, has := ctx.Deadline(); has && time.Until(dl) < rl.RetryAfter {
			return err
		}
		g.logger.LogAttrs(ctx, slog.LevelWarn, "gateway: waiting for a model's rate limit",
			slog.String("alias", e.pinned.Alias), slog.String("limit", rl.Limit), slog.Duration("wait", rl.RetryAfter))
		if err := g.sleep(ctx, rl.RetryAfter); err != nil {
			return err
		}
	}
}
