package agents

import (
	"context"
	"sync"
)

// Cancels is the watchers of runs' cancel requests in one process: the
// part of Store.WatchCancel every store shares. A store calls Watch from
// WatchCancel and Notify when a request is made (RequestCancel in this
// process, or a notification from another). The zero value is ready to
// use; it is safe for concurrent use.
type Cancels struct {
	mu       sync.Mutex
	watchers map[string]map[*cancelWatch]struct{}
}

type cancelWatch struct {
	ctx  context.Context
	stop func(CancelRequest)
	sent bool
}

// Watch calls stop with runID's first cancel request from now on, or with
// pending before it returns when pending is not nil. The watch ends when
// ctx does; stop is not called after that.
func (c *Cancels) Watch(ctx context.Context, runID string, pending *CancelRequest, stop func(CancelRequest)) {
	if pending != nil {
		stop(*pending)
		return
	}
	w := &cancelWatch{ctx: ctx, stop: stop}
	c.mu.Lock()
	if c.watchers == nil {
		c.watchers = map[string]map[*cancelWatch]struct{}{}
	}
	if c.watchers[runID] == nil {
		c.watchers[runID] = map[*cancelWatch]struct{}{}
	}
	c.watchers[runID][w] = struct{}{}
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.watchers[runID], w)
		if len(c.watchers[runID]) == 0 {
			delete(c.watchers, runID)
		}
	})
}

// Notify hands req to runID's watchers that have not had a request yet,
// calling their stop functions on the caller's goroutine.
func (c *Cancels) Notify(runID string, req CancelRequest) {
	var stops []func(CancelRequest)
	c.mu.Lock()
	for w := range c.watchers[runID] {
		// A watch whose context ended is not called, even before
		// AfterFunc removed it.
		if !w.sent && w.ctx.Err() == nil {
			w.sent = true
			stops = append(stops, w.stop)
		}
	}
	c.mu.Unlock()
	for _, stop := range stops {
		stop(req)
	}
}

// Watched returns the ids of the runs being watched, for a store that
// checks, after missing notifications (a lost connection), whether any of
// them was asked to stop.
func (c *Cancels) Watched() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.watchers))
	for id := range c.watchers {
		out = append(out, id)
	}
	return out
}

// Len returns the number of runs being watched.
func (c *Cancels) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.watchers)
}
