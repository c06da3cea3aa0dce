package retrieval

import (
	"fmt"
	"slices"

	"github.com/aidgen/aid/runtime/kind"
)

// The kinds below are ones a user will reasonably write in an application
// and that are not built. Asking for one fails with a
// *kind.DeferredError naming it (Principle 3), never with "unknown
// kind", which would suggest a typo. The IR schema accepts the same kinds
// (#DeferredSourceKind, #DeferredChunkingStrategy, #DeferredRerankKind)
// so that `aidgen vet` reports them in the same words; a test in the
// module root keeps the lists equal. Each function returns a new, sorted
// slice, so that no caller can change the list another sees. The store
// kinds that are not built are runtime/kind's, as every extension point's.

// DeferredSourceKinds returns the retriever source kinds that are not
// built: web pages, object-storage buckets and database queries.
func DeferredSourceKinds() []string { return []string{"database", "gcs", "s3", "web"} }

// DeferredChunkingStrategies returns the chunking strategies that are not
// built; ChunkFixed is.
func DeferredChunkingStrategies() []string { return []string{"semantic"} }

// DeferredRerankKinds returns the reranker kinds that are not built: a
// hosted reranking API and a cross-encoder model.
func DeferredRerankKinds() []string { return []string{"cohere", "cross-encoder"} }

// deferredKind returns a *kind.DeferredError naming "<what> <name>"
// when name is in list, and nil otherwise.
func deferredKind(list []string, what, name string) error {
	if slices.Contains(list, name) {
		return &kind.DeferredError{Feature: fmt.Sprintf("%s %q", what, name)}
	}
	return nil
}
