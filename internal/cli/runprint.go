package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
)

// Widths at which aidgen run cuts what it prints, unless --verbose.
const (
	argsWidth = 160
	obsWidth  = 120
	textWidth = 200
)

// The names under which the runtime offers handoffs and delegations to the
// model (the IR refuses declared tools with these prefixes).
const (
	transferPrefix = "transfer_to_"
	delegatePrefix = "delegate_to_"
)

// runPrinter prints a run for a person: steps, nested delegations,
// handoffs, the pause or the answer, and the totals.
type runPrinter struct {
	w       io.Writer
	verbose bool
	cmd     string // the command line a resume starts with
	app     string // the application file
}

func (p *runPrinter) resuming(rec *agents.RunRecord, d agents.Decision) {
	what := "pending call"
	if c, ok := rec.Checkpoint.Pending.Call(); ok {
		what = c.Name
	}
	verb := "approved"
	if d.Action == agents.Reject {
		verb = "rejected"
	}
	fmt.Fprintf(p.w, "resuming run %s on %s: %s %s\n", rec.RunID, rec.Agent, verb, what)
}

// continuing says which stopped run a --continue takes up, and with what.
func (p *runPrinter) continuing(rec *agents.RunRecord, steps int) {
	more := "the agent's maxSteps"
	if steps > 0 {
		more = plural(steps, "more step", "more steps")
	}
	fmt.Fprintf(p.w, "continuing run %s on %s (%s after step %d) with %s\n", rec.RunID, rec.Agent, rec.Status, len(rec.Checkpoint.Steps), more)
}

// result prints a run's steps from the one numbered after skip (a resumed
// run's earlier steps were printed by the command that ran them), then how
// it ended.
func (p *runPrinter) result(res agents.RunResult, skip int, where string) {
	for i, st := range res.Steps {
		if st.Number <= skip {
			continue
		}
		if i == len(res.Steps)-1 && res.Status == agents.StatusCompleted && len(st.ToolCalls) == 0 && st.Text == res.Answer {
			st.Text = "" // printed whole below
		}
		p.compactions(res.Compactions, st.Number)
		p.step("", st, nil)
	}
	cp := res.Checkpoint
	if res.Status == agents.StatusPaused && cp != nil && cp.Pending != nil {
		p.compactions(res.Compactions, cp.Pending.Step.Number)
		p.step("", cp.Pending.Step, cp.Pending)
	}
	fmt.Fprintln(p.w)
	steps := len(res.Steps)
	if res.Status == agents.StatusPaused && cp != nil && cp.Pending != nil {
		steps++ // the step whose call waits
	}
	total := fmt.Sprintf("%s · %s · %s", plural(steps, "step", "steps"), plural(int(res.Usage.TotalTokens), "token", "tokens"), usd(res.CostUSD))
	if res.FellBack {
		total += " · a fallback answered"
	}
	switch res.Status {
	case agents.StatusCompleted:
		fmt.Fprintf(p.w, "answer (%s):\n%s\n\n", res.Agent, res.Answer)
		fmt.Fprintf(p.w, "completed: %s\n", total)
	case agents.StatusPaused:
		p.paused(res, where)
		fmt.Fprintf(p.w, "paused: %s\n", total)
	default:
		if res.RunID == "" {
			return
		}
		if agents.Continuable(res.Status) {
			if res.LastText != "" {
				fmt.Fprintf(p.w, "last text (%s):\n%s\n\n", res.Agent, p.cut(res.LastText, textWidth))
			}
			fmt.Fprintf(p.w, "continue it:  %s --continue %s [--steps N]\n\n", p.cmd, res.RunID)
		}
		for _, v := range res.Verdicts {
			fmt.Fprintf(p.w, "guardrail %s: %s at %s (%s)%s\n", v.Guardrail, cmp.Or(string(v.Action), "pass"), v.Point, strings.Join(v.Matched, "; "), verdictCost(v))
		}
		fmt.Fprintf(p.w, "%s: %s (run %s)\n", res.Status, total, res.RunID)
	}
}

// compactions prints the compactions of the thread made before the step
// numbered before: what each did and what it cost.
func (p *runPrinter) compactions(list []agents.CompactionRecord, before int) {
	for _, c := range list {
		if c.Before != before {
			continue
		}
		head := fmt.Sprintf("compaction · %s · %d → %d tokens (trigger %d)", c.Tier, c.TokensBefore, c.TokensAfter, c.Trigger)
		if c.Tier == agents.TierSummary {
			head += fmt.Sprintf(" · %s · %s", c.Alias, usd(c.CostUSD))
		}
		fmt.Fprintln(p.w, head)
		var did []string
		if c.Stubbed > 0 {
			did = append(did, plural(c.Stubbed, "tool result dropped", "tool results dropped"))
		}
		if c.Summarised > 0 {
			did = append(did, plural(c.Summarised, "message summarised", "messages summarised"))
		}
		fmt.Fprintf(p.w, "  %s\n", strings.Join(did, ", "))
		if c.Summary != "" {
			fmt.Fprintf(p.w, "  summary: %s\n", p.cut(c.Summary, textWidth))
		}
	}
}

// paused prints the call a paused run waits for and the commands that
// decide it.
func (p *runPrinter) paused(res agents.RunResult, where string) {
	c, ok := res.Checkpoint.Pending.Call()
	if !ok {
		return
	}
	reason := "approval"
	if res.Checkpoint.Pending.Reason == agents.PauseInterrupted {
		reason = "a decision (its process died during the call, which may or may not have happened)"
	}
	why := ""
	if pr := c.Policy; pr != nil && res.Checkpoint.Pending.Reason == agents.PauseApproval {
		why = " (" + policyWhy(pr) + ")"
	}
	fmt.Fprintf(p.w, "run %s is waiting for %s of %s's call%s:\n", res.RunID, reason, res.Agent, why)
	fmt.Fprintf(p.w, "  %s %s\n\n", c.Name, indentJSON(c.Arguments, "  "))
	fmt.Fprintf(p.w, "approve it:  %s --resume %s --approve\n", p.cmd, res.RunID)
	fmt.Fprintf(p.w, "reject it:   %s --resume %s --reject --feedback 'why'\n", p.cmd, res.RunID)
	fmt.Fprintf(p.w, "(--approve --arguments JSON runs it with edited arguments, --scope run or thread approves %s for the run or its thread; run state: %s)\n\n", c.Name, where)
}

// step prints one step at indent; pending marks the step of a paused run,
// whose call at pending.Next waits.
func (p *runPrinter) step(indent string, st agents.StepRecord, pending *agents.Pending) {
	head := fmt.Sprintf("%sstep %d · %s · %s", indent, st.Number, st.Agent, st.Alias)
	switch {
	case st.DegradedFrom != "":
		head += " (degraded from " + st.DegradedFrom + ")"
	case st.Requested != "" && st.Requested != st.Alias:
		head += " (fell back from " + st.Requested + ")"
	}
	if p.verbose && st.Model != "" {
		head += " [" + st.Model + "]"
	}
	head += fmt.Sprintf(" · %s · %s", plural(int(st.Usage.TotalTokens), "token", "tokens"), usd(st.CostUSD))
	fmt.Fprintln(p.w, head)
	in := indent + "  "
	if st.Text == "" && len(st.ToolCalls) == 0 {
		fmt.Fprintf(p.w, "%sanswers (below)\n", in)
	}
	if st.Text != "" {
		if len(st.ToolCalls) == 0 {
			fmt.Fprintf(p.w, "%sanswer: %s\n", in, p.cut(st.Text, textWidth))
		} else {
			fmt.Fprintf(p.w, "%ssays: %s\n", in, p.cut(st.Text, textWidth))
		}
	}
	for i, c := range st.ToolCalls {
		waiting := pending != nil && pending.Reason != "" && i == pending.Next
		p.call(in, c, waiting)
	}
}

func (p *runPrinter) call(in string, c agents.ToolCallRecord, waiting bool) {
	obs := in + "  ↳ "
	switch {
	case strings.HasPrefix(c.Name, transferPrefix) && c.Done && c.ErrorKind == "":
		fmt.Fprintf(p.w, "%s→ %s\n", in, strings.TrimPrefix(c.Name, transferPrefix))
		return
	case c.Delegate != nil:
		task := c.Arguments
		var args struct {
			Input string `json:"input"`
		}
		if json.Unmarshal([]byte(c.Arguments), &args) == nil && args.Input != "" {
			task = args.Input
		}
		fmt.Fprintf(p.w, "%sdelegate to %s: %s\n", in, c.Delegate.Agent, p.cut(task, argsWidth))
		for _, st := range c.Delegate.Steps {
			p.step(in+"  ", st, nil)
		}
		fmt.Fprintf(p.w, "%s%s %s: %s · %s\n", obs, c.Delegate.Agent, c.Delegate.Status, plural(len(c.Delegate.Steps), "step", "steps"), usd(c.Delegate.CostUSD))
		if c.ErrorKind != "" {
			p.failed(obs, c)
		}
		return
	}
	fmt.Fprintf(p.w, "%s%s %s\n", in, c.Name, p.cut(compactJSON(c.Arguments), argsWidth))
	if a := c.Approval; a != nil {
		switch {
		case !a.Approved:
			fmt.Fprintf(p.w, "%s  ✗ rejected by %s", in, person(a.By))
		case a.OriginalArguments != "":
			fmt.Fprintf(p.w, "%s  ✓ approved by %s with edited arguments (the model wrote %s)", in, person(a.By), p.cut(compactJSON(a.OriginalArguments), argsWidth))
		default:
			fmt.Fprintf(p.w, "%s  ✓ approved by %s", in, person(a.By))
		}
		if a.ClaimedBy != "" && a.ClaimedBy != a.By {
			fmt.Fprintf(p.w, " (who said they were %s)", p.cut(a.ClaimedBy, argsWidth))
		}
		if a.Scope == agents.GrantRun || a.Scope == agents.GrantThread {
			fmt.Fprintf(p.w, " for the %s", a.Scope)
		}
		if a.Feedback != "" {
			fmt.Fprintf(p.w, ": %q", a.Feedback)
		}
		fmt.Fprintln(p.w)
	} else if pr := c.Policy; pr != nil && pr.Grant != nil {
		fmt.Fprintf(p.w, "%s  ✓ allowed by %s's grant for the %s (%s)\n", in, person(pr.Grant.By), pr.Grant.Scope, policyWhy(pr))
	}
	switch {
	case waiting:
		fmt.Fprintf(p.w, "%s⏸ waiting for a decision\n", obs)
	case c.Interrupted:
		fmt.Fprintf(p.w, "%s⏹ interrupted: stopped before its result (a continuation runs a read again and asks about a write)\n", obs)
	case !c.Done:
		fmt.Fprintf(p.w, "%s(not run)\n", obs)
	case c.ErrorKind == agents.KindRejected:
		// The approval line said it.
	case c.ErrorKind != "":
		p.failed(obs, c)
	default:
		fmt.Fprintf(p.w, "%s%s\n", obs, p.cut(c.Observation, obsWidth))
	}
}

// failed prints the observation of a call that failed after "error
// (kind): ". The runtime writes such an observation for the model, which
// starts it with "error: "; said twice, it reads "error (denied): error:".
func (p *runPrinter) failed(obs string, c agents.ToolCallRecord) {
	fmt.Fprintf(p.w, "%serror (%s): %s\n", obs, c.ErrorKind, p.cut(strings.TrimPrefix(c.Observation, "error: "), obsWidth))
}

// person names who decided, for a person to read.
func person(by string) string {
	if by == "" {
		return "a person"
	}
	return by
}

// policyWhy says what in the approval policy decided a call.
func policyWhy(pr *agents.PolicyRecord) string {
	var why string
	switch pr.Source {
	case policy.SourceRule:
		why = fmt.Sprintf("approval rule %d", pr.Rule)
	case policy.SourceTool:
		why = "the tool's approval"
	default:
		why = "the approval policy's default"
	}
	if pr.Reason != "" {
		why += ": " + pr.Reason
	}
	return why
}

// cut puts text on one line and shortens it to width runes, unless
// --verbose asked for everything.
func (p *runPrinter) cut(s string, width int) string {
	if p.verbose {
		return s
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

// compactJSON prints JSON arguments without insignificant space; text that
// is not JSON (a model may write that) is printed as it is.
func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

func indentJSON(s, prefix string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), prefix, "  ") != nil {
		return s
	}
	return b.String()
}

func usd(v float64) string { return fmt.Sprintf("$%.6f", v) }

// runJSON is what aidgen run --json prints: the agents.RunResult with
// stable snake_case names (steps and checkpoints use the runtime's own JSON
// names), the pending call with the commands that decide it, and the error
// of a run that failed. Fields are only ever added.
type runJSON struct {
	RunID      string                `json:"run_id"`
	Status     agents.Status         `json:"status"`
	Agent      string                `json:"agent"`
	Path       []string              `json:"path"`
	Answer     string                `json:"answer,omitempty"`
	Steps      []agents.StepRecord   `json:"steps"`
	Usage      runUsageJSON          `json:"usage"`
	CostUSD    float64               `json:"cost_usd"`
	FellBack   bool                  `json:"fell_back"`
	LastText   string                `json:"last_text,omitempty"`
	Messages   []agents.SavedMessage `json:"messages"`
	Pending    *runPendingJSON       `json:"pending,omitempty"`
	Checkpoint *agents.Checkpoint    `json:"checkpoint,omitempty"`
	// Continue is the command that continues a run that stopped early.
	Continue string `json:"continue_command,omitempty"`
	Error    string `json:"error,omitempty"`
	// Verdicts are the guardrails' verdicts that did something; Blocked
	// is the message of the guardrail that blocked a blocked run, what
	// its caller reads.
	Verdicts []agents.VerdictRecord `json:"verdicts,omitempty"`
	Blocked  string                 `json:"blocked,omitempty"`
	// Compactions are the compactions of the run's thread, each before
	// the step it made fit (its "before"), with what it cost.
	Compactions []agents.CompactionRecord `json:"compactions,omitempty"`
}

type runUsageJSON struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens,omitempty"`
	OutputTokens      int64 `json:"output_tokens"`
	TotalTokens       int64 `json:"total_tokens"`
}

// runPendingJSON is the call a paused run waits for.
type runPendingJSON struct {
	Agent     string             `json:"agent"`
	Tool      string             `json:"tool"`
	CallID    string             `json:"call_id"`
	Arguments string             `json:"arguments"`
	Reason    agents.PauseReason `json:"reason"`
	Approve   string             `json:"approve_command"`
	Reject    string             `json:"reject_command"`
}

func writeRunJSON(s *streams, res agents.RunResult, runErr error, cmd string) error {
	out := runJSON{
		RunID: res.RunID, Status: res.Status, Agent: res.Agent, Path: res.Path, Answer: res.Answer,
		Steps: res.Steps, CostUSD: res.CostUSD, FellBack: res.FellBack, Checkpoint: res.Checkpoint, LastText: res.LastText,
		Usage: runUsageJSON{InputTokens: res.Usage.InputTokens, CachedInputTokens: res.Usage.CachedInputTokens, CacheWriteTokens: res.Usage.CacheWriteInputTokens(), OutputTokens: res.Usage.OutputTokens, TotalTokens: res.Usage.TotalTokens},
	}
	if out.Path == nil {
		out.Path = []string{}
	}
	if out.Steps == nil {
		out.Steps = []agents.StepRecord{}
	}
	out.Messages = make([]agents.SavedMessage, len(res.Messages))
	for i, m := range res.Messages {
		sm := agents.SavedMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		for _, c := range m.ToolCalls {
			sm.ToolCalls = append(sm.ToolCalls, agents.SavedToolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
		}
		out.Messages[i] = sm
	}
	if res.Status == agents.StatusPaused && res.Checkpoint != nil {
		if c, ok := res.Checkpoint.Pending.Call(); ok {
			out.Pending = &runPendingJSON{
				Agent: res.Agent, Tool: c.Name, CallID: c.ID, Arguments: c.Arguments, Reason: res.Checkpoint.Pending.Reason,
				Approve: fmt.Sprintf("%s --resume %s --approve", cmd, res.RunID),
				Reject:  fmt.Sprintf("%s --resume %s --reject --feedback 'why'", cmd, res.RunID),
			}
		}
	}
	if agents.Continuable(res.Status) {
		out.Continue = fmt.Sprintf("%s --continue %s", cmd, res.RunID)
	}
	if runErr != nil {
		out.Error = runErr.Error()
	}
	out.Verdicts = res.Verdicts
	out.Compactions = res.Compactions
	if be, ok := errors.AsType[*agents.BlockedError](runErr); ok {
		out.Blocked = be.Message
	}
	enc := json.NewEncoder(s.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("writing the run as JSON: %w", err)
	}
	return nil
}

// verdictCost is what a verdict cost, as a run prints it: ", 95 tokens,
// $0.000123" for a model guardrail's call, "" for a check that cost
// nothing.
func verdictCost(v agents.VerdictRecord) string {
	out := ""
	if v.Usage != nil && v.Usage.TotalTokens > 0 {
		out = ", " + plural(int(v.Usage.TotalTokens), "token", "tokens")
	}
	if v.CostUSD != 0 {
		out += fmt.Sprintf(", $%.6f", v.CostUSD)
	}
	return out
}
