package retrieval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Embedder turns texts into vectors of one fixed width. Every production
// embedder goes through the gateway (GatewayEmbedder), so that embedding
// calls are batched, retried, priced, written to the ledger and charged to
// budgets like every other model call. Implementations must be safe for
// concurrent use and return promptly when ctx ends.
type Embedder interface {
	// Embed returns one vector of width Dimensions per text, in order.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	// Dimensions is the width of every vector Embed returns.
	Dimensions() int
	// Model is the pinned model id behind the embedder. Chunk ids include
	// it, so that changing the model re-embeds everything rather than
	// mixing vectors of two models in one index.
	Model() string
}

// Reranker reorders the candidates a vector search returned for a query.
// It sees only the candidate set, never the whole index, so its cost is
// bounded by the number of candidates. Implementations must be
// deterministic and safe for concurrent use.
type Reranker interface {
	// Rerank returns the hits in their new order with their new scores. It
	// must return the same hits it was given (no more, no fewer).
	Rerank(ctx context.Context, query string, hits []Hit) ([]Hit, error)
}

// VectorStore holds chunks with their vectors and searches them by
// similarity. A store's width and distance are fixed when it is created:
// a vector of another width is refused with a *DimensionError, never
// truncated or padded. Implementations must be safe for concurrent use.
//
// Package storetest holds the contract suite every implementation passes.
type VectorStore interface {
	// Dimensions is the width of every vector in the store.
	Dimensions() int
	// Distance is the similarity measure of Search.
	Distance() Distance
	// Upsert inserts records, replacing those with the same id. It is
	// all or nothing: a record that is refused (wrong width, a non-finite
	// coordinate, an empty id, a zero vector under cosine) leaves the store
	// unchanged.
	Upsert(ctx context.Context, records []Record) error
	// Delete removes the records with the given ids; unknown ids are
	// ignored, so deleting twice is harmless.
	Delete(ctx context.Context, ids []string) error
	// Search returns the k records most similar to query among those whose
	// metadata matches filter, best first: by Score descending, then by id
	// ascending. It returns k hits whenever k records match, and all of
	// them when fewer do.
	Search(ctx context.Context, query []float32, k int, filter Filter) ([]Hit, error)
	// IDs returns the ids of the records whose metadata matches filter,
	// sorted. Ingest diffs against it.
	IDs(ctx context.Context, filter Filter) ([]string, error)
}

// Chunker cuts a document into chunks. Implementations must be
// deterministic: the same document always gives the same chunks, because
// chunk ids are content hashes and re-ingesting unchanged input must be a
// no-op.
type Chunker interface {
	// Chunk returns the document's chunks in document order, with Source,
	// Start, End, Heading and Text set; Ingest sets the ids.
	Chunk(doc Document) ([]Chunk, error)
}

// Document is one source file as read for ingestion.
type Document struct {
	// Path is the slash-separated path relative to the source's directory;
	// it becomes every chunk's Source.
	Path string
	// Text is the file's content, valid UTF-8.
	Text string
}

// Chunk is a piece of a document small enough to embed and to show a model.
type Chunk struct {
	// ID is the content hash of the chunk (see ChunkID), so that the same
	// input always gives the same id.
	ID string
	// Source is the document's path relative to the source directory.
	Source string
	// Start and End are the byte offsets of Text in the document:
	// document[Start:End] == Text.
	Start, End int
	// Heading is the trail of Markdown headings in effect where the chunk
	// starts, joined by " > "; empty for plain text or before any heading.
	Heading string
	// Text is the chunk's text.
	Text string
}

// Record is what a store holds: a chunk, its vector and its metadata.
type Record struct {
	Chunk
	// Vector is the chunk's embedding, of the store's width.
	Vector []float32
	// Metadata are string attributes a Filter can match, such as the
	// retriever and the source path.
	Metadata map[string]string
}

// Hit is one search result.
type Hit struct {
	Chunk
	// Metadata is the record's metadata.
	Metadata map[string]string
	// Score is the similarity under the store's distance, higher is better
	// (see Distance), the BM25 score of a lexical search, the fused score
	// of a hybrid search (see Fuse), or the reranker's score after
	// reranking.
	Score float64
	// VectorRank and LexicalRank are the hit's ranks, from 1, in the
	// vector and the lexical candidate lists of the search that found it;
	// zero when it was not in that list or the search had no such stage.
	VectorRank, LexicalRank int
}

// Filter restricts a search to records whose metadata has every given key
// with exactly the given value. A nil or empty filter matches everything.
type Filter map[string]string

// Matches reports whether metadata satisfies the filter.
func (f Filter) Matches(metadata map[string]string) bool {
	for k, v := range f {
		if got, ok := metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Metadata keys Ingest sets on every record.
const (
	// MetaRetriever is the name of the retriever that ingested the chunk;
	// retrievers sharing a store see only their own chunks through it.
	MetaRetriever = "retriever"
	// MetaSource is the chunk's source path.
	MetaSource = "source"
)

// Distance is the similarity measure of a store, as the IR spells it.
// Scores are similarities, higher is better, so that every distance sorts
// the same way: cosine similarity for DistanceCosine, the inner product
// for DistanceInnerProduct, and the negated Euclidean distance for DistanceL2.
type Distance string

// The distances a store may use.
const (
	DistanceCosine       Distance = "cosine"
	DistanceInnerProduct Distance = "inner_product"
	DistanceL2           Distance = "l2"
)

// Valid reports whether d is a known distance.
func (d Distance) Valid() bool {
	switch d {
	case DistanceCosine, DistanceInnerProduct, DistanceL2:
		return true
	}
	return false
}

// DimensionError reports a vector whose width is not the store's. A store's
// width is fixed when it is created, so the vector is refused rather than
// truncated or padded.
type DimensionError struct {
	// Op is what was being done: "upsert" or "search".
	Op string
	// ID is the record's id for an upsert; empty for a search.
	ID string
	// Got is the vector's width.
	Got int
	// Want is the store's width.
	Want int
}

// Error implements error.
func (e *DimensionError) Error() string {
	if e.ID != "" {
		return fmt.Sprintf("%s: record %q has a vector of width %d, the store holds width %d", e.Op, e.ID, e.Got, e.Want)
	}
	return fmt.Sprintf("%s: vector of width %d, the store holds width %d", e.Op, e.Got, e.Want)
}

// CheckRecordID refuses a record of an Upsert batch without an id, or with
// the id of one before it in the batch; seen holds the batch's ids so far,
// and takes this one. Every VectorStore calls it for each record, in
// order, so that all stores refuse the same batches with the same errors.
func CheckRecordID(seen map[string]bool, id string) error {
	if id == "" {
		return errors.New("upsert: record with an empty id")
	}
	if seen[id] {
		return fmt.Errorf("upsert: id %q appears twice in one batch", id)
	}
	seen[id] = true
	return nil
}

// CheckVector refuses a vector a store of width dims under distance d
// cannot hold or search with: another width (a *DimensionError), a
// non-finite coordinate, or a zero vector under cosine, which has no
// direction. Every VectorStore calls it, so that all stores refuse the same
// vectors with the same errors. op names the operation in the error and id
// the record, or "" for a query.
func CheckVector(op, id string, v []float32, dims int, d Distance) error {
	if len(v) != dims {
		return &DimensionError{Op: op, ID: id, Got: len(v), Want: dims}
	}
	var sq float64
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("%s: %scoordinate %d is %v; vectors must be finite", op, idPrefix(id), i, x)
		}
		sq += float64(x) * float64(x)
	}
	if d == DistanceCosine && sq == 0 {
		return fmt.Errorf("%s: %szero vector has no direction; cosine similarity is undefined for it", op, idPrefix(id))
	}
	return nil
}

func idPrefix(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf("record %q: ", id)
}

// SortHits puts hits in the canonical order of every store and reranker
// (CompareRanked).
func SortHits(hits []Hit) {
	slices.SortStableFunc(hits, func(a, b Hit) int { return CompareRanked(a.Score, a.ID, b.Score, b.ID) })
}

// CompareRanked is the one order of ranked ids, of every store's and
// reranker's hits and of the runs the metrics score (Rank): score
// descending, then id ascending, so that equal scores never leave the order
// to chance. It returns a negative number when a (aScore, aID) ranks
// before b, as slices.SortFunc reads it.
func CompareRanked(aScore float64, aID string, bScore float64, bID string) int {
	switch {
	case aScore > bScore:
		return -1
	case aScore < bScore:
		return 1
	}
	return strings.Compare(aID, bID)
}

// Sources returns the distinct sources of hits in the order they first
// appear, for callers (and metrics) that judge retrieval by document rather
// than by chunk.
func Sources(hits []Hit) []string {
	seen := make(map[string]bool, len(hits))
	var out []string
	for _, h := range hits {
		if !seen[h.Source] {
			seen[h.Source] = true
			out = append(out, h.Source)
		}
	}
	return out
}
