package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aidgen/aid/runtime/retrieval"
)

// This file bridges retrieval metrics to the gate. A retrieval metric
// scores a ranked set, not an answer string, so it is a separate interface
// (retrieval.RankedMetric); RetrievalRunner answers each case with the
// outcome of a search, encoded as JSON, and RetrievalMetric decodes it and
// scores it against the case's judgement. The result is a standard Result,
// so Stats, baselines and Gate treat a retrieval gate like any other.

// Searcher is what a retrieval evaluation asks: a *retrieval.Retriever, or
// anything that searches like one.
type Searcher interface {
	// Search returns the k best hits for the query, best first.
	Search(ctx context.Context, query string, k int) ([]retrieval.Hit, error)
}

// RetrievalRunner is the target of a retrieval evaluation: it searches each
// case's input and answers with the outcome as JSON, for RetrievalMetric
// to score. Embedding the query is charged through the gateway like any
// call, to the budgets on the context.
type RetrievalRunner struct {
	// Searcher is searched with each case's input.
	Searcher Searcher
	// K is how many hits to retrieve; zero means the searcher's default.
	K int
	// BySource judges documents rather than chunks: the outcome ranks
	// source paths (retrieval.OutcomeFromHits), so a dataset's judgements
	// name files and survive re-chunking.
	BySource bool
}

// Run implements Runner.
func (r *RetrievalRunner) Run(ctx context.Context, c Case, _ int) (Answer, error) {
	if r.Searcher == nil {
		return Answer{}, errors.New("retrieval runner: no searcher")
	}
	hits, err := r.Searcher.Search(ctx, c.Input, r.K)
	if err != nil {
		return Answer{}, err
	}
	text, err := json.Marshal(retrieval.OutcomeFromHits(hits, r.BySource))
	if err != nil {
		return Answer{}, fmt.Errorf("encoding the outcome: %w", err)
	}
	return Answer{Text: string(text)}, nil
}

// RetrievalMetric adapts a retrieval.RankedMetric to Metric. The answer it
// scores is a retrieval.Outcome as JSON (what RetrievalRunner answers, or
// an agent target that reports its retrieval and citations), and the case's
// expected answer is the judgement: an array of relevant ids or an object
// of id to grade (retrieval.ParseJudgement). It is never model-derived, so
// it may gate.
type RetrievalMetric struct {
	// Metric is the ranked-set metric.
	Metric retrieval.RankedMetric
}

// RetrievalMetrics adapts each ranked-set metric.
func RetrievalMetrics(ms ...retrieval.RankedMetric) []Metric {
	out := make([]Metric, len(ms))
	for i, m := range ms {
		out[i] = RetrievalMetric{Metric: m}
	}
	return out
}

// Name implements Metric.
func (m RetrievalMetric) Name() string { return m.Metric.Name() }

// ModelDerived implements Metric; it returns false.
func (RetrievalMetric) ModelDerived() bool { return false }

// Score implements Metric.
func (m RetrievalMetric) Score(_ context.Context, c Case, answer string) (float64, error) {
	var o retrieval.Outcome
	if err := json.Unmarshal([]byte(answer), &o); err != nil {
		return 0, fmt.Errorf("%s: the answer is not a retrieval outcome: %w", m.Name(), err)
	}
	var j retrieval.Judgement
	if _, grounding := m.Metric.(retrieval.CitationGrounding); !grounding || strings.TrimSpace(c.Expected) != "" {
		var err error
		if j, err = retrieval.ParseJudgement([]byte(c.Expected)); err != nil {
			return 0, fmt.Errorf("%s: case %q: expected must be the relevant ids: %w", m.Name(), c.ID, err)
		}
	}
	return m.Metric.Score(o, j)
}

// ParseRetrievalMetric returns the ranked-set metric a name such as
// "recall@4" names, adapted to Metric: recall@K (RecallAtK), mrr@K (MRR)
// or ndcg@K (NDCGAtK), K a cutoff of at least 1 written without leading
// zeros, so that a name reads back as the metric's Name. Any other name is
// refused, saying which names exist.
func ParseRetrievalMetric(name string) (Metric, error) {
	kind, cut, _ := strings.Cut(name, "@")
	k, err := strconv.Atoi(cut)
	if err != nil || k < 1 || strconv.Itoa(k) != cut {
		return nil, fmt.Errorf("retrieval metric %q: want recall@K, mrr@K or ndcg@K with a cutoff K of at least 1, such as recall@4", name)
	}
	var m retrieval.RankedMetric
	switch kind {
	case "recall":
		m = retrieval.RecallAtK{K: k}
	case "mrr":
		m = retrieval.MRR{K: k}
	case "ndcg":
		m = retrieval.NDCGAtK{K: k}
	default:
		return nil, fmt.Errorf("retrieval metric %q: unknown kind %q; want recall@K, mrr@K or ndcg@K", name, kind)
	}
	return RetrievalMetric{Metric: m}, nil
}
