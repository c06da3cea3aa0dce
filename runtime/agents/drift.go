package agents

import (
	"fmt"

	"github.com/aidgen/aid/runtime/gateway"
)

// The parts of a request's cached prefix, in the order a provider caches
// them (Anthropic: tools, then system, then messages): a change in one
// makes every later part miss the cache too.
const (
	// PrefixTools is the tool definitions the request offers.
	PrefixTools = "tools"
	// PrefixSystem is the system prompt: the agent's instructions and any
	// system message (stored memory) sent with them.
	PrefixSystem = "system"
	// PrefixHistory is the conversation before the step's last turn.
	PrefixHistory = "history"
)

// movedPart names the part of the cached prefix in which the replayed
// messages first differ from the recorded ones: the system prompt when the
// first differing message is a system message on either side, the history
// otherwise.
func movedPart(want, got []SavedMessage) string {
	for i := range min(len(want), len(got)) {
		if !equalSaved(want[i], got[i]) {
			if want[i].Role == gateway.RoleSystem || got[i].Role == gateway.RoleSystem {
				return PrefixSystem
			}
			return PrefixHistory
		}
	}
	return PrefixHistory
}

// prefixNote is what a divergence says of the cached prefix that moved.
func prefixNote(step int, part string) string {
	return fmt.Sprintf("; the cached prefix moves at step %d, in the %s: a prompt cache stops hitting from here", step, part)
}
