// Written once by aidgen build for the ping tool. This file is yours: aidgen
// never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/kind"
)

// Ping implements the ping tool: Check that the order system answers.
// Its result is the observation the model reads: a string as is, anything
// else as JSON.
func Ping(ctx context.Context, in PingInput) (string, error) {
	return "", &kind.DeferredError{Feature: "tool ping"}
}
