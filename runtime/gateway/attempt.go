package gateway

import (
	"context"
	"errors"
	"time"
)

// call is one Generate, Stream or Embed call as the attempt loop sees it:
// what was asked, the aliases it may use, the budgets it is charged to, and
// what happened so far.
type call struct {
	// op names the call in errors: "generate", "stream" or "embed".
	op string
	// kind says whether the call is a chat or an embedding call, which
	// decides how its hold is computed.
	kind operation
	// alias is the alias asked for.
	alias string
	// chain is the asked-for alias and then its fallbacks, each already
	// checked for the capabilities the call needs.
	chain []*entry
	// limits are the budgets the call is charged to.
	limits []Limit
	// asked is the chat request's MaxOutputTokens as the caller gave it.
	// The request itself is not held here: run takes a pointer to the
	// caller's own copy, which each alias's turn bounds in place (bound),
	// so that the frames a call waits on its provider with do not each
	// hold a copy.
	asked int
	// texts are the embedding inputs.
	texts []string
	// attempts lists every try so far, in order.
	attempts []Attempt
	// hold is the reservation of the alias being tried.
	hold hold
	// admitted says that the caller's rate limits counted the call, which
	// they do once, whichever alias serves it.
	admitted bool
}

// hold is one reservation. It is closed exactly once, by settling or
// releasing it, whichever way the call ends, panics included.
type hold struct {
	id   string
	open bool
}

// attemptFunc makes one try of alias e with the call's request, bounded to
// what e reserved (none for an embedding call); n is the
// try's index in the call and fellBack says whether e is a fallback. It
// returns done when the call is over, because the try answered or because
// it ended after part of the answer reached the caller; it has then settled
// the call's hold, and err, if any, goes to the caller. Otherwise the try
// failed before anything was charged, and err says why, so that the loop may
// retry or fall back.
//
// The three calls differ only in their attemptFunc; everything else (window
// checks, reservations, retries, fallbacks, closing the hold) is run.
type attemptFunc func(ctx context.Context, e *entry, n int, fellBack bool) (done bool, err error)

// newCall resolves what every call checks before reserving anything: the
// request (req, nil for an embedding call) against the specification, the
// chain of aliases against the capabilities the call needs, and the
// budgets it names.
func (g *Gateway) newCall(ctx context.Context, c *call, req *Request, fallbacks []string, o *callOptions, caps []Capability) error {
	if c.kind == opEmbeddings {
		if err := validateEmbedInput(c.texts); err != nil {
			return err
		}
	} else if err := req.validate(); err != nil {
		return err
	} else {
		c.asked = req.MaxOutputTokens
	}
	chain, err := g.chain(c.alias, fallbacks, caps)
	if err != nil {
		return err
	}
	c.chain = chain
	c.limits, err = g.limits(ctx, o)
	return err
}

// run is the one attempt loop of Generate, Stream and Embed. For each alias
// of the chain in order it checks that the request fits the alias's context
// window (skipping, and recording as an attempt, one that does not), holds
// the call's upper bound against its budgets, makes attempts, retrying
// retryable failures within the alias's policy, and closes the hold: the
// attempt settles it when something was charged, and run releases it
// otherwise, in a defer, so that a panicking consumer or adapter cannot
// leave it held. Then it falls back to the next alias if IsFallbackEligible
// allows. It returns the index in the chain of the alias that ended the
// call, or a *CallError (or, when nothing was tried, the bare error). req
// is the chat request (nil for an embedding call), which the attempts see
// bounded for their alias.
func (g *Gateway) run(ctx context.Context, c *call, req *Request, attempt attemptFunc) (int, error) {
	var lastErr error
	for i, e := range c.chain {
		if i > 0 {
			g.logFallback(ctx, c.chain[i-1], e, lastErr)
		}
		done, err := g.tryAlias(ctx, c, req, e, i > 0, attempt)
		if done {
			if err != nil {
				return i, g.callError(c.op, c.alias, c.attempts, err)
			}
			return i, nil
		}
		lastErr = err
		if ctx.Err() != nil || !IsFallbackEligible(err) {
			break
		}
	}
	return -1, g.callError(c.op, c.alias, c.attempts, lastErr)
}

// tryAlias is one alias's turn in run: window check, reservation, attempts
// with retries, and the release of a hold that no attempt settled.
//
// Its frame is on the stack while the call waits on the provider, so what
// it does before the call is in bound.
func (g *Gateway) tryAlias(ctx context.Context, c *call, req *Request, e *entry, fellBack bool, attempt attemptFunc) (done bool, err error) {
	amount, err := c.bound(e, req)
	if err != nil {
		return false, err
	}
	d, dep := e, (*deployment)(nil)
	if e.route != nil {
		if dep = g.pick(e); dep == nil {
			err := g.coolingError(e)
			c.attempts = append(c.attempts, Attempt{Alias: e.pinned.Alias, Model: e.pinned.Spec.ID, Err: err})
			return false, err
		}
		d = dep.entry
	}
	if err := g.admit(ctx, d, !c.admitted, amount.Tokens); err != nil {
		// A model's quota is that deployment's: another may serve the
		// call. The caller's own limits end it.
		rl, ok := errors.AsType[*RateLimitedError](err)
		return !ok || rl.Scope != RateScopeModel, err
	}
	c.admitted = true
	if err := g.reserve(ctx, e, amount, c.limits, &c.hold); err != nil {
		return true, err
	}
	defer g.release(ctx, &c.hold)
	for retry := 0; ; retry++ {
		start := time.Now()
		var name string
		if dep == nil {
			done, err = attempt(ctx, d, len(c.attempts), fellBack)
		} else {
			name = dep.name
			done, err = dep.try(ctx, attempt, len(c.attempts), fellBack)
		}
		c.attempts = append(c.attempts, Attempt{Alias: e.pinned.Alias, Model: e.pinned.Spec.ID, Deployment: name, Retry: retry, Duration: time.Since(start), Err: err})
		if done {
			return done, err
		}
		if dep != nil && ctx.Err() == nil && g.failed(dep, e.route.coolDown, err) {
			// A deployment that failed is cooled down: the call goes
			// straight to another, or falls back, rather than wait to
			// retry it.
			if dep = g.pick(e); dep == nil {
				return false, err
			}
			d = dep.entry
			continue
		}
		if !g.shouldRetry(ctx, e, retry, err) {
			return done, err
		}
	}
}

// try is one attempt on deployment d, counted in its load whatever way it
// ends.
func (d *deployment) try(ctx context.Context, attempt attemptFunc, n int, fellBack bool) (bool, error) {
	d.calls.Add(1)
	d.inFlight.Add(1)
	defer d.inFlight.Add(-1)
	return attempt(ctx, d.entry, n, fellBack)
}

// bound makes req the call's request as e is sent it (boundRequest) and
// returns the amount to hold on e; a request too large for e's window is
// recorded as an attempt. It is not inlined, so that its temporaries stay
// out of tryAlias's frame.
//
//go:noinline
func (c *call) bound(e *entry, req *Request) (Amount, error) {
	spec := &e.pinned.Spec
	if c.kind == opEmbeddings {
		return Price(spec.Cost, embedHold(c.texts)), nil
	}
	req.MaxOutputTokens = c.asked
	if err := boundRequest(e, req); err != nil {
		c.attempts = append(c.attempts, Attempt{Alias: e.pinned.Alias, Model: spec.ID, Err: err})
		return Amount{}, err
	}
	return Price(spec.Cost, EstimateUsage(*spec, *req)), nil
}
