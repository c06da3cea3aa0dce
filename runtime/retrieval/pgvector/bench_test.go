package pgvector_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// clustered returns n vectors of the given width around clusters random
// centres, as embeddings of a corpus about a few topics are: uniform random
// vectors have no neighbourhoods, which makes any index look worse and any
// exact scan look as good as it ever gets.
func clustered(rng *rand.Rand, n, dims, clusters int) [][]float32 {
	centres := make([][]float32, clusters)
	for i := range centres {
		centres[i] = randomVec(rng, dims)
	}
	out := make([][]float32, n)
	for i := range out {
		c := centres[rng.IntN(clusters)]
		v := make([]float32, dims)
		for j := range v {
			v[j] = c[j] + 0.6*float32(rng.NormFloat64())
		}
		out[i] = v
	}
	return out
}

// BenchmarkSearch measures the HNSW store on 50,000 clustered vectors of
// width 128 (cosine): recall@10 against exact search (the memory store on
// the same data) over 200 held-out queries, and queries per second, at
// ef_search 40 and 100, unfiltered and with a filter that 10% of the rows
// match. Building the table (one Upsert through COPY, the index maintained
// as rows arrive) is logged. It needs AID_TEST_DATABASE_URL:
//
//	go test -run '^$' -bench BenchmarkSearch -benchtime 2000x ./runtime/retrieval/pgvector/
func BenchmarkSearch(b *testing.B) {
	const n, dims, clusters, queries, k = 50000, 128, 100, 200, 10
	rng := rand.New(rand.NewPCG(42, 42))
	vecs := clustered(rng, n+queries, dims, clusters)
	pool := pgtest.NewPool(b)
	store, err := pgvector.New(b.Context(), pool, pgvector.Config{Table: "bench", Dimensions: dims})
	if err != nil {
		b.Fatal(err)
	}
	exact, _ := memory.NewStore(dims, retrieval.DistanceCosine)
	recs := make([]retrieval.Record, n)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("c%05d", i), vecs[i], map[string]string{"tenth": fmt.Sprint(i % 10)})
	}
	start := time.Now()
	if err := store.Upsert(b.Context(), recs); err != nil {
		b.Fatal(err)
	}
	b.Logf("upserted %d vectors of width %d with the HNSW index in %v", n, dims, time.Since(start).Round(time.Millisecond))
	if err := exact.Upsert(b.Context(), recs); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(b.Context(), `ANALYZE bench`); err != nil {
		b.Fatal(err)
	}
	qs := vecs[n:]
	for _, filter := range []retrieval.Filter{nil, {"tenth": "3"}} {
		name := "all"
		if filter != nil {
			name = "filter10pct"
		}
		for _, ef := range []int{40, 100} {
			b.Run(fmt.Sprintf("%s/ef_search=%d", name, ef), func(b *testing.B) {
				s, err := pgvector.New(b.Context(), pool, pgvector.Config{Table: "bench", Dimensions: dims, EFSearch: ef})
				if err != nil {
					b.Fatal(err)
				}
				var recall float64
				for _, q := range qs {
					got, err := s.Search(b.Context(), q, k, filter)
					if err != nil {
						b.Fatal(err)
					}
					want, _ := exact.Search(b.Context(), q, k, filter)
					in := make(map[string]bool, k)
					for _, h := range want {
						in[h.ID] = true
					}
					for _, h := range got {
						if in[h.ID] {
							recall++
						}
					}
				}
				recall /= float64(queries * k)
				exactBefore := pgvector.ExactRuns(s)
				i := 0
				start := time.Now()
				for b.Loop() {
					if _, err := s.Search(b.Context(), qs[i%queries], k, filter); err != nil {
						b.Fatal(err)
					}
					i++
				}
				b.ReportMetric(recall, "recall@10")
				b.ReportMetric(float64(i)/time.Since(start).Seconds(), "qps")
				b.ReportMetric(float64(pgvector.ExactRuns(s)-exactBefore)/float64(i), "exact/op")
			})
		}
	}
}
