package retrieval_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

const (
	benchRows = 100_000
	benchDims = 384
	// copyBytes is the size of each buffer of the bandwidth reference,
	// far larger than any cache.
	copyBytes = 128 << 20
)

// copyBandwidth measures this machine's memory bandwidth the simple way: the
// best of several copies of a buffer far larger than the caches, counting
// bytes read plus bytes written (the STREAM convention), in GB/s.
func copyBandwidth() float64 {
	src, dst := make([]byte, copyBytes), make([]byte, copyBytes)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	best := time.Duration(math.MaxInt64)
	for range 5 {
		start := time.Now()
		copy(dst, src)
		best = min(best, time.Since(start))
	}
	return 2 * copyBytes / best.Seconds() / 1e9
}

// BenchmarkMemoryCopy is the bandwidth reference for BenchmarkSearchMemory:
// its MB/s counts bytes read plus bytes written.
func BenchmarkMemoryCopy(b *testing.B) {
	src, dst := make([]byte, copyBytes), make([]byte, copyBytes)
	for i := range src {
		src[i] = byte(i) // untouched pages all map the one zero page, which stays in cache
	}
	copy(dst, src)
	b.SetBytes(2 * copyBytes)
	for b.Loop() {
		copy(dst, src)
	}
}

func benchStore(b *testing.B, rows, dims int) *memory.Store {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	s, err := memory.NewStore(dims, retrieval.DistanceCosine)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 10_000
	recs := make([]retrieval.Record, 0, batch)
	for i := range rows {
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(rng.NormFloat64())
		}
		g := "even"
		if i%2 == 1 {
			g = "odd"
		}
		recs = append(recs, retrieval.Record{Chunk: retrieval.Chunk{ID: fmt.Sprintf("c%07d", i)}, Vector: v, Metadata: map[string]string{"group": g}})
		if len(recs) == batch || i == rows-1 {
			if err := s.Upsert(b.Context(), recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	return s
}

// BenchmarkSearchMemory measures exact top-10 search over 100,000 vectors
// of width 384 (153.6 MB of float32): queries per second, and the
// effective bandwidth (the matrix bytes scanned per second, the MB/s
// column and gb/s) as a share of the copy bandwidth measured in the same
// run (pct_of_copy_bw; the target is at least 50).
func BenchmarkSearchMemory(b *testing.B) {
	s := benchStore(b, benchRows, benchDims)
	bw := copyBandwidth()
	rng := rand.New(rand.NewPCG(2, 2))
	queries := make([][]float32, 64)
	for i := range queries {
		q := make([]float32, benchDims)
		for j := range q {
			q[j] = float32(rng.NormFloat64())
		}
		queries[i] = q
	}
	matrix := int64(benchRows * benchDims * 4)
	b.Run("exact", func(b *testing.B) {
		b.SetBytes(matrix)
		i := 0
		for b.Loop() {
			hits, err := s.Search(b.Context(), queries[i%len(queries)], 10, nil)
			if err != nil || len(hits) != 10 {
				b.Fatal(err)
			}
			i++
		}
		report(b, matrix, bw)
	})
	// A filter matching half the rows still scans the whole matrix: rows
	// are scored first and the filter is checked only for rows that would
	// enter the top k.
	b.Run("filtered-half", func(b *testing.B) {
		b.SetBytes(matrix)
		i := 0
		for b.Loop() {
			hits, err := s.Search(b.Context(), queries[i%len(queries)], 10, retrieval.Filter{"group": "odd"})
			if err != nil || len(hits) != 10 {
				b.Fatal(err)
			}
			i++
		}
		report(b, matrix, bw)
	})
}

func report(b *testing.B, bytesPerOp int64, copyGBs float64) {
	perOp := b.Elapsed().Seconds() / float64(b.N)
	gbs := float64(bytesPerOp) / perOp / 1e9
	b.ReportMetric(1/perOp, "queries/s")
	b.ReportMetric(gbs, "gb/s")
	b.ReportMetric(copyGBs, "copy_gb/s")
	b.ReportMetric(100*gbs/copyGBs, "pct_of_copy_bw")
}

// BenchmarkIngest measures a full ingest of 200 Markdown files (about 3.5
// MB of text in chunks of 800 with overlap 100) through the gateway and
// the fake embedder of width 384 into a memory store: reading, chunking,
// embedding, pricing and storing, in chunks per second.
func BenchmarkIngest(b *testing.B) {
	dir := b.TempDir()
	files := make(map[string]string)
	words := strings.Fields("refunds shipping delivery order account password tracking customs damaged items payment method business days express standard the a of to within")
	rng := rand.New(rand.NewPCG(3, 3))
	for f := range 200 {
		var sb strings.Builder
		for s := range 6 {
			fmt.Fprintf(&sb, "## Section %d\n\n", s)
			for range 4 {
				for range 60 {
					sb.WriteString(words[rng.IntN(len(words))] + " ")
				}
				sb.WriteString("\n\n")
			}
		}
		files[fmt.Sprintf("docs/f%03d.md", f)] = sb.String()
	}
	writeFiles(b, dir, files)
	gw := newGatewayWidth(b, benchDims)
	chunks := 0
	for b.Loop() {
		s, _ := memory.NewStore(benchDims, retrieval.DistanceCosine)
		e, err := retrieval.NewGatewayEmbedder(gw, "embed")
		if err != nil {
			b.Fatal(err)
		}
		c, _ := retrieval.NewTextChunker(800, 100)
		r, err := retrieval.New(retrieval.Binding{Name: "kb", Source: retrieval.Source{Dir: dir, Files: []string{"docs/*.md"}}, Chunker: c, Embedder: e, Store: s, TopK: 5})
		if err != nil {
			b.Fatal(err)
		}
		st, err := r.Ingest(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		chunks = st.Added
	}
	b.ReportMetric(float64(chunks)*float64(b.N)/b.Elapsed().Seconds(), "chunks/s")
	b.ReportMetric(float64(chunks), "chunks/op")
}
