package pgtest

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"
)

// TestVectorRoundTrip is the smoke test: pgx with pgvector-go's types against the real server.
func TestVectorRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := NewDatabase(t)

	// Configure the pool by hand, as production code will, rather than through NewPool.
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		return pgxvec.RegisterTypes(ctx, conn)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	if _, err := pool.Exec(ctx, `CREATE TABLE items (id int PRIMARY KEY, embedding vector(3) NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	rows := map[int][]float32{
		1: {1, 0, 0},
		2: {0, 1, 0},
		3: {0, 0, 1},
		4: {0.25, -1.5, 3.125}, // exactly representable, so equality is exact
	}
	for id, v := range rows {
		if _, err := pool.Exec(ctx, `INSERT INTO items (id, embedding) VALUES ($1, $2)`, id, pgvector.NewVector(v)); err != nil {
			t.Fatalf("insert %d: %v", id, err)
		}
	}

	for id, want := range rows {
		var got pgvector.Vector
		if err := pool.QueryRow(ctx, `SELECT embedding FROM items WHERE id = $1`, id).Scan(&got); err != nil {
			t.Fatalf("select %d: %v", id, err)
		}
		if !slices.Equal(got.Slice(), want) {
			t.Errorf("row %d: read back %v, wrote %v", id, got.Slice(), want)
		}
	}

	// The text form proves the server stored what we sent, not just that the codec is symmetric.
	var text string
	if err := pool.QueryRow(ctx, `SELECT embedding::text FROM items WHERE id = 4`).Scan(&text); err != nil {
		t.Fatal(err)
	}
	if want := "[0.25,-1.5,3.125]"; text != want {
		t.Errorf("server text of row 4 = %s, want %s", text, want)
	}

	nearest := []struct {
		query    []float32
		wantID   int
		wantDist float64
	}{
		{query: []float32{0.9, 0.1, 0}, wantID: 1, wantDist: 1 - 0.9/math.Sqrt(0.82)},
		{query: []float32{0, 2, 0}, wantID: 2, wantDist: 0},
		{query: []float32{0.1, 0.2, 5}, wantID: 3, wantDist: 1 - 5/math.Sqrt(25.05)},
	}
	for _, tc := range nearest {
		t.Run(fmt.Sprint(tc.query), func(t *testing.T) {
			var id int
			var dist float64
			err := pool.QueryRow(ctx,
				`SELECT id, embedding <=> $1 FROM items WHERE id <> 4 ORDER BY embedding <=> $1 LIMIT 1`,
				pgvector.NewVector(tc.query)).Scan(&id, &dist)
			if err != nil {
				t.Fatal(err)
			}
			if id != tc.wantID {
				t.Errorf("nearest by cosine distance = row %d, want row %d", id, tc.wantID)
			}
			if math.Abs(dist-tc.wantDist) > 1e-6 {
				t.Errorf("cosine distance = %g, want %g", dist, tc.wantDist)
			}
		})
	}

	// A width mismatch must be refused by the server, not truncated.
	_, err = pool.Exec(ctx, `INSERT INTO items (id, embedding) VALUES (5, $1)`, pgvector.NewVector([]float32{1, 2}))
	if err == nil || !strings.Contains(err.Error(), "expected 3 dimensions") {
		t.Errorf("inserting a 2-dimensional vector into vector(3): err = %v, want a dimension error", err)
	}
}

// TestNewPool checks the helper's pool has pgvector types registered and works concurrently.
func TestNewPool(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := NewPool(t)

	if _, err := pool.Exec(ctx, `CREATE TABLE v (id int PRIMARY KEY, e vector(2))`); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := pool.Exec(ctx, `INSERT INTO v VALUES ($1, $2)`, i, pgvector.NewVector([]float32{float32(i), 1}))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var vs []pgvector.Vector
	rows, err := pool.Query(ctx, `SELECT e FROM v ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	vs, err = pgx.CollectRows(rows, pgx.RowTo[pgvector.Vector])
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != n {
		t.Fatalf("read %d rows, want %d", len(vs), n)
	}
	for i, v := range vs {
		if want := []float32{float32(i), 1}; !slices.Equal(v.Slice(), want) {
			t.Errorf("row %d = %v, want %v", i, v.Slice(), want)
		}
	}
}

// TestNewDatabaseIsolatedAndDropped checks that each call gets its own database with the
// vector extension, and that the database is gone once its test has finished.
func TestNewDatabaseIsolatedAndDropped(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })

	const n = 4
	names := make([]string, n)
	t.Run("group", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				conn, err := pgx.Connect(t.Context(), NewDatabase(t))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				var ext string
				if err := conn.QueryRow(t.Context(),
					`SELECT current_database(), (SELECT extname FROM pg_extension WHERE extname = 'vector')`,
				).Scan(&names[i], &ext); err != nil {
					t.Fatal(err)
				}
				// Each database starts empty: a table made here is invisible to the siblings.
				if _, err := conn.Exec(t.Context(), `CREATE TABLE only_here (x int)`); err != nil {
					t.Fatal(err)
				}
			})
		}
	})
	if t.Failed() {
		return
	}

	seen := map[string]bool{}
	for _, name := range names {
		if !strings.HasPrefix(name, "aidt_") || len(name) > 63 {
			t.Errorf("database name %q: want an aidt_ prefix and at most 63 bytes", name)
		}
		if seen[name] {
			t.Errorf("database %q handed out twice", name)
		}
		seen[name] = true
	}
	var left int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = ANY($1)`, names).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d of the test databases %v still exist after their tests finished", left, names)
	}
}

func TestDatabaseName(t *testing.T) {
	t.Parallel()
	tests := []string{
		"TestX",
		"TestStore/contract/Upsert#01",
		strings.Repeat("VeryLongTestName", 10),
		"Tést/ünïcode",
	}
	for _, in := range tests {
		a, b := databaseName(in), databaseName(in)
		if a == b {
			t.Errorf("databaseName(%q) returned %q twice", in, a)
		}
		for _, name := range []string{a, b} {
			if len(name) > 63 {
				t.Errorf("databaseName(%q) = %q: %d bytes, PostgreSQL keeps 63", in, name, len(name))
			}
			if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != "" {
				t.Errorf("databaseName(%q) = %q: want only [a-z0-9_]", in, name)
			}
		}
	}
}

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dsn, want string
	}{
		{
			dsn:  "postgres://postgres@127.0.0.1:54329/aid_test?sslmode=disable",
			want: "postgres://postgres@127.0.0.1:54329/aidt_x?sslmode=disable",
		},
		{
			dsn:  "postgresql://u:p@localhost/",
			want: "postgresql://u:p@localhost/aidt_x",
		},
		{
			dsn:  "host=127.0.0.1 port=54329 user=postgres dbname=aid_test sslmode=disable",
			want: "host=127.0.0.1 port=54329 user=postgres dbname=aid_test sslmode=disable dbname=aidt_x",
		},
	}
	for _, tc := range tests {
		got, err := withDatabase(tc.dsn, "aidt_x")
		if err != nil {
			t.Errorf("withDatabase(%q): %v", tc.dsn, err)
			continue
		}
		if got != tc.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil {
			t.Errorf("pgx cannot parse %q: %v", got, err)
		} else if cfg.Database != "aidt_x" {
			t.Errorf("pgx reads database %q from %q, want aidt_x", cfg.Database, got)
		}
	}
	if _, err := withDatabase("postgres://%zz", "aidt_x"); err == nil {
		t.Error("withDatabase accepted a malformed URL")
	}
}

// recorder is a testing.TB that records how DSN ended the test. Its Skip and Fatal end the
// calling goroutine like the real ones, so DSN's code after them is proven unreachable.
type recorder struct {
	testing.TB // nil: any method not overridden here panics, catching unexpected calls
	mu         sync.Mutex
	skipped    string
	fatal      string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.mu.Lock()
	r.skipped = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// TestDSNWhenUnset checks the contract of a missing server: fail under CI, skip elsewhere,
// and say how to start one. It changes the environment, so it cannot run in parallel.
func TestDSNWhenUnset(t *testing.T) {
	tests := []struct {
		name, url, ci string
		want          string // "dsn", "skip" or "fatal"
	}{
		{name: "set", url: "postgres://x@127.0.0.1:1/db", ci: "true", want: "dsn"},
		{name: "unset, no CI", url: "", ci: "", want: "skip"},
		{name: "unset, CI=false", url: "", ci: "false", want: "skip"},
		{name: "unset, CI=0", url: "", ci: "0", want: "skip"},
		{name: "unset, CI=true", url: "", ci: "true", want: "fatal"},
		{name: "unset, CI=1", url: "", ci: "1", want: "fatal"},
		{name: "unset, CI=yes", url: "", ci: "yes", want: "fatal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(EnvVar, tc.url)
			t.Setenv("CI", tc.ci)
			r := &recorder{}
			var got string
			done := make(chan struct{})
			go func() {
				defer close(done)
				got = DSN(r)
			}()
			<-done

			var outcome, msg string
			switch {
			case r.fatal != "":
				outcome, msg = "fatal", r.fatal
			case r.skipped != "":
				outcome, msg = "skip", r.skipped
			default:
				outcome = "dsn"
			}
			if outcome != tc.want {
				t.Fatalf("DSN ended with %s (%q), want %s", outcome, msg, tc.want)
			}
			if outcome == "dsn" {
				if got != tc.url {
					t.Errorf("DSN() = %q, want %q", got, tc.url)
				}
				return
			}
			for _, part := range []string{EnvVar, `eval "$(scripts/postgres.sh env)"`} {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not mention %s", msg, part)
				}
			}
		})
	}
}
