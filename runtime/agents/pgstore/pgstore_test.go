package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
)

func checkpoint(runID string) agents.Checkpoint {
	return agents.Checkpoint{Version: agents.CheckpointVersion, RunID: runID, Agent: "desk", Path: []string{"desk"}, Alias: "small",
		Messages: []agents.SavedMessage{{Role: "user", Content: "hi"}}}
}

// schemaVersions returns the versions the migrations table records.
func schemaVersions(t *testing.T, pool *pgxpool.Pool, prefix string) []int {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT version FROM `+pgx.Identifier{prefix + "_migrations"}.Sanitize()+` ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func wantVersions() []int {
	var out []int
	for v := 1; v <= pgstore.SchemaVersion; v++ {
		out = append(out, v)
	}
	return out
}

// TestReplicasMigrateAtOnce starts several replicas on a fresh database at
// the same instant, each with its own pool: all start, and each schema step
// is applied once. Without the advisory lock, concurrent CREATE TABLEs fail
// with a unique violation in the catalog.
func TestReplicasMigrateAtOnce(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const n = 8
	pools := make([]*pgxpool.Pool, n)
	for i := range pools {
		pools[i] = openPool(t, dsn)
		if err := pools[i].Ping(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range pools {
		wg.Go(func() {
			<-start
			_, errs[i] = pgstore.New(t.Context(), p)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	if got := schemaVersions(t, pools[0], "aid_agent"); fmt.Sprint(got) != fmt.Sprint(wantVersions()) {
		t.Fatalf("migrations recorded %v, want %v", got, wantVersions())
	}
}

// TestMigrateKeepsData runs New again on a database in use: nothing is
// lost, nothing is applied twice.
func TestMigrateKeepsData(t *testing.T) {
	pool := pgtest.NewPool(t)
	s, err := pgstore.New(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateRun(t.Context(), agents.RunRecord{RunID: "run_1", Agent: "desk", Status: agents.StatusPaused, Checkpoint: checkpoint("run_1")}); err != nil {
		t.Fatal(err)
	}
	s2, err := pgstore.New(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := s2.LoadRun(t.Context(), "run_1"); err != nil || rec.Status != agents.StatusPaused {
		t.Fatalf("after a second migration: %+v, %v", rec, err)
	}
	if got := schemaVersions(t, pool, "aid_agent"); fmt.Sprint(got) != fmt.Sprint(wantVersions()) {
		t.Fatalf("migrations recorded %v, want %v", got, wantVersions())
	}
}

// TestSchemaTooNew refuses a database a newer release migrated.
func TestSchemaTooNew(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pgstore.New(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `INSERT INTO aid_agent_migrations (version) VALUES ($1)`, pgstore.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	var tooNew *pgstore.SchemaTooNewError
	_, err := pgstore.New(t.Context(), pool)
	if !errors.As(err, &tooNew) || tooNew.Database != pgstore.SchemaVersion+1 || tooNew.Known != pgstore.SchemaVersion {
		t.Fatalf("New on a newer schema: %v, want *SchemaTooNewError", err)
	}
}

// TestFailedMigrationChangesNothing meets a table of the same name that is
// not the store's: New fails naming the step, and the transaction leaves
// the database as it was (no migrations table, no other tables).
func TestFailedMigrationChangesNothing(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE aid_agent_calls (id int)`); err != nil {
		t.Fatal(err)
	}
	_, err := pgstore.New(t.Context(), pool)
	if err == nil || !strings.Contains(err.Error(), "migrate: step 1") {
		t.Fatalf("New over a foreign table: %v", err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'aid_agent%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d aid_agent tables after a failed migration, want only the foreign one", n)
	}
}

// TestOptions checks the options' refusals and that prefixes keep stores
// apart in one database.
func TestOptions(t *testing.T) {
	pool := pgtest.NewPool(t)
	for _, tt := range []struct {
		name string
		opt  pgstore.Option
		want string
	}{
		{"upper-case prefix", pgstore.WithTablePrefix("Aid"), "invalid table prefix"},
		{"quoting prefix", pgstore.WithTablePrefix(`x"; DROP TABLE y; --`), "invalid table prefix"},
		{"empty prefix", pgstore.WithTablePrefix(""), "invalid table prefix"},
		{"zero timeout", pgstore.WithOpTimeout(0), "not positive"},
	} {
		if _, err := pgstore.New(t.Context(), pool, tt.opt); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := pgstore.New(t.Context(), nil); err == nil {
		t.Errorf("New with a nil pool succeeded")
	}
	a, err := pgstore.New(t.Context(), pool, pgstore.WithTablePrefix("tenant_a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := pgstore.New(t.Context(), pool, pgstore.WithTablePrefix("tenant_b"), pgstore.WithOpTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.CreateRun(t.Context(), agents.RunRecord{RunID: "run_1", Agent: "desk", Status: agents.StatusRunning, Checkpoint: checkpoint("run_1")}); err != nil {
		t.Fatal(err)
	}
	var nf *agents.RunNotFoundError
	if _, err := b.LoadRun(t.Context(), "run_1"); !errors.As(err, &nf) {
		t.Fatalf("prefix tenant_b sees tenant_a's run: %v", err)
	}
}

// TestOpTimeoutBoundsAHungDatabase holds a lock on a run's row from another
// connection, so the store's update waits: the operation timeout ends it,
// even under a context that is never canceled (as the runtime's final
// writes are).
func TestOpTimeoutBoundsAHungDatabase(t *testing.T) {
	pool := pgtest.NewPool(t)
	// Migrated first under the default bound: the test is about the one
	// update, and migrating takes longer on a loaded machine.
	if _, err := pgstore.New(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(t.Context(), pool, pgstore.WithOpTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.CreateRun(t.Context(), agents.RunRecord{RunID: "run_1", Agent: "desk", Status: agents.StatusRunning, Checkpoint: checkpoint("run_1")})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // the test only holds a lock
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM aid_agent_runs WHERE run_id = 'run_1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateRun(context.WithoutCancel(t.Context()), rec)
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(fmt.Sprint(err), "timeout") {
		t.Fatalf("update under a held lock: %v, want the operation timeout", err)
	}
}

// TestBadIdentifiers sends identifiers PostgreSQL text cannot hold: writes
// are refused naming the field, reads find nothing, and nothing reaches the
// database as a confusing encoding error.
func TestBadIdentifiers(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	s, err := pgstore.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	var inv *pgstore.InvalidTextError
	for _, id := range []string{"run\x00", "run\xff"} {
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "desk", Checkpoint: checkpoint(id)}); !errors.As(err, &inv) || inv.Field != "run id" {
			t.Errorf("CreateRun(%q): %v, want *InvalidTextError on the run id", id, err)
		}
		var nf *agents.RunNotFoundError
		if _, err := s.LoadRun(ctx, id); !errors.As(err, &nf) {
			t.Errorf("LoadRun(%q): %v, want *RunNotFoundError", id, err)
		}
		if _, err := s.UpdateRun(ctx, agents.RunRecord{RunID: id, Version: 1}); !errors.As(err, &nf) {
			t.Errorf("UpdateRun(%q): %v, want *RunNotFoundError", id, err)
		}
		if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_1", Key: id}); !errors.As(err, &inv) || inv.Field != "call key" {
			t.Errorf("RecordCall with key %q: %v, want *InvalidTextError on the key", id, err)
		}
		var cnf *agents.CallNotFoundError
		if err := s.FinishCall(ctx, "run_1", id, agents.CallResult{}); !errors.As(err, &cnf) {
			t.Errorf("FinishCall with key %q: %v, want *CallNotFoundError", id, err)
		}
		if _, err := s.Call(ctx, id, "1.0"); !errors.As(err, &cnf) {
			t.Errorf("Call(%q): %v, want *CallNotFoundError", id, err)
		}
		if cs, err := s.Calls(ctx, id); err != nil || len(cs) != 0 {
			t.Errorf("Calls(%q): %v, %v", id, cs, err)
		}
		if _, err := s.Memory(id); !errors.As(err, &inv) {
			t.Errorf("Memory(%q): %v, want *InvalidTextError", id, err)
		}
		m, err := s.Memory("notes")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.AddMemory(ctx, agents.MemoryUser, id, "x"); !errors.As(err, &inv) || inv.Field != "user id" {
			t.Errorf("AddMemory for user %q: %v, want *InvalidTextError on the user id", id, err)
		}
		if es, err := m.Memories(ctx, agents.MemoryUser, id); err != nil || len(es) != 0 {
			t.Errorf("Memories of user %q: %v, %v", id, es, err)
		}
	}
	if _, err := s.Memory(""); err == nil {
		t.Errorf("a memory store without a name was accepted")
	}
	// A checkpoint an operator broke by hand is reported, not half-read.
	if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_bad", Agent: "desk", Status: agents.StatusPaused, Checkpoint: checkpoint("run_bad")}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE aid_agent_runs SET checkpoint = '{"version":"one"}' WHERE run_id = 'run_bad'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadRun(ctx, "run_bad"); err == nil || !strings.Contains(err.Error(), "decode checkpoint") {
		t.Errorf("LoadRun of a broken checkpoint: %v", err)
	}
}

// TestAbortedStatementIsRetriedOnce makes the database abort the store's
// writes: a trigger raises the given SQLSTATE on the first `times` writes
// of a table, counted by a sequence, which an abort does not undo. A
// deadlock or serialization failure is run again once and the write lands
// once; a second abort, any other error, or a store told not to retry
// reaches the caller with the database's code.
func TestAbortedStatementIsRetriedOnce(t *testing.T) {
	type op struct {
		table string
		run   func(context.Context, *pgstore.Store) error
		check func(context.Context, *pgstore.Store) error // that the write landed
	}
	ops := map[string]op{
		"create": {"runs", func(ctx context.Context, s *pgstore.Store) error {
			_, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_2", Agent: "desk", Status: agents.StatusRunning, Checkpoint: checkpoint("run_2")})
			return err
		}, func(ctx context.Context, s *pgstore.Store) error {
			rec, err := s.LoadRun(ctx, "run_2")
			if err == nil && rec.Version != 1 {
				err = fmt.Errorf("version %d, want 1", rec.Version)
			}
			return err
		}},
		"update": {"runs", func(ctx context.Context, s *pgstore.Store) error {
			_, err := s.UpdateRun(ctx, agents.RunRecord{RunID: "run_1", Agent: "desk", Status: agents.StatusCompleted, Version: 1, Checkpoint: checkpoint("run_1")})
			return err
		}, func(ctx context.Context, s *pgstore.Store) error {
			rec, err := s.LoadRun(ctx, "run_1")
			if err == nil && (rec.Version != 2 || rec.Status != agents.StatusCompleted) {
				err = fmt.Errorf("version %d status %s, want 2 completed", rec.Version, rec.Status)
			}
			return err
		}},
		"record": {"calls", func(ctx context.Context, s *pgstore.Store) error {
			return s.RecordCall(ctx, agents.CallRecord{RunID: "run_1", Key: "1.1", Tool: "refund", Effects: agents.EffectsWrite})
		}, func(ctx context.Context, s *pgstore.Store) error {
			_, err := s.Call(ctx, "run_1", "1.1")
			return err
		}},
		"finish": {"calls", func(ctx context.Context, s *pgstore.Store) error {
			return s.FinishCall(ctx, "run_1", "1.0", agents.CallResult{Observation: "done"})
		}, func(ctx context.Context, s *pgstore.Store) error {
			c, err := s.Call(ctx, "run_1", "1.0")
			if err == nil && (c.Result == nil || c.Result.Observation != "done") {
				err = fmt.Errorf("result %+v, want done", c.Result)
			}
			return err
		}},
		"memory": {"memory", func(ctx context.Context, s *pgstore.Store) error {
			m, _ := s.Memory("notes")
			_, err := m.AddMemory(ctx, agents.MemoryGlobal, "", "fact")
			return err
		}, func(ctx context.Context, s *pgstore.Store) error {
			m, _ := s.Memory("notes")
			es, err := m.Memories(ctx, agents.MemoryGlobal, "")
			if err == nil && len(es) != 1 {
				err = fmt.Errorf("%d entries, want 1", len(es))
			}
			return err
		}},
	}
	tests := []struct {
		op        string
		code      string
		times     int
		noRetry   bool
		wantErr   bool
		wantFired int64
	}{
		{op: "create", code: "40001", times: 1, wantFired: 2},
		{op: "update", code: "40P01", times: 1, wantFired: 2},
		{op: "record", code: "40001", times: 1, wantFired: 2},
		{op: "finish", code: "40P01", times: 1, wantFired: 2},
		{op: "memory", code: "40001", times: 1, wantFired: 2},
		{op: "update", code: "40001", times: 2, wantErr: true, wantFired: 2},
		{op: "finish", code: "40001", times: 2, wantErr: true, wantFired: 2},
		{op: "record", code: "23514", times: 1, wantErr: true, wantFired: 1},
		{op: "update", code: "40001", times: 1, noRetry: true, wantErr: true, wantFired: 1},
	}
	for _, tt := range tests {
		name := fmt.Sprintf("%s %s %d", tt.op, tt.code, tt.times)
		if tt.noRetry {
			name += " no retry"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			pool := pgtest.NewPool(t)
			s, err := pgstore.New(ctx, pool)
			if err != nil {
				t.Fatal(err)
			}
			if tt.noRetry {
				pgstore.NoRetry(s)
			}
			if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_1", Agent: "desk", Status: agents.StatusRunning, Checkpoint: checkpoint("run_1")}); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_1", Key: "1.0", Tool: "lookup", Effects: agents.EffectsRead}); err != nil {
				t.Fatal(err)
			}
			o := ops[tt.op]
			fired := pgtest.AbortWrites(t, pool, "aid_agent_"+o.table, "INSERT OR UPDATE", tt.code, tt.times)
			err = o.run(ctx, s)
			var pe *pgconn.PgError
			switch {
			case tt.wantErr && (!errors.As(err, &pe) || pe.Code != tt.code):
				t.Errorf("%s: %v, want the database's %s", tt.op, err, tt.code)
			case !tt.wantErr && err != nil:
				t.Errorf("%s: %v", tt.op, err)
			case !tt.wantErr:
				if err := o.check(ctx, s); err != nil {
					t.Errorf("after %s: %v", tt.op, err)
				}
			}
			if n := fired(); n != tt.wantFired {
				t.Errorf("the statement ran %d times, want %d", n, tt.wantFired)
			}
		})
	}
}

// TestTxView writes a run through a transaction's view of the store: it
// is seen by nobody until the transaction commits, and a rollback leaves
// nothing behind, so that a job queue can write a run and its job
// together.
func TestTxView(t *testing.T) {
	ctx := t.Context()
	pool := pgtest.NewPool(t)
	s, err := pgstore.New(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Pool() != pool {
		t.Fatal("Pool is not the store's pool")
	}
	for _, commit := range []bool{false, true} {
		id := fmt.Sprintf("run_tx_%v", commit)
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.Tx(tx).CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "desk", Status: agents.StatusQueued, Checkpoint: checkpoint(id)})
		if err != nil || rec.Version != 1 {
			t.Fatalf("create in tx: %+v %v", rec, err)
		}
		if _, err := s.LoadRun(ctx, id); !errors.As(err, new(*agents.RunNotFoundError)) {
			t.Fatalf("a run of an open transaction is visible outside it: %v", err)
		}
		if got, err := s.Tx(tx).LoadRun(ctx, id); err != nil || got.Status != agents.StatusQueued {
			t.Fatalf("load in tx: %+v %v", got, err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.LoadRun(ctx, id)
		if commit && err != nil || !commit && !errors.As(err, new(*agents.RunNotFoundError)) {
			t.Fatalf("after commit=%v: %v", commit, err)
		}
	}
}
