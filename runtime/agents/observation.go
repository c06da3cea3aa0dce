package agents

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// The bounds of Tool.MaxObservationBytes.
const (
	// DefaultMaxObservationBytes bounds the observation of a tool whose
	// MaxObservationBytes is zero, and of every tool the runtime makes
	// itself (search_, delegate_to_, transfer_to_): 32 KiB, about 8,000
	// tokens, a small part of a model's context, and more than a
	// search_ call of MaxSearchK passages of 800 characters takes.
	DefaultMaxObservationBytes = 32 << 10
	// MinObservationBytes is the smallest MaxObservationBytes: room for
	// some text and the marker that says how much was cut.
	MinObservationBytes = 1 << 10
	// MaxObservationBytesLimit is the largest MaxObservationBytes: 1 MiB,
	// about 250,000 tokens, beyond any model's context.
	MaxObservationBytesLimit = 1 << 20
)

// checkObservationBytes refuses a MaxObservationBytes outside its bounds;
// zero is the default.
func checkObservationBytes(n int) error {
	if n != 0 && (n < MinObservationBytes || n > MaxObservationBytesLimit) {
		return fmt.Errorf("maxObservationBytes %d is not from %d to %d", n, MinObservationBytes, MaxObservationBytesLimit)
	}
	return nil
}

// boundObservation cuts an observation longer than limit bytes to at most
// limit bytes: its beginning, cut at a UTF-8 boundary, then a marker that
// says how many bytes were left out. Every observation goes through it in
// one place (execOne), whatever the tool's kind, so that no kind has to
// bound its own output, and the stored call record and the checkpoint
// hold the bounded text. A tool that answers with megabytes costs the run
// one allocation of them, not a context window or a store row.
func boundObservation(obs string, limit int) string {
	if len(obs) <= limit {
		return obs
	}
	// The marker's length depends on the number of bytes cut, which depends
	// on the marker's: the count is at most len(obs), so a marker holding
	// len(obs) is never shorter than the final one.
	keep := max(limit-len(cutMarker(len(obs), len(obs))), 0)
	for keep > 0 && !utf8.RuneStart(obs[keep]) {
		keep--
	}
	return obs[:keep] + cutMarker(len(obs)-keep, len(obs))
}

// cutMarker is the text that ends a cut observation.
func cutMarker(cut, total int) string {
	return "\n…[observation cut by aid: " + strconv.Itoa(cut) + " of its " + strconv.Itoa(total) + " bytes are not shown]"
}
