package agents

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/rules"
)

// Compaction is an agent's compaction policy: what happens when its
// thread outgrows the context window. When a step's request would hold
// more input tokens than Trigger (gateway.EstimateInputTokens: the system
// prompt, stored memory, the thread and the tools), the thread is
// compacted before the call, in tiers:
//
//  1. the bodies of the tool results older than the newest KeepTurns
//     turns are dropped, each call kept with a one-line stub for its
//     result (no model call). This ends the compaction when it brings the
//     request to half the trigger or less, so that the thread grows for a
//     while before the next compaction rewrites it;
//  2. otherwise the turns older than the newest KeepTurns (and more of
//     the newest when those alone do not fit under the trigger) are
//     summarised by Model into one message that takes their place at the
//     head of the thread.
//
// The system prompt, stored memory and the current turn (the run's input,
// its pending tool calls and their results) are never compacted, and only
// the oldest part of the thread is rewritten, so the prefix a provider
// caches stays stable between two compactions. A request that still holds
// more than the smallest window allows stops the run with a
// *ContextOverflowError, never reaching the provider. Each compaction is a
// record of the run (CompactionRecord), the summary's call is priced and
// charged to the run's budgets like a step's, and the summary stays in the
// thread (RunResult.Messages), so the thread's next run starts from it.
//
// It applies to a run's thread; a delegated run, which has none, is not
// compacted.
type Compaction struct {
	// Trigger is the input size, in estimated tokens, above which the
	// thread is compacted. Zero means the default: the smallest context
	// window among the agent's model, ladder and fallbacks, less each
	// one's output bound, less a tenth of that for the estimate's error
	// (rules.CompactionBounds).
	Trigger int
	// KeepTurns is how many of the newest turns stay verbatim; zero means
	// DefaultKeepTurns. A turn starts at a user message; the current turn
	// is always kept.
	KeepTurns int
	// Model is the alias that writes the summaries, a chat model.
	Model string
	// SummaryTokens bounds a summary's length; zero means
	// rules.DefaultSummaryTokens, or the summary model's output bound when
	// it is lower.
	SummaryTokens int
	// Instructions is the summariser's system prompt; empty means
	// DefaultSummaryInstructions.
	Instructions string
}

// The compaction defaults.
const (
	// DefaultKeepTurns is how many turns a compaction keeps verbatim by
	// default.
	DefaultKeepTurns = 4
	// DefaultSummaryInstructions is the summariser's default system
	// prompt.
	DefaultSummaryInstructions = "You compact the earlier part of a conversation between a user and an assistant, so that the assistant can continue it without the original. Write a summary that keeps every fact, name, number, identifier, decision and open question; copy verbatim every line that starts with FACT:. Write plain text, without a preamble."
	// SummaryPrefix starts the message that stands for the turns a
	// compaction summarised, at the head of the thread.
	SummaryPrefix = "Summary of the earlier conversation (compacted):\n"
	// stubPrefix starts the stub that stands for a tool result whose body
	// a compaction dropped.
	stubPrefix = "[compacted] "
)

// CompactionTier says how a compaction made the thread fit.
type CompactionTier string

// The tiers, in the order they are tried.
const (
	// TierToolResults dropped the bodies of old tool results.
	TierToolResults CompactionTier = "tool_results"
	// TierSummary summarised the oldest turns into one message (after
	// dropping old tool results' bodies).
	TierSummary CompactionTier = "summary"
)

// CompactionRecord is one compaction of a run's thread: a step of its own,
// recorded with the run (Checkpoint.Compacted, RecordedRun.Compactions)
// and replayed from the record.
type CompactionRecord struct {
	// Agent is the agent whose request it made fit.
	Agent string `json:"agent"`
	// Before is the number of the step whose request it made fit.
	Before int `json:"before"`
	// Tier is how.
	Tier CompactionTier `json:"tier"`
	// Trigger is the agent's trigger; TokensBefore and TokensAfter the
	// request's estimated input tokens before and after.
	Trigger      int64 `json:"trigger"`
	TokensBefore int64 `json:"tokens_before"`
	TokensAfter  int64 `json:"tokens_after"`
	// Stubbed counts the tool results whose bodies were dropped.
	Stubbed int `json:"stubbed,omitempty"`
	// Summarised counts the messages the summary replaced.
	Summarised int `json:"summarised,omitempty"`
	// Summary is the summary's text, for the summary tier.
	Summary string `json:"summary,omitempty"`
	// Alias and Model are what wrote the summary; Usage and CostUSD what
	// it cost. Zero for the tool-results tier, which calls no model.
	Alias   string      `json:"alias,omitempty"`
	Model   string      `json:"model,omitempty"`
	Usage   UsageRecord `json:"usage,omitzero"`
	CostUSD float64     `json:"cost_usd,omitempty"`
}

// ContextOverflowError reports a request that holds more input than the
// smallest window its agent may run on allows (the context window less the
// output bound), even after compaction: the current turn alone is too
// long. Nothing was sent.
type ContextOverflowError struct {
	// RunID and Agent are the run and the agent.
	RunID, Agent string
	// InputTokens is the request's estimated input; Limit the most the
	// agent's smallest window takes.
	InputTokens, Limit int64
}

// Error implements error.
func (e *ContextOverflowError) Error() string {
	return fmt.Sprintf("run %s: agent %q: the request holds %d input tokens after compaction, more than the %d the smallest context window the agent may run on takes: the current turn alone is too long", e.RunID, e.Agent, e.InputTokens, e.Limit)
}

// CompactionCallAgent is the agent name a compaction's summary call carries
// (gateway.CallInfo.Agent, with CallInfo.Compaction set), so that a fake
// provider's script can answer it: "compaction:" and the agent's name,
// which no agent's name can be.
func CompactionCallAgent(agent string) string { return "compaction:" + agent }

// compactor is an agent's compaction policy, resolved.
type compactor struct {
	trigger, limit int64
	keep           int
	model          string
	maxTokens      int
	instructions   string
}

// Compacted is what a run keeps of the compactions of its thread
// (Checkpoint.Compacted).
type Compacted struct {
	// Compactions are the run's compactions, in order.
	Compactions []CompactionRecord `json:"compactions"`
	// History is the thread before the run, which its first compaction
	// rewrote (Checkpoint.Messages then starts with the summary): the
	// recording's history, from which a replay compacts again.
	History []SavedMessage `json:"history"`
}

// into writes the run's compactions to a checkpoint; a run without any
// (a nil receiver) writes nothing.
func (l *Compacted) into(cp *Checkpoint) {
	if l != nil {
		cp.Compacted = &Compacted{Compactions: slices.Clip(l.Compactions), History: l.History}
	}
}

// list returns the run's compactions.
func (l *Compacted) list() []CompactionRecord {
	if l == nil {
		return nil
	}
	return slices.Clone(l.Compactions)
}

// restoreCompactions is what a run restored from cp keeps of its
// compactions.
func restoreCompactions(cp *Checkpoint) *Compacted {
	if cp.Compacted == nil {
		return nil
	}
	return &Compacted{Compactions: slices.Clip(cp.Compacted.Compactions), History: cp.Compacted.History}
}

// compactionRules is what runtime/rules reads of an agent's policy, its
// defaults applied.
func compactionRules(c *Compaction) *rules.Compaction {
	if c == nil {
		return nil
	}
	return &rules.Compaction{
		Trigger: c.Trigger, KeepTurns: cmp.Or(c.KeepTurns, DefaultKeepTurns), Model: c.Model,
		SummaryTokens: c.SummaryTokens,
	}
}

// bindCompaction resolves the agent's compaction policy: its summary
// model, and its trigger and limit from the models it may run on.
func (r *Runtime) bindCompaction(d *agentDef, ra rules.Agent, k rules.Known) []error {
	c := d.spec.Compaction
	if c == nil {
		return nil
	}
	if c.Trigger < 0 || c.KeepTurns < 0 || c.SummaryTokens < 0 {
		return []error{fmt.Errorf("agent %q: compaction: negative trigger, keepTurns or summaryTokens", d.spec.Name)}
	}
	m, ok := k.Model(c.Model)
	if !ok {
		return []error{fmt.Errorf("agent %q: compaction: model %q is not an alias of a chat model", d.spec.Name, c.Model)}
	}
	trigger, limit, ok := rules.CompactionBounds(ra, k)
	if !ok {
		return nil // the agent's aliases are reported
	}
	rc := ra.Compaction
	d.compact = &compactor{
		trigger: int64(trigger), limit: int64(limit), keep: rc.KeepTurns, model: c.Model,
		maxTokens: rules.SummaryTokens(rc, m), instructions: cmp.Or(c.Instructions, DefaultSummaryInstructions),
	}
	return nil
}

// request builds the model call of the current step (buildRequest), and
// compacts the thread first when the agent has a compaction policy and
// the request would exceed its trigger. An agent without one pays a nil
// check.
func (r *Runtime) request(ctx context.Context, st *runState, req *gateway.Request) error {
	if err := r.buildRequest(ctx, st, req); err != nil {
		return err
	}
	if c := st.agent.compact; c != nil && !st.sub {
		return r.fitRequest(ctx, st, req, c)
	}
	return nil
}

// fitRequest compacts st's thread when req exceeds the trigger, rebuilds
// req from it, and refuses a request that still exceeds the limit.
//
//go:noinline
func (r *Runtime) fitRequest(ctx context.Context, st *runState, req *gateway.Request, c *compactor) error {
	in := gateway.EstimateInputTokens(*req)
	if in <= c.trigger {
		return nil
	}
	ctx, span := r.startCompactionSpan(ctx, st, in, c)
	rec, err := r.compact(ctx, st, c, in)
	if err == nil && rec != nil {
		if err = r.buildRequest(ctx, st, req); err == nil {
			in = gateway.EstimateInputTokens(*req)
			rec.TokensAfter = in
			if r.replay != nil {
				err = r.replay.checkCompaction(st, rec)
			}
		}
		if err == nil {
			if st.clog == nil {
				st.clog = &Compacted{}
			}
			st.clog.Compactions = append(st.clog.Compactions, *rec)
			if st.events != nil {
				st.event(Event{Kind: EventCompaction, Step: rec.Before, Compaction: rec})
			}
		}
	}
	if err == nil && in > c.limit {
		err = &ContextOverflowError{RunID: st.id, Agent: st.agent.spec.Name, InputTokens: in, Limit: c.limit}
	}
	endCompactionSpan(span, rec, err)
	return err
}

// compact rewrites the oldest part of st's thread so that its request
// (of in input tokens) fits under the trigger, and returns what it did:
// nil when there is nothing older than the turns it keeps.
func (r *Runtime) compact(ctx context.Context, st *runState, c *compactor, in int64) (*CompactionRecord, error) {
	starts := turnStarts(st.msgs, st.turn)
	k := max(len(starts)-c.keep, 0)
	if starts[k] == 0 {
		return nil, nil
	}
	fixed := in - threadTokens(st.msgs)
	if current := fixed + threadTokens(st.msgs[st.turn:]); current > c.limit {
		// Nothing a compaction may rewrite would make it fit: refused
		// before a summary is paid for.
		return nil, &ContextOverflowError{RunID: st.id, Agent: st.agent.spec.Name, InputTokens: current, Limit: c.limit}
	}
	rec := &CompactionRecord{Agent: st.agent.spec.Name, Before: len(st.steps) + 1, Trigger: c.trigger, TokensBefore: in}

	// Tier 1: the bodies of old tool results. It ends the compaction when
	// it brings the request to half the trigger or less, so that the
	// thread it leaves grows for a while before the next compaction
	// rewrites the prefix a provider caches; otherwise the summary tier
	// follows.
	out := slices.Clone(st.msgs)
	for i := range out[:starts[k]] {
		if m := &out[i]; m.Role == gateway.RoleTool && !strings.HasPrefix(m.Content, stubPrefix) {
			m.Content = stubPrefix + "the result of " + m.Name + " (" + strconv.Itoa(len(m.Content)) + " bytes) was dropped to fit the context window"
			rec.Stubbed++
		}
	}
	if rec.Stubbed > 0 && fixed+threadTokens(out) <= c.trigger/2 {
		rec.Tier = TierToolResults
		st.rewriteThread(out, st.turn)
		return rec, nil
	}

	// Tier 2: a summary of the oldest turns, as many as it takes for the
	// rest and a summary of the longest length to fit.
	summaryBound := messageTokens(gateway.Message{Role: gateway.RoleUser, Content: SummaryPrefix}) + int64(c.maxTokens)
	for k < len(starts)-1 && fixed+summaryBound+threadTokens(out[starts[k]:]) > c.trigger {
		k++
	}
	from := starts[k]
	text, res, err := r.summarise(ctx, st, c, out[:from], rec)
	if err != nil {
		return nil, err
	}
	rec.Tier, rec.Summarised, rec.Summary = TierSummary, from, text
	rec.Alias, rec.Model, rec.Usage, rec.CostUSD = res.Alias, res.Model, usageRecord(res.Usage), res.CostUSD
	st.usage = st.usage.add(rec.Usage)
	st.cost += res.CostUSD
	thread := make([]gateway.Message, 0, len(out)-from+4)
	thread = append(thread, gateway.Message{Role: gateway.RoleUser, Content: SummaryPrefix + text})
	thread = append(thread, out[from:]...)
	st.rewriteThread(thread, st.turn-from+1)
	return rec, nil
}

// summarise asks the agent's summary model for a summary of msgs, charged
// to the run's budgets like a step; a replay answers from the recording.
func (r *Runtime) summarise(ctx context.Context, st *runState, c *compactor, msgs []gateway.Message, rec *CompactionRecord) (string, gateway.Result, error) {
	if r.replay != nil {
		return r.replay.compaction(st, rec, len(msgs))
	}
	req := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: c.instructions},
			{Role: gateway.RoleUser, Content: transcript(msgs)},
		},
		MaxOutputTokens: c.maxTokens,
	}
	n := 1
	if st.clog != nil {
		n += len(st.clog.Compactions)
	}
	ctx = sideCallContext(ctx, st, gateway.CallInfo{Agent: CompactionCallAgent(st.agent.spec.Name), Step: n, RunID: st.id, Compaction: true})
	res, err := r.gen.Generate(ctx, c.model, req)
	if _, ok := errors.AsType[*gateway.BudgetExceededError](err); ok {
		// The run stops as budget_exceeded, as when a step's call is
		// refused.
		err = &BudgetExceededError{RunID: st.id, Agent: st.agent.spec.Name, Alias: c.model, Err: err}
	}
	if err != nil {
		return "", res, fmt.Errorf("run %s: agent %q: compaction: summary on %q: %w", st.id, st.agent.spec.Name, c.model, err)
	}
	if strings.TrimSpace(res.Text) == "" {
		return "", res, fmt.Errorf("run %s: agent %q: compaction: the summary model %q answered no summary", st.id, st.agent.spec.Name, c.model)
	}
	return res.Text, res, nil
}

// transcript renders the messages a summary replaces as the summariser
// reads them: each under a header naming its role (and tool), its lines
// as they were.
func transcript(msgs []gateway.Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("[")
		b.WriteString(string(m.Role))
		if m.Role == gateway.RoleTool && m.Name != "" {
			b.WriteString(" " + m.Name)
		}
		b.WriteString("]\n")
		b.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			b.WriteString("\n(calls " + tc.Name + " with " + string(tc.Arguments) + ")")
		}
	}
	return b.String()
}

// turnStarts returns the indices of msgs where the turns up to the current
// one (at turn) start, ascending: the first message, and each user message
// up to turn, turn included.
func turnStarts(msgs []gateway.Message, turn int) []int {
	starts := []int{0}
	for i := 1; i <= turn && i < len(msgs); i++ {
		if msgs[i].Role == gateway.RoleUser {
			starts = append(starts, i)
		}
	}
	if starts[len(starts)-1] != turn && turn < len(msgs) {
		starts = append(starts, turn)
	}
	return starts
}

// threadTokens is the token estimate of messages of a request.
func threadTokens(msgs []gateway.Message) int64 {
	var n int64
	for i := range msgs {
		n += messageTokens(msgs[i])
	}
	return n
}

// rewriteThread replaces st's thread with msgs, whose current turn starts
// at turn. The thread before the run is kept first, once per run, for the
// recording (Compacted.History). The request is rebuilt on a new array,
// so that recordRequest never takes it for the old one grown in place.
func (st *runState) rewriteThread(msgs []gateway.Message, turn int) {
	if st.clog == nil {
		st.clog = &Compacted{}
	}
	if st.clog.History == nil {
		st.clog.History = slices.Clip(st.saved[:st.turn:st.turn])
	}
	st.msgs, st.turn = msgs, turn
	st.saved = make([]SavedMessage, len(msgs), len(msgs)+4)
	for i, m := range msgs {
		st.saved[i] = saveMessage(m)
	}
	st.req, st.reqAgent = nil, nil
}

// Span attributes of a compaction.
const (
	// AttrCompactionTier is the tier that made the thread fit.
	AttrCompactionTier = attribute.Key("aid.compaction.tier")
	// AttrCompactionTokensBefore and AttrCompactionTokensAfter are the
	// request's estimated input tokens before and after.
	AttrCompactionTokensBefore = attribute.Key("aid.compaction.tokens_before")
	AttrCompactionTokensAfter  = attribute.Key("aid.compaction.tokens_after")
	// AttrCompactionCost is what the summary cost, in US dollars.
	AttrCompactionCost = attribute.Key("aid.compaction.cost_usd")
)

// startCompactionSpan opens the span of a compaction, the parent of its
// summary's chat span.
func (r *Runtime) startCompactionSpan(ctx context.Context, st *runState, in int64, c *compactor) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, noop.Span{}
	}
	return r.tracer.Start(ctx, "compact_thread "+st.agent.spec.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		AttrRunID.String(st.id), AttrCompactionTokensBefore.Int64(in), attribute.Int64("aid.compaction.trigger", c.trigger)))
}

// endCompactionSpan closes it with what the compaction did.
func endCompactionSpan(span trace.Span, rec *CompactionRecord, err error) {
	if span.IsRecording() {
		if rec != nil {
			span.SetAttributes(AttrCompactionTier.String(string(rec.Tier)), AttrCompactionTokensAfter.Int64(rec.TokensAfter), AttrCompactionCost.Float64(rec.CostUSD))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// checkCompaction compares a replayed compaction with the recorded one in
// its place: the next of the recording's, made before the same step, in
// the same tier, over the same messages, to the same size.
func (rp *replayer) checkCompaction(st *runState, rec *CompactionRecord) error {
	recorded := rp.rec.Run.Compactions
	i := 0
	if st.clog != nil {
		i = len(st.clog.Compactions)
	}
	div := Divergence{Kind: DivergeCompaction, Step: rec.Before, Depth: st.depth, Agent: st.agent.spec.Name}
	if i >= len(recorded) {
		div.Message = fmt.Sprintf("the replay compacts the thread before step %d (%s); the recording has %d compactions", rec.Before, rec.Tier, len(recorded))
		return rp.diverge(div)
	}
	w := recorded[i]
	if w.Agent != rec.Agent || w.Before != rec.Before || w.Tier != rec.Tier || w.Stubbed != rec.Stubbed || w.Summarised != rec.Summarised || w.TokensBefore != rec.TokensBefore || (rec.TokensAfter != 0 && w.TokensAfter != rec.TokensAfter) {
		div.Message = fmt.Sprintf("compaction %d differs: the replay's is %s, the recording's %s", i+1, describeCompaction(rec), describeCompaction(&w))
		return rp.diverge(div)
	}
	return nil
}

// compaction answers a compaction's summary call, in a replay, with the
// recorded summary in its place, after checking that the replay compacts
// as the recording did (checkCompaction).
func (rp *replayer) compaction(st *runState, rec *CompactionRecord, summarised int) (string, gateway.Result, error) {
	want := *rec
	want.Tier, want.Summarised = TierSummary, summarised
	if err := rp.checkCompaction(st, &want); err != nil {
		return "", gateway.Result{}, err
	}
	i := 0
	if st.clog != nil {
		i = len(st.clog.Compactions)
	}
	w := rp.rec.Run.Compactions[i]
	return w.Summary, gateway.Result{Text: w.Summary, Usage: w.Usage.Usage(), CostUSD: w.CostUSD, Alias: w.Alias, Model: w.Model}, nil
}

// missedCompaction is the divergence of a replay that ended with fewer
// compactions than the recording; nil when it made them all.
func (rp *replayer) missedCompaction(res RunResult) *Divergence {
	recorded := rp.rec.Run.Compactions
	if len(res.Compactions) >= len(recorded) {
		return nil
	}
	w := recorded[len(res.Compactions)]
	return &Divergence{Kind: DivergeCompaction, Step: w.Before, Agent: w.Agent,
		Message: fmt.Sprintf("the recording compacts the thread before step %d (%s); the replay does not", w.Before, describeCompaction(&w))}
}

// describeCompaction says what a compaction did, for a divergence.
func describeCompaction(c *CompactionRecord) string {
	return fmt.Sprintf("%s before step %d (%d results stubbed, %d messages summarised, %d → %d tokens)", c.Tier, c.Before, c.Stubbed, c.Summarised, c.TokensBefore, c.TokensAfter)
}
