package pgvector_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// lexRecords are records with texts, for the lexical index.
func lexRecords() []retrieval.Record {
	texts := []string{"Refunds arrive within ten business days", "Damaged parcels are refunded", "Track a parcel with its link",
		"Reset a forgotten password", "The account is locked after five attempts", "Invoices are kept for ten years"}
	var recs []retrieval.Record
	for i, text := range texts {
		r := record(fmt.Sprintf("r%d", i), []float32{1, float32(i)}, map[string]string{"n": fmt.Sprint(i % 2)})
		r.Heading, r.Text = "Help", text
		recs = append(recs, r)
	}
	return recs
}

// memoryLexical is what the memory store answers for the same records.
func memoryLexical(t *testing.T, recs []retrieval.Record, query string) []retrieval.Hit {
	t.Helper()
	m, _ := memory.NewStore(2, retrieval.DistanceCosine)
	if err := m.Upsert(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	hits, err := m.SearchLexical(t.Context(), analysis.QueryTerms(query), 10, nil, retrieval.DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

func sameHits(t *testing.T, what string, got, want []retrieval.Hit) {
	t.Helper()
	if !slices.Equal(hitIDs(got), hitIDs(want)) {
		t.Fatalf("%s: got %v, want %v", what, hitIDs(got), hitIDs(want))
	}
	for i := range got {
		if got[i].Score != want[i].Score {
			t.Errorf("%s: hit %s scores %v, the memory store %v", what, got[i].ID, got[i].Score, want[i].Score)
		}
	}
}

// TestLexicalIndexOfAnOldTable opens a table made before the lexical index
// existed (schema version 1, rows in it): the migration adds the index and
// fills it from the stored chunks, so lexical search finds them without a
// re-ingest.
func TestLexicalIndexOfAnOldTable(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 2})
	recs := lexRecords()
	if err := s.Upsert(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `DROP TABLE docs_postings, docs_terms, docs_lexstats;
		ALTER TABLE docs DROP COLUMN lex_len;
		UPDATE aid_vector_stores SET version = 1 WHERE name = 'docs'`); err != nil {
		t.Fatal(err)
	}
	again := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 2})
	for _, q := range []string{"refund", "parcel link", "ten years locked"} {
		got, err := again.SearchLexical(t.Context(), analysis.QueryTerms(q), 10, nil, retrieval.DefaultBM25)
		if err != nil {
			t.Fatal(err)
		}
		sameHits(t, q, got, memoryLexical(t, recs, q))
	}
}

// TestLexicalReindexOnAnalyzerChange: an index made by another analyzer
// has other terms, so the store rebuilds it when it opens.
func TestLexicalReindexOnAnalyzerChange(t *testing.T) {
	pool := pgtest.NewPool(t)
	s := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 2})
	recs := lexRecords()
	if err := s.Upsert(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), `UPDATE docs_postings SET term = upper(term);
		UPDATE docs_lexstats SET analyzer = 'an older analyzer'`); err != nil {
		t.Fatal(err)
	}
	again := newStore(t, pool, pgvector.Config{Table: "docs", Dimensions: 2})
	got, err := again.SearchLexical(t.Context(), analysis.QueryTerms("refunded parcels"), 10, nil, retrieval.DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	sameHits(t, "after the rebuild", got, memoryLexical(t, recs, "refunded parcels"))
	var analyzer string
	if err := pool.QueryRow(t.Context(), `SELECT analyzer FROM docs_lexstats`).Scan(&analyzer); err != nil || analyzer != analysis.Version {
		t.Errorf("the index records analyzer %q, %v; want %q", analyzer, err, analysis.Version)
	}
}

// TestLexicalLongTableNames opens two stores whose 63-byte names differ
// only at the end: their lexical tables, named after them, must not
// collide when PostgreSQL's 63-byte limit cuts the suffixed names.
func TestLexicalLongTableNames(t *testing.T) {
	pool := pgtest.NewPool(t)
	prefix := strings.Repeat("t", 62)
	a := newStore(t, pool, pgvector.Config{Table: prefix + "a", Dimensions: 2})
	b := newStore(t, pool, pgvector.Config{Table: prefix + "b", Dimensions: 2})
	recs := lexRecords()
	if err := a.Upsert(t.Context(), recs[:3]); err != nil {
		t.Fatal(err)
	}
	if err := b.Upsert(t.Context(), recs[3:]); err != nil {
		t.Fatal(err)
	}
	ga, err := a.SearchLexical(t.Context(), analysis.QueryTerms("refund password"), 10, nil, retrieval.DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := b.SearchLexical(t.Context(), analysis.QueryTerms("refund password"), 10, nil, retrieval.DefaultBM25)
	if err != nil {
		t.Fatal(err)
	}
	sameHits(t, "store a", ga, memoryLexical(t, recs[:3], "refund password"))
	sameHits(t, "store b", gb, memoryLexical(t, recs[3:], "refund password"))
}
