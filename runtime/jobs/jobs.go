package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/agents"
)

// Queue runs agents in the background. Each method checks what a
// synchronous call would refuse before anything is written, records the
// run queued, and returns its record at once; a worker drives it.
type Queue interface {
	// Submit queues a new run of agent on input.
	Submit(ctx context.Context, agent, input string, opts agents.RunOptions) (agents.RunRecord, error)
	// Resume queues a paused run with a decision on its pending call.
	Resume(ctx context.Context, runID string, d agents.Decision) (agents.RunRecord, error)
	// Continue queues a continuation of a run that stopped early.
	Continue(ctx context.Context, runID string, opts agents.ContinueOptions) (agents.RunRecord, error)
	// Start starts this process's workers; they run until Stop. ctx
	// bounds starting them.
	Start(ctx context.Context) error
	// Stop stops taking jobs and waits for the runs being driven until
	// ctx ends; then it interrupts them (agents.ErrInterrupted), which
	// leaves them running in the store for another worker, and returns
	// once they have stopped.
	Stop(ctx context.Context) error
	// Describe says, for the start-up log, where jobs are kept and how
	// many workers drive them.
	Describe() []any
	// Driver names the replica (Config.Replica) whose worker drives the
	// run now, or returns "" when none does (the run waits, or is not
	// driven through the queue).
	Driver(ctx context.Context, runID string) (string, error)
}

// The defaults of Config.
const (
	DefaultWorkers     = 8
	DefaultMaxQueued   = 1000
	DefaultRunTimeout  = 10 * time.Minute
	DefaultRetryAfter  = 5 * time.Second
	defaultSaveGrace   = 15 * time.Second
	maxAgentQueueBytes = 100
	// DefaultDeadAfter is Config.DeadAfter's default: a crashed replica's
	// background runs go on elsewhere within about 40 s.
	DefaultDeadAfter = 30 * time.Second
	// minDeadAfter keeps the heartbeat (a third of DeadAfter) at a second
	// or more.
	minDeadAfter = 3 * time.Second
)

// DefaultReplica is the replica name of Config.Replica's default: the
// host's name and the process id, "host-1234", which tells apart two
// processes on one host and, in a container, names the pod.
func DefaultReplica() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// Config sizes a Queue. A zero field takes its default.
type Config struct {
	// Workers is how many runs this process drives at once, of agents
	// without a limit of their own (AgentConcurrency); default 8. A
	// negative value drives none: the process only queues, and other
	// processes' workers drive.
	Workers int
	// AgentConcurrency bounds, per agent, how many of its runs this
	// process drives at once. Such an agent's runs wait in a queue of
	// their own and do not take Workers' slots. A run is queued under the
	// agent it is on (after handoffs, for a resume or a continuation).
	AgentConcurrency map[string]int
	// MaxQueued bounds the runs waiting for a worker, across the queue;
	// a submission beyond it is refused with a *FullError. Default 1000.
	MaxQueued int
	// RetryAfter is what a *FullError tells the client to wait; default 5s.
	RetryAfter time.Duration
	// RunTimeout bounds one drive of a run by a worker: a run still going
	// then stops timed_out, with its partial result, and can be
	// continued. It bounds the job, so that a durable queue can tell a
	// job whose worker died from one still working (RescueAfter). Default
	// 10 minutes; an agent's own run timeout applies within it.
	RunTimeout time.Duration
	// RescueAfter is, in a durable queue, how long after a job started a
	// worker that has not finished it is presumed stuck and the job is
	// given to another (River's RescueStuckJobsAfter), even when its
	// replica is alive. It must exceed RunTimeout; default RunTimeout plus
	// 15s, the time a stopped run takes to be saved. A replica that died
	// is noticed much sooner: see DeadAfter.
	RescueAfter time.Duration
	// DeadAfter is, in a durable queue, how long a replica may go without
	// a heartbeat (written every third of it) before it is presumed dead
	// and the runs its workers were driving are given at once to another
	// replica, which continues them with Drive's semantics. Default
	// 30s: a crashed replica's run goes on within about 40s. Shorter
	// rescues sooner, at the cost of more heartbeats and of taking the
	// runs of a replica that is only paused (a long GC, a network blip
	// to the database): the run's version check then stops the slower of
	// the two drives at its next write, and a write in flight is recorded
	// interrupted, asked about rather than repeated. At least 3s.
	DeadAfter time.Duration
	// Replica names this process in the runs it drives (GET
	// /v1/runs/{id}'s driven_by) and in the logs; default
	// DefaultReplica(). Give each replica its own (a pod name).
	Replica string
	// Logger receives the workers' failures and the rescues; nil means no
	// logging.
	Logger *slog.Logger
}

// WithDefaults returns c with every zero field set to its default, or an
// error naming a field that cannot be used.
func (c Config) WithDefaults() (Config, error) {
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.MaxQueued == 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.RunTimeout == 0 {
		c.RunTimeout = DefaultRunTimeout
	}
	if c.RescueAfter == 0 {
		c.RescueAfter = c.RunTimeout + defaultSaveGrace
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = DefaultDeadAfter
	}
	if c.Replica == "" {
		c.Replica = DefaultReplica()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	var errs []error
	if c.MaxQueued < 0 {
		errs = append(errs, fmt.Errorf("jobs: MaxQueued is %d; want at least 1", c.MaxQueued))
	}
	if c.RetryAfter < time.Second {
		errs = append(errs, fmt.Errorf("jobs: RetryAfter is %v; want at least 1s", c.RetryAfter))
	}
	if c.RunTimeout < 0 {
		errs = append(errs, fmt.Errorf("jobs: RunTimeout is %v; want a positive duration", c.RunTimeout))
	}
	if c.DeadAfter < minDeadAfter {
		errs = append(errs, fmt.Errorf("jobs: DeadAfter is %v; want at least %v", c.DeadAfter, minDeadAfter))
	}
	if c.RescueAfter <= c.RunTimeout {
		errs = append(errs, fmt.Errorf("jobs: RescueAfter (%v) must exceed RunTimeout (%v): a job still working would be given to another worker", c.RescueAfter, c.RunTimeout))
	}
	for _, a := range slices.Sorted(maps.Keys(c.AgentConcurrency)) {
		if n := c.AgentConcurrency[a]; n < 1 {
			errs = append(errs, fmt.Errorf("jobs: AgentConcurrency of agent %q is %d; want at least 1", a, n))
		}
		if !agentQueueName(a) {
			errs = append(errs, fmt.Errorf("jobs: agent %q cannot name a queue: use lower-case letters, digits, '_' and '-', at most %d bytes", a, maxAgentQueueBytes))
		}
	}
	return c, errors.Join(errs...)
}

// agentQueueName reports whether an agent's name can name its queue.
func agentQueueName(a string) bool {
	if a == "" || len(a) > maxAgentQueueBytes {
		return false
	}
	return strings.Trim(a, "abcdefghijklmnopqrstuvwxyz0123456789_-") == ""
}

// ParseAgentConcurrency reads the per-agent limits of a flag or an
// environment variable: "agent=N" pairs separated by commas, such as
// "billing=2,researcher=4".
func ParseAgentConcurrency(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, n, ok := strings.Cut(part, "=")
		var v int
		if _, err := fmt.Sscanf(strings.TrimSpace(n), "%d", &v); !ok || err != nil || fmt.Sprint(v) != strings.TrimSpace(n) {
			return nil, fmt.Errorf("agent concurrency %q: want agent=N, such as billing=2", part)
		}
		name = strings.TrimSpace(name)
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("agent concurrency: agent %q given twice", name)
		}
		out[name] = v
	}
	return out, nil
}

// FullError refuses a submission to a queue holding MaxQueued runs
// waiting for a worker: the service answers 429 with Retry-After rather
// than let the queue grow without bound. Nothing was written.
type FullError struct {
	// Waiting is how many runs were waiting; Max is Config.MaxQueued.
	Waiting, Max int
	// RetryAfter is how long the client should wait before trying again.
	RetryAfter time.Duration
}

// Error implements error.
func (e *FullError) Error() string {
	return fmt.Sprintf("the queue of background runs is full (%d waiting, at most %d); try again in %v", e.Waiting, e.Max, e.RetryAfter)
}

// ClosedError refuses a submission to a queue that is stopping.
type ClosedError struct{}

// Error implements error.
func (*ClosedError) Error() string { return "the queue of background runs is stopping" }

// Outcome is what Work did with a job.
type Outcome int

// The outcomes of Work.
const (
	// Done: the run is no longer queued or running (it ended, paused,
	// stopped early, or was driven already); the job is finished.
	Done Outcome = iota
	// Retry: the run is still queued or running (its drive was
	// interrupted, or the store could not be reached); the job should be
	// tried again, by this worker or another, and its next attempt
	// continues the run with Drive's semantics.
	Retry
)

// Work drives the run of one job: agents.Runtime.Drive under the run
// timeout, then a look at where the run stands, which is the only thing
// that decides whether the job is done (not the error, which for a run that
// failed or stopped early is the run's own end). Both queues' workers call
// it, for a job's first attempt and for one rescued from a dead worker.
func Work(ctx context.Context, rt *agents.Runtime, runID string, timeout, runTimeout time.Duration, logger *slog.Logger) (Outcome, agents.RunResult, error) {
	if runTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, runTimeout, &agents.TimeoutError{Scope: agents.TimeoutDeadline, Timeout: runTimeout})
		defer cancel()
	}
	res, err := rt.Drive(ctx, runID, agents.DriveOptions{Timeout: timeout})
	if _, driven := errors.AsType[*agents.WrongStatusError](err); driven {
		// Driven to a stop already: a job finished by a worker that died
		// before it could say so, or a run cancelled while it waited.
		logger.DebugContext(ctx, "background run needs no drive", "run", runID, "status", res.Status)
		return Done, res, nil
	}
	if _, gone := errors.AsType[*agents.RunNotFoundError](err); gone {
		logger.WarnContext(ctx, "background run not found: its job is dropped", "run", runID)
		return Done, res, nil
	}
	// Where the run stands decides; the look ignores ctx's end, which may
	// be what stopped the run.
	rec, lerr := rt.Store().LoadRun(context.WithoutCancel(ctx), runID)
	if lerr != nil {
		return Retry, res, fmt.Errorf("background run %s: read its status: %w", runID, errors.Join(err, lerr))
	}
	if rec.Status == agents.StatusQueued || rec.Status == agents.StatusRunning {
		if _, lost := errors.AsType[*agents.ConflictError](err); lost {
			// Another worker claimed it: that worker's job drives it.
			return Done, res, nil
		}
		return Retry, res, fmt.Errorf("background run %s is still %s: %w", runID, rec.Status, cmpErr(err))
	}
	if err != nil {
		logger.DebugContext(ctx, "background run stopped", "run", runID, "status", rec.Status, "err", err)
	}
	return Done, res, nil
}

func cmpErr(err error) error {
	if err == nil {
		return errors.New("its drive ended without stopping it")
	}
	return err
}
