package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aidgen/aid/runtime/agents"
)

// Local is the in-process Queue: queued runs wait in this process's
// memory and are driven by its goroutines, at most Config.Workers at once
// (and each agent of Config.AgentConcurrency at most its limit). It keeps
// nothing beyond the process: a run queued or being driven when the
// process exits stays queued or running in the store, which, for the
// memory store it goes with, goes too. RescueAfter does not apply.
type Local struct {
	rt  *agents.Runtime
	cfg Config

	mu      sync.Mutex
	driving map[string]bool          // the runs a worker drives now
	slots   map[string]chan struct{} // by agent; "" is the shared one
	waiting int
	closed  bool
	started bool
	base    context.Context
	cancel  context.CancelCauseFunc
	wg      sync.WaitGroup
}

// NewLocal returns an in-process queue driving rt's runs. Workers below
// zero mean at least one here: nothing else would drive the runs.
func NewLocal(rt *agents.Runtime, cfg Config) (*Local, error) {
	if rt == nil {
		return nil, errors.New("jobs: the runtime is nil")
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	q := &Local{rt: rt, cfg: cfg, driving: map[string]bool{}, slots: map[string]chan struct{}{"": make(chan struct{}, max(1, cfg.Workers))}}
	for a, n := range cfg.AgentConcurrency {
		q.slots[a] = make(chan struct{}, n)
	}
	q.base, q.cancel = context.WithCancelCause(context.Background())
	return q, nil
}

// Describe implements Queue.
func (q *Local) Describe() []any {
	return []any{"jobs", "in process", "replica", q.cfg.Replica, "workers", max(1, q.cfg.Workers), "agent_concurrency", q.cfg.AgentConcurrency, "max_queued", q.cfg.MaxQueued}
}

// Driver implements Queue: this process, while one of its workers drives
// the run.
func (q *Local) Driver(_ context.Context, runID string) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.driving[runID] {
		return q.cfg.Replica, nil
	}
	return "", nil
}

// Start implements Queue: the workers are goroutines started per run, so
// it only opens the queue.
func (q *Local) Start(context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return &ClosedError{}
	}
	q.started = true
	return nil
}

// Submit implements Queue.
func (q *Local) Submit(ctx context.Context, agent, input string, opts agents.RunOptions) (agents.RunRecord, error) {
	return q.enqueue(ctx, func(s agents.Store) (agents.RunRecord, error) { return q.rt.Submit(ctx, s, agent, input, opts) }, 0)
}

// Resume implements Queue.
func (q *Local) Resume(ctx context.Context, runID string, d agents.Decision) (agents.RunRecord, error) {
	return q.enqueue(ctx, func(s agents.Store) (agents.RunRecord, error) { return q.rt.SubmitResume(ctx, s, runID, d) }, 0)
}

// Continue implements Queue.
func (q *Local) Continue(ctx context.Context, runID string, opts agents.ContinueOptions) (agents.RunRecord, error) {
	return q.enqueue(ctx, func(s agents.Store) (agents.RunRecord, error) { return q.rt.SubmitContinue(ctx, s, runID, opts) }, opts.Timeout)
}

// enqueue reserves a place, records the run queued and starts its
// goroutine, which waits for a slot of the run's agent.
func (q *Local) enqueue(ctx context.Context, submit func(agents.Store) (agents.RunRecord, error), timeout time.Duration) (agents.RunRecord, error) {
	q.mu.Lock()
	switch {
	case q.closed || !q.started:
		q.mu.Unlock()
		return agents.RunRecord{}, &ClosedError{}
	case q.waiting >= q.cfg.MaxQueued:
		w := q.waiting
		q.mu.Unlock()
		return agents.RunRecord{}, &FullError{Waiting: w, Max: q.cfg.MaxQueued, RetryAfter: q.cfg.RetryAfter}
	}
	q.waiting++
	q.wg.Add(1)
	q.mu.Unlock()
	rec, err := submit(q.rt.Store())
	if err != nil {
		q.release()
		q.wg.Done()
		return rec, err
	}
	slot, ok := q.slots[rec.Agent]
	if !ok {
		slot = q.slots[""]
	}
	go q.drive(rec.RunID, slot, timeout)
	return rec, nil
}

func (q *Local) release() {
	q.mu.Lock()
	q.waiting--
	q.mu.Unlock()
}

// drive waits for a slot and drives the run; a run whose drive is
// interrupted stays in the store as it stood.
func (q *Local) drive(runID string, slot chan struct{}, timeout time.Duration) {
	defer q.wg.Done()
	select {
	case slot <- struct{}{}:
	case <-q.base.Done():
		q.release()
		q.cfg.Logger.Warn("background run not started: the queue stopped", "run", runID)
		return
	}
	q.release()
	defer func() { <-slot }()
	q.mu.Lock()
	q.driving[runID] = true
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		delete(q.driving, runID)
		q.mu.Unlock()
	}()
	q.cfg.Logger.Info("driving background run", "run", runID, "replica", q.cfg.Replica)
	out, res, err := Work(q.base, q.rt, runID, timeout, q.cfg.RunTimeout, q.cfg.Logger)
	if out == Retry {
		q.cfg.Logger.Warn("background run left unfinished: it stays in the store as it stood", "run", runID, "status", res.Status, "err", err)
	}
}

// Register adds the queue's depth to reg, as aid_jobs_waiting with the
// queue label in_process, the series pgqueue reports per River queue.
func (q *Local) Register(reg prometheus.Registerer) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "aid_jobs_waiting",
		Help:        "Background runs waiting for a worker of this process, at scrape time.",
		ConstLabels: prometheus.Labels{"queue": "in_process"},
	}, func() float64 { return float64(q.Waiting()) }))
}

// Waiting returns how many runs wait for a slot.
func (q *Local) Waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// Stop implements Queue.
func (q *Local) Stop(ctx context.Context) error {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	done := make(chan struct{})
	go func() {
		q.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		q.cancel(nil)
		return nil
	case <-ctx.Done():
	}
	q.cancel(agents.ErrInterrupted)
	<-done
	return fmt.Errorf("jobs: stop: runs interrupted: %w", context.Cause(ctx))
}

var _ Queue = (*Local)(nil)
