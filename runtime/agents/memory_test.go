package agents

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/gateway"
)

// TestTrimThreadBoundaries trims conversations at each budget and checks
// that only whole turns are dropped, oldest first, and that the newest
// turn is always kept.
func TestTrimThreadBoundaries(t *testing.T) {
	u := func(s string) gateway.Message { return gateway.Message{Role: gateway.RoleUser, Content: s} }
	a := func(s string) gateway.Message { return gateway.Message{Role: gateway.RoleAssistant, Content: s} }
	ac := func(id string) gateway.Message {
		return gateway.Message{Role: gateway.RoleAssistant, ToolCalls: []gateway.ToolCall{{ID: id, Name: "lookup", Arguments: []byte(`{"id":"x"}`)}}}
	}
	tr := func(id string) gateway.Message {
		return gateway.Message{Role: gateway.RoleTool, ToolCallID: id, Content: strings.Repeat("r", 40)}
	}
	msgs := []gateway.Message{
		u("first question"), ac("c1"), tr("c1"), a("first answer"),
		u("second question"), a("second answer"),
		u("third question"), ac("c3"), tr("c3"),
	}
	turns := [][]gateway.Message{msgs[0:4], msgs[4:6], msgs[6:9]}
	cost := func(ms []gateway.Message) int {
		var n int64
		for _, m := range ms {
			n += messageTokens(m)
		}
		return int(n)
	}
	last, lastTwo, all := cost(turns[2]), cost(msgs[4:]), cost(msgs)
	tests := []struct {
		name   string
		budget int
		want   []gateway.Message
	}{
		{"no budget", 0, msgs},
		{"everything fits exactly", all, msgs},
		{"one token short drops the oldest turn", all - 1, msgs[4:]},
		{"two newest fit exactly", lastTwo, msgs[4:]},
		{"one short of two turns keeps the newest", lastTwo - 1, msgs[6:]},
		{"newest exactly", last, msgs[6:]},
		{"newest alone exceeds the budget and is kept", 1, msgs[6:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := trimThread(msgs, tt.budget, 6)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("(-want +got):\n%s", d)
			}
			// A tool result is never separated from its call.
			if len(got) > 0 && got[0].Role == gateway.RoleTool {
				t.Fatalf("trimmed thread starts with a tool result")
			}
		})
	}
	// A thread with no user message (a resumed tail) is one turn.
	tail := []gateway.Message{ac("c9"), tr("c9")}
	if d := cmp.Diff(tail, trimThread(tail, 1, 0)); d != "" {
		t.Fatalf("tail trimmed (-want +got):\n%s", d)
	}
}

func TestRenderMemoryKeepsNewestWithinBudget(t *testing.T) {
	user := []MemoryEntry{{Text: "oldest fact about the user"}, {Text: "likes tea"}, {Text: "lives in Lyon"}}
	global := []MemoryEntry{{Text: "office closes at 6"}}
	// "likes tea" is 3 tokens + 1, "lives in Lyon" 4 + 1: 9 tokens keep the
	// two newest.
	m, ok := renderMemory(user, global, 9, 100)
	want := "Memory about this user:\n- likes tea\n- lives in Lyon\n\nShared memory:\n- office closes at 6"
	if !ok || m.Role != gateway.RoleSystem || m.Content != want {
		t.Fatalf("rendered %q", m.Content)
	}
	if _, ok := renderMemory(nil, nil, 100, 100); ok {
		t.Fatalf("empty memory rendered a message")
	}
	if m, _ := renderMemory(user, nil, 1, 100); m.Content != "" {
		t.Fatalf("a budget below every entry rendered %q", m.Content)
	}
}
