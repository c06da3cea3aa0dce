package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/jobs/pgqueue"
)

// replica is one process's runtime and queue on the shared database.
type replica struct {
	rt      *agents.Runtime
	q       *pgqueue.Queue
	reg     *prometheus.Registry
	refunds *atomic.Int32
}

// newReplica opens a runtime on dsn (its own pool, as another process
// would) whose agent looks an order up, then refunds it (approval
// required), then answers; and a queue with cfg, started.
func newReplica(t *testing.T, dsn string, cfg jobs.Config) *replica {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := pgstore.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	p, err := fake.New(fake.Config{Agents: map[string][]fake.Step{"desk": {
		{ToolCalls: []gateway.ToolCall{{ID: "l", Name: "lookup", Arguments: json.RawMessage(`{}`)}}},
		{ToolCalls: []gateway.ToolCall{{ID: "r", Name: "refund", Arguments: json.RawMessage(`{}`)}}},
		{Text: "refunded"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "small", Spec: gateway.ModelSpec{ID: "m", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100,
			Capabilities: []gateway.Capability{gateway.CapabilityTools}}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		t.Fatal(err)
	}
	var refunds atomic.Int32
	schema := json.RawMessage(`{"type":"object"}`)
	rt, err := agents.New(agents.Config{
		Gateway: gw, Store: store,
		Agents: []agents.Agent{{Name: "desk", Model: "small", Tools: []string{"lookup", "refund"}}},
		Tools: []agents.Tool{
			{Name: "lookup", Description: "d", Input: schema},
			{Name: "refund", Description: "d", Input: schema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways},
		},
		Implementations: map[string]agents.Implementation{
			"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "order A", nil }),
			"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { refunds.Add(1); return "done", nil }),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	q, err := pgqueue.Open(ctx, rt, cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := q.Stop(sctx); err != nil {
			t.Error(err)
		}
	})
	return &replica{rt: rt, q: q, reg: reg, refunds: &refunds}
}

func waitStatus(t *testing.T, rt *agents.Runtime, id string, want agents.Status) agents.RunRecord {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec, err := rt.Store().LoadRun(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status == want {
			return rec
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s", id, rec.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAnotherReplicaDrives submits a run on a replica that only inserts:
// the other replica's worker drives it to its pause; the decision, posted
// to the first, is queued and driven by the second too. River records
// which client worked each job.
func TestAnotherReplicaDrives(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	front := newReplica(t, dsn, jobs.Config{Workers: -1})
	worker := newReplica(t, dsn, jobs.Config{Workers: 2})
	ctx := context.Background()

	rec, err := front.q.Submit(ctx, "desk", "refund A", agents.RunOptions{ThreadID: "th"})
	if err != nil || rec.Status != agents.StatusQueued {
		t.Fatalf("submit: %+v %v", rec, err)
	}
	waitStatus(t, front.rt, rec.RunID, agents.StatusPaused)
	if _, err := front.q.Resume(ctx, rec.RunID, agents.Decision{Action: agents.Approve, By: "alice"}); err != nil {
		t.Fatal(err)
	}
	done := waitStatus(t, front.rt, rec.RunID, agents.StatusCompleted)
	if front.refunds.Load() != 0 || worker.refunds.Load() != 1 || agents.LastText(done.Checkpoint.Steps) != "refunded" {
		t.Fatalf("refunds front %d worker %d", front.refunds.Load(), worker.refunds.Load())
	}
	var by []string
	conn, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(ctx, `SELECT attempted_by[array_length(attempted_by, 1)] FROM river_job WHERE args->>'run_id' = $1 ORDER BY id`, rec.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		by = append(by, s)
	}
	if len(by) != 2 || by[0] != worker.q.ID() || by[1] != worker.q.ID() {
		t.Fatalf("jobs worked by %v, want twice %s", by, worker.q.ID())
	}
	if err := testutil.GatherAndCompare(worker.reg, strings.NewReader(`
# HELP aid_background_runs_total Background runs this process's workers drove to a stop, by the status they stopped in.
# TYPE aid_background_runs_total counter
aid_background_runs_total{status="completed"} 1
aid_background_runs_total{status="paused"} 1
`), "aid_background_runs_total"); err != nil {
		t.Fatal(err)
	}
}

// TestFullQueue fills a queue nobody works: the submission beyond
// MaxQueued is a *jobs.FullError and writes no run, and the depth metric
// says how many wait.
func TestFullQueue(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	r := newReplica(t, dsn, jobs.Config{Workers: -1, MaxQueued: 2, RetryAfter: 2 * time.Second})
	ctx := context.Background()
	for range 2 {
		if _, err := r.q.Submit(ctx, "desk", "x", agents.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := r.q.Submit(ctx, "desk", "x", agents.RunOptions{})
	var full *jobs.FullError
	if !errors.As(err, &full) || full.Waiting != 2 || full.RetryAfter != 2*time.Second {
		t.Fatalf("third submission: %v", err)
	}
	if rec.RunID != "" {
		if _, err := r.rt.Store().LoadRun(ctx, rec.RunID); !errors.As(err, new(*agents.RunNotFoundError)) {
			t.Fatalf("a refused submission left its run: %v", err)
		}
	}
	if n, err := r.q.Waiting(ctx); err != nil || n != 2 {
		t.Fatalf("waiting %d %v", n, err)
	}
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(`
# HELP aid_jobs_refused_total Background submissions refused because the queue held MaxQueued waiting runs (answered 429).
# TYPE aid_jobs_refused_total counter
aid_jobs_refused_total 1
# HELP aid_jobs_waiting Jobs of background runs waiting for a worker (available, retryable or scheduled), by River queue, at scrape time.
# TYPE aid_jobs_waiting gauge
aid_jobs_waiting{queue="aid_runs"} 2
`), "aid_jobs_waiting", "aid_jobs_refused_total"); err != nil {
		t.Fatal(err)
	}
}

// TestAgentQueue gives the agent a limit of its own: its runs' jobs go to
// its River queue, which this replica works with one worker even though it
// has no shared workers.
func TestAgentQueue(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	r := newReplica(t, dsn, jobs.Config{Workers: -1, AgentConcurrency: map[string]int{"desk": 1}})
	ctx := context.Background()
	var ids []string
	for range 2 {
		rec, err := r.q.Submit(ctx, "desk", "refund A", agents.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.RunID)
	}
	for _, id := range ids {
		waitStatus(t, r.rt, id, agents.StatusPaused)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var queues []string
	rows, err := pool.Query(ctx, `SELECT DISTINCT queue FROM river_job`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, q)
	}
	if len(queues) != 1 || queues[0] != pgqueue.QueueRuns+"_desk" {
		t.Fatalf("jobs in queues %v, want only %s_desk", queues, pgqueue.QueueRuns)
	}
}

// TestDeadReplicasRunGoesOnWithinSeconds: a job that a replica was working
// when it died (its heartbeat a minute old) is taken over by a live
// replica within seconds (DeadAfter), not after River's RescueAfter (the
// run timeout plus 15s, ten minutes by default); until then the run names
// the dead replica as its driver, and the dead replica is forgotten once
// it holds no job.
func TestDeadReplicasRunGoesOnWithinSeconds(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	front := newReplica(t, dsn, jobs.Config{Workers: -1})
	ctx := context.Background()
	rec, err := front.q.Submit(ctx, "desk", "refund A", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	// The dead replica had taken the job; it wrote its last heartbeat a
	// minute ago.
	if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '1 minute',
		attempted_by = ARRAY['aid_dead_client'] WHERE args->>'run_id' = $1`, rec.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO aid_replicas (client_id, replica, heartbeat_at) VALUES ('aid_dead_client', 'desk-dead', now() - interval '1 minute')`); err != nil {
		t.Fatal(err)
	}
	if by, err := front.q.Driver(ctx, rec.RunID); err != nil || by != "desk-dead" {
		t.Fatalf("driver %q, %v; want desk-dead", by, err)
	}
	start := time.Now()
	worker := newReplica(t, dsn, jobs.Config{Workers: 1, DeadAfter: 3 * time.Second, Replica: "desk-live"})
	waitStatus(t, worker.rt, rec.RunID, agents.StatusPaused)
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("the run went on after %v", d)
	}
	var last string
	if err := pool.QueryRow(ctx, `SELECT errors[array_length(errors, 1)]->>'error' FROM river_job WHERE args->>'run_id' = $1`, rec.RunID).Scan(&last); err != nil ||
		!strings.HasPrefix(last, "rescued from replica desk-dead: no heartbeat since ") {
		t.Errorf("the job's last error %q, %v", last, err)
	}
	if err := testutil.GatherAndCompare(worker.reg, strings.NewReader(`
# HELP aid_jobs_rescued_total Jobs this process took over after they were taken from a worker presumed dead (its replica silent for DeadAfter, or the job older than RescueAfter).
# TYPE aid_jobs_rescued_total counter
aid_jobs_rescued_total 1
`), "aid_jobs_rescued_total"); err != nil {
		t.Error(err)
	}
	var dead int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM aid_replicas WHERE client_id = 'aid_dead_client'`).Scan(&dead); err != nil || dead != 0 {
		t.Errorf("the dead replica is still listed (%d, %v)", dead, err)
	}
}
