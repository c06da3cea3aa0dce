package pgvector

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/retrieval"
)

// The lexical index of a store lives in three tables the store owns, named
// after its table (lexNames): the postings (term, id, tf), the terms with
// their document frequencies, and one row of statistics (the record count,
// their summed length and the analyzer that made the terms). Each record's
// length is the lex_len column of the store's table. Upsert and Delete
// maintain all of them in the transaction that writes the vectors, after
// locking the statistics row, so that writers of one store take their
// locks in one order and the statistics always describe the committed
// rows. Terms are made in Go by analysis.TermCounts, so that PostgreSQL
// indexes exactly what the memory store does.

// lexNames are the quoted names of a store's lexical tables.
type lexNames struct {
	postings, terms, stats string
}

// derivedName names a table that belongs to table: table + "_" + suffix,
// shortened with a hash of the table's name when that would pass
// PostgreSQL's 63 bytes, so that two long table names never share one.
func derivedName(table, suffix string) string {
	name := table + "_" + suffix
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(table))
	tag := hex.EncodeToString(sum[:4])
	keep := 63 - len(suffix) - len(tag) - 2
	// Cut at a rune boundary so that the name stays UTF-8.
	for keep > 0 && keep < len(table) && table[keep]&0xC0 == 0x80 {
		keep--
	}
	return table[:keep] + "_" + tag + "_" + suffix
}

func newLexNames(table string) lexNames {
	q := func(suffix string) string { return pgx.Identifier{derivedName(table, suffix)}.Sanitize() }
	return lexNames{postings: q("postings"), terms: q("terms"), stats: q("lexstats")}
}

// lockStats takes the row lock every writer of the store takes first.
func (s *Store) lockStats(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM `+s.lex.stats+` FOR UPDATE`)
	return err
}

// unindex removes the lexical entries of the given ids, which must be
// sorted, and returns how many records they were and their summed length.
func (s *Store) unindex(ctx context.Context, tx pgx.Tx, ids []string) (docs, length int64, err error) {
	if _, err := tx.Exec(ctx, `WITH gone AS (DELETE FROM `+s.lex.postings+` WHERE id = ANY($1::text[]) RETURNING term),
			counts AS (SELECT term, count(*) AS n FROM gone GROUP BY term)
		UPDATE `+s.lex.terms+` t SET df = t.df - counts.n FROM counts WHERE t.term = counts.term`, ids); err != nil {
		return 0, 0, err
	}
	err = tx.QueryRow(ctx, `SELECT count(*), coalesce(sum(lex_len), 0) FROM `+s.table+` WHERE id = ANY($1::text[])`, ids).Scan(&docs, &length)
	return docs, length, err
}

// lexRow is one record's analysed text.
type lexRow struct {
	terms  []string
	tfs    []int32
	length int
}

// index writes the postings and term frequencies of rows (the records'
// ids are ids) and moves the statistics by the records added and removed.
func (s *Store) index(ctx context.Context, tx pgx.Tx, ids []string, rows []lexRow, goneDocs, goneLength int64) error {
	var n int
	for _, r := range rows {
		n += len(r.terms)
	}
	pterms := make([]string, 0, n)
	pids := make([]string, 0, n)
	ptfs := make([]int32, 0, n)
	var length int64
	for i, r := range rows {
		for j, t := range r.terms {
			pterms = append(pterms, t)
			pids = append(pids, ids[i])
			ptfs = append(ptfs, r.tfs[j])
		}
		length += int64(r.length)
	}
	if n >= copyMin {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{derivedName(s.cfg.Table, "postings")}, []string{"term", "id", "tf"},
			pgx.CopyFromSlice(n, func(i int) ([]any, error) { return []any{pterms[i], pids[i], ptfs[i]}, nil })); err != nil {
			return err
		}
	} else if n > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.lex.postings+` (term, id, tf) SELECT * FROM unnest($1::text[], $2::text[], $3::int4[])`, pterms, pids, ptfs); err != nil {
			return err
		}
	}
	if n > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO `+s.lex.terms+` (term, df)
			SELECT term, count(*) FROM unnest($1::text[]) AS term GROUP BY term ORDER BY term
			ON CONFLICT (term) DO UPDATE SET df = `+s.lex.terms+`.df + EXCLUDED.df`, pterms); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, `UPDATE `+s.lex.stats+` SET docs = docs + $1, length = length + $2`, int64(len(rows))-goneDocs, length-goneLength)
	return err
}

// reindex rebuilds the lexical index from the stored chunks when the
// analyzer that built it is not this program's (or none did: a table made
// before the index existed). It runs in the migration's transaction,
// under its lock.
func (s *Store) reindex(ctx context.Context, tx pgx.Tx) error {
	var analyzer string
	if err := tx.QueryRow(ctx, `SELECT analyzer FROM `+s.lex.stats+` FOR UPDATE`).Scan(&analyzer); err != nil {
		return fmt.Errorf("read the lexical index's analyzer: %w", err)
	}
	if analyzer == analysis.Version {
		return nil
	}
	if _, err := tx.Exec(ctx, `TRUNCATE `+s.lex.postings+`, `+s.lex.terms); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.lex.stats+` SET docs = 0, length = 0, analyzer = $1`, analysis.Version); err != nil {
		return err
	}
	const batch = 1000
	after := ""
	for {
		rows, err := tx.Query(ctx, `SELECT id, heading, body FROM `+s.table+` WHERE id > $1 ORDER BY id LIMIT `+fmt.Sprint(batch), after)
		if err != nil {
			return err
		}
		var ids []string
		var lex []lexRow
		for rows.Next() {
			var id string
			var heading, body []byte
			if err := rows.Scan(&id, &heading, &body); err != nil {
				rows.Close()
				return err
			}
			terms, tfs, length := analysis.TermCounts(retrieval.LexicalText(retrieval.Chunk{Heading: string(heading), Text: string(body)}))
			ids = append(ids, id)
			lex = append(lex, lexRow{terms: terms, tfs: tfs, length: length})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		lens := make([]int32, len(lex))
		for i, r := range lex {
			lens[i] = int32(r.length)
		}
		if _, err := tx.Exec(ctx, `UPDATE `+s.table+` t SET lex_len = u.len FROM unnest($1::text[], $2::int4[]) AS u(id, len) WHERE t.id = u.id`, ids, lens); err != nil {
			return err
		}
		if err := s.index(ctx, tx, ids, lex, 0, 0); err != nil {
			return err
		}
		after = ids[len(ids)-1]
	}
}

// QueryTerms implements retrieval.LexicalSearcher: the analyzer the index
// is built with, runtime/analysis (whose Version the store records).
func (*Store) QueryTerms(query string) []string { return analysis.QueryTerms(query) }

// SearchLexical implements retrieval.LexicalSearcher. It reads the
// statistics and the document frequencies of the query's terms, computes
// their idf and the mean length in Go (retrieval.IDF, retrieval.AvgLen),
// and has PostgreSQL sum retrieval.BM25.TermScore over each record's
// postings in ascending term order, in float8, the operations of the
// memory store in the same order, so that the scores are equal to the bit.
// Both queries read one snapshot.
func (s *Store) SearchLexical(ctx context.Context, terms []string, k int, filter retrieval.Filter, p retrieval.BM25) ([]retrieval.Hit, error) {
	if err := retrieval.CheckLexicalQuery(ctx, terms, k, p); err != nil {
		return nil, err
	}
	terms = slices.Compact(slices.Clone(terms))
	terms = slices.DeleteFunc(terms, func(t string) bool { return !storable(t) }) // not storable: not stored
	doc, ok := filterJSON(filter)
	if !ok || len(terms) == 0 {
		return nil, nil
	}
	var hits []retrieval.Hit
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var docs, length int64
		var found []string
		var dfs []int64
		if err := tx.QueryRow(ctx, `SELECT s.docs, s.length,
				coalesce(array_agg(t.term ORDER BY t.term COLLATE "C") FILTER (WHERE t.term IS NOT NULL), '{}'),
				coalesce(array_agg(t.df ORDER BY t.term COLLATE "C") FILTER (WHERE t.term IS NOT NULL), '{}')
			FROM `+s.lex.stats+` s LEFT JOIN `+s.lex.terms+` t ON t.term = ANY($1::text[]) AND t.df > 0
			GROUP BY s.docs, s.length`, terms).Scan(&docs, &length, &found, &dfs); err != nil {
			return err
		}
		if len(found) == 0 {
			return nil
		}
		idfs := make([]float64, len(found))
		for i := range found {
			idfs[i] = retrieval.IDF(docs, dfs[i])
		}
		args := []any{found, idfs, p.K1 + 1, p.K1, 1 - p.B, p.B, retrieval.AvgLen(length, docs)}
		where := ""
		if doc != nil {
			where = ` WHERE c.metadata @> $8::jsonb`
			args = append(args, string(doc))
		}
		// The expression is retrieval.BM25.TermScore, operation for
		// operation; the sum runs in ascending term order, as the memory
		// store's does.
		rows, err := tx.Query(ctx, `WITH q(term, idf) AS (SELECT * FROM unnest($1::text[], $2::float8[])),
			scored AS (
				SELECT p.id, sum(q.idf * ((p.tf * $3::float8) / (p.tf + ($4::float8 * ($5::float8 + ($6::float8 * (c.lex_len / $7::float8))))))
					ORDER BY q.term COLLATE "C") AS score
				FROM q JOIN `+s.lex.postings+` p ON p.term = q.term JOIN `+s.table+` c ON c.id = p.id`+where+`
				GROUP BY p.id)
			SELECT c.id, c.source, c.start_byte, c.end_byte, c.heading, c.body, c.metadata, scored.score
			FROM scored JOIN `+s.table+` c ON c.id = scored.id
			ORDER BY scored.score DESC, c.id LIMIT `+fmt.Sprint(k), args...)
		if err != nil {
			return err
		}
		hits, err = collectHits(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgvector: lexical search %q: %w", s.cfg.Table, err)
	}
	return hits, nil
}

// collectHits reads rows of (id, source, start, end, heading, body,
// metadata, score).
func collectHits(rows pgx.Rows) ([]retrieval.Hit, error) {
	defer rows.Close()
	var hits []retrieval.Hit
	for rows.Next() {
		var h retrieval.Hit
		var source, heading, body []byte
		var start, end int64
		if err := rows.Scan(&h.ID, &source, &start, &end, &heading, &body, &h.Metadata, &h.Score); err != nil {
			return nil, err
		}
		h.Source, h.Heading, h.Text, h.Start, h.End = string(source), string(heading), string(body), int(start), int(end)
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// lexicalTables is migration step 2: the lexical index's tables, and the
// record length column. The analyzer is empty, so that the store rebuilds
// the index from the stored chunks right after (reindex).
const lexicalTables = `ALTER TABLE {table} ADD COLUMN lex_len integer NOT NULL DEFAULT 0;
	CREATE TABLE {postings} (
		term text    COLLATE "C" NOT NULL,
		id   text    COLLATE "C" NOT NULL REFERENCES {table} (id) ON DELETE CASCADE,
		tf   integer NOT NULL,
		PRIMARY KEY (term, id)
	);
	CREATE INDEX ON {postings} (id);
	CREATE TABLE {terms} (
		term text   COLLATE "C" PRIMARY KEY,
		df   bigint NOT NULL
	);
	CREATE TABLE {lexstats} (
		one      boolean PRIMARY KEY DEFAULT true CHECK (one),
		docs     bigint  NOT NULL,
		length   bigint  NOT NULL,
		analyzer text    NOT NULL
	);
	INSERT INTO {lexstats} (docs, length, analyzer) VALUES (0, 0, '');`

// sortedIDs returns the ids of rows, which Upsert has sorted.
func sortedIDs(rows []row) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.id
	}
	return ids
}
