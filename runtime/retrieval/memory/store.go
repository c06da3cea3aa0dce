package memory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Store is the in-process retrieval.VectorStore of the store kind memory
// (Kind), with the lexical index of a retrieval.LexicalSearcher. It holds
// every vector in one contiguous row-major []float32 matrix and searches it
// exactly: every row is scored with gonum's vectorised single-precision
// kernels, the best k are kept in a heap, and a large matrix is split over
// the available cores. Exact search over a contiguous matrix is bounded by
// memory bandwidth, which is what BenchmarkSearchMemory measures.
//
// Under DistanceCosine rows and queries are normalised, so the score is one
// inner product. Deletion moves the last row into the hole, so the matrix
// stays dense. A Store is safe for concurrent use: searches share a
// read lock, writes take the write lock.
type Store struct {
	dims int
	dist retrieval.Distance

	mu    sync.RWMutex
	data  []float32 // len(recs) rows of dims floats
	norms []float32 // squared row norms, for DistanceL2
	recs  []memRecord
	index map[string]int // id → row
	lex   lexIndex       // the lexical index of the records' LexicalText

	// parallelMin is the matrix size, in floats, from which a search is
	// split over cores; tests lower it to exercise the split on small data.
	parallelMin int
}

type memRecord struct {
	chunk retrieval.Chunk
	meta  map[string]string
	slot  int32 // in lex
}

// NewStore returns an empty store of the given width and distance.
func NewStore(dims int, d retrieval.Distance) (*Store, error) {
	if dims <= 0 {
		return nil, fmt.Errorf("memory store: width must be positive, got %d", dims)
	}
	if !d.Valid() {
		return nil, fmt.Errorf("memory store: unknown distance %q; use cosine, inner_product or l2", d)
	}
	return &Store{dims: dims, dist: d, index: make(map[string]int), lex: newLexIndex(), parallelMin: parallelFloats}, nil
}

// Dimensions implements retrieval.VectorStore.
func (s *Store) Dimensions() int { return s.dims }

// Distance implements retrieval.VectorStore.
func (s *Store) Distance() retrieval.Distance { return s.dist }

// Len returns the number of records.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.recs)
}

// Upsert implements retrieval.VectorStore.
func (s *Store) Upsert(ctx context.Context, records []retrieval.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(records))
	for _, r := range records {
		if err := retrieval.CheckRecordID(seen, r.ID); err != nil {
			return err
		}
		if err := retrieval.CheckVector("upsert", r.ID, r.Vector, s.dims, s.dist); err != nil {
			return err
		}
	}
	// Analysing the text is the costly part of indexing; it is done before
	// the lock is taken.
	entries := make([]lexEntry, len(records))
	for i, r := range records {
		e := &entries[i]
		e.terms, e.tfs, e.length = analysis.TermCounts(retrieval.LexicalText(r.Chunk))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range records {
		row, ok := s.index[r.ID]
		if ok {
			s.lex.remove(s.recs[row].slot)
		} else {
			row = len(s.recs)
			s.index[r.ID] = row
			s.recs = append(s.recs, memRecord{})
			s.data = slices.Grow(s.data, s.dims)[:len(s.data)+s.dims]
			s.norms = append(s.norms, 0)
		}
		dst := s.data[row*s.dims : (row+1)*s.dims]
		copy(dst, r.Vector)
		if s.dist == retrieval.DistanceCosine {
			normalize(dst)
		}
		s.norms[row] = blas32.Dot(vec(dst), vec(dst))
		s.recs[row] = memRecord{chunk: r.Chunk, meta: maps.Clone(r.Metadata), slot: s.lex.add(entries[i], row)}
	}
	s.lex.compact(s.setSlot)
	return nil
}

// setSlot records a row's new lexical slot after a compaction.
func (s *Store) setSlot(row int, slot int32) { s.recs[row].slot = slot }

// Delete implements retrieval.VectorStore.
func (s *Store) Delete(ctx context.Context, ids []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		row, ok := s.index[id]
		if !ok {
			continue
		}
		s.lex.remove(s.recs[row].slot)
		last := len(s.recs) - 1
		if row != last {
			copy(s.data[row*s.dims:(row+1)*s.dims], s.data[last*s.dims:])
			s.norms[row] = s.norms[last]
			s.recs[row] = s.recs[last]
			s.index[s.recs[row].chunk.ID] = row
			s.lex.docs[s.recs[row].slot].row = row
		}
		s.recs[last] = memRecord{}
		s.recs = s.recs[:last]
		s.data = s.data[:last*s.dims]
		s.norms = s.norms[:last]
		delete(s.index, id)
	}
	s.lex.compact(s.setSlot)
	return nil
}

// IDs implements retrieval.VectorStore.
func (s *Store) IDs(ctx context.Context, filter retrieval.Filter) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for _, r := range s.recs {
		if filter.Matches(r.meta) {
			out = append(out, r.chunk.ID)
		}
	}
	slices.Sort(out)
	return out, nil
}

// parallelFloats is the matrix size, in floats, from which a search is
// split over cores: below it the goroutines cost more than they save.
const parallelFloats = 1 << 20

// blockRows is how many rows one matrix-vector product scores at a time:
// small enough that the scores stay in cache, large enough to amortise the
// call.
const blockRows = 512

// Search implements retrieval.VectorStore.
func (s *Store) Search(ctx context.Context, query []float32, k int, filter retrieval.Filter) ([]retrieval.Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("search: k must be positive, got %d", k)
	}
	if err := retrieval.CheckVector("search", "", query, s.dims, s.dist); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	q := slices.Clone(query)
	if s.dist == retrieval.DistanceCosine {
		normalize(q)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.recs)
	parts := 1
	if n*s.dims >= s.parallelMin {
		parts = max(1, min(runtime.GOMAXPROCS(0), n/blockRows))
	}
	results := make([][]cand, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*n/parts, (p+1)*n/parts
		scan := func() { results[p], errs[p] = s.scan(ctx, q, k, filter, lo, hi) }
		if parts == 1 {
			scan()
			break
		}
		wg.Go(scan)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := slices.Concat(results...)
	slices.SortFunc(all, func(a, b cand) int {
		if s.better(a, b) {
			return -1
		}
		if s.better(b, a) {
			return 1
		}
		return 0
	})
	all = all[:min(k, len(all))]
	var qn float64
	if s.dist == retrieval.DistanceL2 {
		qn = float64(blas32.Dot(vec(q), vec(q)))
	}
	hits := make([]retrieval.Hit, len(all))
	for i, c := range all {
		r := s.recs[c.row]
		score := float64(c.key)
		if s.dist == retrieval.DistanceL2 {
			// key = 2·q·x − |x|², so |q − x|² = |q|² − key.
			score = -math.Sqrt(max(0, qn-score))
		}
		hits[i] = retrieval.Hit{Chunk: r.chunk, Metadata: maps.Clone(r.meta), Score: score}
	}
	return hits, nil
}

// cand is a scored row. key orders rows: the score itself for cosine and
// inner product, 2·q·x − |x|² (a monotone transform of the negated squared
// distance) for l2.
type cand struct {
	key float32
	row int
}

// better reports whether a ranks before b: higher key, then smaller id.
func (s *Store) better(a, b cand) bool {
	if a.key != b.key {
		return a.key > b.key
	}
	return s.recs[a.row].chunk.ID < s.recs[b.row].chunk.ID
}

// scan returns the best k rows of [lo, hi) that match filter.
func (s *Store) scan(ctx context.Context, q []float32, k int, filter retrieval.Filter, lo, hi int) ([]cand, error) {
	h := topK{k: k, better: s.better}
	var buf [blockRows]float32
	d := s.dims
	for start := lo; start < hi; start += blockRows {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := min(start+blockRows, hi)
		rows := end - start
		blas32.Gemv(blas.NoTrans, 1,
			blas32.General{Rows: rows, Cols: d, Stride: d, Data: s.data[start*d : end*d]},
			vec(q), 0, blas32.Vector{N: rows, Inc: 1, Data: buf[:rows]})
		for i, dot := range buf[:rows] {
			c := cand{key: s.key(dot, start+i), row: start + i}
			// The filter is checked only for rows that would enter the
			// heap: scoring every row is a sequential scan at memory
			// speed, while a metadata lookup per row would cost more.
			if len(filter) > 0 && (!h.admits(c) || !filter.Matches(s.recs[c.row].meta)) {
				continue
			}
			h.push(c)
		}
	}
	return h.items, nil
}

// key turns a row's inner product with the query into its ordering key; a
// NaN (an overflowing inner product of huge finite vectors) ranks last.
func (s *Store) key(dot float32, row int) float32 {
	if s.dist == retrieval.DistanceL2 {
		dot = 2*dot - s.norms[row]
	}
	if dot != dot {
		return float32(math.Inf(-1))
	}
	return dot
}

// topK keeps the best k candidates in a heap whose root is the worst kept.
type topK struct {
	k      int
	items  []cand
	better func(a, b cand) bool
}

// admits reports whether push would keep c.
func (t *topK) admits(c cand) bool {
	return len(t.items) < t.k || t.better(c, t.items[0])
}

func (t *topK) push(c cand) {
	if len(t.items) < t.k {
		t.items = append(t.items, c)
		for i := len(t.items) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.better(t.items[p], t.items[i]) {
				break
			}
			t.items[p], t.items[i] = t.items[i], t.items[p]
			i = p
		}
		return
	}
	if c.key < t.items[0].key || !t.better(c, t.items[0]) {
		return
	}
	t.items[0] = c
	for i := 0; ; {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < len(t.items) && t.better(t.items[worst], t.items[l]) {
			worst = l
		}
		if r < len(t.items) && t.better(t.items[worst], t.items[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		t.items[i], t.items[worst] = t.items[worst], t.items[i]
		i = worst
	}
}

func vec(v []float32) blas32.Vector { return blas32.Vector{N: len(v), Inc: 1, Data: v} }

// normalize scales v to unit length in place; CheckVector has refused zero
// vectors where this is called.
func normalize(v []float32) {
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return
	}
	inv := 1 / math.Sqrt(sq)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}

// compile-time check.
var (
	_ retrieval.VectorStore     = (*Store)(nil)
	_ retrieval.LexicalSearcher = (*Store)(nil)
)
