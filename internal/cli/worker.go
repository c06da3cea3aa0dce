package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/pgledger"
	"github.com/aidgen/aid/runtime/jobs/pgqueue"
	"github.com/aidgen/aid/runtime/jobs/pgqueue/evalqueue"
)

type workerFlags struct {
	tags        []string
	queue       string
	concurrency int
	rescue      time.Duration
}

func newWorker(s *streams) *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker FILE --queue DSN",
		Short: "Run the samples of distributed evals (aidgen eval --queue) from a PostgreSQL queue",
		Long: `Worker runs the samples that aidgen eval --queue DSN enqueues, as River jobs
in the PostgreSQL database DSN names, until it is interrupted (SIGTERM or
Ctrl-C: it finishes the samples in flight, up to 30 seconds, and the rest
go back to the queue). Start any number of workers, on any machine that
reaches the database, with the same application file (and -t tags) as the
eval command: a sample of another application, or of another version of
it, is refused and left for a worker that has it.

Budgets are kept in the database's ledger, so that the workers of one eval
share its budget and cannot together overspend it. A worker that dies
(SIGKILL, a lost machine) leaves its samples to River's rescuer, which gives
them to another worker after --rescue-after; each sample is counted once.`,
		Example: `  aidgen worker app.cue --queue "$DATABASE_URL" --concurrency 8 &
  aidgen eval app.cue --queue "$DATABASE_URL"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(errors.New("worker needs exactly one application file; usage: aidgen worker FILE --queue DSN"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.queue == "" {
				return usageErr(errors.New("worker needs --queue DSN: the PostgreSQL database the eval command enqueues to"))
			}
			if f.concurrency < 1 {
				return usageErr(fmt.Errorf("--concurrency must be at least 1, not %d", f.concurrency))
			}
			return runWorker(cmd.Context(), s, args[0], f)
		},
	}
	fl := cmd.Flags()
	tagFlag(cmd, &f.tags)
	fl.StringVar(&f.queue, "queue", "", "PostgreSQL `DSN` of the queue (River's tables, the results and the budget ledger)")
	fl.IntVar(&f.concurrency, "concurrency", 4, "samples this worker runs at once")
	fl.DurationVar(&f.rescue, "rescue-after", 5*time.Minute, "how long a sample may run before River gives it to another worker")
	return cmd
}

// descriptionDigest identifies an application's description across
// machines: its JSON form without the directory it was read from.
func descriptionDigest(desc app.Description, evals []appeval.Eval) (string, error) {
	desc.Dir = ""
	b, err := json.Marshal(struct {
		Desc  app.Description
		Evals []appeval.Eval
	}{desc, evals})
	if err != nil {
		return "", fmt.Errorf("digest of the application: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}

// openQueuePool opens the pool of a --queue DSN.
func openQueuePool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgqueue.PoolConfig(dsn)
	if err != nil {
		return nil, usageErr(fmt.Errorf("--queue: %w", err))
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--queue: connect: %w", err)
	}
	return pool, nil
}

func runWorker(ctx context.Context, s *streams, path string, f workerFlags) error {
	desc, evals, err := loadWithEvals(s, path, f.tags)
	if err != nil {
		return err
	}
	digest, err := descriptionDigest(desc, evals)
	if err != nil {
		return err
	}
	pool, err := openQueuePool(ctx, f.queue)
	if err != nil {
		return err
	}
	defer pool.Close()
	ledger, err := pgledger.New(pool)
	if err == nil {
		err = ledger.Migrate(ctx)
	}
	if err != nil {
		return fmt.Errorf("opening the budget ledger: %w", err)
	}
	w := &sampleRunner{s: s, desc: desc, evals: evals, digest: digest, ledger: &tallyLedger{Ledger: ledger, open: map[string]*tally{}}, runs: map[evalKey]*appeval.EvalRun{}}
	defer w.close()
	q, err := evalqueue.OpenEvals(ctx, pool, evalqueue.EvalsConfig{Workers: f.concurrency, Sample: w.run, RescueAfter: f.rescue})
	if err != nil {
		return err
	}
	if err := q.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(s.err, "worker: %s %s (digest %s) runs up to %d samples at once; Ctrl-C stops it\n", desc.Name, desc.Version, digest, f.concurrency)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := q.Stop(sctx); err != nil {
		fmt.Fprintf(s.err, "worker: samples interrupted at stop, left to other workers: %v\n", err)
	}
	fmt.Fprintf(s.err, "worker: stopped after %d samples\n", w.done.Load())
	return nil
}

// evalKey names one eval run a worker has assembled.
type evalKey struct {
	eval, batch string
	seed        int64
	seeded      bool
}

// sampleRunner runs the samples of a worker, assembling each eval run
// once (the application with the batch's seed, the eval's dataset and
// metrics), on the shared ledger.
type sampleRunner struct {
	s      *streams
	desc   app.Description
	digest string
	ledger *tallyLedger
	done   atomic.Int64

	mu      sync.Mutex
	evals   []appeval.Eval
	runs    map[evalKey]*appeval.EvalRun
	closers []func()
}

// maxEvalRuns bounds the eval runs a worker keeps assembled; the oldest
// are dropped, so that a long-lived worker's memory stays flat.
const maxEvalRuns = 8

func (w *sampleRunner) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.closers {
		c()
	}
}

// evalRun returns the assembled eval run of a job.
func (w *sampleRunner) evalRun(ctx context.Context, args evalqueue.SampleArgs) (*appeval.EvalRun, error) {
	k := evalKey{eval: args.Eval, batch: args.Batch}
	if args.Seed != nil {
		k.seed, k.seeded = *args.Seed, true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.runs[k]; ok {
		return e, nil
	}
	opts, closeCache := commandOptions(w.s, w.desc)
	opts.Ledger = w.ledger
	if k.seeded {
		seed := k.seed
		opts.Seed = &seed
	}
	a, err := appeval.Assemble(ctx, w.desc, w.evals, opts)
	if err != nil {
		closeCache()
		return nil, err
	}
	// The app's stores close with it, then the embedding cache.
	closeStores := func() {
		_ = a.Close()
		closeCache()
	}
	e, err := a.Eval(args.Eval)
	if err != nil {
		closeStores()
		return nil, err
	}
	e.RunID = args.Batch // the batch's budget account, shared by its workers
	if len(w.runs) >= maxEvalRuns {
		clear(w.runs)
	}
	w.runs[k] = e
	w.closers = append(w.closers, closeStores)
	return e, nil
}

// run is the worker's evalqueue.SampleFunc.
func (w *sampleRunner) run(ctx context.Context, args evalqueue.SampleArgs) (evalqueue.SampleResult, error) {
	if args.App != w.desc.Name || args.Digest != w.digest {
		return evalqueue.SampleResult{}, fmt.Errorf("sample of %s (digest %s) refused: this worker serves %s (digest %s); start the worker with the eval's application file and tags", args.App, args.Digest, w.desc.Name, w.digest)
	}
	e, err := w.evalRun(ctx, args)
	if err != nil {
		return evalqueue.SampleResult{}, err
	}
	if args.Case < 0 || args.Case >= len(e.Dataset.Cases) || e.Dataset.Cases[args.Case].ID != args.CaseID {
		return evalqueue.SampleResult{}, fmt.Errorf("sample of case %d (%q) refused: the worker's dataset of eval %s differs", args.Case, args.CaseID, args.Eval)
	}
	t := &tally{}
	s, pins := eval.RunSample(withTally(ctx, t), e.Dataset.Cases[args.Case], args.Sample, e.Runner, e.Metrics)
	if err := ctx.Err(); err != nil {
		// Stopped, not answered: the job is tried again.
		return evalqueue.SampleResult{}, context.Cause(ctx)
	}
	w.done.Add(1)
	spend, calls := t.get()
	return evalqueue.NewSampleResult(args, s, pins, spend, calls), nil
}

// tally is what one sample's calls spent, as the ledger settled it.
type tally struct {
	mu    sync.Mutex
	spend gateway.Amount
	calls int64
}

func (t *tally) get() (gateway.Amount, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.spend, t.calls
}

type tallyKey struct{}

func withTally(ctx context.Context, t *tally) context.Context {
	return context.WithValue(ctx, tallyKey{}, t)
}

// tallyLedger is the shared ledger, also adding each settled call to the
// tally of the sample that made it, so that an eval's cost is its
// samples' whatever else the database's ledger holds.
type tallyLedger struct {
	gateway.Ledger
	mu   sync.Mutex
	open map[string]*tally
}

// Reserve implements gateway.Ledger.
func (l *tallyLedger) Reserve(ctx context.Context, r gateway.Reservation) error {
	if err := l.Ledger.Reserve(ctx, r); err != nil {
		return err
	}
	if t, ok := ctx.Value(tallyKey{}).(*tally); ok {
		l.mu.Lock()
		l.open[r.ID] = t
		l.mu.Unlock()
	}
	return nil
}

// Settle implements gateway.Ledger.
func (l *tallyLedger) Settle(ctx context.Context, id string, actual gateway.Amount) error {
	err := l.Ledger.Settle(ctx, id, actual)
	l.mu.Lock()
	t := l.open[id]
	delete(l.open, id)
	l.mu.Unlock()
	if err == nil && t != nil {
		t.mu.Lock()
		t.spend, t.calls = t.spend.Add(actual), t.calls+1
		t.mu.Unlock()
	}
	return err
}

// Release implements gateway.Ledger.
func (l *tallyLedger) Release(ctx context.Context, id string) error {
	l.mu.Lock()
	delete(l.open, id)
	l.mu.Unlock()
	return l.Ledger.Release(ctx, id)
}
