package evalqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/jobs/pgqueue"
	"github.com/aidgen/aid/runtime/kind"
)

// QueueEvals is the River queue of eval samples.
const QueueEvals = "aid_eval"

// evalFetchCooldown is the least time between two fetches of a worker of
// samples.
const evalFetchCooldown = 5 * time.Millisecond

// SampleArgs is the job of one sample of a distributed eval: run sample
// Sample of case Case of eval Eval, as the eval command's run Batch.
type SampleArgs struct {
	// Batch names the eval command's run: its samples' results, and its
	// budget account (appeval.EvalRun.RunID), which every worker shares.
	Batch string `json:"batch" river:"unique"`
	// App and Digest name the application and the digest of its
	// description: a worker whose application differs refuses the job.
	App    string `json:"app"`
	Digest string `json:"digest"`
	// Eval is the eval's name.
	Eval string `json:"eval"`
	// Seed, when set, replaces the fake providers' seeds (--seed).
	Seed *int64 `json:"seed,omitempty"`
	// Case is the case's index in the dataset and CaseID its id, which
	// the worker checks.
	Case   int    `json:"case" river:"unique"`
	CaseID string `json:"case_id"`
	// Sample is the sample index.
	Sample int `json:"sample" river:"unique"`
}

// Kind implements river.JobArgs.
func (SampleArgs) Kind() string { return "aid_eval_sample" }

// InsertOpts implements river.JobArgsWithInsertOpts: one job per sample
// of a batch.
func (SampleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueEvals, UniqueOpts: river.UniqueOpts{ByArgs: true}, MaxAttempts: 5}
}

// SampleResult is a sample as a worker stores it and the eval command
// reads it back: eval.Sample with its errors as text, and what it cost.
type SampleResult struct {
	Case   int         `json:"case"`
	Sample int         `json:"sample"`
	Answer eval.Answer `json:"answer"`
	Err    string      `json:"err,omitempty"`
	// Deferred names the feature a failed sample needed that is not built
	// (a *kind.DeferredError), which the eval command reports as a
	// configuration error rather than a failed sample.
	Deferred   string          `json:"deferred,omitempty"`
	Scores     []float64       `json:"scores"`
	MetricErrs []string        `json:"metric_errs"`
	Pins       []eval.ModelPin `json:"pins,omitempty"`
	LatencyNS  int64           `json:"latency_ns"`
	Spend      gateway.Amount  `json:"spend"`
	Calls      int64           `json:"calls"`
	Worker     string          `json:"worker"`
}

// NewSampleResult records a sample run by RunSample.
func NewSampleResult(args SampleArgs, s eval.Sample, pins []eval.ModelPin, spend gateway.Amount, calls int64) SampleResult {
	r := SampleResult{Case: args.Case, Sample: args.Sample, Answer: s.Answer, Scores: s.Scores, Pins: pins, LatencyNS: int64(s.Latency), Spend: spend, Calls: calls}
	if s.Err != nil {
		r.Err = errors.Unwrap(s.Err).Error()
		if d, ok := errors.AsType[*kind.DeferredError](s.Err); ok {
			r.Deferred = d.Feature
		}
	}
	r.MetricErrs = make([]string, len(s.MetricErrs))
	for i, e := range s.MetricErrs {
		if e != nil {
			r.MetricErrs[i] = errors.Unwrap(e).Error()
		}
	}
	return r
}

// EvalSample returns the eval.Sample the result records, for eval.Gather; the
// errors are the text they had, with a deferred feature typed again.
func (r SampleResult) EvalSample(caseID string, metrics []eval.Metric) eval.Sample {
	s := eval.Sample{Index: r.Sample, Answer: r.Answer, Scores: r.Scores, Latency: time.Duration(r.LatencyNS), MetricErrs: make([]error, len(r.MetricErrs))}
	if r.Err != "" {
		var cause error = errors.New(r.Err)
		if r.Deferred != "" {
			cause = &kind.DeferredError{Feature: r.Deferred}
		}
		s.Err = &eval.SampleError{CaseID: caseID, Sample: r.Sample, Err: cause}
	}
	for i, e := range r.MetricErrs {
		if e != "" && i < len(metrics) {
			s.MetricErrs[i] = &eval.SampleError{CaseID: caseID, Sample: r.Sample, Metric: metrics[i].Name(), Err: errors.New(e)}
		}
	}
	return s
}

// SampleFunc runs the sample a job names and returns its result; an error
// is retried by River (another attempt, maybe on another worker), unless
// it is river.JobCancel's.
type SampleFunc func(ctx context.Context, args SampleArgs) (SampleResult, error)

// evalSteps are the results table's versions (see pgstore's migrations for
// the rules).
var evalSteps = []string{
	`CREATE TABLE aid_eval_samples (
		batch      text        NOT NULL,
		case_index integer     NOT NULL,
		sample     integer     NOT NULL,
		result     json        NOT NULL,
		worker     text        NOT NULL,
		stored_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
		PRIMARY KEY (batch, case_index, sample)
	);`,
}

// Evals is a distributed eval's queue: the eval command enqueues its
// samples (Enqueue) and waits for their results (Wait); workers
// (OpenEvals with a SampleFunc, Start) run them. A result is stored once
// per sample (the first wins, by the results table's key), so a sample
// rescued from a dead worker and run again is counted once.
type Evals struct {
	pool    *pgxpool.Pool
	client  *river.Client[pgx.Tx]
	sample  SampleFunc
	logger  *slog.Logger
	workers int
}

// EvalsConfig configures OpenEvals.
type EvalsConfig struct {
	// Workers is how many samples this process runs at once; zero for the
	// eval command, which only enqueues and waits.
	Workers int
	// Sample runs a sample; required with Workers.
	Sample SampleFunc
	// RescueAfter is how long a sample may run before River presumes its
	// worker dead and gives it to another; default 5 minutes.
	RescueAfter time.Duration
	// Logger receives the workers' failures; nil means none.
	Logger *slog.Logger
}

// OpenEvals migrates River's tables and the results table in pool's
// database and returns the queue.
func OpenEvals(ctx context.Context, pool *pgxpool.Pool, cfg EvalsConfig) (*Evals, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Workers > 0 && cfg.Sample == nil {
		return nil, errors.New("pgqueue: a worker of evals needs a SampleFunc")
	}
	if err := pgqueue.Migrate(ctx, pool, cfg.Logger); err != nil {
		return nil, err
	}
	schema := pgutil.Schema{
		LockKey:  pgutil.LockKey("aid/pgqueue:evals"),
		Steps:    evalSteps,
		Versions: pgutil.MigrationsTable{Name: "aid_eval_migrations", Clock: "clock_timestamp()"},
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return pgutil.Migrate(ctx, tx, schema) }); err != nil {
		return nil, fmt.Errorf("pgqueue: migrate the eval results table: %w", err)
	}
	e := &Evals{pool: pool, sample: cfg.Sample, logger: cfg.Logger, workers: cfg.Workers}
	rescue := cmpDuration(cfg.RescueAfter, 5*time.Minute)
	rc := &river.Config{ID: pgqueue.ClientID(), Logger: cfg.Logger, JobTimeout: rescue, RescueStuckJobsAfter: rescue, RetryPolicy: pgqueue.RetrySoon{}, CompletedJobRetentionPeriod: time.Hour}
	if cfg.Workers > 0 {
		w := river.NewWorkers()
		if err := river.AddWorkerSafely(w, &sampleWorker{e: e}); err != nil {
			return nil, fmt.Errorf("pgqueue: %w", err)
		}
		rc.Workers = w
		// Samples are short: fetch again soon after a fetch, not after
		// River's default 100 ms, which would bound a worker to
		// MaxWorkers samples per 100 ms.
		rc.Queues = map[string]river.QueueConfig{QueueEvals: {MaxWorkers: cfg.Workers, FetchCooldown: evalFetchCooldown}}
	} else {
		rc.SkipUnknownJobCheck = true
	}
	var err error
	if e.client, err = river.NewClient(riverpgxv5.New(pool), rc); err != nil {
		return nil, fmt.Errorf("pgqueue: %w", err)
	}
	return e, nil
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Start starts the workers; Stop stops them.
func (e *Evals) Start(ctx context.Context) error {
	if e.workers <= 0 {
		return nil
	}
	return e.client.Start(context.WithoutCancel(ctx))
}

// Stop stops fetching samples and waits for those running until ctx
// ends, then cancels them (River retries them on another worker).
func (e *Evals) Stop(ctx context.Context) error {
	if e.workers <= 0 {
		return nil
	}
	if err := e.client.Stop(ctx); err != nil {
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return errors.Join(err, e.client.StopAndCancel(hctx))
	}
	return nil
}

// Enqueue inserts the samples' jobs in one transaction.
func (e *Evals) Enqueue(ctx context.Context, samples []SampleArgs) error {
	params := make([]river.InsertManyParams, len(samples))
	for i, s := range samples {
		params[i] = river.InsertManyParams{Args: s}
	}
	err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		_, err := e.client.InsertManyTx(ctx, tx, params)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgqueue: enqueue %d samples: %w", len(samples), err)
	}
	return nil
}

// Wait polls the batch's results until total are stored, calling
// progress with the count as it grows, and returns them. It ends with
// ctx; a sample whose job River discarded after its attempts is reported
// as missing.
func (e *Evals) Wait(ctx context.Context, batch string, total int, progress func(done int)) ([]SampleResult, error) {
	last := -1
	for poll := 0; ; poll++ {
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM aid_eval_samples WHERE batch = $1`, batch).Scan(&n); err != nil {
			return nil, fmt.Errorf("pgqueue: count the results of %s: %w", batch, err)
		}
		if n != last && progress != nil {
			progress(n)
			last = n
		}
		if n >= total {
			break
		}
		if poll%10 != 9 {
			// A look at River's jobs, which scans them, once a second.
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("pgqueue: waiting for %d of %d samples of %s: %w", total-n, total, batch, context.Cause(ctx))
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		var discarded int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state IN ('discarded', 'cancelled') AND args->>'batch' = $2`, SampleArgs{}.Kind(), batch).Scan(&discarded); err != nil {
			return nil, fmt.Errorf("pgqueue: look for failed samples of %s: %w", batch, err)
		}
		if discarded > 0 {
			var why string
			_ = e.pool.QueryRow(ctx, `SELECT COALESCE(errors[array_length(errors, 1)]->>'error', '') FROM river_job WHERE kind = $1 AND state IN ('discarded', 'cancelled') AND args->>'batch' = $2 LIMIT 1`, SampleArgs{}.Kind(), batch).Scan(&why)
			return nil, fmt.Errorf("pgqueue: %d samples of %s were given up by the workers: %s", discarded, batch, why)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pgqueue: waiting for %d of %d samples of %s: %w", total-n, total, batch, context.Cause(ctx))
		case <-time.After(100 * time.Millisecond):
		}
	}
	rows, err := e.pool.Query(ctx, `SELECT result FROM aid_eval_samples WHERE batch = $1 ORDER BY case_index, sample`, batch)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: read the results of %s: %w", batch, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (SampleResult, error) {
		var b []byte
		var r SampleResult
		if err := row.Scan(&b); err != nil {
			return r, err
		}
		return r, json.Unmarshal(b, &r)
	})
	if err != nil {
		return nil, fmt.Errorf("pgqueue: read the results of %s: %w", batch, err)
	}
	return out, nil
}

// sampleWorker runs a sample and stores its result with its job's
// completion.
type sampleWorker struct {
	river.WorkerDefaults[SampleArgs]
	e *Evals
}

// Work implements river.Worker.
func (w *sampleWorker) Work(ctx context.Context, job *river.Job[SampleArgs]) error {
	if pgqueue.Rescued(job.JobRow) {
		w.e.logger.Warn("running a sample rescued from a worker presumed dead", "batch", job.Args.Batch, "case", job.Args.CaseID, "sample", job.Args.Sample, "attempt", job.Attempt)
	}
	res, err := w.e.sample(ctx, job.Args)
	if err != nil {
		return err
	}
	res.Worker = w.e.client.ID()
	b, err := json.Marshal(res)
	if err != nil {
		return river.JobCancel(fmt.Errorf("encode the result: %w", err))
	}
	// The first result of a sample is kept: a second attempt's (a sample
	// rescued from a worker presumed dead that was not, or one whose
	// worker died after storing it and before River completed its job)
	// changes nothing. River completes the job, in its batches, once Work
	// returns.
	_, err = w.e.pool.Exec(ctx, `INSERT INTO aid_eval_samples (batch, case_index, sample, result, worker) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`, job.Args.Batch, job.Args.Case, job.Args.Sample, string(b), res.Worker)
	if err != nil {
		return fmt.Errorf("store the result of case %s sample %d: %w", job.Args.CaseID, job.Args.Sample, err)
	}
	return nil
}

// Results counts the stored results per worker of a batch, for a report
// of who ran what.
func (e *Evals) Results(ctx context.Context, batch string) (map[string]int, error) {
	rows, err := e.pool.Query(ctx, `SELECT worker, count(*) FROM aid_eval_samples WHERE batch = $1 GROUP BY worker`, batch)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for rows.Next() {
		var w string
		var n int
		if err := rows.Scan(&w, &n); err != nil {
			rows.Close()
			return nil, err
		}
		out[strings.TrimSpace(w)] = n
	}
	return out, rows.Err()
}
