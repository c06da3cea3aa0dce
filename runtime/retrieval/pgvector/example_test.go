package pgvector_test

import (
	"context"
	"log"
	"os"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// A program that keeps its vectors in PostgreSQL passes the connector's
// opener to retrieval.Build; the stores' DSNs come from the environment
// variables their configuration names.
func ExampleConnector() {
	ctx := context.Background()
	var gw *gateway.Gateway // the program's gateway
	c := pgvector.NewConnector(ctx, 0)
	defer c.Close()
	_, err := retrieval.Build(gw,
		[]retrieval.StoreConfig{{Name: "docs", Kind: retrieval.StorePGVector, DSNEnv: "DATABASE_URL", Table: "doc_chunks"}},
		[]retrieval.Config{ /* the retrievers */ },
		retrieval.BuildOptions{Openers: map[string]retrieval.StoreOpener{retrieval.StorePGVector: c.Open}})
	if err != nil {
		log.Fatal(err)
	}
}

// A store opened by itself, with its own pool.
func ExampleOpen() {
	ctx := context.Background()
	s, err := pgvector.Open(ctx, os.Getenv("DATABASE_URL"), pgvector.Config{
		Table: "doc_chunks", Dimensions: 384, Distance: retrieval.DistanceCosine, EFSearch: 40,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	query := make([]float32, 384) // the embedding of the user's question
	query[0] = 1
	hits, err := s.Search(ctx, query, 10, retrieval.Filter{retrieval.MetaRetriever: "docs"})
	if err != nil {
		log.Fatal(err)
	}
	_ = hits
}
