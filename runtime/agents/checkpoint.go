package agents

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway"
)

// CheckpointVersion is the version of the checkpoint format this runtime
// writes and reads. It changes when a field changes meaning, so that an old
// checkpoint is refused with a *CheckpointVersionError rather than
// misread.
const CheckpointVersion = 1

// Checkpoint is a run's state between two steps: enough to continue it in
// this process or another. It serialises to JSON with stable field names.
type Checkpoint struct {
	// Version is CheckpointVersion at the time of writing.
	Version int `json:"version"`
	// RunID identifies the run.
	RunID string `json:"run_id"`
	// Agent is the agent the run is on.
	Agent string `json:"agent"`
	// Path lists the agents the conversation went through, the entry agent
	// first and Agent last.
	Path []string `json:"path"`
	// Alias is the current alias: the rung a resumed run continues on.
	Alias string `json:"alias"`
	// Degraded is true once the agent stepped down its ladder; it does not
	// step down twice.
	Degraded bool `json:"degraded,omitempty"`
	// ThreadID is the conversation thread, when the run has one.
	ThreadID string `json:"thread_id,omitempty"`
	// UserID is the user, when the run has one.
	UserID string `json:"user_id,omitempty"`
	// Key and Tenant are whom the run is for: the API key that started it
	// and that key's tenant (RunOptions.Caller); empty for a run no key
	// started. A resumed, continued or recovered run is driven as theirs.
	Key    string `json:"key,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Messages is the conversation without the system messages, which are
	// rebuilt from the agent at each call.
	Messages []SavedMessage `json:"messages"`
	// Turn is the index in Messages of the run's input, where the current
	// turn starts: thread trimming never drops it or what follows. A
	// checkpoint without it (written before it existed) keeps the whole
	// thread.
	Turn int `json:"turn,omitempty"`
	// Steps are the completed steps.
	Steps []StepRecord `json:"steps"`
	// AgentSteps counts the current agent's model calls, against its
	// MaxSteps.
	AgentSteps int `json:"agent_steps"`
	// StepLimit is the current agent's bound on AgentSteps once Continue
	// gave it a fresh allowance; zero means its MaxSteps. A transfer
	// resets it.
	StepLimit int `json:"step_limit,omitempty"`
	// Delegations counts the run's delegations, against MaxDelegations.
	Delegations int `json:"delegations,omitempty"`
	// Repaired is true once the structured-output repair attempt was
	// spent.
	Repaired bool `json:"repaired,omitempty"`
	// Usage is the run's usage so far.
	Usage UsageRecord `json:"usage"`
	// CostUSD is the run's cost so far.
	CostUSD float64 `json:"cost_usd"`
	// Pending is the step whose tool calls are in flight or wait for a
	// decision; nil between steps.
	Pending *Pending `json:"pending,omitempty"`
	// Continuations lists where the run was continued after stopping
	// early, oldest first.
	Continuations []Continuation `json:"continuations,omitempty"`
	// Client is what the client that started the run asked of it
	// (RunOptions.Client); nil for a run started without it.
	Client *ClientRequest `json:"client,omitempty"`
	// Cancel is the request that last cancelled the run (Runtime.Cancel):
	// who asked and when.
	Cancel *CancelRequest `json:"cancel,omitempty"`
	// App and AppVersion are the application the run started in
	// (Config.App, Config.AppVersion), for its event log.
	App        string `json:"app,omitempty"`
	AppVersion string `json:"app_version,omitempty"`
	// Grants are the grants people gave in this run: a tool for the rest
	// of the run, or for the thread (kept in the store too, for the
	// thread's later runs). A resumed or continued run honours them.
	Grants []Grant `json:"grants,omitempty"`
	// Verdicts are the verdicts of the run's hooks and guardrails that did
	// something, in order, delegated runs' included.
	Verdicts []VerdictRecord `json:"verdicts,omitempty"`
	// Compacted is what the run keeps of the compactions of its thread;
	// nil for a run without any. (One pointer, so that the checkpoint of
	// a run that never compacts, copied at every step, is no larger.)
	Compacted *Compacted `json:"compacted,omitempty"`
	// InputChecked is true once the input guardrails judged the run's
	// input, so that a run continued before its first step is not judged
	// twice.
	InputChecked bool `json:"input_checked,omitempty"`
}

// GrantScope says how far a person's approval reaches.
type GrantScope string

// The grant scopes.
const (
	// GrantCall approves the one call; the default.
	GrantCall GrantScope = "call"
	// GrantRun approves the call and every later call of the tool in the
	// run, that the policy would ask about.
	GrantRun GrantScope = "run"
	// GrantThread approves the call and every later call of the tool in
	// the run's thread, in this run and the thread's later runs.
	GrantThread GrantScope = "thread"
)

// Grant is a person's approval of a tool beyond one call: the calls of
// Tool that the approval policy would ask about run without asking, for
// the run (Scope run) or the thread (Scope thread). A denial is never
// granted away.
type Grant struct {
	// Tool is the tool granted.
	Tool string `json:"tool"`
	// Scope is run or thread.
	Scope GrantScope `json:"scope"`
	// By names who granted it (Decision.By); empty when unknown.
	By string `json:"by,omitempty"`
	// At is when.
	At time.Time `json:"at"`
	// RunID is the run it was given in.
	RunID string `json:"run_id"`
	// ThreadID is the thread, for a thread grant.
	ThreadID string `json:"thread_id,omitempty"`
}

func (g *Grant) checkThread() error {
	if g.ThreadID == "" {
		return fmt.Errorf("grant of %s in run %s: a thread grant needs a thread id", g.Tool, g.RunID)
	}
	return nil
}

// PolicyRecord is how the approval policy judged a call: what it decided,
// on what (a rule, the tool's approval, the default), why, when, and the
// grant that answered an ask in a person's place.
type PolicyRecord struct {
	// Action is allow, deny or ask.
	Action policy.Action `json:"action"`
	// Source is rule, tool or default.
	Source policy.Source `json:"source"`
	// Rule is the deciding rule's number, from 1, for Source rule.
	Rule int `json:"rule,omitempty"`
	// Reason is the rule's reason, or why its condition could not be
	// judged.
	Reason string `json:"reason,omitempty"`
	// At is when the call was judged.
	At time.Time `json:"at"`
	// Grant is the grant that let an asked call run without asking.
	Grant *Grant `json:"grant,omitempty"`
}

// Continuation records one Continue of a run: when, by whom, from which
// status and step, and with what allowance.
type Continuation struct {
	// At is when the run was continued.
	At time.Time `json:"at"`
	// By names who continued it (ContinueOptions.By); empty when unknown.
	By string `json:"by,omitempty"`
	// From is the status the run had stopped with.
	From Status `json:"from"`
	// AfterStep is the number of the run's last completed step then: the
	// continued run's first new step is numbered after it (a pending step
	// that stopped during its tool calls is completed first).
	AfterStep int `json:"after_step"`
	// Steps is the fresh allowance of model calls the agent got.
	Steps int `json:"steps"`
	// PendingStep is the number of the step the run had stopped in, during
	// its tool calls; zero when it stopped between steps.
	PendingStep int `json:"pending_step,omitempty"`
	// Interrupted lists the positions of that step's calls that had
	// started and were stopped before their result.
	Interrupted []int `json:"interrupted,omitempty"`
	// Timeout is the run timeout of the continued drive; zero means the
	// agent's.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// Pending is a step whose tool calls have not all been answered.
type Pending struct {
	// Step is the step, with the observations of its finished calls.
	Step StepRecord `json:"step"`
	// Next is the index of the call waiting for a decision.
	Next int `json:"next"`
	// Reason says why the run waits: approval or interrupted; empty while
	// the calls run.
	Reason PauseReason `json:"reason,omitempty"`
}

// Call returns the call waiting for a decision, if any.
func (p *Pending) Call() (ToolCallRecord, bool) {
	if p == nil || p.Reason == "" || p.Next >= len(p.Step.ToolCalls) {
		return ToolCallRecord{}, false
	}
	return p.Step.ToolCalls[p.Next], true
}

// PauseReason says why a run waits for a decision.
type PauseReason string

// The pause reasons.
const (
	// PauseApproval is a call of a tool with ApprovalAlways.
	PauseApproval PauseReason = "approval"
	// PauseInterrupted is a write call whose process died after recording
	// it and before its result: it may or may not have happened, so a
	// human decides whether to run it again.
	PauseInterrupted PauseReason = "interrupted"
)

// SavedMessage is a conversation message in a checkpoint.
type SavedMessage struct {
	// Role says who wrote the message.
	Role gateway.Role `json:"role"`
	// Content is the message's text.
	Content string `json:"content,omitempty"`
	// ToolCalls are an assistant message's calls.
	ToolCalls []SavedToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to its call.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Name names the participant or the tool.
	Name string `json:"name,omitempty"`
	// Failed marks a tool message whose call failed (gateway.Message.Failed).
	Failed bool `json:"failed,omitempty"`
	// Reasoning is the provider's opaque state kept with an assistant
	// message (gateway.Message.Reasoning), so that a run continued from
	// the checkpoint sends it back as the uninterrupted run would.
	Reasoning json.RawMessage `json:"reasoning,omitempty"`
}

// SavedToolCall is a tool call in a checkpoint. Arguments are kept as text,
// because a model may write arguments that are not valid JSON and the
// checkpoint must still serialise.
type SavedToolCall struct {
	// ID is the model's id for the call.
	ID string `json:"id"`
	// Name is the tool called.
	Name string `json:"name"`
	// Arguments is the arguments as the model wrote them.
	Arguments string `json:"arguments"`
}

// UsageRecord is token usage in a checkpoint or a step.
type UsageRecord struct {
	// InputTokens counts prompts, cache reads and writes included.
	InputTokens int64 `json:"input_tokens"`
	// CacheReadTokens is the part of InputTokens the provider read from
	// its prompt cache, billed at the cached-input price.
	CacheReadTokens int64 `json:"cache_read_tokens,omitempty"`
	// CacheWrite5mTokens is the part of InputTokens written to the prompt
	// cache with a five-minute lifetime, billed at its write price.
	CacheWrite5mTokens int64 `json:"cache_write_5m_tokens,omitempty"`
	// CacheWrite1hTokens is the part of InputTokens written to the prompt
	// cache with a one-hour lifetime, billed at its write price.
	CacheWrite1hTokens int64 `json:"cache_write_1h_tokens,omitempty"`
	// OutputTokens counts answers.
	OutputTokens int64 `json:"output_tokens"`
	// TotalTokens is their sum.
	TotalTokens int64 `json:"total_tokens"`
}

func usageRecord(u gateway.Usage) UsageRecord {
	total := u.TotalTokens
	if total == 0 {
		total = u.InputTokens + u.OutputTokens
	}
	return UsageRecord{
		InputTokens: u.InputTokens, CacheReadTokens: u.CachedInputTokens,
		CacheWrite5mTokens: u.CacheWrite5mInputTokens, CacheWrite1hTokens: u.CacheWrite1hInputTokens,
		OutputTokens: u.OutputTokens, TotalTokens: total,
	}
}

func (u UsageRecord) add(v UsageRecord) UsageRecord {
	return UsageRecord{
		InputTokens: u.InputTokens + v.InputTokens, CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens,
		CacheWrite5mTokens: u.CacheWrite5mTokens + v.CacheWrite5mTokens, CacheWrite1hTokens: u.CacheWrite1hTokens + v.CacheWrite1hTokens,
		OutputTokens: u.OutputTokens + v.OutputTokens, TotalTokens: u.TotalTokens + v.TotalTokens,
	}
}

// Usage returns the usage as the gateway counts it.
func (u UsageRecord) Usage() gateway.Usage {
	return gateway.Usage{
		InputTokens: u.InputTokens, CachedInputTokens: u.CacheReadTokens,
		CacheWrite5mInputTokens: u.CacheWrite5mTokens, CacheWrite1hInputTokens: u.CacheWrite1hTokens,
		OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
	}
}

// StepRecord is one model call of a run and the tool calls it asked for.
type StepRecord struct {
	// Number counts the run's steps from 1.
	Number int `json:"number"`
	// Agent is the agent that made the call.
	Agent string `json:"agent"`
	// Alias is the alias that answered.
	Alias string `json:"alias"`
	// Requested is the alias asked for; it differs from Alias when the
	// gateway fell back.
	Requested string `json:"requested"`
	// Model is the pinned model id that answered.
	Model string `json:"model"`
	// DegradedFrom is the rung the agent stepped down from for this call,
	// after a budget breach; empty otherwise.
	DegradedFrom string `json:"degraded_from,omitempty"`
	// Text is the model's text.
	Text string `json:"text,omitempty"`
	// Request is the request the model answered, as a replay compares
	// it; nil for steps recorded before requests were.
	Request *RequestRecord `json:"request,omitempty"`
	// Usage is the call's usage.
	Usage UsageRecord `json:"usage"`
	// CostUSD is the call's price.
	CostUSD float64 `json:"cost_usd"`
	// ToolCalls are the calls the model asked for, with their observations,
	// in the model's order.
	ToolCalls []ToolCallRecord `json:"tool_calls,omitempty"`
	// Truncated is true when the answer was cut by its output bound
	// (ClientRequest.MaxOutputTokens, or the model's).
	Truncated bool `json:"truncated,omitempty"`
}

// ToolCallRecord is one tool call and its observation.
type ToolCallRecord struct {
	// ID is the model's id for the call.
	ID string `json:"id"`
	// Name is the tool called.
	Name string `json:"name"`
	// Arguments is the arguments as run (edited ones after an approval
	// with edits).
	Arguments string `json:"arguments"`
	// Done is true once the call has its observation.
	Done bool `json:"done,omitempty"`
	// Interrupted is true for a call that started and was stopped before
	// its result (a timeout, a cancellation, a shutdown): it is recorded
	// without a result, never as done. Continue and Drive run an
	// interrupted read again and ask a person about an interrupted write,
	// which may or may not have happened.
	Interrupted bool `json:"interrupted,omitempty"`
	// Observation is what the model was told.
	Observation string `json:"observation,omitempty"`
	// ErrorKind classifies a failed call; empty on success.
	ErrorKind ErrorKind `json:"error_kind,omitempty"`
	// Policy is how the approval policy judged the call; nil for calls
	// it does not govern (handoffs, delegations, searches), calls of a
	// tool it has nothing to decide about (no rule matches the tool, it
	// has no approval of its own, and the default allows: the call is
	// allowed), calls that were never judged (invalid arguments, not
	// run), and runs recorded before policies.
	Policy *PolicyRecord `json:"policy,omitempty"`
	// Approval is the human decision on the call, when it needed one.
	Approval *ApprovalRecord `json:"approval,omitempty"`
	// Delegate is the delegated run, for a delegate_to_ call.
	Delegate *DelegateRecord `json:"delegate,omitempty"`
	// Client is true for a call of a client tool (ClientRequest.Tools),
	// which ended the run for the client to run it: it has no
	// observation in this run.
	Client bool `json:"client,omitempty"`
}

// ErrorKind classifies a tool call that did not produce a normal
// observation. The model is told the error as the observation; the kind is
// for callers and tests.
type ErrorKind string

// The error kinds of tool calls.
const (
	// KindUnknownTool is a call of a tool the agent does not offer.
	KindUnknownTool ErrorKind = "unknown_tool"
	// KindInvalidArguments is a call whose arguments do not match the
	// tool's schema, or are not JSON.
	KindInvalidArguments ErrorKind = "invalid_arguments"
	// KindTimeout is a call that ran out of its tool's timeout.
	KindTimeout ErrorKind = "timeout"
	// KindToolFailed is a call whose implementation returned an error or
	// panicked.
	KindToolFailed ErrorKind = "tool_error"
	// KindRejected is a call a human rejected.
	KindRejected ErrorKind = "rejected"
	// KindDenied is a call the approval policy denied; the observation
	// says which rule and why.
	KindDenied ErrorKind = "denied"
	// KindReentry is a transfer or delegation to an agent on the path.
	KindReentry ErrorKind = "reentry"
	// KindDelegationLimit is a delegation beyond the depth or count bound.
	KindDelegationLimit ErrorKind = "delegation_limit"
	// KindDelegateFailed is a delegated run that ended without an answer.
	KindDelegateFailed ErrorKind = "delegate_failed"
	// KindNotRun is a call after a transfer in the same answer: the
	// conversation had already moved on.
	KindNotRun ErrorKind = "not_run"
	// KindInterrupted marks, in a span, a call stopped before its result
	// by a timeout, a cancellation or a shutdown; the call itself is
	// recorded without a result (ToolCallRecord.Interrupted), not with
	// this kind.
	KindInterrupted ErrorKind = "interrupted"
	// KindBudgetExceeded is a search_ call whose embedding the budget
	// refused, by an agent that degrades rather than fail (see Searcher):
	// the run goes on without the passages.
	KindBudgetExceeded ErrorKind = "budget_exceeded"
)

// ApprovalRecord is a human decision on a call.
type ApprovalRecord struct {
	// Approved says whether the call may run.
	Approved bool `json:"approved"`
	// By names who decided (Decision.By); empty when unknown.
	By string `json:"by,omitempty"`
	// ClaimedBy is who the decision's sender said decided
	// (Decision.ClaimedBy), kept apart from By when By comes from an
	// authenticated key.
	ClaimedBy string `json:"claimed_by,omitempty"`
	// At is when.
	At time.Time `json:"at,omitzero"`
	// Scope is how far an approval reaches: the call, the tool for the
	// run, or the tool for the thread.
	Scope GrantScope `json:"scope,omitempty"`
	// Feedback is the human's note, shown to the model on rejection.
	Feedback string `json:"feedback,omitempty"`
	// OriginalArguments holds the model's arguments when the human edited
	// them.
	OriginalArguments string `json:"original_arguments,omitempty"`
}

// DelegateRecord is the run of a delegated agent.
type DelegateRecord struct {
	// Agent is the delegated agent (the last one, if it transferred).
	Agent string `json:"agent"`
	// Status is how the delegated run ended.
	Status Status `json:"status"`
	// Steps are its steps.
	Steps []StepRecord `json:"steps"`
	// Usage is its usage.
	Usage UsageRecord `json:"usage"`
	// CostUSD is its cost.
	CostUSD float64 `json:"cost_usd"`
}

// MarshalCheckpoint encodes a checkpoint as JSON, as encoding/json would,
// faster.
func MarshalCheckpoint(cp Checkpoint) ([]byte, error) {
	return encodeCheckpoint(&cp)
}

// UnmarshalCheckpoint decodes a checkpoint from JSON, refusing a version
// this runtime does not read and a checkpoint without a run id or agent.
func UnmarshalCheckpoint(data []byte) (Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return Checkpoint{}, fmt.Errorf("decode checkpoint: %w", err)
	}
	if err := cp.check(); err != nil {
		return Checkpoint{}, err
	}
	return cp, nil
}

// check refuses a checkpoint that cannot be resumed whatever the runtime.
func (cp *Checkpoint) check() error {
	if cp.Version != CheckpointVersion {
		return &CheckpointVersionError{Got: cp.Version, Want: CheckpointVersion}
	}
	switch {
	case cp.RunID == "":
		return fmt.Errorf("checkpoint has no run id")
	case cp.Agent == "":
		return fmt.Errorf("checkpoint of run %s has no agent", cp.RunID)
	case cp.Alias == "":
		return fmt.Errorf("checkpoint of run %s has no alias", cp.RunID)
	case len(cp.Path) == 0 || cp.Path[len(cp.Path)-1] != cp.Agent:
		return fmt.Errorf("checkpoint of run %s: path %v does not end with agent %q", cp.RunID, cp.Path, cp.Agent)
	}
	if cp.Turn < 0 || (cp.Turn > 0 && cp.Turn >= len(cp.Messages)) {
		return fmt.Errorf("checkpoint of run %s: turn %d is not one of its %d messages", cp.RunID, cp.Turn, len(cp.Messages))
	}
	if p := cp.Pending; p != nil && (p.Next < 0 || p.Next > len(p.Step.ToolCalls)) {
		return fmt.Errorf("checkpoint of run %s: pending call %d out of range", cp.RunID, p.Next)
	}
	return nil
}

func saveMessage(m gateway.Message) SavedMessage {
	s := SavedMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name, Failed: m.Failed, Reasoning: m.Reasoning}
	if len(m.ToolCalls) > 0 {
		s.ToolCalls = make([]SavedToolCall, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			s.ToolCalls[i] = SavedToolCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)}
		}
	}
	return s
}

// Message returns the message s saves, as a run's history takes it.
func (s SavedMessage) Message() gateway.Message { return loadMessage(s) }

func loadMessage(s SavedMessage) gateway.Message {
	m := gateway.Message{Role: s.Role, Content: s.Content, ToolCallID: s.ToolCallID, Name: s.Name, Failed: s.Failed, Reasoning: s.Reasoning}
	if len(s.ToolCalls) > 0 {
		m.ToolCalls = make([]gateway.ToolCall, len(s.ToolCalls))
		for i, c := range s.ToolCalls {
			m.ToolCalls[i] = gateway.ToolCall{ID: c.ID, Name: c.Name, Arguments: json.RawMessage(c.Arguments)}
		}
	}
	return m
}
