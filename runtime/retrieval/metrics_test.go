package retrieval_test

import (
	"math"
	"slices"
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
)

// The worked example: ranking d1 … d5, judgement d2 (grade 1), d4 (grade 2)
// and d9 (grade 1, never retrieved), d7 judged not relevant (grade 0).
//
//	recall@3 = 1/3 (d2), recall@5 = recall@10 = 2/3
//	mrr@1 = 0, mrr@5 = 1/2 (d2 at rank 2)
//	ndcg@5: DCG = 1/log2(3) + 2/log2(5); ideal grades 2, 1, 1:
//	        IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4)
//	ndcg@3: DCG = 1/log2(3); IDCG as above (three relevant fit in 3)
//	ndcg@1: DCG = 0 → 0
var (
	exRanked = []string{"d1", "d2", "d3", "d4", "d5"}
	exJudged = retrieval.Judgement{"d2": 1, "d4": 2, "d9": 1, "d7": 0}
	exIDCG   = 2 + 1/math.Log2(3) + 0.5
)

func TestRankedMetrics(t *testing.T) {
	tests := []struct {
		name   string
		metric retrieval.RankedMetric
		ranked []string
		judged retrieval.Judgement
		want   float64
	}{
		{"recall@3", retrieval.RecallAtK{K: 3}, exRanked, exJudged, 1.0 / 3},
		{"recall@5", retrieval.RecallAtK{K: 5}, exRanked, exJudged, 2.0 / 3},
		{"recall@10", retrieval.RecallAtK{K: 10}, exRanked, exJudged, 2.0 / 3},
		{"mrr@1", retrieval.MRR{K: 1}, exRanked, exJudged, 0},
		{"mrr@5", retrieval.MRR{K: 5}, exRanked, exJudged, 0.5},
		{"ndcg@5", retrieval.NDCGAtK{K: 5}, exRanked, exJudged, (1/math.Log2(3) + 2/math.Log2(5)) / exIDCG},
		{"ndcg@3", retrieval.NDCGAtK{K: 3}, exRanked, exJudged, (1 / math.Log2(3)) / exIDCG},
		{"ndcg@1", retrieval.NDCGAtK{K: 1}, exRanked, exJudged, 0},
		// ndcg@2 cuts the ideal ranking too: IDCG@2 = 2 + 1/log2(3).
		{"ndcg@2 cuts the ideal", retrieval.NDCGAtK{K: 2}, []string{"d4", "d2"}, exJudged, 1},
		{"perfect ndcg", retrieval.NDCGAtK{K: 10}, []string{"d4", "d2", "d9"}, exJudged, 1},
		{"grade order matters", retrieval.NDCGAtK{K: 10}, []string{"d2", "d9", "d4"}, exJudged, (1 + 1/math.Log2(3) + 2/math.Log2(4)) / exIDCG},
		// No relevant id: trec_eval scores 0 for every measure.
		{"recall, nothing relevant", retrieval.RecallAtK{K: 5}, exRanked, retrieval.Judgement{"d1": 0}, 0},
		{"mrr, nothing relevant", retrieval.MRR{K: 5}, exRanked, nil, 0},
		{"ndcg, nothing relevant", retrieval.NDCGAtK{K: 5}, exRanked, retrieval.Judgement{}, 0},
		{"empty ranking", retrieval.RecallAtK{K: 5}, nil, exJudged, 0},
		{"mrr of first rank", retrieval.MRR{K: 5}, []string{"d4"}, exJudged, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.metric.Score(retrieval.Outcome{Ranked: tc.ranked}, tc.judged)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("%s = %v, want %v", tc.metric.Name(), got, tc.want)
			}
		})
	}
}

// TestRankTies checks the deterministic tie-break: equal scores rank by id
// ascending, the order the stores return, and the metrics see that order.
func TestRankTies(t *testing.T) {
	ranked, err := retrieval.Rank([]retrieval.Scored{{"b", 0.5}, {"c", 0.9}, {"a", 0.5}, {"d", 0.1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"c", "a", "b", "d"}; !slices.Equal(ranked, want) {
		t.Fatalf("Rank = %v, want %v", ranked, want)
	}
	o := retrieval.Outcome{Ranked: ranked}
	for _, tc := range []struct {
		rel  string
		want float64
	}{{"a", 1.0 / 2}, {"b", 1.0 / 3}} {
		if got, _ := (retrieval.MRR{K: 10}).Score(o, retrieval.Judgement{tc.rel: 1}); got != tc.want {
			t.Errorf("MRR with %s relevant = %v, want %v", tc.rel, got, tc.want)
		}
	}
	if r, _ := (retrieval.RecallAtK{K: 2}).Score(o, retrieval.Judgement{"b": 1}); r != 0 {
		t.Errorf("b ties with a for rank 2 but loses on id: recall@2 = %v, want 0", r)
	}
	for _, bad := range [][]retrieval.Scored{{{"a", 1}, {"a", 2}}, {{"a", math.NaN()}}} {
		if _, err := retrieval.Rank(bad); err == nil {
			t.Errorf("Rank(%v) accepted", bad)
		}
	}
}

// TestCompareRanked checks the one order of ranked ids, and that the
// metrics' runs (Rank) and the stores' hits (SortHits) both follow it.
func TestCompareRanked(t *testing.T) {
	for _, tc := range []struct {
		a, b retrieval.Scored
		want int
	}{
		{retrieval.Scored{"z", 0.9}, retrieval.Scored{"a", 0.5}, -1}, // the higher score first, whatever the ids
		{retrieval.Scored{"a", 0.5}, retrieval.Scored{"z", 0.9}, 1},
		{retrieval.Scored{"a", 0.5}, retrieval.Scored{"b", 0.5}, -1}, // a tie: the lower id first
		{retrieval.Scored{"b", 0.5}, retrieval.Scored{"a", 0.5}, 1},
		{retrieval.Scored{"a", 0.5}, retrieval.Scored{"a", 0.5}, 0},
	} {
		if got := retrieval.CompareRanked(tc.a.Score, tc.a.ID, tc.b.Score, tc.b.ID); got != tc.want {
			t.Errorf("CompareRanked(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	run := []retrieval.Scored{{"b", 0.5}, {"c", 0.9}, {"a", 0.5}, {"d", 0.1}}
	ranked, err := retrieval.Rank(run)
	if err != nil {
		t.Fatal(err)
	}
	hits := make([]retrieval.Hit, len(run))
	for i, r := range run {
		hits[i] = retrieval.Hit{Chunk: retrieval.Chunk{ID: r.ID}, Score: r.Score}
	}
	retrieval.SortHits(hits)
	for i, h := range hits {
		if h.ID != ranked[i] {
			t.Fatalf("SortHits and Rank disagree at %d: %s, %s", i, h.ID, ranked[i])
		}
	}
}

func TestRankedMetricRefusals(t *testing.T) {
	dup := retrieval.Outcome{Ranked: []string{"a", "b", "a"}}
	for _, m := range []retrieval.RankedMetric{retrieval.RecallAtK{K: 3}, retrieval.MRR{K: 3}, retrieval.NDCGAtK{K: 3}} {
		if _, err := m.Score(dup, retrieval.Judgement{"a": 1}); err == nil {
			t.Errorf("%s accepted a ranking with a duplicate", m.Name())
		}
	}
	for _, m := range []retrieval.RankedMetric{retrieval.RecallAtK{}, retrieval.MRR{K: -1}, retrieval.NDCGAtK{}} {
		if _, err := m.Score(retrieval.Outcome{Ranked: []string{"a"}}, retrieval.Judgement{"a": 1}); err == nil {
			t.Errorf("%s accepted a non-positive cutoff", m.Name())
		}
	}
}

func TestCitationGrounding(t *testing.T) {
	passages := map[string]string{"x": "Refunds arrive within  5 to 10\nbusiness days.", "y": "Orders ship in 2 days."}
	tests := []struct {
		name      string
		citations []retrieval.Citation
		want      float64
	}{
		{"one of three grounded", []retrieval.Citation{
			{ID: "x", Quote: "within 5 to 10 business days"}, // white space differs: grounded
			{ID: "x", Quote: "within 3 days"},                // not in the passage
			{ID: "z", Quote: "Refunds"},                      // not retrieved
		}, 1.0 / 3},
		{"quote from another passage", []retrieval.Citation{{ID: "y", Quote: "Refunds arrive"}}, 0},
		{"case is kept", []retrieval.Citation{{ID: "y", Quote: "orders ship"}}, 0},
		{"all grounded", []retrieval.Citation{{ID: "y", Quote: "ship in 2"}, {ID: "x", Quote: "Refunds"}}, 1},
		{"no citations", nil, 0},
	}
	for _, tc := range tests {
		got, err := retrieval.CitationGrounding{}.Score(retrieval.Outcome{Passages: passages, Citations: tc.citations}, nil)
		if err != nil || math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := (retrieval.CitationGrounding{}).Score(retrieval.Outcome{Passages: passages, Citations: []retrieval.Citation{{ID: "x", Quote: " \n"}}}, nil); err == nil {
		t.Error("a citation without a quote was scored")
	}
}

func TestParseJudgement(t *testing.T) {
	j, err := retrieval.ParseJudgement([]byte(`["docs/refunds.md","docs/shipping.md"]`))
	if err != nil || j["docs/refunds.md"] != 1 || j.Relevant() != 2 {
		t.Errorf("array: %v %v", j, err)
	}
	j, err = retrieval.ParseJudgement([]byte(`{"a": 2, "b": 0}`))
	if err != nil || j["a"] != 2 || j.Relevant() != 1 {
		t.Errorf("object: %v %v", j, err)
	}
	for _, bad := range []string{`"a"`, `{"a": -1}`, `[""]`, `{"a": 1.5}`, `not json`} {
		if _, err := retrieval.ParseJudgement([]byte(bad)); err == nil {
			t.Errorf("ParseJudgement(%s) accepted", bad)
		}
	}
}

func TestOutcomeFromHits(t *testing.T) {
	hits := []retrieval.Hit{
		{Chunk: retrieval.Chunk{ID: "c1", Source: "a.md", Text: "one"}},
		{Chunk: retrieval.Chunk{ID: "c2", Source: "b.md", Text: "two"}},
		{Chunk: retrieval.Chunk{ID: "c3", Source: "a.md", Text: "three"}},
	}
	o := retrieval.OutcomeFromHits(hits, true)
	if !slices.Equal(o.Ranked, []string{"a.md", "b.md"}) || o.Passages["a.md"] != "one\n\nthree" {
		t.Errorf("by source: %+v", o)
	}
	o = retrieval.OutcomeFromHits(hits, false)
	if !slices.Equal(o.Ranked, []string{"c1", "c2", "c3"}) || o.Passages["c3"] != "three" {
		t.Errorf("by chunk: %+v", o)
	}
}
