package retrieval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/aidgen/aid/runtime/rules"
)

// Search modes, as the IR spells them.
const (
	// ModeHybrid searches the vector and the lexical index and fuses the
	// two rankings: the default.
	ModeHybrid = rules.ModeHybrid
	// ModeVector searches the vectors only.
	ModeVector = rules.ModeVector
	// ModeLexical searches the lexical (BM25) index only; the query is not
	// embedded.
	ModeLexical = rules.ModeLexical
)

// Fusion methods, as the IR spells them.
const (
	// FusionRRF is reciprocal-rank fusion (Cormack et al., 2009): a hit
	// scores Σ weight/(RRFK + rank) over the rankings it appears in.
	FusionRRF = rules.FusionRRF
	// FusionWeighted is weighted score fusion: each ranking's scores are
	// scaled to [0, 1] over its candidates (min-max) and a hit scores
	// Σ weight · scaled score.
	FusionWeighted = rules.FusionWeighted
)

// Collapse settings, as the IR spells them.
const (
	// CollapseNone returns chunks: several may come from one document.
	CollapseNone = rules.CollapseNone
	// CollapseDocument keeps the best chunk of each document, so that a
	// result list of k holds k documents.
	CollapseDocument = rules.CollapseDocument
)

// DefaultDepth is how many candidates each stage of a search retrieves when
// the ranking does not say: as many as the largest k a search may ask for
// (agents.MaxSearchK, the IR's topK bound), so that the top 10 are the
// same whether a search asks for 10 hits or 100.
const DefaultDepth = 100

// DefaultRRFK is reciprocal-rank fusion's k, the value of the literature.
const DefaultRRFK = 60

// Ranking says how a retriever ranks its chunks. The zero value is the
// default: hybrid, reciprocal-rank fusion with k 60 and equal weights, a
// depth of DefaultDepth per stage, chunks not collapsed, DefaultBM25.
type Ranking struct {
	// Mode is ModeHybrid, ModeVector or ModeLexical; empty means
	// ModeHybrid.
	Mode string
	// Fusion is how a hybrid search fuses its two rankings: FusionRRF or
	// FusionWeighted; empty means FusionRRF.
	Fusion string
	// RRFK damps reciprocal-rank fusion's preference for the top ranks;
	// zero means DefaultRRFK.
	RRFK float64
	// VectorWeight and LexicalWeight weigh the two rankings in either
	// fusion; zero means 1.
	VectorWeight, LexicalWeight float64
	// Depth is how many candidates each stage retrieves, whatever k a
	// search asks for (a k above it deepens every stage to k); zero means
	// DefaultDepth. The top k of a search are therefore the same for
	// every k up to Depth.
	Depth int
	// Collapse is CollapseNone or CollapseDocument; empty means
	// CollapseNone. Collapsing to documents, the stages search deeper
	// until the fused chunks hold Depth documents, so k hits are k
	// documents.
	Collapse string
	// BM25 are the lexical stage's parameters; the zero value means
	// DefaultBM25.
	BM25 BM25
}

// WithDefaults returns the ranking with every zero field set to its
// default.
func (r Ranking) WithDefaults() Ranking {
	if r.Mode == "" {
		r.Mode = ModeHybrid
	}
	if r.Fusion == "" {
		r.Fusion = FusionRRF
	}
	if r.RRFK == 0 {
		r.RRFK = DefaultRRFK
	}
	if r.VectorWeight == 0 {
		r.VectorWeight = 1
	}
	if r.LexicalWeight == 0 {
		r.LexicalWeight = 1
	}
	if r.Depth == 0 {
		r.Depth = DefaultDepth
	}
	if r.Collapse == "" {
		r.Collapse = CollapseNone
	}
	if r.BM25 == (BM25{}) {
		r.BM25 = DefaultBM25
	}
	return r
}

// MaxDepth is the deepest a stage may search.
const MaxDepth = rules.MaxDepth

// RankingError is one problem of a Ranking: Field is the field as the
// IR spells it ("mode", "fusion", "collapse", "rrfK", "weights", "depth",
// "bm25"), so that `aidgen vet` can point at it.
type RankingError struct {
	// Field names the field.
	Field string
	// Err says what is wrong with it.
	Err error
}

// Error implements error.
func (e *RankingError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RankingError) Unwrap() error { return e.Err }

// Check refuses a ranking with an unknown mode, fusion or collapse, or a
// number out of its range, with one *RankingError per problem (joined);
// zero fields are defaults and pass. The rules live once, in
// runtime/rules (CheckRanking), which `aidgen vet` applies to the IR.
func (r Ranking) Check() error {
	var errs []error
	for _, p := range rules.CheckRanking(r.rules()) {
		errs = append(errs, &RankingError{Field: p.Field(), Err: errors.New(p.Msg)})
	}
	return errors.Join(errs...)
}

// rules spells the ranking as the values runtime/rules checks.
func (r Ranking) rules() rules.Ranking {
	return rules.Ranking{
		Mode: r.Mode, Fusion: r.Fusion, Collapse: r.Collapse, RRFK: r.RRFK,
		VectorWeight: r.VectorWeight, LexicalWeight: r.LexicalWeight,
		Depth: r.Depth, BM25K1: r.BM25.K1, BM25B: r.BM25.B,
	}
}

// needsLexical reports whether the ranking searches a lexical index.
func (r Ranking) needsLexical() bool { return r.Mode != ModeVector }

// needsVector reports whether the ranking embeds the query.
func (r Ranking) needsVector() bool { return r.Mode != ModeLexical }

// Query is a search's query in the forms the stages need.
type Query struct {
	// Vector is the query's embedding; nil in ModeLexical.
	Vector []float32
	// Terms are the query's distinct terms (LexicalSearcher.QueryTerms);
	// ignored in ModeVector.
	Terms []string
}

// SearchStore runs a ranking's stages against a store and returns the
// best k hits of the fused ranking, collapsed to documents if the ranking
// says so: the search of a Retriever after its query is embedded, without
// a reranker. Each hit carries its VectorRank and LexicalRank; its Score
// is the fused score in a hybrid search, and the stage's own score (the
// similarity, or BM25) in a single-stage one. A hybrid or lexical ranking
// needs a store that is a LexicalSearcher.
func SearchStore(ctx context.Context, store VectorStore, q Query, k int, filter Filter, r Ranking) ([]Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("search: k must be positive, got %d", k)
	}
	hits, err := candidates(ctx, store, q, k, filter, r.WithDefaults())
	if err != nil {
		return nil, err
	}
	return finish(hits, k, r.WithDefaults()), nil
}

// candidates runs the stages at their depth (at least k), the two of a
// hybrid search at the same time, and fuses them, chunk by chunk; r has
// its defaults. Collapsing to documents, the stages are searched twice as
// deep, again and again, until the fused chunks hold Depth documents or
// the stages have no more (or maxStageFetch times the depth was reached):
// how deep depends on the query and the data, never on k, so the ranking
// still does not depend on k, and k hits are k documents.
func candidates(ctx context.Context, store VectorStore, q Query, k int, filter Filter, r Ranking) ([]Hit, error) {
	depth := max(r.Depth, k)
	var ls LexicalSearcher
	if r.needsLexical() {
		var ok bool
		if ls, ok = store.(LexicalSearcher); !ok {
			return nil, fmt.Errorf("search: mode %q needs a lexical index, and this store keeps none; use mode %q", r.Mode, ModeVector)
		}
	}
	if r.needsVector() && q.Vector == nil {
		return nil, errors.New("search: the ranking searches vectors but the query has none")
	}
	for n := depth; ; n *= 2 {
		vec, lex, err := stages(ctx, store, ls, q, n, filter, r)
		if err != nil {
			return nil, err
		}
		var hits []Hit
		switch r.Mode {
		case ModeVector:
			hits = ranked(vec, func(h *Hit, i int) { h.VectorRank = i })
		case ModeLexical:
			hits = ranked(lex, func(h *Hit, i int) { h.LexicalRank = i })
		default:
			hits = Fuse(vec, lex, r)
		}
		if r.Collapse != CollapseDocument || len(vec) < n && len(lex) < n || n >= maxStageFetch*depth ||
			len(collapsed(slices.Clone(hits))) >= depth {
			return hits, nil
		}
	}
}

// maxStageFetch bounds how deep a search collapsing to documents searches
// each stage, as a multiple of its depth.
const maxStageFetch = 16

// stages runs the vector and the lexical stage for n candidates each, the
// lexical one in a goroutine of its own.
func stages(ctx context.Context, store VectorStore, ls LexicalSearcher, q Query, n int, filter Filter, r Ranking) (vec, lex []Hit, err error) {
	var lexErr error
	done := make(chan struct{})
	if ls != nil && len(q.Terms) > 0 {
		go func() {
			defer close(done)
			if lex, lexErr = ls.SearchLexical(ctx, q.Terms, n, filter, r.BM25); lexErr != nil {
				lexErr = fmt.Errorf("lexical search: %w", lexErr)
			}
		}()
	} else {
		close(done)
	}
	var vecErr error
	if r.needsVector() {
		vec, vecErr = store.Search(ctx, q.Vector, n, filter)
	}
	<-done
	if err := errors.Join(vecErr, lexErr); err != nil {
		return nil, nil, err
	}
	return vec, lex, nil
}

// collapsed keeps the first (best) hit of each source, in order.
func collapsed(hits []Hit) []Hit {
	seen := make(map[string]bool, len(hits))
	return slices.DeleteFunc(hits, func(h Hit) bool {
		if seen[h.Source] {
			return true
		}
		seen[h.Source] = true
		return false
	})
}

// ranked sets each hit's rank, from 1, with set.
func ranked(hits []Hit, set func(*Hit, int)) []Hit {
	for i := range hits {
		set(&hits[i], i+1)
	}
	return hits
}

// Fuse fuses a vector ranking and a lexical ranking, each best first, by
// the ranking's fusion method and weights, into one ranking: by fused score
// descending, then by lexical rank (a hit the lexical stage ranked first
// before one it ranked second or not at all: reciprocal-rank fusion makes
// ranks (1, 2) and (2, 1) equal, and the query's own words are the better
// judge between them), then by id. A hit in both keeps the vector hit's
// fields; every hit carries its rank in each list (zero when it is absent
// from one).
func Fuse(vec, lex []Hit, r Ranking) []Hit {
	r = r.WithDefaults()
	out := make([]Hit, 0, len(vec)+len(lex))
	at := make(map[string]int, len(vec)+len(lex))
	add := func(list []Hit, w float64, weighted bool, setRank func(*Hit, int)) {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, h := range list {
			lo, hi = min(lo, h.Score), max(hi, h.Score)
		}
		for i, h := range list {
			var s float64
			if weighted {
				s = 1
				if hi > lo {
					s = (h.Score - lo) / (hi - lo)
				}
				s *= w
			} else {
				s = w / (r.RRFK + float64(i+1))
			}
			j, ok := at[h.ID]
			if !ok {
				j = len(out)
				at[h.ID] = j
				h.Score, h.VectorRank, h.LexicalRank = 0, 0, 0
				out = append(out, h)
			}
			out[j].Score += s
			setRank(&out[j], i+1)
		}
	}
	weighted := r.Fusion == FusionWeighted
	add(vec, r.VectorWeight, weighted, func(h *Hit, i int) { h.VectorRank = i })
	add(lex, r.LexicalWeight, weighted, func(h *Hit, i int) { h.LexicalRank = i })
	lexRank := func(h Hit) int {
		if h.LexicalRank == 0 {
			return math.MaxInt
		}
		return h.LexicalRank
	}
	slices.SortFunc(out, func(a, b Hit) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		if c := cmp.Compare(lexRank(a), lexRank(b)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// finish collapses hits to documents when the ranking says so and keeps
// the best k.
func finish(hits []Hit, k int, r Ranking) []Hit {
	if r.Collapse == CollapseDocument {
		hits = collapsed(hits)
	}
	return hits[:min(k, len(hits))]
}
