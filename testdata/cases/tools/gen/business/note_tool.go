// Written once by aidgen build for the note tool. This file is yours: aidgen
// never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/kind"
)

// Note implements the note tool: Add a note; Go code, by default.
// Its result is the observation the model reads: a string as is, anything
// else as JSON.
func Note(ctx context.Context, in NoteInput) (string, error) {
	return "", &kind.DeferredError{Feature: "tool note"}
}
