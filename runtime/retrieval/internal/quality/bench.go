package quality

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
)

// The keyless setup the harness measures: the fake embedding model at the
// width the examples use, and the IR's default chunking.
const (
	Dims      = 256
	ChunkSize = 800
	Overlap   = 100
	// K is how many hits each search asks for: enough for recall@100.
	K = 100
)

// Config is one ranking the harness scores.
type Config struct {
	// Name names the row of the report.
	Name string
	// Ranking is the retriever's ranking; the harness collapses hits to
	// documents so that recall@100 counts 100 documents.
	Ranking retrieval.Ranking
	// Rerank is the reranker kind.
	Rerank string
}

// Configs are the rows of the report: the keyless default before hybrid
// search (vector candidates, four per hit, reranked by BM25 over them),
// each stage alone, and the two fusions.
func Configs() []Config {
	return []Config{
		{Name: "before-vector+rerank", Ranking: retrieval.Ranking{Mode: retrieval.ModeVector, Depth: 4 * K}, Rerank: retrieval.RerankLexical},
		{Name: "vector", Ranking: retrieval.Ranking{Mode: retrieval.ModeVector}},
		{Name: "lexical", Ranking: retrieval.Ranking{Mode: retrieval.ModeLexical}},
		{Name: "hybrid-rrf", Ranking: retrieval.Ranking{Mode: retrieval.ModeHybrid}},
		{Name: "hybrid-weighted", Ranking: retrieval.Ranking{Mode: retrieval.ModeHybrid, Fusion: retrieval.FusionWeighted}},
	}
}

// Gateway returns a gateway serving the fake embedding model as alias
// "embed" at width Dims.
func Gateway(tb testing.TB) *gateway.Gateway {
	tb.Helper()
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}})
	if err != nil {
		tb.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "embed", Spec: gateway.ModelSpec{
			ID: "fake-embed-2024-06-01", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: Dims,
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return gw
}

// Retriever binds a retriever named "quality" over the documents in dir to
// store with cfg's ranking.
func Retriever(tb testing.TB, gw *gateway.Gateway, dir string, store retrieval.VectorStore, cfg Config) *retrieval.Retriever {
	tb.Helper()
	e, err := retrieval.NewGatewayEmbedder(gw, "embed")
	if err != nil {
		tb.Fatal(err)
	}
	ch, err := retrieval.NewTextChunker(ChunkSize, Overlap)
	if err != nil {
		tb.Fatal(err)
	}
	rr, err := retrieval.NewReranker(cfg.Rerank)
	if err != nil {
		tb.Fatal(err)
	}
	rk := cfg.Ranking
	rk.Collapse = retrieval.CollapseDocument
	r, err := retrieval.New(retrieval.Binding{
		Name: "quality", Source: retrieval.Source{Dir: dir, Files: []string{"**/*.md"}},
		Chunker: ch, Embedder: e, Store: store, Reranker: rr, TopK: 10, Ranking: rk,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Bench runs every configuration of Configs over every collection, each in
// a store open returns for it (ingested once: the rankings differ, the
// index does not), reports nDCG@10, recall@100, MRR and the median and
// 95th-percentile search latency of each as the metrics of sub-benchmark
// <collection>/<configuration>, and returns the results by that name.
func Bench(b *testing.B, open func(b *testing.B, name string) retrieval.VectorStore) map[string]Result {
	cs, err := Collections()
	if err != nil {
		b.Fatal(err)
	}
	gw := Gateway(b)
	out := map[string]Result{}
	for _, c := range cs {
		dir := b.TempDir()
		if err := c.WriteFiles(dir); err != nil {
			b.Fatal(err)
		}
		store := open(b, c.Name)
		st, err := Retriever(b, gw, dir, store, Configs()[0]).Ingest(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %d documents, %d chunks, %d queries", c.Name, st.Files, st.Added, len(c.Queries))
		for _, cfg := range Configs() {
			b.Run(c.Name+"/"+cfg.Name, func(b *testing.B) {
				r := Retriever(b, gw, dir, store, cfg)
				var res Result
				for b.Loop() {
					if res, err = Evaluate(b.Context(), c, r, K); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(res.NDCG10, "ndcg@10")
				b.ReportMetric(res.Recall100, "recall@100")
				b.ReportMetric(res.MRR, "mrr")
				b.ReportMetric(float64(res.P50.Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(res.P95.Microseconds())/1000, "p95_ms")
				out[c.Name+"/"+cfg.Name] = res
			})
		}
	}
	return out
}

// Report formats a result as one line.
func Report(name string, r Result) string {
	return fmt.Sprintf("%-22s nDCG@10 %.4f  recall@100 %.4f  MRR %.4f  p50 %v", name, r.NDCG10, r.Recall100, r.MRR, r.P50)
}

// EvaluateAll ingests collection c into store and evaluates every
// configuration of Configs on it once, for tests that compare stores.
func EvaluateAll(tb testing.TB, c *Collection, store retrieval.VectorStore) map[string]Result {
	tb.Helper()
	dir := tb.TempDir()
	if err := c.WriteFiles(dir); err != nil {
		tb.Fatal(err)
	}
	gw := Gateway(tb)
	if _, err := Retriever(tb, gw, dir, store, Configs()[0]).Ingest(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	out := map[string]Result{}
	for _, cfg := range Configs() {
		res, err := Evaluate(tb.Context(), c, Retriever(tb, gw, dir, store, cfg), K)
		if err != nil {
			tb.Fatal(err)
		}
		out[cfg.Name] = res
	}
	return out
}

// LatencyChunking is the chunking of Latency: the support-desk example's,
// which cuts the collection into about 2,400 chunks.
const (
	LatencyChunkSize = 600
	LatencyOverlap   = 80
)

// Latency measures one search for K hits in every configuration of
// Configs, over the GoDoc collection chunked as the support-desk example
// chunks (LatencyChunkSize), in a store open returns. Each iteration
// takes the next question of the collection and searches it once in every
// configuration, in a rotating order, so that the configurations are
// timed under the same load (the machine may be shared); it reports each
// one's median and 95th percentile as <name>_p50_ms and <name>_p95_ms.
// Before-vector+rerank is the keyless default before hybrid search.
func Latency(b *testing.B, open func(b *testing.B) retrieval.VectorStore) {
	c, err := GoDoc()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := c.WriteFiles(dir); err != nil {
		b.Fatal(err)
	}
	gw := Gateway(b)
	store := open(b)
	cfgs := Configs()
	rs := make([]*retrieval.Retriever, len(cfgs))
	for i, cfg := range cfgs {
		e, _ := retrieval.NewGatewayEmbedder(gw, "embed")
		ch, _ := retrieval.NewTextChunker(LatencyChunkSize, LatencyOverlap)
		rr, err := retrieval.NewReranker(cfg.Rerank)
		if err != nil {
			b.Fatal(err)
		}
		if rs[i], err = retrieval.New(retrieval.Binding{
			Name: "quality", Source: retrieval.Source{Dir: dir, Files: []string{"**/*.md"}},
			Chunker: ch, Embedder: e, Store: store, Reranker: rr, TopK: 10, Ranking: cfg.Ranking,
		}); err != nil {
			b.Fatal(err)
		}
	}
	st, err := rs[0].Ingest(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	took := make([][]time.Duration, len(cfgs))
	n := 0
	for b.Loop() {
		q := c.Queries[n%len(c.Queries)].Text
		for j := range cfgs {
			i := (j + n) % len(cfgs)
			start := time.Now()
			if _, err := rs[i].Search(b.Context(), q, K); err != nil {
				b.Fatal(err)
			}
			took[i] = append(took[i], time.Since(start))
		}
		n++
	}
	b.ReportMetric(float64(st.Added), "chunks")
	for i, cfg := range cfgs {
		t := took[i]
		slices.Sort(t)
		b.ReportMetric(float64(t[len(t)/2].Microseconds())/1000, cfg.Name+"_p50_ms")
		b.ReportMetric(float64(t[len(t)*95/100].Microseconds())/1000, cfg.Name+"_p95_ms")
	}
}
