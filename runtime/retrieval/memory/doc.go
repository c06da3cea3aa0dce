// Package memory is the store kind memory of runtime/retrieval: Store, the
// in-process vector store with its lexical (BM25) index, and Kind, its
// configuration in an application description.
//
// A Store holds every vector in one contiguous matrix and searches it
// exactly with gonum's vectorised single-precision kernels; its lexical
// index analyses text with runtime/analysis (the Snowball English stemmer).
// Both live here rather than in runtime/retrieval so that a program that
// only names retrieval's types (the agents, the service, an application
// with no memory store) links neither: a generated service imports this
// package when its description names memory.Kind.
//
// What it is not: not persistent (a process starts with an empty store,
// which is ingested before it is searched) and not an approximate index
// (approximate search belongs to the pgvector store).
package memory
