// Written once by aidgen build for the escalate tool. This file is yours: aidgen
// never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/kind"
)

// Escalate implements the escalate tool: Escalate to a person.
// Its result is the observation the model reads: a string as is, anything
// else as JSON.
func Escalate(ctx context.Context, in EscalateInput) (string, error) {
	return "", &kind.DeferredError{Feature: "tool escalate"}
}
