package retrieval_test

import (
	"math"
	"slices"
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
)

func hit(id, heading, text string, score float64) retrieval.Hit {
	return retrieval.Hit{Chunk: retrieval.Chunk{ID: id, Heading: heading, Text: text}, Score: score}
}

// TestLexicalBM25 checks BM25 and the fusion against hand-computed values.
// Query "refund"; candidates in vector order D "" (0 terms), C "shipping"
// (1), B "refund policy here" (3), A "refund refund" (2): N = 4, df = 2,
// avgdl = 6/4 = 1.5, idf = ln(1 + (4 − 2 + 0.5)/(2 + 0.5)) = ln 2, and
//
//	A: ln2 · 2·2.2 / (2 + 1.2·(0.25 + 0.75·2/1.5)) = ln2 · 4.4/3.5
//	B: ln2 · 1·2.2 / (1 + 1.2·(0.25 + 0.75·3/1.5)) = ln2 · 2.2/3.1
//	C, D: 0
//
// BM25 ranks A 1, B 2, C and D 3 (tied); vector ranks D 1, C 2, B 3, A 4.
// Fused with k = 60: D 1/61+1/63, A 1/64+1/61, C 1/62+1/63, B 1/63+1/62;
// C and B tie and keep vector order.
func TestLexicalBM25(t *testing.T) {
	in := []retrieval.Hit{hit("D", "", "", 0.9), hit("C", "", "shipping", 0.8), hit("B", "", "Refund policy here", 0.7), hit("A", "", "refund, REFUND", 0.6)}
	bm, err := retrieval.Lexical{}.BM25("Refund?", in)
	if err != nil {
		t.Fatal(err)
	}
	wantBM := []float64{0, 0, math.Ln2 * 2.2 / 3.1, math.Ln2 * 4.4 / 3.5}
	for i, w := range wantBM {
		if math.Abs(bm[i]-w) > 1e-12 {
			t.Errorf("BM25 of %s is %v, want %v", in[i].ID, bm[i], w)
		}
	}
	out, err := retrieval.Lexical{}.Rerank(t.Context(), "Refund?", in)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		id    string
		score float64
	}{{"D", 1.0/61 + 1.0/63}, {"A", 1.0/64 + 1.0/61}, {"C", 1.0/62 + 1.0/63}, {"B", 1.0/63 + 1.0/62}}
	for i, w := range want {
		if out[i].ID != w.id || math.Abs(out[i].Score-w.score) > 1e-12 {
			t.Errorf("rank %d: %s %v, want %s %v", i, out[i].ID, out[i].Score, w.id, w.score)
		}
	}
	if in[0].ID != "D" || in[0].Score != 0.9 {
		t.Error("Rerank modified its input")
	}
}

// TestLexicalHeadingAndRepeats checks that the heading trail counts as
// text and that a repeated query term counts once.
func TestLexicalHeadingAndRepeats(t *testing.T) {
	in := []retrieval.Hit{hit("x", "", "about the weather", 0.9), hit("y", "Refunds", "about the weather", 0.1)}
	for _, q := range []string{"refunds", "refunds refunds refunds"} {
		out, err := retrieval.Lexical{}.Rerank(t.Context(), q, in)
		if err != nil {
			t.Fatal(err)
		}
		// y is second by vector and first by BM25; x the reverse: a tie
		// of fused scores, kept in vector order.
		if out[0].ID != "x" || out[0].Score != out[1].Score {
			t.Errorf("%q: %+v", q, out)
		}
	}
	a, _ := retrieval.Lexical{}.BM25("refunds", in)
	b, _ := retrieval.Lexical{}.BM25("refunds refunds", in)
	if a[1] <= 0 || a[0] != 0 || a[1] != b[1] {
		t.Errorf("heading not counted or a repeated query term changed the score: %v vs %v", a, b)
	}
}

func TestRerankEdges(t *testing.T) {
	for _, rr := range []retrieval.Reranker{retrieval.NoRerank{}, retrieval.Lexical{}} {
		out, err := rr.Rerank(t.Context(), "anything", nil)
		if err != nil || len(out) != 0 {
			t.Errorf("%T on no candidates: %v %v", rr, out, err)
		}
	}
	in := []retrieval.Hit{hit("b", "", "x", 0.5), hit("a", "", "y", 0.4)}
	out, _ := retrieval.NoRerank{}.Rerank(t.Context(), "y", in)
	if !slices.Equal(ids(out), []string{"b", "a"}) {
		t.Errorf("NoRerank reordered: %v", ids(out))
	}
	for _, l := range []retrieval.Lexical{{K1: -1}, {B: 1.5}, {K1: math.NaN()}, {RRFK: -1}} {
		if _, err := l.Rerank(t.Context(), "x", in); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	if _, err := retrieval.NewReranker("cross-encoder"); err == nil {
		t.Error("unknown rerank kind accepted")
	}
}

func ids(hits []retrieval.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.ID
	}
	return out
}
