package retrieval_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/retrieval"
)

func modeRetriever(t *testing.T, f *fixture, store retrieval.VectorStore, r retrieval.Ranking) (*retrieval.Retriever, error) {
	t.Helper()
	e, _ := retrieval.NewGatewayEmbedder(f.gw, "embed")
	return retrieval.New(retrieval.Binding{
		Name: "kb", Source: retrieval.Source{Dir: f.dir, Files: []string{"docs/**/*.md", "docs/**/*.txt"}, Exclude: []string{"docs/ignored/**"}},
		Chunker: mustChunker(t, 120, 20), Embedder: e, Store: store, TopK: 3, Ranking: r,
	})
}

// TestModes: a lexical search embeds nothing (it costs nothing), a vector
// search carries vector ranks only, a hybrid one both, and every hit of a
// lexical search holds a query term.
func TestModes(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	f.ingest(t)
	for _, mode := range []string{retrieval.ModeLexical, retrieval.ModeVector, retrieval.ModeHybrid} {
		r, err := modeRetriever(t, f, f.store, retrieval.Ranking{Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		before := f.spend(t)
		hits, err := r.Search(t.Context(), "shipping detail", 5)
		if err != nil {
			t.Fatal(err)
		}
		calls := f.spend(t).Calls - before.Calls
		if want := map[string]int64{retrieval.ModeLexical: 0, retrieval.ModeVector: 1, retrieval.ModeHybrid: 1}[mode]; calls != want {
			t.Errorf("%s: %d embedding calls, want %d", mode, calls, want)
		}
		if len(hits) == 0 {
			t.Fatalf("%s: no hits", mode)
		}
		for i, h := range hits {
			switch mode {
			case retrieval.ModeLexical:
				if h.LexicalRank != i+1 || h.VectorRank != 0 || !strings.Contains(strings.ToLower(h.Text), "shipping") && !strings.Contains(strings.ToLower(h.Text), "detail") {
					t.Errorf("lexical hit %d: %+v", i, h)
				}
			case retrieval.ModeVector:
				if h.VectorRank != i+1 || h.LexicalRank != 0 {
					t.Errorf("vector hit %d has ranks %d, %d", i, h.VectorRank, h.LexicalRank)
				}
			case retrieval.ModeHybrid:
				if h.VectorRank == 0 && h.LexicalRank == 0 {
					t.Errorf("hybrid hit %d is in neither list", i)
				}
			}
		}
	}
	// A query of stop words only has no terms: lexical finds nothing,
	// hybrid falls back on the vectors.
	lex, _ := modeRetriever(t, f, f.store, retrieval.Ranking{Mode: retrieval.ModeLexical})
	if hits, err := lex.Search(t.Context(), "the of and", 5); err != nil || len(hits) != 0 {
		t.Errorf("lexical search of stop words: %d hits, %v", len(hits), err)
	}
	hyb, _ := modeRetriever(t, f, f.store, retrieval.Ranking{})
	if hits, err := hyb.Search(t.Context(), "the of and", 5); err != nil || len(hits) == 0 {
		t.Errorf("hybrid search of stop words: %d hits, %v", len(hits), err)
	}
}

// vectorOnly is a store without a lexical index.
type vectorOnly struct{ retrieval.VectorStore }

func (v vectorOnly) Search(ctx context.Context, q []float32, k int, f retrieval.Filter) ([]retrieval.Hit, error) {
	return v.VectorStore.Search(ctx, q, k, f)
}

// TestModeNeedsLexicalIndex: a store that keeps no lexical index serves
// mode vector, and refuses hybrid and lexical at New, saying why.
func TestModeNeedsLexicalIndex(t *testing.T) {
	f := newFixture(t, retrieval.RerankNone)
	store := vectorOnly{f.store}
	if _, err := modeRetriever(t, f, store, retrieval.Ranking{Mode: retrieval.ModeVector}); err != nil {
		t.Errorf("mode vector: %v", err)
	}
	for _, mode := range []string{"", retrieval.ModeHybrid, retrieval.ModeLexical} {
		_, err := modeRetriever(t, f, store, retrieval.Ranking{Mode: mode})
		if err == nil || !strings.Contains(err.Error(), "needs a lexical index") || !strings.Contains(err.Error(), `use mode "vector"`) {
			t.Errorf("mode %q on a store without a lexical index: %v", mode, err)
		}
	}
}
