package pgvector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	pgv "github.com/pgvector/pgvector-go"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/internal/pgutil"
	"github.com/aidgen/aid/runtime/retrieval"
)

// copyMin is the batch size from which Upsert loads rows with COPY into a
// temporary table: below it one INSERT over unnest'ed arrays is cheaper
// than creating the table, above it COPY streams rows where the arrays of
// one INSERT would be held whole in one message.
const copyMin = 256

// columns are the table's columns, in the order Upsert writes them.
var columns = []string{"id", "source", "start_byte", "end_byte", "heading", "body", "metadata", "embedding", "lex_len"}

// row is one record as written.
type row struct {
	id                    string
	source, heading, body []byte
	start, end            int64
	meta                  string
	vec                   pgv.Vector
	lex                   lexRow
}

// Upsert implements retrieval.VectorStore. Every record is checked before
// anything is written; the batch is one transaction.
func (s *Store) Upsert(ctx context.Context, records []retrieval.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rows := make([]row, len(records))
	seen := make(map[string]bool, len(records))
	for i, r := range records {
		if err := retrieval.CheckRecordID(seen, r.ID); err != nil {
			return err
		}
		if !storable(r.ID) {
			return &InvalidTextError{ID: r.ID, Field: "id", Value: r.ID}
		}
		if err := retrieval.CheckVector("upsert", r.ID, r.Vector, s.cfg.Dimensions, s.cfg.Distance); err != nil {
			return err
		}
		meta := r.Metadata
		if meta == nil {
			meta = map[string]string{}
		}
		for k, v := range meta {
			if !storable(k) {
				return &InvalidTextError{ID: r.ID, Field: "metadata key", Value: k}
			}
			if !storable(v) {
				return &InvalidTextError{ID: r.ID, Field: "metadata value", Value: v}
			}
		}
		doc, err := json.Marshal(meta)
		if err != nil {
			return fmt.Errorf("upsert: record %q: encode metadata: %w", r.ID, err)
		}
		rows[i] = row{
			id: r.ID, source: []byte(r.Source), heading: []byte(r.Heading), body: []byte(r.Text),
			start: int64(r.Start), end: int64(r.End), meta: string(doc),
			vec: pgv.NewVector(slices.Clone(r.Vector)),
		}
		l := &rows[i].lex
		l.terms, l.tfs, l.length = analysis.TermCounts(retrieval.LexicalText(r.Chunk))
	}
	if len(rows) == 0 {
		return nil
	}
	// One order for every writer, so that two batches sharing ids lock
	// their rows in the same order and cannot deadlock.
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.id, b.id) })
	set := make([]string, 0, len(columns)-1)
	for _, c := range columns[1:] {
		set = append(set, c+" = EXCLUDED."+c)
	}
	onConflict := ` ON CONFLICT (id) DO UPDATE SET ` + strings.Join(set, ", ")
	cols := strings.Join(columns, ", ")
	ids := sortedIDs(rows)
	lex := make([]lexRow, len(rows))
	for i, r := range rows {
		lex[i] = r.lex
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockStats(ctx, tx); err != nil {
			return err
		}
		// The lexical entries of the records replaced go first, while
		// their lengths are still stored.
		goneDocs, goneLength, err := s.unindex(ctx, tx, ids)
		if err != nil {
			return err
		}
		if len(rows) < copyMin {
			err = insertArrays(ctx, tx, s.table, cols, onConflict, rows)
		} else {
			err = copyRows(ctx, tx, s.table, cols, onConflict, rows)
		}
		if err != nil {
			return err
		}
		return s.index(ctx, tx, ids, lex, goneDocs, goneLength)
	})
	if err != nil {
		return fmt.Errorf("pgvector: upsert %d records into %q: %w", len(rows), s.cfg.Table, unavailable(ctx, err))
	}
	return nil
}

// copyRows writes a large batch with COPY into a temporary table and one
// INSERT from it, in id order.
func copyRows(ctx context.Context, tx pgx.Tx, table, cols, onConflict string, rows []row) error {
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE aid_vector_load (LIKE `+table+`) ON COMMIT DROP`); err != nil {
		return err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"aid_vector_load"}, columns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := rows[i]
		return []any{r.id, r.source, r.start, r.end, r.heading, r.body, r.meta, r.vec, int32(r.lex.length)}, nil
	})); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+table+` (`+cols+`) SELECT `+cols+` FROM aid_vector_load ORDER BY id`+onConflict)
	return err
}

// insertArrays writes a small batch with one INSERT over unnest'ed arrays,
// which keeps their (id) order.
func insertArrays(ctx context.Context, tx pgx.Tx, table, cols, onConflict string, rows []row) error {
	ids := make([]string, len(rows))
	sources := make([][]byte, len(rows))
	starts := make([]int64, len(rows))
	ends := make([]int64, len(rows))
	headings := make([][]byte, len(rows))
	bodies := make([][]byte, len(rows))
	metas := make([]string, len(rows))
	vecs := make([]pgv.Vector, len(rows))
	lens := make([]int32, len(rows))
	for i, r := range rows {
		ids[i], sources[i], starts[i], ends[i] = r.id, r.source, r.start, r.end
		headings[i], bodies[i], metas[i], vecs[i], lens[i] = r.heading, r.body, r.meta, r.vec, int32(r.lex.length)
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+table+` (`+cols+`)
		SELECT * FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::bigint[], $5::bytea[], $6::bytea[], $7::jsonb[], $8::vector[], $9::int4[])`+onConflict,
		ids, sources, starts, ends, headings, bodies, metas, vecs, lens)
	return err
}

// Delete implements retrieval.VectorStore. The rows are locked in id order
// before they are deleted, the order Upsert writes in, after the lexical
// statistics row every writer locks first.
func (s *Store) Delete(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	keep := make([]string, 0, len(ids))
	for _, id := range ids {
		if storable(id) { // an id that is not cannot be stored, so is not there
			keep = append(keep, id)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	slices.Sort(keep)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.lockStats(ctx, tx); err != nil {
			return err
		}
		goneDocs, goneLength, err := s.unindex(ctx, tx, keep)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+s.table+` WHERE id IN (
			SELECT id FROM `+s.table+` WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE)`, keep); err != nil {
			return err
		}
		return s.index(ctx, tx, nil, nil, goneDocs, goneLength)
	})
	if err != nil {
		return fmt.Errorf("pgvector: delete %d ids from %q: %w", len(keep), s.cfg.Table, unavailable(ctx, err))
	}
	return nil
}

// IDs implements retrieval.VectorStore.
func (s *Store) IDs(ctx context.Context, filter retrieval.Filter) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	doc, ok := filterJSON(filter)
	if !ok {
		return nil, nil
	}
	sql := `SELECT id FROM ` + s.table
	var args []any
	if doc != nil {
		sql += ` WHERE metadata @> $1::jsonb`
		args = append(args, string(doc))
	}
	rows, err := s.pool.Query(ctx, sql+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("pgvector: list ids of %q: %w", s.cfg.Table, unavailable(ctx, err))
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("pgvector: list ids of %q: %w", s.cfg.Table, unavailable(ctx, err))
	}
	return out, nil
}

// Search implements retrieval.VectorStore. It asks the HNSW index for k+1
// rows and runs the search again exactly when that does not settle the
// answer: fewer than k rows came back (the filter may be more selective
// than the iterative scan reached), or the k-th and the next row score the
// same (which of the tied rows come first is decided by id, which the
// index does not know).
func (s *Store) Search(ctx context.Context, query []float32, k int, filter retrieval.Filter) ([]retrieval.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("search: k must be positive, got %d", k)
	}
	if err := retrieval.CheckVector("search", "", query, s.cfg.Dimensions, s.cfg.Distance); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	doc, ok := filterJSON(filter)
	if !ok {
		return nil, nil
	}
	hits, err := s.search(ctx, query, k+1, doc, false)
	if err == nil && !s.noExact && (len(hits) < k || len(hits) > k && hits[k].Score == hits[k-1].Score) {
		s.exactRuns.Add(1)
		hits, err = s.search(ctx, query, k, doc, true)
	}
	if err != nil {
		return nil, fmt.Errorf("pgvector: search %q: %w", s.cfg.Table, unavailable(ctx, err))
	}
	return hits[:min(k, len(hits))], nil
}

// score is the SQL of a row's score, as the memory store defines it.
func (s *Store) score() string {
	if s.cfg.Distance == retrieval.DistanceCosine {
		return nanLast(`1 - (embedding <=> $1)`)
	}
	// Inner product and l2 negate their operator's distance.
	return nanLast(`-(embedding ` + s.op + ` $1)`)
}

// nanLast makes a NaN score −∞, so that it ranks last, as in the memory
// store, where PostgreSQL would sort NaN above every number. pgvector
// computes an inner product with fused multiply-adds where the CPU has
// them, which cannot give NaN, but the plain float loop it falls back to
// does when huge coordinates overflow both ways.
func nanLast(expr string) string {
	return `coalesce(nullif(` + expr + `, 'NaN'::float8), '-Infinity'::float8)`
}

// search runs one query for the best n rows. Approximate: through the
// HNSW index, ordered by distance, with ef_search and the iterative scan
// set for this transaction only, then sorted in Go. Exact: ordered by score
// and id in SQL, which no vector index can serve, so PostgreSQL scans the
// rows the filter selects (through the metadata index when it is
// selective) and keeps the top n.
func (s *Store) search(ctx context.Context, query []float32, n int, filter []byte, exact bool) ([]retrieval.Hit, error) {
	args := []any{vector(query)}
	where := ""
	if filter != nil {
		where = ` WHERE metadata @> $2::jsonb`
		args = append(args, string(filter))
	}
	order := `embedding ` + s.op + ` $1`
	if exact {
		order = `score DESC, id`
	}
	sql := `SELECT id, source, start_byte, end_byte, heading, body, metadata, ` + s.score() + ` AS score
		FROM ` + s.table + where + ` ORDER BY ` + order + ` LIMIT ` + strconv.Itoa(n)
	var hits []retrieval.Hit
	collect := func(rows pgx.Rows) error {
		var err error
		hits, err = collectHits(rows)
		return err
	}
	if exact {
		rows, err := s.pool.Query(ctx, sql, args...)
		if err != nil {
			return nil, err
		}
		if err := collect(rows); err != nil {
			return nil, err
		}
		return hits, nil
	}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`SELECT set_config('hnsw.ef_search', $1, true), set_config('hnsw.iterative_scan', $2, true)`, strconv.Itoa(s.cfg.EFSearch), s.iterative)
		b.Queue(sql, args...).Query(collect)
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return nil, err
	}
	// relaxed_order lets the index return rows slightly out of order, and
	// equal distances come back in no particular order.
	retrieval.SortHits(hits)
	return hits, nil
}

// unavailable makes a database that cannot be reached a
// *kind.UnavailableError (pgutil.Unavailable).
func unavailable(ctx context.Context, err error) error {
	return pgutil.Unavailable(ctx, "vector store", err)
}
