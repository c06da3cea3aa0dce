// Package rules states, once, the rules of an application's agents and
// tools that hold between values: a ladder descends in price, an agent
// degrades only to a cheaper rung and only under a budget, never hands off
// or delegates to itself, names an entry once, falls back to other aliases
// than its own, fits its thread in every window it may run in, and offers
// the model no two tools of one name nor a name longer than the model API
// takes; and the rules of a retriever's ranking (CheckRanking): known
// mode, fusion and collapse, numbers in their ranges.
//
// Two places enforce them and must not disagree: the runtime (agents.New,
// retrieval.New), for every application however it was written, and
// `aidgen vet` (package ir), before anything runs, at the position of the
// offending value. So each rule is a function here returning Problems,
// each with the path of the offending value inside the element and a
// message saying what to change; the runtime prefixes the element's name,
// ir adds file:line:col. What neither can know without the other (whether
// a name resolves, what a model can do) stays with the caller.
//
// It imports only the standard library, so that ir may use it without
// linking the runtime.
package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Problem is a rule an element breaks.
type Problem struct {
	// Path is where in the element the offending value is: field names
	// (strings, dotted for nested fields) and list indices (ints); empty
	// for the element itself.
	Path []any
	// Msg says what is wrong and what to change, in the element's own
	// terms; it does not name the element, which the caller does.
	Msg string
}

func problem(msg string, path ...any) Problem { return Problem{Path: path, Msg: msg} }

// The names of the tools the agent runtime offers the model besides the
// declared ones, one per handoff, delegate and retriever: the prefix, then
// the target's name.
const (
	// TransferPrefix names a handoff's tool: transfer_to_<agent>.
	TransferPrefix = "transfer_to_"
	// DelegatePrefix names a delegate's tool: delegate_to_<agent>.
	DelegatePrefix = "delegate_to_"
	// SearchPrefix names a retriever's tool: search_<retriever>.
	SearchPrefix = "search_"
)

// The names of the tools the agent runtime offers an agent that lists
// skills: one loads a skill's instructions, the other reads a file of its
// folder.
const (
	// LoadSkillTool loads a skill's instructions.
	LoadSkillTool = "load_skill"
	// ReadSkillFileTool reads a file of a skill's folder.
	ReadSkillFileTool = "read_skill_file"
)

// MaxToolName is the longest tool name the model API accepts: OpenAI's
// function names match ^[a-zA-Z0-9_-]{1,64}$.
const MaxToolName = 64

// ToolName checks a declared tool's name against the model API's length.
func ToolName(name string) []Problem {
	if len(name) > MaxToolName {
		return []Problem{problem(fmt.Sprintf("tool name %q has %d characters; the model API accepts function names of at most %d: shorten it", name, len(name), MaxToolName))}
	}
	return nil
}

// Price is what a model costs per 1,000 tokens, in US dollars.
type Price struct {
	// Input is the price of 1,000 input tokens.
	Input float64
	// Output is the price of 1,000 output tokens.
	Output float64
}

// String writes the price as messages do: "$0.001 in / $0.002 out per 1k".
func (p Price) String() string { return fmt.Sprintf("$%g in / $%g out per 1k", p.Input, p.Output) }

// Cheaper reports whether a is strictly cheaper than b: no price higher
// and at least one lower.
func Cheaper(a, b Price) bool {
	return a.Input <= b.Input && a.Output <= b.Output && (a.Input < b.Input || a.Output < b.Output)
}

// Model is what the rules read of the model an alias resolves to.
type Model struct {
	// ID is the model's exact id.
	ID string
	// Price is the model's pinned price.
	Price Price
	// ContextWindow is the model's context length in tokens.
	ContextWindow int
	// MaxOutputTokens is the most tokens one answer may have.
	MaxOutputTokens int
}

// Agent is what the rules read of an agent: its own fields, by the names
// the IR gives them.
type Agent struct {
	// Name is the agent's name.
	Name string
	// Model is the alias it starts on.
	Model string
	// Ladder lists aliases from most to least capable.
	Ladder []string
	// Fallbacks are the aliases tried when a call fails.
	Fallbacks []string
	// Degrade is whether the agent steps down its ladder on a budget
	// breach (onBudgetExhausted "degrade").
	Degrade bool
	// Budget names the agent's budget; empty means none.
	Budget string
	// Tools, Handoffs, Delegates and Retrievers are the agent's lists.
	Tools, Handoffs, Delegates, Retrievers []string
	// Skills are the skills the agent lists.
	Skills []string
	// Output is whether the agent has an output schema.
	Output bool
	// ThreadTokenBudget bounds the thread sent to the model; zero means
	// the whole thread.
	ThreadTokenBudget int
	// Compaction is the agent's compaction policy; nil means none.
	Compaction *Compaction
}

// Known is what the caller knows of the application an agent is part of:
// the model behind each alias that resolves to a chat model, and the names
// declared. A name that is not known is the caller's to report; the rules
// pass over it.
type Known struct {
	// Model returns the chat model an alias resolves to.
	Model func(alias string) (Model, bool)
	// Tool, Agent and Retriever report whether a name is declared.
	Tool, Agent, Retriever func(name string) bool
}

// CheckAgent applies every rule of this package to an agent, in a stable
// order.
func CheckAgent(a Agent, k Known) []Problem {
	return slices.Concat(
		Ladder(a, k),
		Degrade(a),
		List("handoffs", a.Handoffs, "agent", a.Name),
		List("delegates", a.Delegates, "agent", a.Name),
		List("tools", a.Tools, "tool", ""),
		List("retrievers", a.Retrievers, "retriever", ""),
		Fallbacks("fallbacks", a.Fallbacks, a.Model, "the agent's model"),
		ThreadBudget(a, k),
		CompactionPolicy(a, k),
		GeneratedTools(a, k),
	)
}

// Ladder checks an agent's ladder: it contains the agent's model, holds
// each alias once, and each rung is strictly cheaper than the rung above,
// so that stepping down saves money.
func Ladder(a Agent, k Known) []Problem {
	var out []Problem
	if len(a.Ladder) > 0 && !slices.Contains(a.Ladder, a.Model) {
		out = append(out, problem(fmt.Sprintf("the ladder must contain the agent's model %q; add it at its rung", a.Model), "ladder"))
	}
	for i, r := range a.Ladder {
		if j := slices.Index(a.Ladder, r); j < i {
			out = append(out, problem(fmt.Sprintf("alias %q is on the ladder twice; each rung is one alias", r), "ladder", i))
			continue
		}
		if i == 0 {
			continue
		}
		above, ok1 := k.Model(a.Ladder[i-1])
		below, ok2 := k.Model(r)
		if !ok1 || !ok2 || Cheaper(below.Price, above.Price) {
			continue
		}
		// Say what can fix it: swapping works only when the rung above is
		// the cheaper one; equal or crossed prices need another model.
		var fix string
		switch {
		case Cheaper(above.Price, below.Price):
			fix = fmt.Sprintf("order the ladder from most to least expensive: put %q above %q", r, a.Ladder[i-1])
		case below.Price == above.Price:
			fix = fmt.Sprintf("the two cost the same, so stepping down saves nothing in either order: remove one of them, or make this rung an alias of a model cheaper than %q", a.Ladder[i-1])
		default:
			fix = fmt.Sprintf("one is cheaper on input and the other on output, so neither order makes a step down cheaper: remove this rung, or make it an alias of a model cheaper than %q on both prices", a.Ladder[i-1])
		}
		out = append(out, problem(fmt.Sprintf("rung %q (%s) is not strictly cheaper than the rung above it, %q (%s); %s", r, below.Price, a.Ladder[i-1], above.Price, fix), "ladder", i))
	}
	return out
}

// Degrade checks an agent that degrades on a budget breach: it has a
// budget to breach, and a strictly cheaper rung below its model (the price
// order is Ladder's).
func Degrade(a Agent) []Problem {
	if !a.Degrade {
		return nil
	}
	var out []Problem
	if a.Budget == "" {
		out = append(out, problem(`onBudgetExhausted "degrade" reacts to a budget breach, but the agent has no budget; set budget or use "fail"`, "onBudgetExhausted"))
	}
	switch i := slices.Index(a.Ladder, a.Model); {
	case len(a.Ladder) == 0:
		out = append(out, problem(fmt.Sprintf(`onBudgetExhausted "degrade" needs a ladder with a strictly cheaper alias below %q; add ladder: [%q, "<cheaper alias>"]`, a.Model, a.Model), "onBudgetExhausted"))
	case i >= 0 && i == len(a.Ladder)-1:
		out = append(out, problem(fmt.Sprintf(`onBudgetExhausted "degrade" needs a strictly cheaper alias below %q on the ladder, but %q is its last rung`, a.Model, a.Model), "onBudgetExhausted"))
	} // a model off the ladder is Ladder's to report
	return out
}

// List checks a list of names in field: none repeats, and none is self,
// the agent the list belongs to when it names agents (a handoff or a
// delegate never re-enters an agent on the path).
func List(field string, names []string, what, self string) []Problem {
	var out []Problem
	for i, n := range names {
		switch {
		case self != "" && n == self:
			out = append(out, problem(fmt.Sprintf("agent %q cannot name itself: an agent on the path is never re-entered; remove %q", self, n), field, i))
		case slices.Index(names, n) < i:
			out = append(out, problem(fmt.Sprintf("%s %q is listed twice; remove this entry", what, n), field, i))
		}
	}
	return out
}

// Fallbacks checks a list of fallback aliases in field: none repeats or is
// primary, the alias they stand in for (called primaryWords in messages),
// which the gateway would only try again after it failed.
func Fallbacks(field string, fallbacks []string, primary, primaryWords string) []Problem {
	var out []Problem
	for i, f := range fallbacks {
		switch {
		case f == primary:
			out = append(out, problem(fmt.Sprintf("fallback %q is %s, which the fallbacks stand in for when it fails; remove it or name another alias", f, primaryWords), field, i))
		case slices.Index(fallbacks, f) < i:
			out = append(out, problem(fmt.Sprintf("fallback %q is listed twice; remove this entry", f), field, i))
		}
	}
	return out
}

// ThreadBudget checks that the thread's history and the longest answer
// fit together in the context window of every model the agent may run on.
// A rung (the model or a ladder alias) that does not is reported at the
// budget, which fixes them all; a fallback at itself, since another
// fallback may fit. Each alias is judged once, at its first place.
func ThreadBudget(a Agent, k Known) []Problem {
	tb := a.ThreadTokenBudget
	if tb <= 0 {
		return nil
	}
	var out []Problem
	seen := map[string]bool{}
	check := func(alias string, fallback int) {
		if seen[alias] {
			return
		}
		seen[alias] = true
		m, ok := k.Model(alias)
		if !ok || tb+m.MaxOutputTokens <= m.ContextWindow {
			return
		}
		fix := fmt.Sprintf("lower tokenBudget to at most %d", m.ContextWindow-m.MaxOutputTokens)
		if m.ContextWindow <= m.MaxOutputTokens {
			fix = fmt.Sprintf("lower %q's maxOutputTokens, which fills its whole context window", m.ID)
		}
		if fallback >= 0 {
			out = append(out, problem(fmt.Sprintf("fallback %q (model %q) cannot take the thread: tokenBudget %d plus the %d output tokens it may answer with is %d tokens, more than its context window of %d; pick a fallback with a larger window, or %s", alias, m.ID, tb, m.MaxOutputTokens, tb+m.MaxOutputTokens, m.ContextWindow, fix), "fallbacks", fallback))
			return
		}
		out = append(out, problem(fmt.Sprintf("thread tokenBudget %d plus the %d output tokens %q may answer with is %d tokens, more than its context window of %d; %s", tb, m.MaxOutputTokens, m.ID, tb+m.MaxOutputTokens, m.ContextWindow, fix), "memory.thread.tokenBudget"))
	}
	check(a.Model, -1)
	for _, r := range a.Ladder {
		check(r, -1)
	}
	for i, f := range a.Fallbacks {
		check(f, i)
	}
	return out
}

// Needs returns the capabilities every model an agent may run on must
// have: tools when it has tools, handoffs, delegates or retrievers (the
// model sees each as a tool), json when it has an output schema.
func Needs(a Agent) []string {
	var out []string
	if len(a.Tools)+len(a.Handoffs)+len(a.Delegates)+len(a.Retrievers)+len(a.Skills) > 0 {
		out = append(out, "tools")
	}
	if a.Output {
		out = append(out, "json")
	}
	return out
}

// Why says why an agent needs a capability Needs returned.
func Why(capability string) string {
	switch capability {
	case "tools":
		return "it has tools, handoffs, delegates or retrievers"
	case "json":
		return "it has an output schema"
	}
	return capability
}

// GeneratedTools checks the tools the runtime generates for an agent (one
// per handoff, delegate and retriever it names that is declared, once):
// each name fits MaxToolName, and no declared tool the agent lists takes
// one of them, which would leave the model two tools of one name.
func GeneratedTools(a Agent, k Known) []Problem {
	var out []Problem
	generated := map[string]string{} // tool name → what the runtime generates it for
	gen := func(field string, refs []string, prefix, what, kind string, known func(string) bool) {
		for i, r := range refs {
			if slices.Index(refs, r) != i || r == a.Name || known == nil || !known(r) {
				continue // List's, or the caller's, to report
			}
			name := prefix + r
			generated[name] = fmt.Sprintf("%s %q", what, r)
			if len(name) > MaxToolName {
				out = append(out, problem(fmt.Sprintf("the runtime offers %s %q to the model as tool %q, %d characters, but the model API accepts function names of at most %d: shorten the %s's name to at most %d characters", what, r, name, len(name), MaxToolName, kind, MaxToolName-len(prefix)), field, i))
			}
		}
	}
	gen("handoffs", a.Handoffs, TransferPrefix, "the handoff to agent", "agent", k.Agent)
	gen("delegates", a.Delegates, DelegatePrefix, "the delegate", "agent", k.Agent)
	gen("retrievers", a.Retrievers, SearchPrefix, "the search of retriever", "retriever", k.Retriever)
	if len(a.Skills) > 0 {
		generated[LoadSkillTool] = "loading skills"
		generated[ReadSkillFileTool] = "reading skills' files"
	}
	for i, t := range a.Tools {
		if what, ok := generated[t]; ok && k.Tool != nil && k.Tool(t) {
			out = append(out, problem(fmt.Sprintf("tool %q has the name the runtime gives the tool for %s, so the model would see two tools of one name; rename the declared tool", t, what), "tools", i))
		}
	}
	return out
}

// Field returns a problem's path as a string such as "ladder[1]", for
// messages that cannot point at a position.
func (p Problem) Field() string {
	var b strings.Builder
	for _, part := range p.Path {
		switch part := part.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", part)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, part)
		}
	}
	return b.String()
}

// Suggest returns the candidate closest to name when it is close enough to
// be a likely typo, for "did you mean" hints (at most two edits, or a third
// of name), and "" otherwise; of two equally close, the smaller.
func Suggest(name string, candidates []string) string {
	best, bestD := "", len(name)/2+1
	for _, c := range candidates {
		if d := levenshtein(name, c); d < bestD || (d == bestD && best != "" && c < best) {
			best, bestD = c, d
		}
	}
	if bestD > 2 && bestD > len(name)/3 {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Nearest returns the n candidates closest to name by edit distance, ties
// broken by name.
func Nearest(name string, candidates []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	all := make([]scored, len(candidates))
	for i, c := range candidates {
		all[i] = scored{c, levenshtein(name, c)}
	}
	slices.SortFunc(all, func(a, b scored) int { return cmp.Or(cmp.Compare(a.d, b.d), strings.Compare(a.name, b.name)) })
	out := make([]string, 0, n)
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.name)
	}
	return out
}
