package retrieval_test

import (
	"context"
	"fmt"
	"log"
	"path/filepath"

	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// exampleGateway is a gateway with one embedding alias served by the fake
// provider, as a team that does not use the IR would build it.
func exampleGateway() *gateway.Gateway {
	p, err := fake.New(fake.Config{Analyzer: analysis.English{}})
	if err != nil {
		log.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{
		Models: []gateway.PinnedModel{{Alias: "embed", Spec: gateway.ModelSpec{
			ID: "fake-embed-1", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 256,
			Cost: gateway.CostProfile{InputPer1kUSD: 0.00002},
		}}},
		Providers: map[string]gateway.Provider{"fake": p},
	})
	if err != nil {
		log.Fatal(err)
	}
	return gw
}

// Example builds the retriever of the support-desk example from plain
// configuration, ingests its documents twice (the second time is a no-op)
// and searches it.
func Example() {
	ctx := context.Background()
	rs, err := retrieval.Build(context.Background(), exampleGateway(),
		[]retrieval.StoreConfig{{Name: "kb", Distance: retrieval.DistanceCosine, Kind: memory.Kind{}}},
		[]retrieval.Config{{
			Name:      "kb",
			Source:    retrieval.Source{Dir: filepath.Join("..", "..", "examples", "support-desk"), Files: []string{"docs/**/*.md"}},
			ChunkSize: 600, ChunkOverlap: 80,
			EmbedModel: "embed", Store: "kb", TopK: 2, Rerank: retrieval.RerankLexical,
		}}, retrieval.BuildOptions{})
	if err != nil {
		log.Fatal(err)
	}
	kb := rs["kb"]
	first, err := kb.Ingest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	again, err := kb.Ingest(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("first: %+v\nagain: %+v\n", first, again)
	hits, err := kb.Search(ctx, "how long do I have to return an item", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(hits[0].Source, "under", hits[0].Heading)
	// Output:
	// first: {Files:9 Added:9 Unchanged:0 Removed:0 Skipped:[]}
	// again: {Files:9 Added:0 Unchanged:9 Removed:0 Skipped:[]}
	// docs/refunds.md under Refunds
}

// ExampleTextChunker shows chunks cut at a heading, with their offsets and
// heading trails.
func ExampleTextChunker() {
	c, err := retrieval.NewTextChunker(60, 10)
	if err != nil {
		log.Fatal(err)
	}
	doc := retrieval.Document{Path: "refunds.md", Text: "# Refunds\n\nAsk within 30 days.\n\n## Damaged items\n\nReport damage within 7 days.\n"}
	chunks, err := c.Chunk(doc)
	if err != nil {
		log.Fatal(err)
	}
	for _, ch := range chunks {
		fmt.Printf("%d:%d %q %q\n", ch.Start, ch.End, ch.Heading, ch.Text)
	}
	// Output:
	// 0:30 "Refunds" "# Refunds\n\nAsk within 30 days."
	// 32:78 "Refunds > Damaged items" "## Damaged items\n\nReport damage within 7 days."
}

// ExampleNDCGAtK scores a ranking against graded judgements.
func ExampleNDCGAtK() {
	o := retrieval.Outcome{Ranked: []string{"shipping.md", "refunds.md", "login.md"}}
	j := retrieval.Judgement{"refunds.md": 2, "login.md": 1}
	for _, m := range []retrieval.RankedMetric{retrieval.RecallAtK{K: 2}, retrieval.MRR{K: 3}, retrieval.NDCGAtK{K: 3}} {
		s, err := m.Score(o, j)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s %.3f\n", m.Name(), s)
	}
	// Output:
	// recall@2 0.500
	// mrr@3 0.500
	// ndcg@3 0.670
}
