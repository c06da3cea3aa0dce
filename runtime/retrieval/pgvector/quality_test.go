package pgvector_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/internal/quality"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// TestRankingsMatchMemory searches the quality harness's gospec collection
// (153 documents, 45 questions, 100 hits each) in every ranking of the
// harness on the memory store and on pgvector: the chunk rankings must be
// the same, hit for hit. With AID_QUALITY_ALL=1 it searches the godoc
// collection too (1,906 documents, 100 questions; minutes under -race):
//
//	AID_QUALITY_ALL=1 go test -run RankingsMatchMemory ./runtime/retrieval/pgvector/
func TestRankingsMatchMemory(t *testing.T) {
	pool := pgtest.NewPool(t)
	spec, err := quality.GoSpec()
	if err != nil {
		t.Fatal(err)
	}
	cs := []*quality.Collection{spec}
	if os.Getenv("AID_QUALITY_ALL") == "1" {
		doc, err := quality.GoDoc()
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, doc)
	}
	for _, c := range cs {
		pg, err := pgvector.New(t.Context(), pool, pgvector.Config{Table: c.Name, Dimensions: quality.Dims})
		if err != nil {
			t.Fatal(err)
		}
		mem, _ := memory.NewStore(quality.Dims, retrieval.DistanceCosine)
		want := quality.EvaluateAll(t, c, mem)
		got := quality.EvaluateAll(t, c, pg)
		for _, cfg := range quality.Configs() {
			if diff := quality.Diff(got[cfg.Name], want[cfg.Name]); len(diff) > 0 {
				t.Errorf("%s %s: pgvector ranks differently from the memory store in %d of %d queries: %v", c.Name, cfg.Name, len(diff), len(c.Queries), diff)
			}
		}
	}
}

// BenchmarkQuality scores every ranking of the quality harness on a
// pgvector store, as BenchmarkQuality in package retrieval does on the
// memory store. It needs AID_TEST_DATABASE_URL:
//
//	go test -run '^$' -bench Quality -benchtime 1x ./runtime/retrieval/pgvector/
func BenchmarkQuality(b *testing.B) {
	pool := pgtest.NewPool(b)
	quality.Bench(b, func(b *testing.B, name string) retrieval.VectorStore {
		s, err := pgvector.New(b.Context(), pool, pgvector.Config{Table: name, Dimensions: quality.Dims})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}

// ftsSearcher ranks a store's chunks with PostgreSQL full-text search
// instead of the store's BM25 index: the query's words ORed in an English
// tsquery, ranked by rank, a ts_rank or ts_rank_cd call.
type ftsSearcher struct {
	pool interface {
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
	table, rank string
}

func (f ftsSearcher) Search(ctx context.Context, query string, k int) ([]retrieval.Hit, error) {
	rows, err := f.pool.Query(ctx, `WITH q AS (SELECT replace(plainto_tsquery('english', $1)::text, '&', '|')::tsquery AS q),
		d AS (SELECT id, source, to_tsvector('english', convert_from(heading, 'UTF8') || ' ' || convert_from(body, 'UTF8')) AS v FROM `+f.table+`)
		SELECT id, source FROM d, q WHERE v @@ q.q ORDER BY `+f.rank+`(v, q.q) DESC, id LIMIT $2`, query, k)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (retrieval.Hit, error) {
		var h retrieval.Hit
		var source []byte
		err := r.Scan(&h.ID, &source)
		h.Source = string(source)
		return h, err
	})
}

// BenchmarkFullTextSearch scores PostgreSQL's own full-text ranking
// (ts_rank and ts_rank_cd over an English tsvector, the query's words
// ORed) on the quality harness, beside the store's BM25 (the "lexical"
// row of BenchmarkQuality): the measurement behind keeping BM25 postings
// rather than full-text search. Only quality is reported; the tsvectors
// are computed per query, without an index.
//
//	go test -run '^$' -bench FullTextSearch -benchtime 1x ./runtime/retrieval/pgvector/
func BenchmarkFullTextSearch(b *testing.B) {
	pool := pgtest.NewPool(b)
	s, err := pgvector.New(b.Context(), pool, pgvector.Config{Table: "godoc", Dimensions: quality.Dims})
	if err != nil {
		b.Fatal(err)
	}
	c, err := quality.GoDoc()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := c.WriteFiles(dir); err != nil {
		b.Fatal(err)
	}
	if _, err := quality.Retriever(b, quality.Gateway(b), dir, s, quality.Configs()[0]).Ingest(b.Context()); err != nil {
		b.Fatal(err)
	}
	for _, rank := range []string{"ts_rank", "ts_rank_cd"} {
		b.Run(rank, func(b *testing.B) {
			var res quality.Result
			for b.Loop() {
				if res, err = quality.Evaluate(b.Context(), c, ftsSearcher{pool: pool, table: "godoc", rank: rank}, quality.K); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(res.NDCG10, "ndcg@10")
			b.ReportMetric(res.Recall100, "recall@100")
			b.ReportMetric(res.MRR, "mrr")
		})
	}
}

// BenchmarkSearchLatency times a search for 100 hits in every ranking of
// the quality harness on a pgvector store, over about 2,400 chunks. It
// needs AID_TEST_DATABASE_URL:
//
//	go test -run '^$' -bench SearchLatency -benchtime 200x ./runtime/retrieval/pgvector/
func BenchmarkSearchLatency(b *testing.B) {
	pool := pgtest.NewPool(b)
	quality.Latency(b, func(b *testing.B) retrieval.VectorStore {
		s, err := pgvector.New(b.Context(), pool, pgvector.Config{Table: "godoc", Dimensions: quality.Dims})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
