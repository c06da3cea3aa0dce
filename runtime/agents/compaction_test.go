package agents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
)

// The thread of the compaction tests: an 8k-token model answering, a
// cheaper model with a larger window summarising.
const (
	threadWindow    = 8192
	threadMaxOutput = 512
	threadTurns     = 300
	plantedFacts    = 50
)

func compactionCatalog() []gateway.PinnedModel {
	caps := []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON}
	return []gateway.PinnedModel{
		{Alias: "chat", Spec: gateway.ModelSpec{ID: "m-8k", Provider: "fake", ContextWindow: threadWindow, MaxOutputTokens: threadMaxOutput, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}},
		{Alias: "summ", Spec: gateway.ModelSpec{ID: "m-summ", Provider: "fake", ContextWindow: 16000, MaxOutputTokens: 2000, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.0005, OutputPer1kUSD: 0.001}}},
	}
}

// fact is the fact planted in its turn: a line the conversation marks as
// one to keep (fake.DefaultSummaryKeep).
func fact(i int) string {
	return fmt.Sprintf("FACT: the code of locker %d is L%05d.", i, (i*7919+13)%100000)
}

// turnInput is the user's message of turn i (from 1): a fact in turns 3
// to 52, and a request that makes the agent look something up.
func turnInput(i int) string {
	var b strings.Builder
	if j := i - 2; j >= 1 && j <= plantedFacts {
		b.WriteString(fact(j) + "\n")
	}
	fmt.Fprintf(&b, "Turn %d: please look up order %d and tell me where it stands. %s", i, 1000+i, strings.Repeat("Some more words about it. ", 12))
	return b.String()
}

// thread is one scripted 300-turn conversation on agent "desk".
type thread struct {
	gw      *gateway.Gateway
	fake    *fake.Provider
	cfg     agents.Config
	rt      *agents.Runtime
	results []agents.RunResult
}

// runThread plays the thread, the agent declaring compaction or, as today,
// trimming its thread to the same number of tokens its requests may hold.
func runThread(t *testing.T, compact bool) *thread {
	t.Helper()
	p, err := fake.New(fake.Config{Record: true, Agents: map[string][]fake.Step{
		"desk": {calls(call("", "lookup", `{"id":"x"}`)), answer("It is on its way.")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	budget := gateway.Budget{Name: "per-thread", MaxUSD: 100, Scope: gateway.ScopeThread}
	gw, err := gateway.New(gateway.Config{Models: compactionCatalog(), Providers: map[string]gateway.Provider{"fake": p}, Budgets: []gateway.Budget{budget}, Retry: gateway.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	agent := agents.Agent{Name: "desk", Model: "chat", Instructions: "You answer questions about orders.", Tools: []string{"lookup"}, Budget: "per-thread", MaxSteps: 4}
	limit := threadWindow - threadMaxOutput
	if compact {
		agent.Compaction = &agents.Compaction{Model: "summ", KeepTurns: 3}
	} else {
		agent.Memory = &agents.Memory{ThreadTokenBudget: limit - limit/10}
	}
	body := strings.Repeat("order line: shipped from the warehouse, tracking pending; ", 24)
	cfg := agents.Config{
		Gateway: gw, Agents: []agents.Agent{agent}, Budgets: []gateway.Budget{budget},
		Tools:           []agents.Tool{{Name: "lookup", Description: "Looks an order up."}},
		Implementations: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return body, nil })},
	}
	th := &thread{gw: gw, fake: p, cfg: cfg, rt: newRuntime(t, cfg)}
	var history []gateway.Message
	for i := 1; i <= threadTurns; i++ {
		input := turnInput(i)
		if i == threadTurns {
			input = "Which locker codes have I told you?"
		}
		res, err := th.rt.Run(t.Context(), "desk", input, agents.RunOptions{ThreadID: "thread-1", History: history})
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		th.results = append(th.results, res)
		history = res.Messages
	}
	return th
}

// recall is the share of the planted facts the last request of the
// thread holds: what the model answering the question at turn 300 reads.
func (th *thread) recall(t *testing.T) float64 {
	t.Helper()
	reqs := th.fake.Requests()
	last := reqs[len(reqs)-1]
	var text strings.Builder
	for _, m := range last.Messages {
		text.WriteString(m.Content + "\n")
	}
	found := 0
	for j := 1; j <= plantedFacts; j++ {
		if strings.Contains(text.String(), fact(j)) {
			found++
		}
	}
	return float64(found) / plantedFacts
}

// TestCompactionLongThread plays 300 turns on an 8k-token model: every
// request stays within the window, every compaction is on the ledger and
// in the run's record, each run replays identically without a model call,
// and the facts planted early are still in the request at turn 300 —
// against today's trimming, which lost them.
func TestCompactionLongThread(t *testing.T) {
	th := runThread(t, true)
	trimmed := runThread(t, false)

	// Every request within the window; the summaries on the summary model;
	// the prefix a provider caches rewritten only by a compaction: every
	// other request repeats the one before it whole and adds to it.
	summaryCalls, rewrites := 0, 0
	var prev []gateway.Message
	for i, req := range th.fake.Requests() {
		in := gateway.EstimateInputTokens(req)
		if len(req.Messages) > 0 && req.Messages[0].Content == agents.DefaultSummaryInstructions {
			summaryCalls++
			continue
		}
		if in+threadMaxOutput > threadWindow {
			t.Fatalf("request %d holds %d input tokens: with %d output, more than the %d-token window", i, in, threadMaxOutput, threadWindow)
		}
		if len(req.Messages) < len(prev) || !samePrefix(prev, req.Messages[:len(prev)]) {
			rewrites++
		}
		prev = req.Messages
	}

	// Every compaction in the record, and the run's cost includes it.
	var tiers = map[agents.CompactionTier]int{}
	var compactionUSD, runsUSD float64
	steps := 0
	for i, res := range th.results {
		runsUSD += res.CostUSD
		steps += len(res.Steps)
		rec, err := th.rt.Store().LoadRun(t.Context(), res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		var stored []agents.CompactionRecord
		if c := rec.Checkpoint.Compacted; c != nil {
			stored = c.Compactions
		}
		if len(stored) != len(res.Compactions) {
			t.Fatalf("turn %d: the record holds %d compactions, the result %d", i+1, len(stored), len(res.Compactions))
		}
		for _, c := range res.Compactions {
			tiers[c.Tier]++
			compactionUSD += c.CostUSD
			if c.TokensAfter > c.Trigger && c.TokensAfter+threadMaxOutput > threadWindow {
				t.Fatalf("turn %d: compaction left %d tokens", i+1, c.TokensAfter)
			}
			if c.Tier == agents.TierSummary && (c.CostUSD <= 0 || c.Alias != "summ" || c.Summary == "") {
				t.Fatalf("turn %d: summary compaction %+v is not priced on the summary model", i+1, c)
			}
		}
	}
	if n := tiers[agents.TierToolResults] + tiers[agents.TierSummary]; rewrites != n {
		t.Fatalf("the requests' prefix was rewritten %d times, by %d compactions", rewrites, n)
	}
	if tiers[agents.TierToolResults] == 0 || tiers[agents.TierSummary] == 0 {
		t.Fatalf("compactions by tier %v: want both tiers", tiers)
	}
	if summaryCalls != tiers[agents.TierSummary] {
		t.Fatalf("%d summary calls, %d summary compactions", summaryCalls, tiers[agents.TierSummary])
	}

	// On the ledger: a call per step and per summary, the summaries on the
	// summary model's alias, the whole equal to what the runs cost.
	spend, err := th.gw.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(steps + summaryCalls); spend.Calls != want {
		t.Fatalf("ledger holds %d calls, want %d steps and %d summaries", spend.Calls, steps, summaryCalls)
	}
	var summNano int64
	for _, a := range spend.ByAlias {
		if a.Name == "summ" {
			summNano = a.Spent.NanoUSD
			if a.Calls != int64(summaryCalls) {
				t.Fatalf("ledger holds %d calls on the summary alias, want %d", a.Calls, summaryCalls)
			}
		}
	}
	if d := math.Abs(float64(summNano)/1e9 - compactionUSD); d > 1e-9*float64(summaryCalls+1) {
		t.Fatalf("ledger charged %d nano-USD to summaries, the records say $%.9f", summNano, compactionUSD)
	}
	if d := math.Abs(float64(spend.Total.NanoUSD)/1e9 - runsUSD); d > 1e-9*float64(spend.Calls+1) {
		t.Fatalf("ledger total %d nano-USD, the runs cost $%.9f", spend.Total.NanoUSD, runsUSD)
	}

	// The summary is kept with the thread: the next run starts from it.
	if last := th.results[len(th.results)-1].Messages; !strings.HasPrefix(last[0].Content, agents.SummaryPrefix) {
		t.Fatalf("the thread after turn %d starts with %.80q, not a summary", threadTurns, last[0].Content)
	}

	// Each run replays from its record, identically, with no model call.
	calls := th.fake.Calls()
	replayed := 0
	for i, res := range th.results {
		if len(res.Compactions) == 0 && i%10 != 0 {
			continue // every run with a compaction, and some without
		}
		rep := replayRun(t, th, res.RunID)
		if rep.Divergence != nil {
			t.Fatalf("turn %d: replay diverged: %+v", i+1, *rep.Divergence)
		}
		replayed++
	}
	if th.fake.Calls() != calls {
		t.Fatalf("the replays made %d model calls", th.fake.Calls()-calls)
	}

	with, without := th.recall(t), trimmed.recall(t)
	t.Logf("%d turns on a %d-token window: %d steps, %d compactions (%d dropping tool results, %d summaries costing $%.6f), %d runs replayed identically", threadTurns, threadWindow, steps, tiers[agents.TierToolResults]+tiers[agents.TierSummary], tiers[agents.TierToolResults], tiers[agents.TierSummary], compactionUSD, replayed)
	t.Logf("recall of %d facts planted in turns 3-%d, asked at turn %d: %.2f with compaction, %.2f with trimming", plantedFacts, plantedFacts+2, threadTurns, with, without)
	if with < 0.9 {
		t.Errorf("recall with compaction %.2f, want at least 0.9", with)
	}
	if without > 0.5 {
		t.Errorf("recall with trimming %.2f, want at most 0.5", without)
	}
}

// samePrefix reports whether two lists of messages are equal.
func samePrefix(a, b []gateway.Message) bool {
	for i := range a {
		x, y := a[i], b[i]
		if x.Role != y.Role || x.Content != y.Content || x.ToolCallID != y.ToolCallID || len(x.ToolCalls) != len(y.ToolCalls) {
			return false
		}
	}
	return true
}

// recordingOf writes the event log of a stored run of the thread and
// reads it back.
func recordingOf(t *testing.T, th *thread, runID string) *agents.Recording {
	t.Helper()
	rec, err := th.rt.Store().LoadRun(t.Context(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := agents.Record(&log, rec, "", "", ""); err != nil {
		t.Fatal(err)
	}
	recording, err := agents.ReadRecording(&log)
	if err != nil {
		t.Fatal(err)
	}
	return recording
}

// replayRun replays a stored run of the thread from its event log.
func replayRun(t *testing.T, th *thread, runID string) *agents.ReplayReport {
	t.Helper()
	rep, err := agents.Replay(t.Context(), th.cfg, recordingOf(t, th, runID))
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestCompactionReplayDiverges checks that a replay compares compactions:
// a recording whose summary was made before another step diverges.
func TestCompactionReplayDiverges(t *testing.T) {
	th := runThreadTurns(t, 40)
	var runID string
	for _, res := range th.results {
		if len(res.Compactions) > 0 {
			runID = res.RunID
		}
	}
	if runID == "" {
		t.Fatal("no run compacted")
	}
	recording := recordingOf(t, th, runID)
	recording.Run.Compactions[0].Before++
	rep, err := agents.Replay(t.Context(), th.cfg, recording)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Divergence == nil || rep.Divergence.Kind != agents.DivergeCompaction {
		t.Fatalf("divergence %+v, want a compaction divergence", rep.Divergence)
	}
	recording.Run.Compactions = nil
	if rep, _ = agents.Replay(t.Context(), th.cfg, recording); rep.Divergence == nil || rep.Divergence.Kind != agents.DivergeCompaction {
		t.Fatalf("divergence %+v of a recording without its compactions, want a compaction divergence", rep.Divergence)
	}
}

// runThreadTurns plays the first n turns of the compacting thread.
func runThreadTurns(t *testing.T, n int) *thread {
	t.Helper()
	return runTracedThread(t, n, nil, nil)
}

// runTracedThread is runThreadTurns with a tracer provider and an event
// hook, either nil.
func runTracedThread(t *testing.T, n int, tp *sdktrace.TracerProvider, onEvent func(agents.Event)) *thread {
	t.Helper()
	p, err := fake.New(fake.Config{Record: true, Agents: map[string][]fake.Step{
		"desk": {calls(call("", "lookup", `{"id":"x"}`)), answer("It is on its way.")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gcfg := gateway.Config{Models: compactionCatalog(), Providers: map[string]gateway.Provider{"fake": p}, Retry: gateway.RetryPolicy{MaxAttempts: 1}}
	if tp != nil {
		gcfg.Tracer = tp.Tracer("gateway")
	}
	gw, err := gateway.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("order line: shipped from the warehouse, tracking pending; ", 24)
	cfg := agents.Config{
		Gateway: gw,
		Agents:  []agents.Agent{{Name: "desk", Model: "chat", Instructions: "You answer questions about orders.", Tools: []string{"lookup"}, Compaction: &agents.Compaction{Model: "summ", KeepTurns: 2}}},
		Tools:   []agents.Tool{{Name: "lookup", Description: "Looks an order up."}},
		Implementations: map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return body, nil
		})},
	}
	if tp != nil {
		cfg.Tracer = tp.Tracer("agents")
	}
	th := &thread{gw: gw, fake: p, cfg: cfg, rt: newRuntime(t, cfg)}
	var history []gateway.Message
	for i := 1; i <= n; i++ {
		res := mustRun(t, th.rt, "desk", turnInput(i), agents.RunOptions{History: history, OnEvent: onEvent})
		th.results = append(th.results, res)
		history = res.Messages
	}
	return th
}

// TestCompactionOverflow checks that a turn too long to fit even after
// compaction stops the run with a typed error before any call.
func TestCompactionOverflow(t *testing.T) {
	th := runThreadTurns(t, 3)
	calls := th.fake.Calls()
	huge := strings.Repeat("word ", threadWindow) // about 1.25 tokens a word
	_, err := th.rt.Run(t.Context(), "desk", huge, agents.RunOptions{History: th.results[2].Messages})
	var oe *agents.ContextOverflowError
	if !errors.As(err, &oe) {
		t.Fatalf("run error %v, want a *ContextOverflowError", err)
	}
	if oe.Agent != "desk" || oe.Limit != threadWindow-threadMaxOutput || oe.InputTokens <= oe.Limit {
		t.Fatalf("error %+v", oe)
	}
	if th.fake.Calls() != calls {
		t.Fatal("a call was made for a turn that cannot fit")
	}
}

// TestCompactionRules checks what New refuses of a compaction policy.
func TestCompactionRules(t *testing.T) {
	f := newFixture(t, fake.Config{})
	for _, tc := range []struct {
		name string
		a    agents.Agent
		want string
	}{
		{"unknown model", agents.Agent{Name: "a", Model: "small", Instructions: "x", Compaction: &agents.Compaction{Model: "nope"}}, `model "nope" is not an alias of a chat model`},
		{"trigger above the window", agents.Agent{Name: "a", Model: "small", Instructions: "x", Compaction: &agents.Compaction{Model: "small", Trigger: 9000}}, "lower it to at most 7900"},
		{"with trimming", agents.Agent{Name: "a", Model: "small", Instructions: "x", Memory: &agents.Memory{ThreadTokenBudget: 100}, Compaction: &agents.Compaction{Model: "small"}}, "both bound the thread"},
		{"summary longer than the model answers", agents.Agent{Name: "a", Model: "small", Instructions: "x", Compaction: &agents.Compaction{Model: "small", SummaryTokens: 500}}, "summaryTokens 500 is more than the 100 output tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agents.New(agents.Config{Gateway: f.gw, Agents: []agents.Agent{tc.a}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestCompactionTracedAndReported checks that a compaction has a span of
// its own, the parent of its summary's chat span, and an event before the
// model call of the step it made fit.
func TestCompactionTracedAndReported(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var events []agents.Event
	th := runTracedThread(t, 40, tp, func(e agents.Event) {
		if e.Kind == agents.EventCompaction || e.Kind == agents.EventModelCall {
			events = append(events, e)
		}
	})
	var compactions []agents.CompactionRecord
	for _, res := range th.results {
		compactions = append(compactions, res.Compactions...)
	}
	var spans, summaries []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "compact_thread desk" {
			spans = append(spans, s)
		}
	}
	for _, s := range rec.Ended() {
		for _, c := range spans {
			if s.Parent().SpanID() == c.SpanContext().SpanID() {
				summaries = append(summaries, s)
			}
		}
	}
	summaryTier := 0
	for _, c := range compactions {
		if c.Tier == agents.TierSummary {
			summaryTier++
		}
	}
	if len(compactions) == 0 || len(spans) != len(compactions) || len(summaries) != summaryTier {
		t.Fatalf("%d compactions (%d summaries), %d compaction spans, %d spans under them", len(compactions), summaryTier, len(spans), len(summaries))
	}
	if v, ok := attr(spans[0], string(agents.AttrCompactionTier)); !ok || v.AsString() != string(compactions[0].Tier) {
		t.Fatalf("first compaction span's tier %v, want %s", v, compactions[0].Tier)
	}
	n := 0
	for i, e := range events {
		if e.Kind != agents.EventCompaction {
			continue
		}
		if e.Compaction == nil || *e.Compaction != compactions[n] || i+1 >= len(events) || events[i+1].Kind != agents.EventModelCall || events[i+1].Step != e.Step {
			t.Fatalf("compaction event %d: %+v, then %+v", n, e, events[min(i+1, len(events)-1)])
		}
		n++
	}
	if n != len(compactions) {
		t.Fatalf("%d compaction events, %d compactions", n, len(compactions))
	}
}

// TestCompactionBudget checks that a summary is charged to the agent's
// budget before it is made: a summary the run's budget cannot pay stops the
// run as budget_exceeded, the summary never asked for.
func TestCompactionBudget(t *testing.T) {
	p, err := fake.New(fake.Config{Record: true, Agents: map[string][]fake.Step{"desk": {answer("Noted.")}}})
	if err != nil {
		t.Fatal(err)
	}
	models := compactionCatalog()
	models[1].Spec.Cost = gateway.CostProfile{InputPer1kUSD: 10, OutputPer1kUSD: 10} // a summary no run budget pays
	budget := gateway.Budget{Name: "per-run", MaxUSD: 0.5, Scope: gateway.ScopeRun}
	gw, err := gateway.New(gateway.Config{Models: models, Providers: map[string]gateway.Provider{"fake": p}, Budgets: []gateway.Budget{budget}, Retry: gateway.RetryPolicy{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, agents.Config{Gateway: gw, Budgets: []gateway.Budget{budget}, Agents: []agents.Agent{{
		Name: "desk", Model: "chat", Instructions: "Take notes.", Budget: "per-run", Compaction: &agents.Compaction{Model: "summ", KeepTurns: 1},
	}}})
	var history []gateway.Message
	for i := 1; i <= 100; i++ {
		res, err := rt.Run(t.Context(), "desk", turnInput(i), agents.RunOptions{History: history})
		if err == nil {
			history = res.Messages
			continue
		}
		var be *agents.BudgetExceededError
		if res.Status != agents.StatusBudgetExceeded || !errors.As(err, &be) || be.Alias != "summ" {
			t.Fatalf("turn %d: %s, %v; want budget_exceeded on the summary", i, res.Status, err)
		}
		for _, req := range p.Requests() {
			if req.Messages[0].Content == agents.DefaultSummaryInstructions {
				t.Fatal("the summary the budget refused was asked for")
			}
		}
		return
	}
	t.Fatal("100 turns and no compaction")
}
