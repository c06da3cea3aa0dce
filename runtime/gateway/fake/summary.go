package fake

import (
	"strings"

	"github.com/aidgen/aid/runtime/gateway"
)

// DefaultSummaryKeep is the mark of the lines the summariser keeps when
// Config.SummaryKeep is empty: a conversation marks a fact to keep with a
// line that starts with it.
const DefaultSummaryKeep = "FACT:"

// summarise is the fake's summariser, the answer to a compaction call
// (gateway.CallInfo.Compaction) that no agent script answers. It keeps
// the facts it is told to keep and nothing else: every line of the
// request's user and assistant messages that starts, after its leading
// blanks, with keep, each once, in the order they first appear. A request
// holding none answers a fixed sentence, so that a summary is never
// empty. It reads no instructions and is deterministic: the same request
// always gets the same summary.
func summarise(req *gateway.Request, keep string) string {
	if keep == "" {
		keep = DefaultSummaryKeep
	}
	var b strings.Builder
	seen := map[string]bool{}
	for _, m := range req.Messages {
		if m.Role == gateway.RoleSystem {
			continue
		}
		for line := range strings.Lines(m.Content) {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, keep) || seen[line] {
				continue
			}
			seen[line] = true
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(line)
		}
	}
	if b.Len() == 0 {
		return "Nothing in the earlier conversation was marked to keep."
	}
	return b.String()
}
