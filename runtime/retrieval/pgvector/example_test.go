package pgvector_test

import (
	"context"
	"log"
	"os"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/pgvector"
)

// A program that keeps its vectors in PostgreSQL names the kind in its
// stores' configuration; retrieval.Build opens them through it, with the
// DSN from the environment variable it names, one pool per DSN kept in the
// environment's scope, which the program closes when it is done.
func ExampleKind() {
	ctx := context.Background()
	var gw *gateway.Gateway // the program's gateway
	env := kind.Env{Scope: &kind.Scope{}}
	defer env.Scope.Close()
	_, err := retrieval.Build(ctx, gw,
		[]retrieval.StoreConfig{{Name: "docs", Kind: pgvector.Kind{DSNEnv: "DATABASE_URL", Table: "doc_chunks"}}},
		[]retrieval.Config{ /* the retrievers */ },
		retrieval.BuildOptions{Env: env})
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
