package agents

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/rules"
)

// Effects says whether a tool only reads or also changes the world. It
// decides whether calls may run concurrently and whether an interrupted call
// may be re-run after a crash.
type Effects string

// The tool effects.
const (
	// EffectsRead is a tool without side effects; the default.
	EffectsRead Effects = "read"
	// EffectsWrite is a tool that changes something outside the run.
	EffectsWrite Effects = "write"
)

// Approval is a tool's approval shorthand: what the approval policy
// (Config.Approvals) decides about the tool's calls that none of its rules
// decides.
type Approval string

// The approval shorthands.
const (
	// ApprovalNever runs the calls without asking.
	ApprovalNever Approval = policy.ShorthandNever
	// ApprovalAlways pauses the run before each call until Resume brings a
	// decision.
	ApprovalAlways Approval = policy.ShorthandAlways
)

// OnBudgetExhausted says what a budget breach does to an agent's run.
type OnBudgetExhausted string

// The budget breach policies.
const (
	// BudgetFail stops the run with status budget_exceeded; the default.
	BudgetFail OnBudgetExhausted = "fail"
	// BudgetDegrade steps exactly one rung down the agent's ladder and tries
	// the same call once more; a second breach stops the run.
	BudgetDegrade OnBudgetExhausted = "degrade"
)

// The prefixes of the tools the runtime offers the model for an agent's
// handoffs, delegates and retrievers (runtime/rules): a declared tool an
// agent lists may not take the name of one of them.
const (
	// TransferPrefix names a handoff tool: transfer_to_<agent>.
	TransferPrefix = rules.TransferPrefix
	// DelegatePrefix names a delegation tool: delegate_to_<agent>.
	DelegatePrefix = rules.DelegatePrefix
	// SearchPrefix names a retriever tool: search_<retriever>.
	SearchPrefix = rules.SearchPrefix
)

// Defaults applied to zero fields of Config, Agent and Tool.
const (
	// DefaultMaxSteps bounds an agent's model calls, as in the schema.
	DefaultMaxSteps = 8
	// DefaultToolTimeout bounds one tool call, as in the schema.
	DefaultToolTimeout = 30 * time.Second
	// DefaultMaxParallelTools bounds concurrent read calls of one answer.
	DefaultMaxParallelTools = 4
	// DefaultMaxDelegationDepth bounds how deep delegations nest.
	DefaultMaxDelegationDepth = 2
	// DefaultMaxDelegations bounds the delegations of one run.
	DefaultMaxDelegations = 8
	// DefaultMemoryTokenBudget bounds injected user or global memory, as
	// in the schema.
	DefaultMemoryTokenBudget = 1000
)

// Config is everything a Runtime is built from: the IR-free description of
// an application's agents and tools. Teams that do not use the IR fill it by
// hand, like gateway.Config; aidgen and generated services fill it from an
// app file.
type Config struct {
	// Gateway is the door to the models; required.
	Gateway *gateway.Gateway
	// Agents are the agents runs may start with or reach.
	Agents []Agent
	// Tools declares the tools agents may call.
	Tools []Tool
	// Implementations holds the code behind each tool, by tool name. Every
	// tool an agent offers must have one, or New fails naming it.
	Implementations map[string]Implementation
	// Retrievers holds what agents search, by the retriever name agents
	// list in Agent.Retrievers; a *retrieval.Retriever is a Searcher. One
	// searcher may serve several agents. Every retriever an agent names
	// must be here, or New fails naming it.
	Retrievers map[string]Searcher
	// Budgets are the budgets the gateway was built with (the same
	// values as gateway.Config.Budgets); the runtime reads their scopes to
	// pick each call's scope key: the run id, the thread id, or none.
	Budgets []gateway.Budget
	// MemoryStores holds user and global memory, by the store name agents'
	// Memory refers to.
	MemoryStores map[string]MemoryStore
	// Store keeps runs, checkpoints and tool-call records; nil means a new
	// InMemoryStore.
	Store Store
	// Tracer receives invoke_agent and execute_tool spans; nil means no
	// tracing. Give the gateway the same tracer provider, so that its chat
	// spans nest under the agent's.
	Tracer trace.Tracer
	// Logger receives pauses, interrupted calls and store failures; nil
	// means no logging.
	Logger *slog.Logger
	// MaxParallelTools bounds how many read-only calls of one model
	// answer run at once; zero means DefaultMaxParallelTools.
	MaxParallelTools int
	// MaxDelegationDepth bounds how deep delegations nest; zero means
	// DefaultMaxDelegationDepth.
	MaxDelegationDepth int
	// MaxDelegations bounds the delegations of one run, nested ones
	// included; zero means DefaultMaxDelegations.
	MaxDelegations int
	// Timeouts are the run and step timeouts of every agent that does not
	// set its own (Agent.Timeouts), field by field; zero fields mean no
	// bound.
	Timeouts Timeouts
	// App and AppVersion name the application the runtime runs, for the
	// runs' records and their event logs (Record); empty when unknown.
	App        string
	AppVersion string
	// Approvals is the approval policy of every call of a declared tool:
	// allow, deny or ask, by rules matched on the tool and its arguments,
	// then the tool's Approval, then the policy's default (see package
	// policy). The zero policy allows every call of a tool without an
	// Approval.
	Approvals policy.Policy
	// Conditions compiles the conditions of Approvals' rules and of
	// guardrails of kind cel: cel.Language (package
	// runtime/agents/policy/cel). Nil when there are none, so that a
	// program without them does not link CEL; a condition without it
	// fails New with a *policy.NoLanguageError.
	Conditions policy.Language
	// Hooks are called at their points in every agent's runs, before the
	// agents' guardrails and own hooks (see Hook).
	Hooks []Hook
	// AgentHooks are agents' own hooks, by agent name, called after the
	// agent's guardrails. They are here rather than on Agent, which is
	// plain data (an application description holds it as a Go literal).
	AgentHooks map[string][]Hook
	// Guardrails are the declared guardrails, by name; an agent runs the
	// ones it or DefaultGuardrails names, each as a hook at its points.
	Guardrails []guard.Guardrail
	// GuardrailFuncs are the Go functions of guardrails of kind go, by the
	// name the guardrails give.
	GuardrailFuncs map[string]guard.Func
	// DefaultGuardrails names the guardrails every agent runs, before its
	// own (the service's defaults).
	DefaultGuardrails []string
	// Skills are the skills agents may list (Agent.Skills).
	Skills []Skill
	// RunEnded are called with a run's id when the run ends for good
	// (any status but paused), after its result is stored: what a tool
	// keeps per run (a sandbox's workspace) is deleted with the run.
	RunEnded []func(runID string)
}

// Timeouts bound the time a run takes. A run that exceeds one stops with
// status timed_out and a *TimeoutError; it keeps its partial result (the
// completed steps, the last text, the cost so far) and can be continued
// (Runtime.Continue). A tool's own Timeout is separate: a call that exceeds
// it is an error observation, and the run goes on.
type Timeouts struct {
	// Run bounds one drive of a run: from Run, Resume, Continue or Drive
	// until the run ends or pauses, whatever agents it goes through. It is
	// the timeout of the agent the drive starts on. Zero means no bound.
	Run time.Duration
	// Step bounds one step of the agent: its model call and the tool calls
	// that call asks for (a delegation included). Zero means no bound.
	Step time.Duration
}

func (t Timeouts) validate() error {
	if t.Run < 0 || t.Step < 0 {
		return fmt.Errorf("negative timeout (run %v, step %v)", t.Run, t.Step)
	}
	return nil
}

// or returns t with each zero field taken from d.
func (t Timeouts) or(d Timeouts) Timeouts {
	return Timeouts{Run: cmp.Or(t.Run, d.Run), Step: cmp.Or(t.Step, d.Step)}
}

// Agent is one model-driven loop.
type Agent struct {
	// Name identifies the agent in runs, paths, spans and tool names.
	Name string
	// Description tells agents that hand off or delegate to this one what
	// it does.
	Description string
	// Model is the alias the agent starts on.
	Model string
	// Ladder lists aliases from most to least capable, containing Model;
	// degrading steps one rung down it.
	Ladder []string
	// OnBudgetExhausted says what a budget breach does; empty means
	// BudgetFail.
	OnBudgetExhausted OnBudgetExhausted
	// Instructions is the system prompt.
	Instructions string
	// Tools names the declared tools the agent may call.
	Tools []string
	// Handoffs names agents the conversation may be transferred to.
	Handoffs []string
	// Delegates names agents this one may call as a tool, in an isolated
	// context.
	Delegates []string
	// Retrievers names retrievers the agent may search, each a key of
	// Config.Retrievers; the model sees each as the tool
	// search_<retriever>.
	Retrievers []string
	// Skills names skills of Config.Skills the agent may load: its prompt
	// lists their names and descriptions, and the model loads one with the
	// tool load_skill and reads its files with read_skill_file.
	Skills []string
	// MaxSteps bounds the agent's model calls in one run; zero means
	// DefaultMaxSteps.
	MaxSteps int
	// Budget names the budget (in Config.Budgets) the agent's calls are
	// charged to; empty means unbudgeted.
	Budget string
	// Fallbacks are aliases the gateway tries, in order, when the agent's
	// current alias fails with a provider error (gateway.WithFallbacks).
	Fallbacks []string
	// Memory says which memory scopes the agent uses; nil means the whole
	// thread, untrimmed, and no stored memory.
	Memory *Memory
	// Compaction is what happens when the agent's thread outgrows the
	// context window (see Compaction); nil means nothing: a request too
	// large for the window fails (gateway.ContextWindowExceededError).
	Compaction *Compaction
	// Output is a JSON Schema the final answer must satisfy; nil means free
	// text.
	Output json.RawMessage
	// Temperature, when set, is the sampling temperature.
	Temperature *float64
	// PromptCache says which parts of the prefix every step repeats the
	// provider should cache (gateway.Request.Cache); its Key is set by the
	// runtime, one per agent and thread. The zero value asks for none.
	PromptCache gateway.PromptCache
	// Timeouts bound the agent's runs and steps; a zero field takes
	// Config.Timeouts'.
	Timeouts Timeouts
	// Guardrails names the guardrails of Config.Guardrails the agent runs,
	// after Config.DefaultGuardrails.
	Guardrails []string
}

// Memory configures an agent's memory scopes.
type Memory struct {
	// ThreadTokenBudget is the most tokens of conversation sent to the
	// model (gateway.EstimateInputTokens); the oldest complete turns are
	// dropped first. Zero sends the whole thread.
	ThreadTokenBudget int
	// User is memory about the run's user, across threads.
	User *StoredMemory
	// Global is memory shared by every user.
	Global *StoredMemory
}

// StoredMemory is a memory scope kept in a MemoryStore.
type StoredMemory struct {
	// Store names the store in Config.MemoryStores.
	Store string
	// TokenBudget is the most tokens of this memory injected into a
	// request; zero means DefaultMemoryTokenBudget.
	TokenBudget int
}

// Tool declares a tool: what the model sees, and how the runtime treats its
// calls. The code behind it is an Implementation registered by name.
type Tool struct {
	// Name is what the model calls and what the implementation is
	// registered under.
	Name string
	// Description tells the model when to call the tool.
	Description string
	// Input is the JSON Schema of the arguments, an object; nil means no
	// arguments. Arguments are validated against it before every call.
	Input json.RawMessage
	// Effects says whether the tool only reads; empty means EffectsRead.
	Effects Effects
	// Approval is the tool's approval shorthand: what the approval policy
	// decides about calls none of its rules decides. Empty leaves them to
	// the policy's default (allow unless Config.Approvals says otherwise).
	Approval Approval
	// From is the declaration a kind imported the tool from under another
	// name (an MCP server's tool, named with the import's prefix); empty
	// for a tool declared under its own name. A rule of the approval
	// policy naming the declaration governs the tool.
	From string
	// Timeout bounds one call; zero means DefaultToolTimeout.
	Timeout time.Duration
	// MaxObservationBytes bounds what the model reads of one call's
	// result, from MinObservationBytes to MaxObservationBytesLimit; zero
	// means DefaultMaxObservationBytes. A longer observation (a result or
	// an error) is cut at a UTF-8 boundary and ends with a marker that
	// says how many bytes were left out; the run goes on, and the stored
	// call record and checkpoint hold the cut text.
	MaxObservationBytes int
	// Learned is set on a tool whose definition its kind learned when the
	// application started, from outside the application (an MCP server's
	// tools/list). A run's recording keeps it with the requests that
	// offer the tool, so that a replay rebuilds the tool as the run saw it
	// without reaching its source (LearnedToolKind, Recording.Learned).
	Learned *LearnedDefinition
}

// LearnedDefinition is a tool's definition as its kind learned it from
// outside the application.
type LearnedDefinition struct {
	// Source says where it came from, as the kind names it (`MCP server
	// "files"`).
	Source string `json:"source"`
	// Definition is the definition in the kind's own JSON.
	Definition json.RawMessage `json:"definition"`
}

// LearnedTool is a learned definition as a recording keeps it: the tool's
// name, as the model is offered it, and its definition.
type LearnedTool struct {
	// Tool is the tool's name.
	Tool string `json:"tool"`
	LearnedDefinition
}

// LearnedToolKind is a ToolKind whose tools' definitions come from outside
// the application, such as an MCP server's: RecordedTools builds the tools
// decl provides from the definitions a recording holds, as NewTools would
// from their source, but without reaching it, for a replay.
type LearnedToolKind interface {
	ToolKind
	// RecordedTools returns the tools decl provides, built from learned,
	// the definitions of a recording (Recording.Learned).
	RecordedTools(decl Tool, learned []LearnedTool) ([]Tool, error)
}

func (t Tool) validate() error {
	if t.Name == "" {
		return fmt.Errorf("a tool has no name")
	}
	if p := rules.ToolName(t.Name); len(p) > 0 {
		return errors.New(p[0].Msg)
	}
	switch t.Effects {
	case "", EffectsRead, EffectsWrite:
	default:
		return fmt.Errorf("tool %q: effects %q is not %q or %q", t.Name, t.Effects, EffectsRead, EffectsWrite)
	}
	if t.Timeout < 0 {
		return fmt.Errorf("tool %q: negative timeout %v", t.Name, t.Timeout)
	}
	if err := checkObservationBytes(t.MaxObservationBytes); err != nil {
		return fmt.Errorf("tool %q: %w", t.Name, err)
	}
	return nil
}
