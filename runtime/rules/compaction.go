package rules

import "fmt"

// Compaction is what the rules read of an agent's compaction policy, by
// the names the IR gives its fields.
type Compaction struct {
	// Trigger is the declared trigger in input tokens; zero means the
	// default (CompactionBounds).
	Trigger int
	// KeepTurns is how many of the newest turns stay verbatim.
	KeepTurns int
	// Model is the alias that writes the summaries.
	Model string
	// SummaryTokens bounds a summary's length; zero means the default
	// (SummaryTokens).
	SummaryTokens int
}

// DefaultSummaryTokens is the most tokens a summary has by default, or the
// summary model's output bound when it is lower.
const DefaultSummaryTokens = 1000

// SummaryTokens returns the bound of a summary written by model m under
// policy c: the declared one, or DefaultSummaryTokens within m's output
// bound.
func SummaryTokens(c *Compaction, m Model) int {
	if c.SummaryTokens > 0 {
		return c.SummaryTokens
	}
	return min(DefaultSummaryTokens, m.MaxOutputTokens)
}

// CompactionBounds returns the input bounds of an agent that compacts its
// thread: limit, the most input tokens a request may hold on every model
// the agent may run on (its model, its ladder and its fallbacks), which is
// the smallest of their context windows less each one's output bound; and
// trigger, the input size above which its thread is compacted: the
// declared one, or limit less a margin of a tenth of it, which absorbs the
// error of the token estimate (gateway.EstimateInputTokens).
// ok is false when no alias of the agent is known, or it declares no
// compaction.
func CompactionBounds(a Agent, k Known) (trigger, limit int, ok bool) {
	c := a.Compaction
	if c == nil {
		return 0, 0, false
	}
	limit, _, ok = smallestRoom(a, k)
	if !ok {
		return 0, 0, false
	}
	if c.Trigger > 0 {
		return c.Trigger, limit, true
	}
	return limit - limit/10, limit, true
}

// smallestRoom is the smallest input room (context window less output
// bound) of the models the agent may run on, and the model that has it.
func smallestRoom(a Agent, k Known) (int, Model, bool) {
	var best Model
	room, ok := 0, false
	for _, alias := range append(append([]string{a.Model}, a.Ladder...), a.Fallbacks...) {
		m, known := k.Model(alias)
		if !known {
			continue
		}
		if r := m.ContextWindow - m.MaxOutputTokens; !ok || r < room {
			room, best, ok = r, m, true
		}
	}
	return room, best, ok
}

// CompactionPolicy checks an agent's compaction policy: it does not bound
// the thread twice (trimming and compaction), keeps at least one turn,
// leaves room under the smallest window, and names a summary model whose
// window holds what a compaction summarises and whose output bound holds
// the summary. An alias that is not known is the caller's to report.
func CompactionPolicy(a Agent, k Known) []Problem {
	c := a.Compaction
	if c == nil {
		return nil
	}
	var out []Problem
	if a.ThreadTokenBudget > 0 {
		out = append(out, problem("compaction and memory.thread.tokenBudget both bound the thread: trimming would drop the turns compaction summarises; remove memory.thread.tokenBudget (compaction.trigger sets when the thread is compacted)", "memory.thread.tokenBudget"))
	}
	if c.KeepTurns < 1 {
		out = append(out, problem(fmt.Sprintf("keepTurns %d keeps no turn; the current turn is always kept, so keepTurns is at least 1", c.KeepTurns), "compaction.keepTurns"))
	}
	if c.SummaryTokens < 0 {
		out = append(out, problem(fmt.Sprintf("summaryTokens %d leaves no room for a summary; set it to at least 1", c.SummaryTokens), "compaction.summaryTokens"))
	}
	trigger, limit, ok := CompactionBounds(a, k)
	if !ok {
		return out
	}
	_, small, _ := smallestRoom(a, k)
	switch {
	case limit <= 0:
		return out // ThreadBudget and the model's own checks say why
	case c.Trigger > limit:
		out = append(out, problem(fmt.Sprintf("trigger %d is more than the %d input tokens the smallest window the agent may run on leaves (model %q: context window %d less %d output tokens); lower it to at most %d", c.Trigger, limit, small.ID, small.ContextWindow, small.MaxOutputTokens, limit), "compaction.trigger"))
	}
	m, known := k.Model(c.Model)
	if !known || c.SummaryTokens < 0 {
		return out
	}
	if c.SummaryTokens > m.MaxOutputTokens {
		out = append(out, problem(fmt.Sprintf("summaryTokens %d is more than the %d output tokens the summary model %q may answer with; lower it", c.SummaryTokens, m.MaxOutputTokens, m.ID), "compaction.summaryTokens"))
	}
	summary := SummaryTokens(c, m)
	if need := min(trigger, limit) + summary; trigger > 0 && need > m.ContextWindow {
		out = append(out, problem(fmt.Sprintf("the summary model %q has a context window of %d tokens, less than the %d a compaction may need (up to %d tokens of thread to summarise and a summary of %d); pick a model with a larger window, or lower the trigger", m.ID, m.ContextWindow, need, min(trigger, limit), summary), "compaction.model"))
	}
	return out
}
