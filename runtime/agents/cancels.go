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
	ch   chan CancelRequest
	sent bool
}

// Watch returns a channel that receives runID's first cancel request from
// now on, or pending at once when it is not nil. The watch ends when ctx
// does.
func (c *Cancels) Watch(ctx context.Context, runID string, pending *CancelRequest) <-chan CancelRequest {
	w := &cancelWatch{ctx: ctx, ch: make(chan CancelRequest, 1)}
	if pending != nil {
		w.ch <- *pending
		w.sent = true
		return w.ch
	}
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
	return w.ch
}

// Notify hands req to runID's watchers that have not had a request yet.
func (c *Cancels) Notify(runID string, req CancelRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.watchers[runID] {
		// A watch whose context ended is not sent to, even before
		// AfterFunc removed it.
		if !w.sent && w.ctx.Err() == nil {
			w.sent = true
			w.ch <- req // buffered, and sent to once
		}
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
