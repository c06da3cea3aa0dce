// Written once by aidgen build for the place_order tool. This file is yours: aidgen
// never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/kind"
)

// PlaceOrder implements the place_order tool: Place an order for the customer.
// Its result is the observation the model reads: a string as is, anything
// else as JSON.
func PlaceOrder(ctx context.Context, in PlaceOrderInput) (string, error) {
	return "", &kind.DeferredError{Feature: "tool place_order"}
}
