package memory_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
)

// ExampleStore stores three vectors and searches them under cosine
// similarity with a metadata filter.
func ExampleStore() {
	ctx := context.Background()
	s, err := memory.NewStore(2, retrieval.DistanceCosine)
	if err != nil {
		log.Fatal(err)
	}
	err = s.Upsert(ctx, []retrieval.Record{
		{Chunk: retrieval.Chunk{ID: "a"}, Vector: []float32{1, 0}, Metadata: map[string]string{"lang": "en"}},
		{Chunk: retrieval.Chunk{ID: "b"}, Vector: []float32{1, 1}, Metadata: map[string]string{"lang": "en"}},
		{Chunk: retrieval.Chunk{ID: "c"}, Vector: []float32{0, 1}, Metadata: map[string]string{"lang": "de"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	hits, err := s.Search(ctx, []float32{0, 1}, 2, retrieval.Filter{"lang": "en"})
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hits {
		fmt.Printf("%s %.3f\n", h.ID, h.Score)
	}
	_, err = s.Search(ctx, []float32{0, 1, 0}, 2, nil)
	fmt.Println(err)
	// Output:
	// b 0.707
	// a 0.000
	// search: vector of width 3, the store holds width 2
}
