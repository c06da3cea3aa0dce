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
//
// A watch ends with its context, and nothing runs when it does: a later
// Watch drops the watches whose context has ended once the set has doubled
// since the last sweep, so it holds at most twice the watches live then
// (and at least minSweep), where a callback on each context would start a
// goroutine for every run that ends. A process that goes idle after a
// burst keeps the burst's ended watches (a context and a function each)
// until its next runs.
type Cancels struct {
	mu       sync.Mutex
	watchers map[string][]*cancelWatch
	held     int // the watches in watchers, ended ones included
	sweepAt  int // held at which Watch drops the ended ones
}

// minSweep is the fewest watches held before Watch looks for ended ones.
const minSweep = 64

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
	defer c.mu.Unlock()
	if c.watchers == nil {
		c.watchers = map[string][]*cancelWatch{}
	}
	if c.held >= c.sweepAt {
		c.sweep()
		c.sweepAt = max(2*c.held, minSweep)
	}
	c.watchers[runID] = append(c.watchers[runID], w)
	c.held++
}

// sweep drops the watches whose context has ended. c.mu is held.
func (c *Cancels) sweep() {
	for id, ws := range c.watchers {
		live := ws[:0]
		for _, w := range ws {
			if w.ctx.Err() == nil {
				live = append(live, w)
			}
		}
		clear(ws[len(live):])
		c.held -= len(ws) - len(live)
		if len(live) == 0 {
			delete(c.watchers, id)
		} else {
			c.watchers[id] = live
		}
	}
}

// Notify hands req to runID's watchers that have not had a request yet,
// calling their stop functions on the caller's goroutine.
func (c *Cancels) Notify(runID string, req CancelRequest) {
	var stops []func(CancelRequest)
	c.mu.Lock()
	for _, w := range c.watchers[runID] {
		// A watch whose context ended is not called, though it is still
		// held until a sweep.
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
	for id, ws := range c.watchers {
		if anyLive(ws) {
			out = append(out, id)
		}
	}
	return out
}

// Len returns the number of runs being watched.
func (c *Cancels) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ws := range c.watchers {
		if anyLive(ws) {
			n++
		}
	}
	return n
}

// anyLive reports whether any of ws has not ended.
func anyLive(ws []*cancelWatch) bool {
	for _, w := range ws {
		if w.ctx.Err() == nil {
			return true
		}
	}
	return false
}
