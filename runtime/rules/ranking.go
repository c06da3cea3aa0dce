package rules

import (
	"fmt"
	"math"
)

// Search modes, as the IR spells them (retrieval.Ranking.Mode).
const (
	ModeHybrid  = "hybrid"
	ModeVector  = "vector"
	ModeLexical = "lexical"
)

// Fusion methods, as the IR spells them (retrieval.Ranking.Fusion).
const (
	FusionRRF      = "rrf"
	FusionWeighted = "weighted"
)

// Collapse settings, as the IR spells them (retrieval.Ranking.Collapse).
const (
	CollapseNone     = "none"
	CollapseDocument = "document"
)

// MaxDepth is the deepest a stage of a search may search.
const MaxDepth = 1000

// Ranking is how a retriever ranks its chunks, as plain values: the
// runtime's retrieval.Ranking and the IR's retrieval block both spell
// themselves as one to be checked. Zero fields are defaults.
type Ranking struct {
	// Mode, Fusion and Collapse are spelled as the IR spells them (the
	// constants above); empty means the default.
	Mode, Fusion, Collapse string
	// RRFK is reciprocal-rank fusion's k.
	RRFK float64
	// VectorWeight and LexicalWeight weigh the two rankings in a fusion.
	VectorWeight, LexicalWeight float64
	// Depth is how many candidates each stage retrieves.
	Depth int
	// BM25K1 and BM25B are the lexical stage's parameters; both zero
	// means the defaults.
	BM25K1, BM25B float64
}

// CheckRanking refuses an unknown mode, fusion or collapse, or a number
// out of its range. Each problem's path is the field as the IR spells it
// ("mode", "fusion", "collapse", "rrfK", "weights", "depth", "bm25").
func CheckRanking(r Ranking) []Problem {
	var ps []Problem
	switch r.Mode {
	case "", ModeHybrid, ModeVector, ModeLexical:
	default:
		ps = append(ps, problem(fmt.Sprintf("unknown mode %q; use %q, %q or %q", r.Mode, ModeHybrid, ModeVector, ModeLexical), "mode"))
	}
	switch r.Fusion {
	case "", FusionRRF, FusionWeighted:
	default:
		ps = append(ps, problem(fmt.Sprintf("unknown fusion %q; use %q or %q", r.Fusion, FusionRRF, FusionWeighted), "fusion"))
	}
	switch r.Collapse {
	case "", CollapseNone, CollapseDocument:
	default:
		ps = append(ps, problem(fmt.Sprintf("unknown collapse %q; use %q or %q", r.Collapse, CollapseNone, CollapseDocument), "collapse"))
	}
	if notFinite(r.RRFK) || r.RRFK < 0 {
		ps = append(ps, problem(fmt.Sprintf("rrfK must be a positive number, got %v", r.RRFK), "rrfK"))
	}
	if notFinite(r.VectorWeight) || notFinite(r.LexicalWeight) || r.VectorWeight < 0 || r.LexicalWeight < 0 {
		ps = append(ps, problem(fmt.Sprintf("weights must be positive numbers, got vector %v and lexical %v", r.VectorWeight, r.LexicalWeight), "weights"))
	}
	if r.Depth < 0 || r.Depth > MaxDepth {
		ps = append(ps, problem(fmt.Sprintf("depth must be from 1 to %d, got %d", MaxDepth, r.Depth), "depth"))
	}
	if r.BM25K1 != 0 || r.BM25B != 0 {
		if msg := BM25(r.BM25K1, r.BM25B); msg != "" {
			ps = append(ps, problem(msg, "bm25"))
		}
	}
	return ps
}

// BM25 says what is wrong with Okapi BM25's parameters, or "": k1 is a
// finite number of at least 0, b is from 0 to 1.
func BM25(k1, b float64) string {
	if math.IsNaN(k1) || k1 < 0 || math.IsInf(k1, 0) {
		return fmt.Sprintf("bm25: k1 must be a finite number of at least 0, got %v", k1)
	}
	if math.IsNaN(b) || b < 0 || b > 1 {
		return fmt.Sprintf("bm25: b must be from 0 to 1, got %v", b)
	}
	return ""
}

func notFinite(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }
