// Written once by aidgen build for the lookup_order tool. This file is yours: aidgen
// never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/kind"
)

// LookupOrder implements the lookup_order tool: Look up an order by id.
// Its result is the observation the model reads: a string as is, anything
// else as JSON.
func LookupOrder(ctx context.Context, in LookupOrderInput) (string, error) {
	return "", &kind.DeferredError{Feature: "tool lookup_order"}
}
