// Package pgvector is a retrieval.VectorStore in PostgreSQL with the
// pgvector extension (0.8.0 or later), so that any number of replicas of a
// service search one index. It lives apart from package retrieval so that a
// program that keeps its vectors in memory does not link pgx.
//
// One store is one table, named by configuration and always quoted, with
// the vector column of the store's width (vector(N)), the chunk's fields,
// its metadata as jsonb (with a GIN index for filters) and an HNSW index
// whose operator class matches the distance: vector_cosine_ops,
// vector_ip_ops or vector_l2_ops. The width and the distance are fixed when
// the table is created and recorded in the registry table aid_vector_stores
// with the table's schema version; opening the table again with another
// width or distance is refused (*MismatchError), and a vector of another
// width is refused (*retrieval.DimensionError), never truncated or padded.
// The table is created, and later brought to newer schema versions, in one
// transaction under an advisory lock, so replicas may all open it at
// start-up.
//
// Scores mean what they mean for the memory store: cosine similarity
// (1 − <=>), the inner product (−<#>) and the negated Euclidean distance
// (−<->), ordered by score and then by id. Search asks the HNSW index for
// one more row than it needs, with hnsw.ef_search as configured and
// pgvector 0.8's iterative scan (hnsw.iterative_scan = relaxed_order), so
// that a filter that rejects most of the index's candidates still yields
// k rows, and sorts them in Go. When that is not enough to be sure of the
// answer — fewer than k rows came back, so the filter may be more selective
// than the iterative scan reaches, or the k-th and the next row have equal
// scores, so the id order of the tie is unknown — it runs the search again
// exactly: ordered by score and id in SQL, which no vector index serves, so
// PostgreSQL scores every row the filter selects (through the metadata
// index when the filter is selective) and keeps the best k. A search
// therefore returns k hits whenever k rows match, never silently fewer; its
// recall against exact search is the HNSW index's. A search whose filter
// matches fewer than k rows of a large table pays for both: the iterative
// scan up to pgvector's hnsw.max_scan_tuples, then the exact one.
//
// Upsert is all or nothing: every record is checked before anything is
// written, and the batch is written in one transaction — a small batch as
// one INSERT over unnest'ed arrays, a large one by COPY into a temporary
// table and one INSERT ... ON CONFLICT from it, rows in id order so that
// concurrent upserts lock rows in one order. A transaction the database
// aborts for a deadlock or a serialization failure is run again once.
//
// Text a store keeps verbatim (a chunk's source, heading and text) is
// bytea and round-trips any Go string. Ids are text in the "C" collation,
// so that PostgreSQL orders them byte-wise as Go does, and metadata is
// jsonb: an id, metadata key or value with a NUL byte or invalid UTF-8 is
// refused (*InvalidTextError) rather than mangled.
//
// It is not a general PostgreSQL vector library: no halfvec, no IVFFlat, no
// partitioning, and the HNSW parameters m and ef_construction apply only
// when the table is created.
package pgvector
