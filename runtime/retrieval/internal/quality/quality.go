// Package quality is aid's retrieval quality harness: a labelled
// collection shipped in the repository and the code that scores a
// retriever on it with trec_eval's nDCG@10, recall@100 and MRR, and times
// its searches. The benchmarks that report the figures live beside the
// stores (BenchmarkQuality in package retrieval and in package pgvector);
// defaults are tuned here and nowhere else.
//
// Two collections, both under the Go project's BSD-3-Clause licence
// (gocorpus/LICENSE), with questions written for this harness in a
// programmer's words rather than the documents', each judged against the
// documents that answer it (grade 2) or help (grade 1): GoDoc, the
// documentation of 1,906 exported names (and the overviews) of 41 Go
// standard library packages, one Markdown document each, with 100
// questions; and GoSpec, the 153 sections of the Go language
// specification, technical prose, with 45 questions. gocorpus/gen.go
// regenerates the documents.
//
// It is test support: only tests and benchmarks import it.
package quality

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/retrieval"
)

//go:embed gocorpus/corpus.jsonl
var goCorpus []byte

//go:embed gocorpus/queries.jsonl
var goQueries []byte

//go:embed gocorpus/spec.jsonl
var specCorpus []byte

//go:embed gocorpus/spec-queries.jsonl
var specQueries []byte

// Doc is one document of a collection.
type Doc struct {
	// ID names the document; its file is ID + ".md".
	ID string `json:"id"`
	// Text is the document's Markdown.
	Text string `json:"text"`
}

// Query is one judged question.
type Query struct {
	// ID names the query.
	ID string `json:"id"`
	// Text is the question.
	Text string `json:"query"`
	// Relevant grades the documents that answer it (2) or help (1).
	Relevant map[string]int `json:"relevant"`
}

// Collection is a labelled collection.
type Collection struct {
	// Name names the collection in reports.
	Name string
	// Docs are its documents.
	Docs []Doc
	// Queries are its judged questions.
	Queries []Query
}

// GoDoc returns the Go documentation collection.
func GoDoc() (*Collection, error) { return load("godoc", goCorpus, goQueries) }

// GoSpec returns the Go specification collection: the 153 sections of
// the language specification, technical prose, with 45 questions.
func GoSpec() (*Collection, error) { return load("gospec", specCorpus, specQueries) }

// Collections returns every collection of the harness.
func Collections() ([]*Collection, error) {
	doc, err := GoDoc()
	if err != nil {
		return nil, err
	}
	spec, err := GoSpec()
	if err != nil {
		return nil, err
	}
	return []*Collection{doc, spec}, nil
}

func load(name string, corpus, queries []byte) (*Collection, error) {
	c := &Collection{Name: name}
	if err := readJSONL(corpus, &c.Docs); err != nil {
		return nil, fmt.Errorf("reading the %s corpus: %w", name, err)
	}
	if err := readJSONL(queries, &c.Queries); err != nil {
		return nil, fmt.Errorf("reading the %s queries: %w", name, err)
	}
	ids := make(map[string]bool, len(c.Docs))
	for _, d := range c.Docs {
		ids[d.ID] = true
	}
	for _, q := range c.Queries {
		for id := range q.Relevant {
			if !ids[id] {
				return nil, fmt.Errorf("query %s judges %q, which is not in the corpus", q.ID, id)
			}
		}
	}
	return c, nil
}

func readJSONL[T any](data []byte, out *[]T) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return err
		}
		*out = append(*out, v)
	}
	return sc.Err()
}

// WriteFiles writes every document to dir as ID + ".md", so that a
// retriever over "**/*.md" ingests the collection.
func (c *Collection) WriteFiles(dir string) error {
	for _, d := range c.Docs {
		p := filepath.Join(dir, filepath.FromSlash(d.ID)+".md")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(d.Text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// DocOf returns the document a retriever's source path names.
func DocOf(source string) string { return strings.TrimSuffix(source, ".md") }

// Searcher is what Evaluate searches: a *retrieval.Retriever.
type Searcher interface {
	Search(ctx context.Context, query string, k int) ([]retrieval.Hit, error)
}

// Result is a searcher's score on a collection.
type Result struct {
	// NDCG10, Recall100 and MRR are the means over the queries of
	// trec_eval's ndcg_cut_10, recall_100 and recip_rank, over the ranking
	// of documents (each document at the rank of its best chunk).
	NDCG10, Recall100, MRR float64
	// P50 and P95 are the median and 95th percentile of one search's
	// latency.
	P50, P95 time.Duration
	// Rankings are the document rankings, by query id.
	Rankings map[string][]string
	// Hits are the chunk rankings (ids), by query id, to compare stores.
	Hits map[string][]string
}

// Evaluate searches every query of c with k hits and scores the rankings.
func Evaluate(ctx context.Context, c *Collection, s Searcher, k int) (Result, error) {
	res := Result{Rankings: map[string][]string{}, Hits: map[string][]string{}}
	var took []time.Duration
	ndcg, recall, mrr := retrieval.NDCGAtK{K: 10}, retrieval.RecallAtK{K: 100}, retrieval.MRR{K: 100}
	for _, q := range c.Queries {
		start := time.Now()
		hits, err := s.Search(ctx, q.Text, k)
		if err != nil {
			return Result{}, fmt.Errorf("query %s: %w", q.ID, err)
		}
		took = append(took, time.Since(start))
		var docs, chunks []string
		for _, src := range retrieval.Sources(hits) {
			docs = append(docs, DocOf(src))
		}
		for _, h := range hits {
			chunks = append(chunks, h.ID)
		}
		res.Rankings[q.ID], res.Hits[q.ID] = docs, chunks
		o, j := retrieval.Outcome{Ranked: docs}, retrieval.Judgement(q.Relevant)
		for _, m := range []struct {
			m   retrieval.RankedMetric
			sum *float64
		}{{ndcg, &res.NDCG10}, {recall, &res.Recall100}, {mrr, &res.MRR}} {
			v, err := m.m.Score(o, j)
			if err != nil {
				return Result{}, fmt.Errorf("query %s: %s: %w", q.ID, m.m.Name(), err)
			}
			*m.sum += v
		}
	}
	n := float64(len(c.Queries))
	res.NDCG10, res.Recall100, res.MRR = res.NDCG10/n, res.Recall100/n, res.MRR/n
	slices.Sort(took)
	res.P50, res.P95 = took[len(took)/2], took[len(took)*95/100]
	return res, nil
}

// Diff lists the queries whose chunk rankings differ between two results,
// with the first rank where they part.
func Diff(a, b Result) []string {
	var out []string
	for id, ha := range a.Hits {
		hb := b.Hits[id]
		if slices.Equal(ha, hb) {
			continue
		}
		i := 0
		for i < min(len(ha), len(hb)) && ha[i] == hb[i] {
			i++
		}
		out = append(out, fmt.Sprintf("%s from rank %d", id, i+1))
	}
	slices.Sort(out)
	return out
}
