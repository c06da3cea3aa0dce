package gateway

import (
	"fmt"
	"slices"
)

// DeferredProviderKinds returns the provider kinds, sorted, that a user will
// reasonably write in an application and that have no adapter yet. The IR
// schema accepts the same kinds (#DeferredProviderKind) so that `aidgen vet`
// reports each as not built rather than as a schema conflict; a test in the
// module root keeps the two lists equal. It returns a new slice on every
// call, so that no caller can change the list another sees.
func DeferredProviderKinds() []string {
	return []string{"anthropic", "azure-openai", "bedrock", "gemini", "vertex"}
}

// ProviderKindDeferred returns a *DeferredError naming kind when kind is one
// of DeferredProviderKinds, and nil for any other kind: the code that turns
// a kind into a Provider (the IR lowering, a team's own wiring) calls it
// before it reports a kind it does not know, so that a kind that is merely
// not built says so, in the words `aidgen vet` uses.
func ProviderKindDeferred(kind string) error {
	if slices.Contains(DeferredProviderKinds(), kind) {
		return &DeferredError{Feature: fmt.Sprintf("provider kind %q", kind)}
	}
	return nil
}
