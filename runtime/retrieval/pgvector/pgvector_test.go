package pgvector_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

func newStore(t *testing.T, pool *pgxpool.Pool, cfg pgvector.Config) *pgvector.Store {
	t.Helper()
	s, err := pgvector.New(t.Context(), pool, cfg)
	if err != nil {
		t.Fatalf("new store %q: %v", cfg.Table, err)
	}
	return s
}

// openPool opens a pool on dsn with pgvector's types registered and the
// given session settings.
func openPool(t *testing.T, dsn string, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pgvector.RegisterOnConnect(cfg)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func randomVec(rng *rand.Rand, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func record(id string, v []float32, meta map[string]string) retrieval.Record {
	return retrieval.Record{Chunk: retrieval.Chunk{ID: id, Source: id + ".md", Text: "text " + id, End: 5 + len(id)}, Vector: v, Metadata: meta}
}

func hitIDs(hits []retrieval.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}

func TestConfigRefusals(t *testing.T) {
	pool := pgtest.NewPool(t)
	tests := []struct {
		name string
		cfg  pgvector.Config
		want string
	}{
		{"empty table", pgvector.Config{Dimensions: 4}, "invalid table name"},
		{"long table", pgvector.Config{Table: strings.Repeat("t", 64), Dimensions: 4}, "invalid table name"},
		{"NUL in table", pgvector.Config{Table: "a\x00b", Dimensions: 4}, "invalid table name"},
		{"zero width", pgvector.Config{Table: "t", Dimensions: 0}, "width must be positive"},
		{"negative width", pgvector.Config{Table: "t", Dimensions: -1}, "width must be positive"},
		{"unknown distance", pgvector.Config{Table: "t", Dimensions: 4, Distance: "euclid"}, "unknown distance"},
		{"ef_search too big", pgvector.Config{Table: "t", Dimensions: 4, EFSearch: 1001}, "ef_search"},
		{"negative ef_search", pgvector.Config{Table: "t", Dimensions: 4, EFSearch: -1}, "ef_search"},
		{"m too small", pgvector.Config{Table: "t", Dimensions: 4, M: 1}, "m 1"},
		{"ef_construction below 2m", pgvector.Config{Table: "t", Dimensions: 4, M: 16, EFConstruction: 20}, "ef_construction"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pgvector.New(t.Context(), pool, tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
			}
		})
	}
	if _, err := pgvector.New(t.Context(), nil, pgvector.Config{Table: "t", Dimensions: 4}); err == nil {
		t.Error("a nil pool was accepted")
	}
	// Wider than the HNSW index takes: a feature not built, named.
	_, err := pgvector.New(t.Context(), pool, pgvector.Config{Table: "wide", Dimensions: 3072})
	var de *kind.DeferredError
	if !errors.As(err, &de) || !strings.Contains(de.Feature, "3072") {
		t.Errorf("width 3072: %v, want a *kind.DeferredError naming it", err)
	}
	// Nothing was created by a refused configuration.
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'aid_vector_stores'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("refused configurations created %d tables", n)
	}
}

// TestReopen checks that a table's width and distance are fixed when it is
// created: reopening with either changed is a *MismatchError, reopening
// as created sees the data.
func TestReopen(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 4, Distance: retrieval.DistanceInnerProduct})
	if err := s.Upsert(t.Context(), []retrieval.Record{record("a", []float32{1, 2, 3, 4}, nil)}); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []pgvector.Config{
		{Table: "docs", Dimensions: 5, Distance: retrieval.DistanceInnerProduct},
		{Table: "docs", Dimensions: 4, Distance: retrieval.DistanceCosine},
		{Table: "docs", Dimensions: 4}, // the default distance is cosine
	} {
		_, err := pgvector.New(t.Context(), pool, cfg)
		var me *pgvector.MismatchError
		if !errors.As(err, &me) || me.Dimensions != 4 || me.Distance != retrieval.DistanceInnerProduct ||
			me.WantDimensions != cfg.Dimensions || me.Table != "docs" {
			t.Errorf("reopening with %d/%q: %v, want a *MismatchError", cfg.Dimensions, cfg.Distance, err)
		}
	}
	again := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 4, Distance: retrieval.DistanceInnerProduct, EFSearch: 7})
	if again.EFSearch() != 7 {
		t.Errorf("ef_search %d, want 7", again.EFSearch())
	}
	if ids, err := again.IDs(t.Context(), nil); err != nil || !slices.Equal(ids, []string{"a"}) {
		t.Errorf("reopened store holds %v, %v", ids, err)
	}
}

func TestForeignTableRefused(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE users (id int PRIMARY KEY); INSERT INTO users VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	_, err := pgvector.New(t.Context(), pool, pgvector.Config{Table: "users", Dimensions: 4})
	if err == nil || !strings.Contains(err.Error(), "not a vector store") {
		t.Fatalf("opening an unrelated table: %v", err)
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM users`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the unrelated table was touched: %d rows, %v", n, err)
	}
}

func TestSchemaTooNew(t *testing.T) {
	pool := pgtest.NewPool(t)
	newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 4})
	if _, err := pool.Exec(t.Context(), `UPDATE aid_vector_stores SET version = $1 WHERE name = 'docs'`, pgvector.SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err := pgvector.New(t.Context(), pool, pgvector.Config{Table: "docs", Dimensions: 4})
	var tn *pgvector.SchemaTooNewError
	if !errors.As(err, &tn) || tn.Database != pgvector.SchemaVersion+1 || tn.Table != "docs" {
		t.Errorf("opening a newer table: %v, want a *SchemaTooNewError", err)
	}
}

// TestConcurrentCreate opens one table from many replicas at once: the
// advisory lock makes one create it and the others find it.
func TestConcurrentCreate(t *testing.T) {
	pool := pgtest.NewPool(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			table := "shared"
			if i%2 == 1 {
				table = fmt.Sprintf("own_%d", i) // different tables share the registry
			}
			_, errs[i] = pgvector.New(t.Context(), pool, pgvector.Config{Table: table, Dimensions: 3})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM aid_vector_stores`).Scan(&n); err != nil || n != 5 {
		t.Errorf("registry holds %d stores (%v), want 5", n, err)
	}
}

// TestHostileTableName uses a table name that would break SQL built by
// pasting it: it is quoted everywhere.
func TestHostileTableName(t *testing.T) {
	pool := pgtest.NewPool(t)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE victim (id int)`); err != nil {
		t.Fatal(err)
	}
	name := `Docs"; DROP TABLE victim; --`
	s := newStore(t, pool, pgvector.Config{Table: name, Dimensions: 2, Distance: retrieval.DistanceL2})
	recs := []retrieval.Record{record("a", []float32{1, 0}, map[string]string{"k": `v'"; --`}), record("b", []float32{0, 1}, nil)}
	if err := s.Upsert(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(t.Context(), []float32{1, 0}, 5, retrieval.Filter{"k": `v'"; --`})
	if err != nil || !slices.Equal(hitIDs(hits), []string{"a"}) {
		t.Errorf("search: %v, %v", hitIDs(hits), err)
	}
	if err := s.Delete(t.Context(), []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.IDs(t.Context(), nil); err != nil || !slices.Equal(ids, []string{"b"}) {
		t.Errorf("ids: %v, %v", ids, err)
	}
	var exists bool
	if err := pool.QueryRow(t.Context(), `SELECT to_regclass('victim') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		t.Errorf("the table name was executed as SQL")
	}
}

// TestPoolWithoutTypes: New needs the pool's connections to know pgvector's
// types and says how to make them.
func TestPoolWithoutTypes(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = pgvector.New(t.Context(), pool, pgvector.Config{Table: "docs", Dimensions: 3})
	if err == nil || !strings.Contains(err.Error(), "RegisterOnConnect") {
		t.Errorf("a pool without pgvector's types: %v", err)
	}
}

// TestOpenCreatesExtension opens a database that lacks the vector
// extension: Open creates it before its pool registers the types.
func TestOpenCreatesExtension(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	admin := openPool(t, dsn, nil)
	if _, err := admin.Exec(t.Context(), `DROP EXTENSION vector`); err != nil {
		t.Fatal(err)
	}
	admin.Close()
	s, err := pgvector.Open(t.Context(), dsn, pgvector.Config{Table: "docs", Dimensions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Upsert(t.Context(), []retrieval.Record{record("a", []float32{1, 2, 3}, nil)}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Search(t.Context(), []float32{1, 2, 3}, 1, nil); err != nil || len(hits) != 1 || math.Abs(hits[0].Score-1) > 1e-6 {
		t.Errorf("search: %+v, %v", hits, err)
	}
}

// TestText: ids and metadata PostgreSQL cannot hold are refused with a
// typed error and nothing is written; the chunk's own text, which it keeps
// as bytes, round-trips whatever it holds.
func TestText(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 2})
	good := record("good", []float32{1, 0}, map[string]string{"k": "v"})
	bad := []struct {
		name  string
		rec   retrieval.Record
		field string
	}{
		{"NUL in id", record("a\x00b", []float32{1, 1}, nil), "id"},
		{"invalid UTF-8 id", record("a\xffb", []float32{1, 1}, nil), "id"},
		{"NUL in metadata key", record("a", []float32{1, 1}, map[string]string{"k\x00": "v"}), "metadata key"},
		{"invalid metadata value", record("a", []float32{1, 1}, map[string]string{"k": "\xc3"}), "metadata value"},
	}
	for _, b := range bad {
		err := s.Upsert(t.Context(), []retrieval.Record{good, b.rec})
		var te *pgvector.InvalidTextError
		if !errors.As(err, &te) || te.Field != b.field {
			t.Errorf("%s: %v, want an *InvalidTextError on the %s", b.name, err, b.field)
		}
	}
	if ids, _ := s.IDs(t.Context(), nil); len(ids) != 0 {
		t.Fatalf("refused batches wrote %v", ids)
	}
	odd := record("odd", []float32{0, 1}, map[string]string{"path": "ünï/cødé <&>.md"})
	odd.Text, odd.Heading, odd.Source = "nul \x00 and invalid \xff\xfe bytes", "H\x00", "src\xff.md"
	if err := s.Upsert(t.Context(), []retrieval.Record{odd}); err != nil {
		t.Fatal(err)
	}
	hits, err := s.Search(t.Context(), []float32{0, 1}, 1, retrieval.Filter{"path": "ünï/cødé <&>.md"})
	if err != nil || len(hits) != 1 {
		t.Fatalf("search: %v, %v", hits, err)
	}
	if h := hits[0]; h.Text != odd.Text || h.Heading != odd.Heading || h.Source != odd.Source {
		t.Errorf("round trip changed the chunk: %q %q %q", h.Text, h.Heading, h.Source)
	}
	// A filter no stored metadata can match matches nothing, without error;
	// deleting an id no record can have is harmless.
	for _, f := range []retrieval.Filter{{"path": "\xff"}, {"pa\x00th": "x"}} {
		if hits, err := s.Search(t.Context(), []float32{0, 1}, 1, f); err != nil || len(hits) != 0 {
			t.Errorf("search with %q: %v, %v", f, hits, err)
		}
		if ids, err := s.IDs(t.Context(), f); err != nil || len(ids) != 0 {
			t.Errorf("ids with %q: %v, %v", f, ids, err)
		}
	}
	if err := s.Delete(t.Context(), []string{"x\x00", "\xff"}); err != nil {
		t.Errorf("delete of unstorable ids: %v", err)
	}
}

// TestUpsertAllOrNothing makes the database refuse one row of a batch, on
// both write paths (one INSERT for a small batch, COPY for a large one):
// the batch leaves the table as it was.
func TestUpsertAllOrNothing(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 4, Distance: retrieval.DistanceL2})
	rng := rand.New(rand.NewPCG(3, 4))
	if err := s.Upsert(t.Context(), []retrieval.Record{record("keep", randomVec(rng, 4), map[string]string{"v": "1"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `ALTER TABLE docs ADD CONSTRAINT no_poison CHECK (id <> 'poison')`); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10, 1000} {
		recs := []retrieval.Record{record("keep", randomVec(rng, 4), map[string]string{"v": "2"})}
		for i := range n {
			recs = append(recs, record(fmt.Sprintf("r%04d", i), randomVec(rng, 4), nil))
		}
		recs = append(recs, record("poison", randomVec(rng, 4), nil))
		if err := s.Upsert(t.Context(), recs); err == nil || !strings.Contains(err.Error(), "no_poison") {
			t.Errorf("batch of %d with a refused row: %v", len(recs), err)
		}
		if ids, _ := s.IDs(t.Context(), nil); !slices.Equal(ids, []string{"keep"}) {
			t.Errorf("batch of %d: a refused batch left %d ids", len(recs), len(ids))
		}
		if ids, _ := s.IDs(t.Context(), retrieval.Filter{"v": "1"}); len(ids) != 1 {
			t.Errorf("batch of %d: a refused batch replaced a record", len(recs))
		}
	}
}

// TestLargeBatchReplaces upserts through COPY twice: the second batch
// replaces every record's vector, text and metadata.
func TestLargeBatchReplaces(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 8, Distance: retrieval.DistanceInnerProduct})
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 600
	for round := range 2 {
		recs := make([]retrieval.Record, n)
		for i := range recs {
			recs[i] = record(fmt.Sprintf("r%04d", n-1-i), randomVec(rng, 8), map[string]string{"round": fmt.Sprint(round)})
			recs[i].Text = fmt.Sprintf("round %d", round)
		}
		if err := s.Upsert(t.Context(), recs); err != nil {
			t.Fatal(err)
		}
		for _, r := range recs[:20] {
			hits, err := s.Search(t.Context(), r.Vector, n, retrieval.Filter{"round": fmt.Sprint(round)})
			if err != nil || len(hits) != n {
				t.Fatalf("round %d: %d hits, %v", round, len(hits), err)
			}
			i := slices.IndexFunc(hits, func(h retrieval.Hit) bool { return h.ID == r.ID })
			if i < 0 || hits[i].Text != r.Text {
				t.Fatalf("round %d: record %s not replaced", round, r.ID)
			}
			var dot float64
			for j := range r.Vector {
				dot += float64(r.Vector[j]) * float64(r.Vector[j])
			}
			if math.Abs(hits[i].Score-dot) > 1e-3*math.Max(1, dot) {
				t.Errorf("round %d: %s scores %v against itself, want %v", round, r.ID, hits[i].Score, dot)
			}
		}
	}
	if ids, _ := s.IDs(t.Context(), nil); len(ids) != n {
		t.Errorf("%d ids after replacing, want %d", len(ids), n)
	}
}

// TestNaNScoresRankLast: the memory store ranks a NaN score (an inner
// product of huge coordinates overflowing both ways in float32) last; the
// score SQL makes it −∞, where PostgreSQL would sort NaN first. pgvector's
// fused multiply-adds do not overflow to NaN on this machine, so the guard
// is checked on NaN itself.
func TestNaNScoresRankLast(t *testing.T) {
	pool := pgtest.NewPool(t)
	rows, err := pool.Query(t.Context(), `SELECT id FROM (VALUES ('nan', 'NaN'::float8), ('one', 1), ('inf', '-Infinity'), ('neg', -5)) AS v(id, x)
		ORDER BY `+pgvector.NaNLast("x")+` DESC, id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"one", "neg", "inf", "nan"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestSelectiveFilter: one row in a thousand matches and k is the number
// of matching rows. The planner is made to search through the HNSW index
// (sequential and bitmap scans off), where a filter that rejects nearly
// every candidate is the case that silently returns fewer rows. Each
// safeguard is shown to matter: with neither the iterative scan nor the
// exact search the store returns fewer rows; with either it returns them
// all.
func TestSelectiveFilter(t *testing.T) {
	const n, dims, every = 10000, 16, 1000
	dsn := pgtest.NewDatabase(t)
	pool := openPool(t, dsn, map[string]string{"enable_seqscan": "off", "enable_bitmapscan": "off"})
	rng := rand.New(rand.NewPCG(9, 10))
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: dims, EFSearch: 40})
	recs := make([]retrieval.Record, n)
	exact, _ := memory.NewStore(dims, retrieval.DistanceCosine)
	for i := range recs {
		g := "hay"
		if i%every == 0 {
			g = "needle"
		}
		recs[i] = record(fmt.Sprintf("r%05d", i), randomVec(rng, dims), map[string]string{"g": g})
	}
	for _, st := range []retrieval.VectorStore{s, exact} {
		if err := st.Upsert(t.Context(), recs); err != nil {
			t.Fatal(err)
		}
	}
	const matching = n / every
	queries := make([][]float32, 5)
	for i := range queries {
		queries[i] = randomVec(rng, dims)
	}
	search := func(t *testing.T, s *pgvector.Store, k int) (short int) {
		t.Helper()
		for _, q := range queries {
			hits, err := s.Search(t.Context(), q, k, retrieval.Filter{"g": "needle"})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) < min(k, matching) {
				short++
			}
		}
		return short
	}

	t.Run("NoSafeguard", func(t *testing.T) {
		bare := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: dims, EFSearch: 40})
		pgvector.SetIterativeScan(bare, "off")
		pgvector.DisableExact(bare)
		if short := search(t, bare, matching); short == 0 {
			t.Fatal("without the iterative scan and the exact search every search found all rows: the index was not used, so this test shows nothing")
		}
	})
	t.Run("ExactOnly", func(t *testing.T) {
		st := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: dims, EFSearch: 40})
		pgvector.SetIterativeScan(st, "off")
		if short := search(t, st, matching); short != 0 {
			t.Errorf("%d searches returned fewer than %d rows", short, matching)
		}
		if pgvector.ExactRuns(st) == 0 {
			t.Error("no search ran exactly")
		}
	})
	t.Run("IterativeOnly", func(t *testing.T) {
		st := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: dims, EFSearch: 40})
		pgvector.DisableExact(st)
		short := search(t, st, 5) // fewer than match: the scan has to find 5 of 10
		if short != 0 {
			t.Errorf("%d searches returned fewer than 5 rows", short)
		}
	})
	t.Run("Store", func(t *testing.T) {
		for _, k := range []int{1, 5, matching, matching + 5} {
			for _, q := range queries {
				got, err := s.Search(t.Context(), q, k, retrieval.Filter{"g": "needle"})
				if err != nil {
					t.Fatal(err)
				}
				want, _ := exact.Search(t.Context(), q, k, retrieval.Filter{"g": "needle"})
				if len(got) != len(want) {
					t.Fatalf("k=%d: %d hits, %d match", k, len(got), len(want))
				}
				if k >= matching && !slices.Equal(hitIDs(got), hitIDs(want)) {
					t.Errorf("k=%d: got %v, want %v", k, hitIDs(got), hitIDs(want))
				}
			}
		}
	})
}

// TestTiesAtTheCut: many rows share the k-th score. The index returns some
// of them in no particular order; the store must return the ones with the
// smallest ids, as the memory store does.
func TestTiesAtTheCut(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 3})
	mem, _ := memory.NewStore(3, retrieval.DistanceCosine)
	var recs []retrieval.Record
	for i := range 300 {
		// Ids in scrambled order, one shared vector.
		recs = append(recs, record(fmt.Sprintf("t%03d", (i*137)%300), []float32{1, 2, 3}, nil))
	}
	recs = append(recs, record("best", []float32{1, 2, 3.5}, nil))
	for _, st := range []retrieval.VectorStore{s, mem} {
		if err := st.Upsert(t.Context(), recs); err != nil {
			t.Fatal(err)
		}
	}
	before := pgvector.ExactRuns(s)
	for _, k := range []int{1, 2, 5, 40} {
		got, err := s.Search(t.Context(), []float32{1, 2, 3.5}, k, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := mem.Search(t.Context(), []float32{1, 2, 3.5}, k, nil)
		if !slices.Equal(hitIDs(got), hitIDs(want)) {
			t.Errorf("k=%d: got %v, want %v", k, hitIDs(got), hitIDs(want))
		}
	}
	if pgvector.ExactRuns(s) == before {
		t.Error("ties at the cut never ran the exact search")
	}
}

func TestCanceledWrites(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 2})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := s.Delete(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("delete on a canceled context: %v", err)
	}
	if _, err := s.IDs(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("ids on a canceled context: %v", err)
	}
}
