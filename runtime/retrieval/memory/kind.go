package memory

import (
	"context"

	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Kind is the configuration of a store of kind memory, as the IR spells it
// (stores: NAME: {kind: "memory"}; the distance is every store's,
// retrieval.StoreConfig.Distance): a Store in the process, lost on exit.
// It has no configuration of its own. It is plain data, so a generated
// service holds it as a literal and links this package, gonum's BLAS
// kernels and the Snowball analyzer, only then.
type Kind struct{}

// StoreKind implements retrieval.StoreKind.
func (Kind) StoreKind() string { return kind.StoreMemory }

// InMemory implements retrieval.StoreKind: a memory store is.
func (Kind) InMemory() bool { return true }

// OpenVectorStore implements retrieval.StoreKind: a new, empty Store.
func (Kind) OpenVectorStore(_ context.Context, _ kind.Env, _ string, d retrieval.Distance, dims int) (retrieval.VectorStore, error) {
	return NewStore(dims, d)
}
