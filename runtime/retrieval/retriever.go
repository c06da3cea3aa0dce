package retrieval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/aidgen/aid/runtime/kind"
)

// Binding is everything a Retriever ingests and searches through: the
// retriever, embedding and store entries of an application folded into
// values. Config.Bind and Build assemble one from plain configuration;
// tests and teams may fill it by hand.
type Binding struct {
	// Name is the retriever's name. Its records carry it (MetaRetriever),
	// so retrievers sharing a store never see or delete each other's.
	Name string
	// Source says which documents are ingested.
	Source Source
	// Files reads the source's files, Source.Dir being relative to their
	// application's directory; the zero value reads them from disk, relative
	// to the working directory.
	Files kind.Files
	// Chunker cuts documents into chunks.
	Chunker Chunker
	// Embedder embeds chunks and queries; its width must be the store's.
	Embedder Embedder
	// Store holds the chunks.
	Store VectorStore
	// Reranker reorders the candidates of the ranking before they are
	// cut to k; nil means NoRerank.
	Reranker Reranker
	// TopK is how many chunks a search returns by default.
	TopK int
	// Ranking says how a search ranks: its mode (hybrid by default), its
	// fusion, the depth of each stage and whether hits collapse to
	// documents. A hybrid or lexical ranking needs a Store that is a
	// LexicalSearcher.
	Ranking Ranking
}

// Retriever ingests a source into a store and searches it. It is safe for
// concurrent use; ingests of one retriever run one at a time.
type Retriever struct {
	b  Binding
	mu sync.Mutex // serialises Ingest
}

// New checks a binding and returns its retriever.
func New(b Binding) (*Retriever, error) {
	var errs []error
	if b.Name == "" {
		errs = append(errs, errors.New("no name"))
	}
	if err := b.Source.checkKind(); err != nil {
		errs = append(errs, err)
	}
	if b.Chunker == nil {
		errs = append(errs, errors.New("no chunker"))
	}
	if b.Embedder == nil {
		errs = append(errs, errors.New("no embedder"))
	}
	if b.Store == nil {
		errs = append(errs, errors.New("no store"))
	}
	if b.TopK <= 0 {
		errs = append(errs, fmt.Errorf("topK must be positive, got %d", b.TopK))
	}
	if err := b.Ranking.Check(); err != nil {
		errs = append(errs, err)
	}
	if _, ok := b.Store.(LexicalSearcher); b.Store != nil && !ok && b.Ranking.WithDefaults().needsLexical() {
		errs = append(errs, fmt.Errorf("mode %q needs a lexical index, and the store keeps none; use mode %q", b.Ranking.WithDefaults().Mode, ModeVector))
	}
	if b.Embedder != nil && b.Store != nil && b.Embedder.Dimensions() != b.Store.Dimensions() {
		errs = append(errs, &DimensionError{Op: "bind", Got: b.Embedder.Dimensions(), Want: b.Store.Dimensions()})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("retriever %q: %w", b.Name, err)
	}
	if b.Reranker == nil {
		b.Reranker = NoRerank{}
	}
	b.Ranking = b.Ranking.WithDefaults()
	return &Retriever{b: b}, nil
}

// Name returns the retriever's name.
func (r *Retriever) Name() string { return r.b.Name }

// TopK returns how many chunks a search returns by default.
func (r *Retriever) TopK() int { return r.b.TopK }

// Ranking returns how the retriever ranks, with its defaults filled in.
func (r *Retriever) Ranking() Ranking { return r.b.Ranking }

// IngestStats says what an Ingest changed. Re-ingesting unchanged input
// reports only Unchanged chunks.
type IngestStats struct {
	// Files is the number of documents read.
	Files int
	// Added counts chunks embedded and stored.
	Added int
	// Unchanged counts chunks already stored with the same id.
	Unchanged int
	// Removed counts stored chunks that no longer exist in the source
	// (their file changed or vanished) and were deleted.
	Removed int
	// Skipped are the files that could not be read as text and were left
	// out, with Source.OnInvalid "skip"; what the store held of them is
	// kept as it was.
	Skipped []InvalidFile
}

// ingestBatch is how many new chunks are embedded and stored together, so
// that a failure keeps what was done and a rerun resumes from there.
const ingestBatch = 256

// Ingest brings the store up to date with the source, incrementally: it
// reads and chunks every document, diffs the chunk ids (content hashes)
// against the ids the store holds for this retriever, embeds and stores
// only the new chunks, and then deletes the chunks that are gone, so a
// search during an ingest never finds the index empty. A failure leaves the
// chunks stored so far; running Ingest again completes the work.
func (r *Retriever) Ingest(ctx context.Context) (IngestStats, error) {
	return r.IngestWith(ctx, IngestOptions{})
}

// IngestOptions adjusts IngestWith.
type IngestOptions struct {
	// Progress, when set, is called once the diff is known with (0, n),
	// n the number of new chunks to embed, and after each batch is stored
	// with the chunks stored so far, so that a command can draw a bar over
	// the part of an ingest that takes time (the embedding calls). It is
	// called from the ingesting goroutine and must not call back into the
	// retriever.
	Progress func(done, total int)
}

// IngestWith is Ingest with options.
func (r *Retriever) IngestWith(ctx context.Context, opts IngestOptions) (IngestStats, error) {
	progress := opts.Progress
	if progress == nil {
		progress = func(int, int) {}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	docs, invalid, err := r.b.Source.LoadValid(ctx, r.b.Files)
	if err != nil {
		return IngestStats{}, fmt.Errorf("ingesting %s: %w", r.b.Name, err)
	}
	if len(invalid) > 0 && r.b.Source.OnInvalid != OnInvalidSkip {
		return IngestStats{}, fmt.Errorf("ingesting %s: %w", r.b.Name, &InvalidFilesError{Files: invalid})
	}
	stats := IngestStats{Files: len(docs), Skipped: invalid}
	model := r.b.Embedder.Model()
	var chunks []Chunk
	seen := make(map[string]bool)
	for _, d := range docs {
		cs, err := r.b.Chunker.Chunk(d)
		if err != nil {
			return stats, fmt.Errorf("ingesting %s: %w", r.b.Name, err)
		}
		for _, c := range cs {
			c.Source = d.Path
			c.ID = ChunkID(r.b.Name, model, c)
			if seen[c.ID] {
				return stats, fmt.Errorf("ingesting %s: chunker returned the same chunk of %s at %d:%d twice", r.b.Name, d.Path, c.Start, c.End)
			}
			seen[c.ID] = true
			chunks = append(chunks, c)
		}
	}
	existing, err := r.b.Store.IDs(ctx, Filter{MetaRetriever: r.b.Name})
	if err != nil {
		return stats, fmt.Errorf("ingesting %s: listing stored chunks: %w", r.b.Name, err)
	}
	stored := make(map[string]bool, len(existing))
	for _, id := range existing {
		stored[id] = true
	}
	var added []Chunk
	for _, c := range chunks {
		if stored[c.ID] {
			stats.Unchanged++
		} else {
			added = append(added, c)
		}
	}
	progress(0, len(added))
	for start := 0; start < len(added); start += ingestBatch {
		batch := added[start:min(start+ingestBatch, len(added))]
		texts := make([]string, len(batch))
		for i, c := range batch {
			texts[i] = EmbedText(c)
		}
		vecs, err := r.b.Embedder.Embed(ctx, texts)
		if err != nil {
			return stats, fmt.Errorf("ingesting %s: %w", r.b.Name, err)
		}
		if len(vecs) != len(batch) {
			return stats, fmt.Errorf("ingesting %s: embedder returned %d vectors for %d chunks", r.b.Name, len(vecs), len(batch))
		}
		recs := make([]Record, len(batch))
		for i, c := range batch {
			recs[i] = Record{Chunk: c, Vector: vecs[i], Metadata: map[string]string{MetaRetriever: r.b.Name, MetaSource: c.Source}}
		}
		if err := r.b.Store.Upsert(ctx, recs); err != nil {
			return stats, fmt.Errorf("ingesting %s: storing chunks: %w", r.b.Name, err)
		}
		stats.Added += len(batch)
		progress(stats.Added, len(added))
	}
	// The chunks of a skipped file are kept: it was not read, so nothing
	// says they are gone.
	for _, f := range invalid {
		ids, err := r.b.Store.IDs(ctx, Filter{MetaRetriever: r.b.Name, MetaSource: f.Path})
		if err != nil {
			return stats, fmt.Errorf("ingesting %s: listing stored chunks: %w", r.b.Name, err)
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	var removed []string
	for _, id := range existing {
		if !seen[id] {
			removed = append(removed, id)
		}
	}
	if len(removed) > 0 {
		if err := r.b.Store.Delete(ctx, removed); err != nil {
			return stats, fmt.Errorf("ingesting %s: deleting stale chunks: %w", r.b.Name, err)
		}
		stats.Removed = len(removed)
	}
	return stats, nil
}

// Search returns the k best chunks of this retriever for the query, best
// first; k ≤ 0 means the binding's TopK. It runs the ranking's stages at
// their depth (embedding the query unless the mode is lexical), fuses them,
// lets the reranker reorder the candidates, collapses them to documents if
// the ranking says so, and keeps the best k. Because each stage's depth
// does not depend on k, the first hits of a search are the same whatever
// k it asks for, up to the depth.
func (r *Retriever) Search(ctx context.Context, query string, k int) ([]Hit, error) {
	if strings.TrimSpace(query) == "" {
		return nil, fmt.Errorf("search %s: empty query", r.b.Name)
	}
	if k <= 0 {
		k = r.b.TopK
	}
	rk := r.b.Ranking
	var q Query
	if rk.needsVector() {
		vecs, err := r.b.Embedder.Embed(ctx, []string{query})
		if err != nil {
			return nil, fmt.Errorf("search %s: %w", r.b.Name, err)
		}
		if len(vecs) != 1 {
			return nil, fmt.Errorf("search %s: embedder returned %d vectors for one query", r.b.Name, len(vecs))
		}
		q.Vector = vecs[0]
	}
	if ls, ok := r.b.Store.(LexicalSearcher); ok && rk.needsLexical() {
		q.Terms = ls.QueryTerms(query) // a store without an index is refused below
	}
	hits, err := candidates(ctx, r.b.Store, q, k, Filter{MetaRetriever: r.b.Name}, rk)
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", r.b.Name, err)
	}
	n := len(hits)
	hits, err = r.b.Reranker.Rerank(ctx, query, hits)
	if err != nil {
		return nil, fmt.Errorf("search %s: rerank: %w", r.b.Name, err)
	}
	if len(hits) != n {
		return nil, fmt.Errorf("search %s: reranker returned %d of %d candidates", r.b.Name, len(hits), n)
	}
	return finish(hits, k, rk), nil
}

// ChunkID returns the content hash that identifies a chunk of a retriever
// embedded by a model: the first 128 bits of SHA-256 over a versioned
// encoding of the retriever, the model, the source path, the offsets, the
// heading trail and the text. The same input always has the same id, so
// re-ingesting it is a no-op; a change of any of these (an edited file, a
// different chunking, another pinned model) is a new chunk.
func ChunkID(retriever, model string, c Chunk) string {
	h := sha256.New()
	for _, s := range []string{"aid-chunk/v1", retriever, model, c.Source, strconv.Itoa(c.Start), strconv.Itoa(c.End), c.Heading, c.Text} {
		// Length-prefixed, so that no two field lists encode alike.
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// EmbedText is what is embedded for a chunk: its heading trail, unless the
// chunk starts with its own heading line, and its text. The trail places a
// chunk cut from the middle of a section in that section.
func EmbedText(c Chunk) string {
	if c.Heading == "" || strings.HasPrefix(c.Text, "#") {
		return c.Text
	}
	return c.Heading + "\n\n" + c.Text
}
