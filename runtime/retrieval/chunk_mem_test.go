package retrieval_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// largeDoc returns a Markdown document of about n bytes: sections with
// headings, paragraphs of words, some non-ASCII text and fenced code.
func largeDoc(n int) string {
	rng := rand.New(rand.NewPCG(5, 5))
	words := strings.Fields("refund parcel courier password invoice warranty damaged tracking customs délai naïve 配送 the a of to and is")
	var b strings.Builder
	b.Grow(n + 1024)
	for s := 0; b.Len() < n; s++ {
		fmt.Fprintf(&b, "## Section %d\n\n", s)
		for p := range 4 {
			for range 40 + rng.IntN(80) {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
			b.WriteString("\n\n")
			if p == 2 && s%5 == 0 {
				b.WriteString("```\n# not a heading\ncode()\n```\n\n")
			}
		}
	}
	return b.String()
}

// peakHeap runs fn and returns the most heap in use while it ran, above
// what was in use before, sampling every 100µs after a collection.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > base && m.HeapAlloc-base > peak.Load() {
				peak.Store(m.HeapAlloc - base)
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	})
	fn()
	close(done)
	wg.Wait()
	return peak.Load()
}

// BenchmarkChunkLarge chunks one 20 MB Markdown document in chunks of 800
// with overlap 100 and reports the heap the chunker allocates (alloc_x)
// and the peak heap in use while it runs (peak_x), as multiples of the
// input's size; the target is a peak under 4× the input.
//
//	go test -run '^$' -bench ChunkLarge -benchtime 3x ./runtime/retrieval/
func BenchmarkChunkLarge(b *testing.B) {
	doc := retrieval.Document{Path: "big.md", Text: largeDoc(20 << 20)}
	c, _ := retrieval.NewTextChunker(800, 100)
	var peak uint64
	b.SetBytes(int64(len(doc.Text)))
	b.ReportAllocs()
	for b.Loop() {
		peak = max(peak, peakHeap(func() {
			if _, err := c.Chunk(doc); err != nil {
				b.Fatal(err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/float64(len(doc.Text)), "peak_x")
}

// BenchmarkIngestLarge ingests one 20 MB Markdown file (chunks of 800,
// overlap 100) through the fake embedder of width 256 into a memory store
// and reports the peak heap in use while it runs (peak_x) as a multiple of
// the file's size: reading, chunking, embedding, the vectors and the
// lexical index together. The store's own footprint is part of it.
//
//	go test -run '^$' -bench IngestLarge -benchtime 1x ./runtime/retrieval/
func BenchmarkIngestLarge(b *testing.B) {
	dir := b.TempDir()
	doc := largeDoc(20 << 20)
	writeFiles(b, dir, map[string]string{"big.md": doc})
	gw := newGatewayWidth(b, 256)
	var peak uint64
	for b.Loop() {
		s, _ := memory.NewStore(256, retrieval.DistanceCosine)
		e, _ := retrieval.NewGatewayEmbedder(gw, "embed")
		c, _ := retrieval.NewTextChunker(800, 100)
		r, err := retrieval.New(retrieval.Binding{Name: "kb", Source: retrieval.Source{Dir: dir, Files: []string{"*.md"}}, Chunker: c, Embedder: e, Store: s, TopK: 5})
		if err != nil {
			b.Fatal(err)
		}
		peak = max(peak, peakHeap(func() {
			if _, err := r.Ingest(b.Context()); err != nil {
				b.Fatal(err)
			}
		}))
	}
	b.ReportMetric(float64(peak)/float64(len(doc)), "peak_x")
}
