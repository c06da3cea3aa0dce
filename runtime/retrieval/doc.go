// Package retrieval turns files into searchable chunks and searches them:
// the retrievers of an aid application, which agents see as the tools
// search_<retriever>.
//
// A Retriever is bound (Binding) to five seams, each an interface in the
// style of the gateway's Provider: a Source of documents (files by glob,
// Markdown and plain text), a Chunker (TextChunker: chunks of a size with
// overlap that prefer heading, paragraph, line and word boundaries, each
// with its source path, byte offsets and heading trail), an Embedder
// (GatewayEmbedder: every embedding goes through the gateway, so it is
// batched, retried, priced, on the ledger and under the caller's budget), a
// VectorStore, which a LexicalSearcher also searches by BM25, and a
// Reranker (NoRerank, or Lexical: BM25 over the candidates fused with
// vector order). Build assembles retrievers from the IR-free Config and
// StoreConfig values an application description holds; the runtime never
// reads the IR itself.
//
// This package is the stores' extension point and holds no store: a store
// kind is a package under runtime/retrieval whose configuration, plain data
// with the IR's JSON field names, implements StoreKind: memory.Kind (an
// exact in-process store over one contiguous matrix, with gonum's BLAS
// kernels) and pgvector.Kind (PostgreSQL). The stores analyse text for
// their lexical index with runtime/analysis (the Snowball stemmer). So a
// program that imports this package for its types (the agents, the
// service, an application without a store) links neither gonum nor
// Snowball, and one with stores links only its stores' kinds. A
// StoreConfig holds a store's name, its distance (every store's) and its
// kind's configuration, which opens the store through a kind.Env: the
// environment its DSN is read from, and the scope where a pool shared by
// the stores of an application is kept and closed. Sources are read
// through the application's files (kind.Files), on disk or embedded in a
// generated service.
//
// Ingest is incremental and idempotent. A chunk's id is a content hash of
// the retriever, the embedding model, the source path, the offsets, the
// heading trail and the text (ChunkID), so ingesting the same input twice
// is a no-op diff that embeds nothing, and an edit re-embeds only the
// chunks it changed; chunks of changed or vanished files are deleted.
// What is not built (the source kinds, chunking strategies and rerankers of
// DeferredSourceKinds, DeferredChunkingStrategies and DeferredRerankKinds,
// PDF and other non-text files) fails with a *kind.DeferredError naming
// itself, in the words `aidgen vet` uses; a misspelt kind is a plain
// error. The store kinds that are not built are runtime/kind's list, which
// lowering refuses in the same way.
//
// Stores keep one contract, checked by package storetest against every
// implementation: the width is fixed at creation and a vector of another
// width is refused with a *DimensionError; scores are similarities, higher
// is better, for cosine, inner product and l2 alike; results are ordered by
// score, then id, so ties never depend on chance; a filtered search returns
// k results whenever k records match.
//
// The ranked-set metrics (RecallAtK, MRR, NDCGAtK, CitationGrounding)
// follow trec_eval's definitions and score an Outcome against a Judgement.
// They are not eval.Metric, which scores an answer string; package eval
// adapts them (eval.RetrievalRunner, eval.RetrievalMetrics) so that a
// retrieval evaluation is an ordinary eval run that reaches the same
// baseline gate.
//
// What it is not: not a store (the kinds are its subpackages), not an
// approximate index (the memory store is exact; approximate search belongs
// to the pgvector store), not a document
// converter, and not a model client: it calls models only through the
// gateway.
package retrieval
