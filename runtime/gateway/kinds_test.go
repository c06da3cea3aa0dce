package gateway_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
)

// TestProviderKindDeferred checks every provider kind that is not built:
// each is a *DeferredError saying "provider kind "<kind>" is not built
// yet", the words `aidgen vet` reports. Built kinds, misspellings and the
// empty kind are not deferred: the caller reports them in its own terms.
func TestProviderKindDeferred(t *testing.T) {
	kinds := gateway.DeferredProviderKinds()
	if len(kinds) == 0 {
		t.Fatal("no deferred provider kinds listed")
	}
	for _, k := range kinds {
		err := gateway.ProviderKindDeferred(k)
		var de *gateway.DeferredError
		if !errors.As(err, &de) || err.Error() != fmt.Sprintf("provider kind %q is not built yet", k) {
			t.Errorf("ProviderKindDeferred(%q) = %v, want a *DeferredError naming the kind", k, err)
		}
		if gateway.IsFallbackEligible(err) {
			t.Errorf("a deferred provider kind %q would fall through to the next alias", k)
		}
	}
	for _, k := range []string{"openai-compatible", "fake", "", "anthropicx", "Anthropic"} {
		if err := gateway.ProviderKindDeferred(k); err != nil {
			t.Errorf("ProviderKindDeferred(%q) = %v, want nil", k, err)
		}
	}
	// The list is the caller's own copy.
	kinds[0] = "openai-compatible"
	if gateway.ProviderKindDeferred("openai-compatible") != nil {
		t.Error("changing the returned list changed the package's")
	}
}
