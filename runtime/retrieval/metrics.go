package retrieval

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Judgement is the relevance of documents to one query, as in a TREC qrels
// file: id → grade. A grade above zero is relevant; higher is more
// relevant (NDCG's gain). Ids may be chunk ids or, for judging by
// document, source paths (see Sources).
type Judgement map[string]int

// Relevant returns the number of relevant ids.
func (j Judgement) Relevant() int {
	n := 0
	for _, g := range j {
		if g > 0 {
			n++
		}
	}
	return n
}

// ParseJudgement reads a judgement from JSON: an array of relevant ids
// (each of grade 1) or an object of id → grade. It is how an eval dataset
// case states what should be retrieved, in its "expected" field.
func ParseJudgement(data []byte) (Judgement, error) {
	var ids []string
	if err := json.Unmarshal(data, &ids); err == nil {
		j := make(Judgement, len(ids))
		for _, id := range ids {
			if id == "" {
				return nil, errors.New("judgement: empty id")
			}
			j[id] = 1
		}
		return j, nil
	}
	var j Judgement
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("judgement: want an array of relevant ids or an object of id to integer grade: %w", err)
	}
	for id, g := range j {
		if id == "" || g < 0 {
			return nil, fmt.Errorf("judgement: id %q has grade %d; ids must be non-empty and grades at least 0", id, g)
		}
	}
	return j, nil
}

// Citation is one passage an answer cites: the id of a retrieved chunk (or
// source) and the text quoted from it.
type Citation struct {
	// ID is the cited chunk's id (or source path).
	ID string `json:"id"`
	// Quote is the text the answer attributes to it.
	Quote string `json:"quote"`
}

// Outcome is what one retrieval produced, for the metrics: the ranking as
// shown, the retrieved passages and, when an answer was written from them,
// its citations.
type Outcome struct {
	// Ranked are the retrieved ids, best first, without duplicates.
	Ranked []string `json:"ranked"`
	// Passages maps each retrieved id to its text, for CitationGrounding.
	Passages map[string]string `json:"passages,omitempty"`
	// Citations are the answer's citations, for CitationGrounding.
	Citations []Citation `json:"citations,omitempty"`
}

// OutcomeFromHits turns search hits into an outcome judged by chunk id, or
// by source path when bySource is set (a document's first chunk gives its
// rank; its passage is the concatenation of its retrieved chunks).
func OutcomeFromHits(hits []Hit, bySource bool) Outcome {
	o := Outcome{Passages: make(map[string]string, len(hits))}
	for _, h := range hits {
		id := h.ID
		if bySource {
			id = h.Source
		}
		if p, ok := o.Passages[id]; ok {
			o.Passages[id] = p + "\n\n" + h.Text
			continue
		}
		o.Ranked = append(o.Ranked, id)
		o.Passages[id] = h.Text
	}
	return o
}

// Scored is one id with a score, as a run file of trec_eval lists them.
type Scored struct {
	ID    string
	Score float64
}

// Rank orders scored ids the way the metrics read a run: by score
// descending, then by id ascending (CompareRanked). trec_eval also sorts by score but
// breaks ties by document id descending; ascending is used here because it
// is the order every store returns, so that a metric scores exactly the
// ranking a search shows. Rank refuses duplicate ids and NaN scores.
func Rank(run []Scored) ([]string, error) {
	s := slices.Clone(run)
	seen := make(map[string]bool, len(s))
	for _, r := range s {
		if math.IsNaN(r.Score) {
			return nil, fmt.Errorf("rank: id %q has a NaN score", r.ID)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("rank: id %q appears twice", r.ID)
		}
		seen[r.ID] = true
	}
	slices.SortFunc(s, func(a, b Scored) int { return CompareRanked(a.Score, a.ID, b.Score, b.ID) })
	out := make([]string, len(s))
	for i, r := range s {
		out[i] = r.ID
	}
	return out, nil
}

// RankedMetric scores a ranked retrieval against a judgement, in [0, 1].
// It is separate from eval.Metric, which scores an answer string; package
// eval adapts it (eval.RetrievalMetrics) so that retrieval reaches the same
// baseline gate. Implementations must be safe for concurrent use.
type RankedMetric interface {
	// Name is the metric's name in reports, baselines and thresholds.
	Name() string
	// Score scores one outcome. An error means the outcome cannot be
	// scored (duplicate ids, a bad cutoff), not that it is poor.
	Score(o Outcome, j Judgement) (float64, error)
}

// checkRanked refuses a ranking with duplicates, which no metric can read.
func checkRanked(ranked []string, k int) error {
	if k <= 0 {
		return fmt.Errorf("cutoff k must be positive, got %d", k)
	}
	seen := make(map[string]bool, len(ranked))
	for _, id := range ranked {
		if seen[id] {
			return fmt.Errorf("ranking lists %q twice", id)
		}
		seen[id] = true
	}
	return nil
}

// RecallAtK is the share of all relevant ids found in the first K ranks
// (trec_eval's recall_K): relevant retrieved / relevant. A query with no
// relevant id scores 0, as in trec_eval.
type RecallAtK struct{ K int }

// Name returns "recall@K".
func (m RecallAtK) Name() string { return fmt.Sprintf("recall@%d", m.K) }

// Score implements RankedMetric.
func (m RecallAtK) Score(o Outcome, j Judgement) (float64, error) {
	if err := checkRanked(o.Ranked, m.K); err != nil {
		return 0, fmt.Errorf("%s: %w", m.Name(), err)
	}
	rel := j.Relevant()
	if rel == 0 {
		return 0, nil
	}
	hits := 0
	for _, id := range o.Ranked[:min(m.K, len(o.Ranked))] {
		if j[id] > 0 {
			hits++
		}
	}
	return float64(hits) / float64(rel), nil
}

// MRR is the reciprocal rank of the first relevant id within the first K
// ranks, 0 when there is none (trec_eval's recip_rank, cut at K). Its mean
// over queries is the mean reciprocal rank.
type MRR struct{ K int }

// Name returns "mrr@K".
func (m MRR) Name() string { return fmt.Sprintf("mrr@%d", m.K) }

// Score implements RankedMetric.
func (m MRR) Score(o Outcome, j Judgement) (float64, error) {
	if err := checkRanked(o.Ranked, m.K); err != nil {
		return 0, fmt.Errorf("%s: %w", m.Name(), err)
	}
	for i, id := range o.Ranked[:min(m.K, len(o.Ranked))] {
		if j[id] > 0 {
			return 1 / float64(i+1), nil
		}
	}
	return 0, nil
}

// NDCGAtK is the normalised discounted cumulative gain at K with linear
// gain, as trec_eval's ndcg_cut_K: DCG = Σ_{i=1..K} grade_i / log2(i+1),
// divided by the DCG of the ideal ranking (all judged ids by grade,
// descending, cut at K). A query with no relevant id scores 0.
type NDCGAtK struct{ K int }

// Name returns "ndcg@K".
func (m NDCGAtK) Name() string { return fmt.Sprintf("ndcg@%d", m.K) }

// Score implements RankedMetric.
func (m NDCGAtK) Score(o Outcome, j Judgement) (float64, error) {
	if err := checkRanked(o.Ranked, m.K); err != nil {
		return 0, fmt.Errorf("%s: %w", m.Name(), err)
	}
	var dcg float64
	for i, id := range o.Ranked[:min(m.K, len(o.Ranked))] {
		if g := j[id]; g > 0 {
			dcg += float64(g) / math.Log2(float64(i+2))
		}
	}
	var grades []int
	for _, g := range j {
		if g > 0 {
			grades = append(grades, g)
		}
	}
	slices.SortFunc(grades, func(a, b int) int { return b - a })
	var ideal float64
	for i, g := range grades[:min(m.K, len(grades))] {
		ideal += float64(g) / math.Log2(float64(i+2))
	}
	if ideal == 0 {
		return 0, nil
	}
	return dcg / ideal, nil
}

// CitationGrounding is the share of an answer's citations that are
// grounded: the cited id was retrieved and its passage contains the quoted
// text (compared with white space collapsed, case kept). An answer that
// cites nothing scores 0: it grounds nothing. A citation without a quote
// is an error, because it cannot be checked. The judgement is not used.
type CitationGrounding struct{}

// Name returns "citation_grounding".
func (CitationGrounding) Name() string { return "citation_grounding" }

// Score implements RankedMetric.
func (CitationGrounding) Score(o Outcome, _ Judgement) (float64, error) {
	if len(o.Citations) == 0 {
		return 0, nil
	}
	grounded := 0
	for i, c := range o.Citations {
		q := collapse(c.Quote)
		if q == "" {
			return 0, fmt.Errorf("citation_grounding: citation %d of %q quotes nothing", i, c.ID)
		}
		if p, ok := o.Passages[c.ID]; ok && strings.Contains(collapse(p), q) {
			grounded++
		}
	}
	return float64(grounded) / float64(len(o.Citations)), nil
}

func collapse(s string) string { return strings.Join(strings.Fields(s), " ") }
