package pgvector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgv "github.com/pgvector/pgvector-go"
	pgxvec "github.com/pgvector/pgvector-go/pgx"

	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Config describes one store.
type Config struct {
	// Table is the table holding the store's rows, in the connection's
	// default schema. It is quoted, so any name PostgreSQL can hold works;
	// the IR allows lower-case letters, digits and underscores.
	Table string
	// Dimensions is the width of every vector, fixed when the table is
	// created.
	Dimensions int
	// Distance is the similarity measure, fixed when the table is created;
	// empty means cosine.
	Distance retrieval.Distance
	// EFSearch is hnsw.ef_search for this store's searches: the size of the
	// candidate list, trading speed for recall. Zero means DefaultEFSearch.
	EFSearch int
	// M and EFConstruction are the HNSW index's build parameters, used only
	// when the table is created; zero means pgvector's defaults, 16 and 64.
	M, EFConstruction int
}

// DefaultEFSearch is the hnsw.ef_search of a store that does not set one.
// On 50,000 clustered vectors of width 128, BenchmarkSearch measured
// recall@10 of 0.96 to 0.98 at ef_search 40 and 0.99 at 100 (the HNSW
// build is randomised, so it varies between builds); 100 keeps a margin
// above 0.95 for harder data at a modest cost in queries per second.
const DefaultEFSearch = 100

// maxIndexedDims is the widest vector pgvector's HNSW index takes.
const maxIndexedDims = 2000

// Store is the pgvector retrieval.VectorStore. It is safe for concurrent
// use, in one process and across processes sharing the database.
type Store struct {
	pool     *pgxpool.Pool
	ownsPool bool
	cfg      Config
	table    string   // quoted
	lex      lexNames // the lexical index's tables, quoted
	op       string   // distance operator

	// exactRuns counts the searches that ran again exactly.
	exactRuns atomic.Int64

	// Tests only: give up at the first abort; the iterative scan mode
	// instead of relaxed_order; never run a search again exactly.
	noRetry   bool
	iterative string
	noExact   bool
}

// connect opens a pool on dsn, creating the vector extension if it is
// missing, whose connections register pgvector-go's types. It has the
// DSN's pool_max_conns connections at most, or pgutil.DefaultMaxConns.
func connect(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	pcfg, err := pgutil.PoolConfig(dsn) // pgx masks the password
	if err != nil {
		return nil, err
	}
	if err := ensureExtension(ctx, pcfg.ConnConfig); err != nil {
		return nil, err
	}
	RegisterOnConnect(pcfg)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return pool, nil
}

// registry is the table that records every store's width, distance and
// schema version.
const registry = "aid_vector_stores"

// Open connects to dsn, creates the vector extension if it is missing (the
// role needs the right to; otherwise create it once as an administrator),
// opens a pool whose connections register pgvector-go's types, and returns
// a store that owns the pool; Close closes it.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	pool, err := connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("pgvector: %w", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownsPool = true
	return s, nil
}

// RegisterOnConnect makes every connection of a pool built from cfg
// register pgvector-go's types, as New requires; a hook cfg already has
// runs first. The vector extension must exist before the pool connects.
func RegisterOnConnect(cfg *pgxpool.Config) {
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if prev != nil {
			if err := prev(ctx, conn); err != nil {
				return err
			}
		}
		if err := pgxvec.RegisterTypes(ctx, conn); err != nil {
			return fmt.Errorf("pgvector: register types: %w", err)
		}
		return nil
	}
}

// ensureExtension creates the vector extension when it is missing, on a
// connection of its own: a pool's connections register the extension's
// types when they open, so it must exist before the pool does.
func ensureExtension(ctx context.Context, cfg *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("pgvector: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')`).Scan(&exists); err != nil {
		return fmt.Errorf("pgvector: look for the vector extension: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector`); err != nil {
		return fmt.Errorf("pgvector: create extension vector (install pgvector, or have an administrator run CREATE EXTENSION vector): %w", err)
	}
	return nil
}

// New returns a store on pool, which the caller keeps and closes, after
// creating the store's table or checking that the existing one has the
// configured width and distance (Migrate). The pool's connections must
// have pgvector-go's types registered (RegisterOnConnect, or
// pgxvec.RegisterTypes in AfterConnect), and the database must have the
// vector extension at version 0.8.0 or later.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgvector: pool is nil")
	}
	if cfg.Distance == "" {
		cfg.Distance = retrieval.DistanceCosine
	}
	if cfg.EFSearch == 0 {
		cfg.EFSearch = DefaultEFSearch
	}
	if cfg.M == 0 {
		cfg.M = 16
	}
	if cfg.EFConstruction == 0 {
		cfg.EFConstruction = 64
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, table: pgx.Identifier{cfg.Table}.Sanitize(), lex: newLexNames(cfg.Table), op: operators[cfg.Distance], iterative: "relaxed_order"}
	if err := s.checkConnection(ctx); err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// operators are pgvector's distance operators, and opclasses the HNSW
// operator classes, of each distance.
var (
	operators = map[retrieval.Distance]string{
		retrieval.DistanceCosine:       "<=>",
		retrieval.DistanceInnerProduct: "<#>",
		retrieval.DistanceL2:           "<->",
	}
	opclasses = map[retrieval.Distance]string{
		retrieval.DistanceCosine:       "vector_cosine_ops",
		retrieval.DistanceInnerProduct: "vector_ip_ops",
		retrieval.DistanceL2:           "vector_l2_ops",
	}
)

func (c Config) check() error {
	if c.Table == "" || len(c.Table) > 63 || !storable(c.Table) {
		return fmt.Errorf("pgvector: invalid table name %q (want 1 to 63 bytes of UTF-8 without NUL)", c.Table)
	}
	if c.Dimensions <= 0 {
		return fmt.Errorf("pgvector: table %q: width must be positive, got %d", c.Table, c.Dimensions)
	}
	if c.Dimensions > maxIndexedDims {
		return fmt.Errorf("pgvector: table %q: %w", c.Table, &kind.DeferredError{
			Feature: fmt.Sprintf("pgvector store of width %d (pgvector's HNSW index takes at most %d; halfvec storage)", c.Dimensions, maxIndexedDims),
		})
	}
	if !c.Distance.Valid() {
		return fmt.Errorf("pgvector: table %q: unknown distance %q; use cosine, inner_product or l2", c.Table, c.Distance)
	}
	if c.EFSearch < 1 || c.EFSearch > 1000 {
		return fmt.Errorf("pgvector: table %q: ef_search %d is outside pgvector's 1 to 1000", c.Table, c.EFSearch)
	}
	if c.M < 2 || c.M > 100 {
		return fmt.Errorf("pgvector: table %q: m %d is outside pgvector's 2 to 100", c.Table, c.M)
	}
	if c.EFConstruction < 2*c.M || c.EFConstruction > 1000 {
		return fmt.Errorf("pgvector: table %q: ef_construction %d must be at least 2·m (%d) and at most 1000", c.Table, c.EFConstruction, 2*c.M)
	}
	return nil
}

// checkConnection refuses a pool whose connections cannot encode vectors,
// or a database whose pgvector lacks iterative index scans.
func (s *Store) checkConnection(ctx context.Context) error {
	return s.pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		if _, ok := c.Conn().TypeMap().TypeForName("vector"); !ok {
			return errors.New("pgvector: the pool's connections do not know the vector type; register pgvector-go's types on connect (RegisterOnConnect)")
		}
		var version string
		if err := c.QueryRow(ctx, `SELECT extversion FROM pg_extension WHERE extname = 'vector'`).Scan(&version); err != nil {
			return fmt.Errorf("pgvector: read the vector extension's version: %w", err)
		}
		if !atLeast(version, 0, 8) {
			return fmt.Errorf("pgvector: the vector extension is at version %s; this store needs 0.8.0 or later for iterative index scans (ALTER EXTENSION vector UPDATE)", version)
		}
		return nil
	})
}

// atLeast reports whether a version "major.minor[.patch]" is at least
// major.minor.
func atLeast(version string, major, minor int) bool {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || maj == major && mnr >= minor
}

// Close closes the pool if the store opened it.
func (s *Store) Close() {
	if s.ownsPool {
		s.pool.Close()
	}
}

// Dimensions implements retrieval.VectorStore.
func (s *Store) Dimensions() int { return s.cfg.Dimensions }

// Distance implements retrieval.VectorStore.
func (s *Store) Distance() retrieval.Distance { return s.cfg.Distance }

// EFSearch returns the store's hnsw.ef_search.
func (s *Store) EFSearch() int { return s.cfg.EFSearch }

// migrationSteps are the schema's versions, in order: step i brings a
// store's table from version i to version i+1. A step is never edited once
// released; a change is a new step.
//
// The id is text in the "C" collation so that PostgreSQL sorts ids
// byte-wise, as Go compares strings; the chunk's text fields are bytea so
// that any Go string round-trips. jsonb_path_ops makes the GIN index
// smaller and faster for @>, the only operator filters use.
var migrationSteps = []string{
	// 1: the table, its HNSW index and the metadata index.
	`CREATE TABLE {table} (
		id         text COLLATE "C" PRIMARY KEY,
		source     bytea  NOT NULL,
		start_byte bigint NOT NULL,
		end_byte   bigint NOT NULL,
		heading    bytea  NOT NULL,
		body       bytea  NOT NULL,
		metadata   jsonb  NOT NULL,
		embedding  vector({dims}) NOT NULL
	);
	CREATE INDEX ON {table} USING hnsw (embedding {opclass}) WITH (m = {m}, ef_construction = {ef_construction});
	CREATE INDEX ON {table} USING gin (metadata jsonb_path_ops);`,
	// 2: the lexical (BM25) index; reindex fills it from the rows.
	lexicalTables,
}

// SchemaVersion is the schema version this code reads and writes: the
// number of migration steps.
const SchemaVersion = 2

// MismatchError reports an existing store table opened with another width
// or distance than the one it was created with. The vectors in it were
// embedded for that width and distance; reading them otherwise would be
// wrong, so the store is refused: use another table, or drop this one (and
// its row in aid_vector_stores) to re-ingest.
type MismatchError struct {
	// Table is the store's table.
	Table string
	// Dimensions and Distance are what the table was created with.
	Dimensions int
	Distance   retrieval.Distance
	// WantDimensions and WantDistance are what the store was opened with.
	WantDimensions int
	WantDistance   retrieval.Distance
}

// Error implements error.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("pgvector: table %q holds width %d and distance %s, opened with width %d and distance %s; use another table or drop this one to re-ingest",
		e.Table, e.Dimensions, e.Distance, e.WantDimensions, e.WantDistance)
}

// SchemaTooNewError reports a store table migrated by a newer release of
// this package: this code does not know what the later steps changed, so it
// refuses the table rather than misread it.
type SchemaTooNewError struct {
	// Table is the store's table.
	Table string
	// Database is the version the table is at.
	Database int
	// Known is the newest version this code knows.
	Known int
}

// Error implements error.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("pgvector: table %q is at schema version %d, newer than this code's %d; upgrade the program", e.Table, e.Database, e.Known)
}

// Migrate creates the store's table, or brings it to SchemaVersion, and
// checks that an existing table has the configured width and distance. It
// runs in one transaction under an advisory lock shared by every store, so
// that replicas starting together create a table once and a failed step
// leaves the database as it was. It is idempotent. A table of the name that
// the registry does not know is refused rather than taken over.
func (s *Store) Migrate(ctx context.Context) error {
	schema := pgutil.Schema{
		// One lock for every store: they share the registry, and
		// migrations are rare enough that one lock costs nothing.
		LockKey: pgutil.LockKey("aid/retrieval/pgvector"),
		Steps:   migrationSteps,
		Names: strings.NewReplacer(
			"{table}", s.table,
			"{postings}", s.lex.postings,
			"{terms}", s.lex.terms,
			"{lexstats}", s.lex.stats,
			"{dims}", strconv.Itoa(s.cfg.Dimensions),
			"{opclass}", opclasses[s.cfg.Distance],
			"{m}", strconv.Itoa(s.cfg.M),
			"{ef_construction}", strconv.Itoa(s.cfg.EFConstruction),
		),
		Versions: registryRow{s},
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := pgutil.Migrate(ctx, tx, schema); err != nil {
			return err
		}
		return s.reindex(ctx, tx)
	})
	var mismatch *MismatchError
	var tooNew *pgutil.SchemaTooNewError
	switch {
	case errors.As(err, &mismatch):
		return mismatch
	case errors.As(err, &tooNew):
		return &SchemaTooNewError{Table: s.cfg.Table, Database: tooNew.Database, Known: tooNew.Known}
	case err != nil:
		return fmt.Errorf("pgvector: migrate table %q: %w", s.cfg.Table, err)
	}
	return nil
}

// registryRow keeps a store table's schema version in its row of the
// registry, with the width and distance it was created with.
type registryRow struct{ s *Store }

// Current implements pgutil.Versions: it creates the registry if it is
// missing, refuses a table opened with another width or distance than its
// row records, and registers a new table at version 0, refusing a table of
// the name that the registry does not know rather than taking it over.
func (r registryRow) Current(ctx context.Context, tx pgx.Tx) (int, error) {
	s := r.s
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+registry+` (
			name       text        PRIMARY KEY,
			dimensions integer     NOT NULL CHECK (dimensions > 0),
			distance   text        NOT NULL,
			version    integer     NOT NULL,
			created_at timestamptz NOT NULL DEFAULT clock_timestamp()
		)`); err != nil {
		return 0, err
	}
	var dims, version int
	var dist string
	err := tx.QueryRow(ctx, `SELECT dimensions, distance, version FROM `+registry+` WHERE name = $1`, s.cfg.Table).Scan(&dims, &dist, &version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.table).Scan(&exists); err != nil {
			return 0, err
		}
		if exists {
			return 0, fmt.Errorf("table %q exists but is not a vector store made by this package (it has no row in %s); choose another table", s.cfg.Table, registry)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+registry+` (name, dimensions, distance, version) VALUES ($1, $2, $3, 0)`,
			s.cfg.Table, s.cfg.Dimensions, string(s.cfg.Distance)); err != nil {
			return 0, err
		}
		return 0, nil
	case err != nil:
		return 0, err
	}
	if dims != s.cfg.Dimensions || retrieval.Distance(dist) != s.cfg.Distance {
		return 0, &MismatchError{Table: s.cfg.Table, Dimensions: dims, Distance: retrieval.Distance(dist),
			WantDimensions: s.cfg.Dimensions, WantDistance: s.cfg.Distance}
	}
	return version, nil
}

// Applied implements pgutil.Versions.
func (r registryRow) Applied(ctx context.Context, tx pgx.Tx, v int) error {
	_, err := tx.Exec(ctx, `UPDATE `+registry+` SET version = $2 WHERE name = $1`, r.s.cfg.Table, v)
	return err
}

// inTx runs fn in a transaction, and runs it once more, from scratch in a
// new transaction, if the database aborted the first for a deadlock or a
// serialization failure (pgutil.InTx); an aborted transaction changed
// nothing. fn must not keep state between runs.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgutil.InTx(ctx, s.pool, s.noRetry, fn)
}

// InvalidTextError reports an id, a metadata key or a metadata value that
// PostgreSQL text and jsonb cannot hold: it has a NUL byte or is not
// UTF-8. The memory store accepts such strings, but Ingest makes none (ids
// are hex hashes, metadata are names and paths), so a record with one is
// refused rather than stored mangled.
type InvalidTextError struct {
	// ID is the record's id.
	ID string
	// Field is "id", "metadata key" or "metadata value".
	Field string
	// Value is the string.
	Value string
}

// Error implements error.
func (e *InvalidTextError) Error() string {
	return fmt.Sprintf("pgvector: upsert: record %q: %s %q has a NUL byte or is not UTF-8", e.ID, e.Field, e.Value)
}

// storable reports whether a string can be a text or jsonb string:
// PostgreSQL holds no NUL byte in either and only valid UTF-8.
func storable(v string) bool {
	return utf8.ValidString(v) && !strings.ContainsRune(v, 0)
}

// filterJSON returns the jsonb a filter is matched with (metadata @> it:
// every key present with exactly that string value, as Filter.Matches),
// or ok false when no stored metadata can match because a key or value is
// not storable. An empty filter gives nil: no condition at all.
func filterJSON(f retrieval.Filter) (doc []byte, ok bool) {
	if len(f) == 0 {
		return nil, true
	}
	for k, v := range f {
		if !storable(k) || !storable(v) {
			return nil, false
		}
	}
	doc, err := json.Marshal(map[string]string(f))
	if err != nil { // a map of valid strings always marshals
		return nil, false
	}
	return doc, true
}

// vector wraps a query for pgx.
func vector(v []float32) pgv.Vector { return pgv.NewVector(v) }

// compile-time check.
var (
	_ retrieval.VectorStore     = (*Store)(nil)
	_ retrieval.LexicalSearcher = (*Store)(nil)
)
