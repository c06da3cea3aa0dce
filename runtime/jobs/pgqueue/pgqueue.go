package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/jobs"
)

// QueueRuns is the River queue of the runs of agents without a limit of
// their own; an agent with one (jobs.Config.AgentConcurrency) has the
// queue QueueRuns + "_" + its name.
const QueueRuns = "aid_runs"

// migrateLock keys the advisory lock River's migrations run under.
var migrateLock = pgutil.LockKey("aid/pgqueue:river")

// PoolConfig parses a queue's DSN into a pool configuration the way every
// store of the runtime does: pgx's, sized by the DSN's pool_max_conns or
// the runtime's default. A worker that opens the queue's pool itself (aidgen
// worker --queue) goes through it so that the DSN means the same there.
func PoolConfig(dsn string) (*pgxpool.Config, error) { return pgutil.PoolConfig(dsn) }

// Migrate brings River's tables in the database pool reaches to the
// version this River release needs, with River's migrator, under a
// session advisory lock held on a connection of its own: replicas starting
// together migrate one after another. River applies each version in a
// transaction of its own (a version may add an enum value that the next
// one uses, which one transaction cannot do).
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return fmt.Errorf("pgqueue: migrate: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgqueue: migrate River's tables: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("pgqueue: migrate River's tables: lock: %w", err)
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLock); err != nil {
			// The session ends with the connection, and the lock with it.
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("pgqueue: migrate River's tables: %w", err)
	}
	if _, err := conn.Exec(ctx, replicasTable); err != nil {
		return fmt.Errorf("pgqueue: create the replicas' heartbeat table: %w", err)
	}
	return nil
}

// replicasTable holds a heartbeat per River client that works jobs, with
// the name of its replica (jobs.Config.Replica): a client whose heartbeat
// is older than jobs.Config.DeadAfter is presumed dead, and its running
// jobs are rescued (rescueDead). River's own rescuer only knows how long a
// job has run, which must exceed the longest run.
const replicasTable = `CREATE TABLE IF NOT EXISTS aid_replicas (
	client_id    text PRIMARY KEY,
	replica      text NOT NULL,
	heartbeat_at timestamptz NOT NULL DEFAULT now()
)`

// RunArgs is the job of a background run: drive the run (jobs.Work).
type RunArgs struct {
	// RunID is the run.
	RunID string `json:"run_id"`
	// Version is the run record's version when it was queued: one job per
	// queued transition (River's unique jobs by arguments), whichever
	// replica inserts it.
	Version int64 `json:"version"`
	// TimeoutMS is the run timeout a continuation asked for, in
	// milliseconds; zero means the agent's.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
}

// Kind implements river.JobArgs.
func (RunArgs) Kind() string { return "aid_run" }

// InsertOpts implements river.JobArgsWithInsertOpts.
func (RunArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}, MaxAttempts: maxAttempts}
}

// maxAttempts bounds the attempts of a run's job: each is a drive that
// was interrupted (a shutdown, a lost database, a dead worker rescued).
const maxAttempts = 25

// Queue is a jobs.Queue on River. It is safe for concurrent use.
type Queue struct {
	rt      *agents.Runtime
	store   *pgstore.Store
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	cfg     jobs.Config
	queues  []string // every queue of runs, sorted
	metrics *metrics
	id      string

	mu       sync.Mutex
	started  bool
	stopping bool
	stopSubs func()
	subsDone chan struct{}
	stopBeat context.CancelFunc
	beatDone chan struct{}
}

// Open migrates River's tables in the database of rt's run store, which
// must be a *pgstore.Store, and returns a queue whose jobs live there. reg,
// when set, receives the queue's metrics (queue depth, job latency,
// rescues). Start starts this process's workers.
func Open(ctx context.Context, rt *agents.Runtime, cfg jobs.Config, reg prometheus.Registerer) (*Queue, error) {
	if rt == nil {
		return nil, errors.New("pgqueue: the runtime is nil")
	}
	store, ok := rt.Store().(*pgstore.Store)
	if !ok {
		return nil, fmt.Errorf("pgqueue: the runtime keeps its runs in %T, not PostgreSQL (*pgstore.Store); use jobs.NewLocal", rt.Store())
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	pool := store.Pool()
	if err := Migrate(ctx, pool, cfg.Logger); err != nil {
		return nil, err
	}
	q := &Queue{rt: rt, store: store, pool: pool, cfg: cfg, id: ClientID()}
	q.metrics, err = newMetrics(reg, q)
	if err != nil {
		return nil, err
	}
	rc := &river.Config{
		ID:     q.id,
		Logger: cfg.Logger,
		// The job's time: the run's drive (RunTimeout, which ends it
		// timed_out) and the time to save it. River's rescuer leaves a
		// job alone for as long, so a job still working is never given
		// to another worker.
		JobTimeout:           cfg.RescueAfter,
		RescueStuckJobsAfter: cfg.RescueAfter,
		RetryPolicy:          RetrySoon{},
		MaxAttempts:          maxAttempts,
		// Finished jobs are the runs' history, which the run store keeps.
		CompletedJobRetentionPeriod: time.Hour,
	}
	if cfg.Workers > 0 || len(cfg.AgentConcurrency) > 0 {
		workers := river.NewWorkers()
		if err := river.AddWorkerSafely(workers, &runWorker{q: q}); err != nil {
			return nil, fmt.Errorf("pgqueue: %w", err)
		}
		rc.Workers = workers
		rc.Queues = map[string]river.QueueConfig{}
		if cfg.Workers > 0 {
			rc.Queues[QueueRuns] = river.QueueConfig{MaxWorkers: cfg.Workers}
		}
		for a, n := range cfg.AgentConcurrency {
			rc.Queues[agentQueue(a)] = river.QueueConfig{MaxWorkers: n}
		}
	} else {
		rc.SkipUnknownJobCheck = true // an insert-only replica: others work the jobs
	}
	q.queues = append(q.queues, QueueRuns)
	for a := range cfg.AgentConcurrency {
		q.queues = append(q.queues, agentQueue(a))
	}
	sort.Strings(q.queues)
	q.client, err = river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: %w", err)
	}
	return q, nil
}

// OpenQueue is Open with the queue as a jobs.Queue: the shape
// serve.Options.Jobs takes, which a generated service whose state is in
// PostgreSQL passes.
func OpenQueue(ctx context.Context, rt *agents.Runtime, cfg jobs.Config, reg prometheus.Registerer) (jobs.Queue, error) {
	q, err := Open(ctx, rt, cfg, reg)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// ClientID names this process's River client, unique across replicas and
// saying which process it is (attempted_by in River's jobs table); the
// eval queue (package evalqueue) names its client the same way.
func ClientID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("aid_%s_%d_%d", host, os.Getpid(), time.Now().UnixNano())
}

// ID returns this process's River client id, which River records on the
// jobs it works (attempted_by).
func (q *Queue) ID() string { return q.id }

func agentQueue(agent string) string { return QueueRuns + "_" + agent }

// queueOf is the River queue of an agent's runs.
func (q *Queue) queueOf(agent string) string {
	if _, ok := q.cfg.AgentConcurrency[agent]; ok {
		return agentQueue(agent)
	}
	return QueueRuns
}

// Describe implements jobs.Queue.
func (q *Queue) Describe() []any {
	return []any{"jobs", "river on the state database", "replica", q.cfg.Replica, "client_id", q.id, "dead_after", q.cfg.DeadAfter.String(), "workers", max(0, q.cfg.Workers), "agent_concurrency", q.cfg.AgentConcurrency,
		"max_queued", q.cfg.MaxQueued, "run_timeout", q.cfg.RunTimeout.String(), "rescue_after", q.cfg.RescueAfter.String()}
}

// Start implements jobs.Queue. A queue without workers (Workers below
// zero and no agent limits) only inserts, and starts nothing.
func (q *Queue) Start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.stopping {
		return &jobs.ClosedError{}
	}
	if q.started {
		return nil
	}
	q.started = true
	if q.cfg.Workers <= 0 && len(q.cfg.AgentConcurrency) == 0 {
		return nil
	}
	events, cancel := q.client.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled)
	q.stopSubs, q.subsDone = cancel, make(chan struct{})
	go func() {
		defer close(q.subsDone)
		for ev := range events {
			q.metrics.event(ev)
		}
	}()
	// The heartbeat is written before the first job is taken, so that a
	// job of this client always has one to be judged by.
	if err := q.beat(ctx); err != nil {
		return fmt.Errorf("pgqueue: start: %w", err)
	}
	bctx, stopBeat := context.WithCancel(context.WithoutCancel(ctx))
	q.stopBeat, q.beatDone = stopBeat, make(chan struct{})
	go q.heartbeat(bctx)
	// The client's own context: Stop ends it, not the caller's ctx, so
	// that a stop signal drains rather than cuts the runs.
	if err := q.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("pgqueue: start: %w", err)
	}
	return nil
}

// beat writes this client's heartbeat.
func (q *Queue) beat(ctx context.Context) error {
	_, err := q.pool.Exec(ctx, `INSERT INTO aid_replicas (client_id, replica, heartbeat_at) VALUES ($1, $2, now())
		ON CONFLICT (client_id) DO UPDATE SET heartbeat_at = now()`, q.id, q.cfg.Replica)
	if err != nil {
		return fmt.Errorf("write the replica's heartbeat: %w", err)
	}
	return nil
}

// heartbeat writes this client's heartbeat every third of DeadAfter, and
// rescues the jobs of replicas presumed dead, until ctx ends; then it
// removes the heartbeat (the jobs in flight have stopped by then).
func (q *Queue) heartbeat(ctx context.Context) {
	defer close(q.beatDone)
	t := time.NewTicker(q.cfg.DeadAfter / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if _, err := q.pool.Exec(dctx, `DELETE FROM aid_replicas WHERE client_id = $1`, q.id); err != nil {
				q.cfg.Logger.Warn("could not remove the replica's heartbeat; it expires", "replica", q.cfg.Replica, "err", err)
			}
			return
		case <-t.C:
		}
		if err := q.beat(ctx); err != nil && ctx.Err() == nil {
			q.cfg.Logger.Warn("heartbeat failed: if it stays so for "+q.cfg.DeadAfter.String()+", other replicas take this one's runs", "replica", q.cfg.Replica, "err", err)
		}
		if err := q.rescueDead(ctx); err != nil && ctx.Err() == nil {
			q.cfg.Logger.Warn("could not rescue the runs of dead replicas", "err", err)
		}
	}
}

// rescuedFrom starts the error a rescueDead writes in a job's errors, as
// River's rescuer writes rescuedError.
const rescuedFrom = "rescued from replica "

// rescueDead makes the running jobs of runs whose worker's replica has
// written no heartbeat for DeadAfter available again at once, as River's
// rescuer does with a job that has run too long (a job at its last
// attempt is discarded), and then forgets the dead replicas that hold no
// running job. Every replica with workers runs it; a job is rescued once,
// since the update takes only running jobs.
func (q *Queue) rescueDead(ctx context.Context) error {
	rows, err := q.pool.Query(ctx, `
		UPDATE river_job j SET
			state = CASE WHEN j.attempt >= j.max_attempts THEN 'discarded'::river_job_state ELSE 'retryable'::river_job_state END,
			finalized_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
			scheduled_at = now(),
			errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt,
				'error', $3 || r.replica || ': no heartbeat since ' || to_char(r.heartbeat_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), 'trace', ''))
		FROM aid_replicas r
		WHERE j.state = 'running' AND j.kind = $2
			AND r.client_id = j.attempted_by[array_length(j.attempted_by, 1)]
			AND r.heartbeat_at < now() - make_interval(secs => $1)
		RETURNING j.id, j.args->>'run_id', r.replica, j.state::text`, q.cfg.DeadAfter.Seconds(), RunArgs{}.Kind(), rescuedFrom)
	if err != nil {
		return fmt.Errorf("rescue the jobs of dead replicas: %w", err)
	}
	for rows.Next() {
		var id int64
		var run, replica, state string
		if err := rows.Scan(&id, &run, &replica, &state); err != nil {
			rows.Close()
			return fmt.Errorf("rescue the jobs of dead replicas: %w", err)
		}
		q.cfg.Logger.Warn("rescuing a background run from a replica presumed dead", "run", run, "job", id, "from_replica", replica, "dead_after", q.cfg.DeadAfter.String(), "state", state)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rescue the jobs of dead replicas: %w", err)
	}
	_, err = q.pool.Exec(ctx, `DELETE FROM aid_replicas r WHERE r.heartbeat_at < now() - make_interval(secs => $1)
		AND NOT EXISTS (SELECT 1 FROM river_job j WHERE j.state = 'running' AND j.attempted_by[array_length(j.attempted_by, 1)] = r.client_id)`, q.cfg.DeadAfter.Seconds())
	if err != nil {
		return fmt.Errorf("forget dead replicas: %w", err)
	}
	return nil
}

// Driver implements jobs.Queue: the replica of the River client working
// the run's job, by its heartbeat's name (its client id when it has none).
func (q *Queue) Driver(ctx context.Context, runID string) (string, error) {
	var name string
	err := q.pool.QueryRow(ctx, `SELECT coalesce(r.replica, j.attempted_by[array_length(j.attempted_by, 1)])
		FROM river_job j LEFT JOIN aid_replicas r ON r.client_id = j.attempted_by[array_length(j.attempted_by, 1)]
		WHERE j.kind = $1 AND j.state = 'running' AND j.args @> jsonb_build_object('run_id', $2::text)
		ORDER BY j.id DESC LIMIT 1`, RunArgs{}.Kind(), runID).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", pgutil.Unavailable(ctx, "job queue", fmt.Errorf("find the driver of run %s: %w", runID, err))
	}
	return name, nil
}

// Stop implements jobs.Queue: River stops fetching and waits for the jobs
// in flight until ctx ends; then their contexts are cancelled, which
// interrupts their runs (they stay running, and their jobs are retried by
// another replica).
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	q.stopping = true
	started := q.started && (q.cfg.Workers > 0 || len(q.cfg.AgentConcurrency) > 0)
	q.mu.Unlock()
	if !started {
		return nil
	}
	err := q.client.Stop(ctx)
	if err != nil {
		q.cfg.Logger.Warn("stop timeout expired: interrupting the background runs in flight", "err", err)
		// Bounded: the runs see the interruption at once and save.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if herr := q.client.StopAndCancel(hctx); herr != nil {
			err = errors.Join(err, herr)
		}
	}
	q.stopSubs()
	<-q.subsDone
	if q.stopBeat != nil { // nil when Start failed before the heartbeat
		q.stopBeat()
		<-q.beatDone
	}
	if err != nil {
		return fmt.Errorf("pgqueue: stop: %w", err)
	}
	return nil
}

// Submit implements jobs.Queue.
func (q *Queue) Submit(ctx context.Context, agent, input string, opts agents.RunOptions) (agents.RunRecord, error) {
	return q.insert(ctx, func(s agents.Store) (agents.RunRecord, error) { return q.rt.Submit(ctx, s, agent, input, opts) }, 0)
}

// Resume implements jobs.Queue.
func (q *Queue) Resume(ctx context.Context, runID string, d agents.Decision) (agents.RunRecord, error) {
	return q.insert(ctx, func(s agents.Store) (agents.RunRecord, error) { return q.rt.SubmitResume(ctx, s, runID, d) }, 0)
}

// Continue implements jobs.Queue.
func (q *Queue) Continue(ctx context.Context, runID string, opts agents.ContinueOptions) (agents.RunRecord, error) {
	return q.insert(ctx, func(s agents.Store) (agents.RunRecord, error) { return q.rt.SubmitContinue(ctx, s, runID, opts) }, opts.Timeout)
}

// insert records the run queued and inserts its job in one transaction,
// after counting the runs waiting under a transaction-scoped advisory lock,
// so that replicas submitting at once cannot together exceed MaxQueued.
func (q *Queue) insert(ctx context.Context, submit func(agents.Store) (agents.RunRecord, error), timeout time.Duration) (agents.RunRecord, error) {
	q.mu.Lock()
	stopping := q.stopping
	q.mu.Unlock()
	if stopping {
		return agents.RunRecord{}, &jobs.ClosedError{}
	}
	var rec agents.RunRecord
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, q.lockKey()); err != nil {
			return err
		}
		waiting, err := q.waiting(ctx, tx)
		if err != nil {
			return err
		}
		if waiting >= q.cfg.MaxQueued {
			q.metrics.refused.Inc()
			return &jobs.FullError{Waiting: waiting, Max: q.cfg.MaxQueued, RetryAfter: q.cfg.RetryAfter}
		}
		if rec, err = submit(q.store.Tx(tx)); err != nil {
			return err
		}
		args := RunArgs{RunID: rec.RunID, Version: rec.Version, TimeoutMS: timeout.Milliseconds()}
		_, err = q.client.InsertTx(ctx, tx, args, &river.InsertOpts{Queue: q.queueOf(rec.Agent)})
		return err
	})
	if err != nil {
		return agents.RunRecord{RunID: rec.RunID}, pgutil.Unavailable(ctx, "job queue", err)
	}
	return rec, nil
}

// lockKey serialises the submissions to this database's queues.
func (q *Queue) lockKey() int64 { return pgutil.LockKey("aid/pgqueue:submit") }

// waiting counts the jobs of runs waiting for a worker, in every queue of
// runs: available, or retryable after an interrupted or rescued attempt.
func (q *Queue) waiting(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state IN ('available', 'retryable', 'scheduled') AND queue = ANY($1)`, q.queues).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the waiting jobs: %w", err)
	}
	return n, nil
}

// Waiting returns how many runs wait for a worker, in every queue of runs.
func (q *Queue) Waiting(ctx context.Context) (int, error) { return q.waiting(ctx, q.pool) }

// RetrySoon retries an interrupted or rescued job at once for its first
// attempts, then backs off to a minute: a run continues where it stood (and
// a sample is run again), so waiting gains nothing unless the database is
// down.
type RetrySoon struct{}

// NextRetry implements river.ClientRetryPolicy.
func (RetrySoon) NextRetry(job *rivertype.JobRow) time.Time {
	d := time.Duration(1<<min(job.Attempt, 6)) * time.Second
	return time.Now().Add(min(d, time.Minute))
}

// runWorker drives the run of a job.
type runWorker struct {
	river.WorkerDefaults[RunArgs]
	q *Queue
}

// rescuedError is what River's rescuer writes in the errors of a job it
// takes from a worker presumed dead.
const rescuedError = "Stuck job rescued by JobRescuer"

// Rescued reports whether job's last attempt was taken from a worker
// presumed dead, by River's rescuer or by a queue's rescue of a dead
// replica's jobs.
func Rescued(job *rivertype.JobRow) bool {
	n := len(job.Errors)
	return n > 0 && (job.Errors[n-1].Error == rescuedError || strings.HasPrefix(job.Errors[n-1].Error, rescuedFrom))
}

// Work implements river.Worker.
func (w *runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	q := w.q
	if Rescued(job.JobRow) {
		q.metrics.rescued.Inc()
		q.cfg.Logger.Warn("continuing a background run rescued from a worker presumed dead", "run", job.Args.RunID, "job", job.ID, "attempt", job.Attempt, "replica", q.cfg.Replica, "why", job.Errors[len(job.Errors)-1].Error)
	}
	q.cfg.Logger.Info("driving background run", "run", job.Args.RunID, "job", job.ID, "attempt", job.Attempt, "replica", q.cfg.Replica)
	// The run's context ends with the job's (a hard stop, River's job
	// timeout) as an interruption: the run stays running for the next
	// attempt, rather than failing.
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(agents.ErrInterrupted) })
	defer stop()
	out, res, err := jobs.Work(rctx, q.rt, job.Args.RunID, time.Duration(job.Args.TimeoutMS)*time.Millisecond, q.cfg.RunTimeout, q.cfg.Logger)
	if out == jobs.Retry {
		return err
	}
	q.metrics.runs.WithLabelValues(string(res.Status)).Inc()
	return nil
}

var _ jobs.Queue = (*Queue)(nil)
