package ir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/rules"
)

// Document is a loaded, validated IR file. Every reference in it resolves
// and every file it names exists; later stages (the runtime wiring, code
// generation, evals) may rely on that without checking again.
//
// Sections are slices sorted by name, so that anything iterating a Document
// is deterministic by construction; the lookup methods (Agent, Tool, ...)
// find one entry by name.
type Document struct {
	// Name names the application.
	Name string `json:"name"`
	// Version is the application's semantic version.
	Version string `json:"version"`
	// Description says what the application is for; it may be empty.
	Description string `json:"description,omitempty"`

	// Providers are the endpoints that serve models, sorted by name.
	Providers []*Provider `json:"providers"`
	// Models are the pinned models, sorted by id.
	Models []*Model `json:"models"`
	// Aliases map alias names to model ids, sorted by alias.
	Aliases []*Alias `json:"aliases"`
	// Budgets are the spend caps, sorted by name.
	Budgets []*Budget `json:"budgets"`
	// RateLimits cap requests and tokens per minute, sorted by name.
	RateLimits []*RateLimit `json:"rateLimits,omitempty"`
	// Tools are the functions agents may call, sorted by name.
	Tools []*Tool `json:"tools"`
	// Agents are the model-driven loops, sorted by name.
	Agents []*Agent `json:"agents"`
	// Stores hold vectors and memory, sorted by name.
	Stores []*Store `json:"stores"`
	// Retrievers search ingested files, sorted by name.
	Retrievers []*Retriever `json:"retrievers"`
	// Evals are the sampled evaluations, sorted by name.
	Evals []*Eval `json:"evals"`
	// Service configures the generated HTTP service.
	Service Service `json:"service"`
	// Resources are the entries of the sections of the resource kinds
	// (runtime/kind), sorted by kind and name.
	Resources []*Resource `json:"resources,omitempty"`
	// Approvals is the approval policy of tool calls; nil means none (every
	// call of a tool without an approval runs).
	Approvals *Approvals `json:"approvals,omitempty"`
	// Keys are the API keys the service accepts, sorted by name.
	Keys []*Key `json:"keys,omitempty"`
	// Guardrails are the declared guardrails, sorted by name.
	Guardrails []*Guardrail `json:"guardrails,omitempty"`
	// SkillSources are the IR's skills entries: folders, or globs of
	// folders, each holding a SKILL.md.
	SkillSources []string `json:"skillSources,omitempty"`
	// Skills are the skills SkillSources found, sorted by name, with what
	// Load read of each SKILL.md.
	Skills []*Skill `json:"skills,omitempty"`

	// Path is the IR file as it was named to Load, used in messages.
	Path string `json:"-"`
	// Dir is the directory relative file paths in the IR are resolved
	// against: the directory of Path.
	Dir string `json:"-"`
}

// Provider is an endpoint that serves models.
type Provider struct {
	// Name is the provider's key in the IR.
	Name string `json:"name"`
	// Kind is the provider kind, one of kind.Names(kind.Providers).
	Kind string `json:"kind"`
	// Config is the provider's block, kind included, which lowering decodes
	// into the kind's typed configuration.
	Config Config `json:"-"`
}

// MarshalJSON writes the provider as its name and its block.
func (p Provider) MarshalJSON() ([]byte, error) { return p.Config.object("name", p.Name) }

// Resource is an entry of the section of a resource kind: a named
// declaration that the elements of another kind share (runtime/kind).
type Resource struct {
	// Kind is the resource kind: the name of its section.
	Kind string `json:"kind"`
	// Name is the entry's key in its section.
	Name string `json:"name"`
	// Config is the entry's block, which lowering decodes into the kind's
	// typed configuration.
	Config Config `json:"-"`
}

// MarshalJSON writes the resource as its kind, its name and its block.
func (r Resource) MarshalJSON() ([]byte, error) {
	named, err := r.Config.object("name", r.Name)
	if err != nil {
		return nil, err
	}
	return Config(named).object("kind", r.Kind)
}

// Resource returns the resource of the given kind and name.
func (d *Document) Resource(kind, name string) (*Resource, bool) {
	for _, r := range d.Resources {
		if r.Kind == kind && r.Name == name {
			return r, true
		}
	}
	return nil, false
}

// Model is one pinned model.
type Model struct {
	// ID is the exact provider model id, including its pinned version.
	ID string `json:"id"`
	// Provider names the provider that serves the model.
	Provider string `json:"provider"`
	// Kind is "chat" or "embedding".
	Kind string `json:"kind"`
	// Cost is the pinned price.
	Cost Cost `json:"cost"`
	// ContextWindow is a chat model's context length in tokens.
	ContextWindow int `json:"contextWindow,omitempty"`
	// MaxOutputTokens is the most tokens one chat response may have.
	MaxOutputTokens int `json:"maxOutputTokens,omitempty"`
	// Capabilities are what a chat model can do ("tools", "json",
	// "streaming", "vision"), sorted.
	Capabilities []string `json:"capabilities,omitempty"`
	// API is the wire API an openai-compatible provider calls a chat model
	// through: "chat" or "responses"; empty means "chat".
	API string `json:"api,omitempty"`
	// Dimensions is an embedding model's vector width.
	Dimensions int `json:"dimensions,omitempty"`
	// MaxInputTokens is the most tokens one embedding input may have.
	MaxInputTokens int `json:"maxInputTokens,omitempty"`
	// Deployments are other providers serving the same model id.
	Deployments []Deployment `json:"deployments,omitempty"`
	// CoolDown is how long a failed deployment is skipped; zero means
	// failures are retried per the provider's retry policy.
	CoolDown *Duration `json:"coolDown,omitempty"`
}

// Routes returns the deployments that serve the model, the model's own
// provider first: the listed entry naming it, moved to the front, or a
// plain one prepended when none does. Nil when none are listed.
func (m *Model) Routes() []Deployment {
	if len(m.Deployments) == 0 {
		return nil
	}
	own := slices.IndexFunc(m.Deployments, func(d Deployment) bool { return d.Provider == m.Provider })
	if own < 0 {
		return append([]Deployment{{Provider: m.Provider}}, m.Deployments...)
	}
	out := append([]Deployment{m.Deployments[own]}, m.Deployments[:own]...)
	return append(out, m.Deployments[own+1:]...)
}

// Deployment is one provider serving a model.
type Deployment struct {
	// Provider names the provider that serves it.
	Provider string `json:"provider"`
	// Weight is its share of the calls; zero means 1.
	Weight int `json:"weight,omitempty"`
	// Name identifies it in metrics; empty means the provider's name.
	Name string `json:"name,omitempty"`
}

// Model kinds.
const (
	KindChat      = "chat"
	KindEmbedding = "embedding"
)

// Has reports whether the model declares the capability.
func (m *Model) Has(capability string) bool {
	return slices.Contains(m.Capabilities, capability)
}

// Cost is a price per 1,000 tokens in US dollars.
type Cost struct {
	// InputPer1kUSD is the price of 1,000 input tokens.
	InputPer1kUSD float64 `json:"inputPer1kUSD"`
	// OutputPer1kUSD is the price of 1,000 output tokens.
	OutputPer1kUSD float64 `json:"outputPer1kUSD"`
	// CachedInputPer1kUSD, when set, is the price of 1,000 input tokens
	// served from the provider's prompt cache; nil bills them at
	// InputPer1kUSD, and a pointer to 0 makes them free. The check pass
	// refuses a price above InputPer1kUSD.
	CachedInputPer1kUSD *float64 `json:"cachedInputPer1kUSD,omitempty"`
	// CacheWrite5mPer1kUSD, when set, is the price of 1,000 input tokens
	// written to the provider's prompt cache with a five-minute lifetime
	// (1.25 times the input price at Anthropic); nil bills them at
	// InputPer1kUSD.
	CacheWrite5mPer1kUSD *float64 `json:"cacheWrite5mPer1kUSD,omitempty"`
	// CacheWrite1hPer1kUSD, when set, is the price of 1,000 input tokens
	// written to the prompt cache with a one-hour lifetime (twice the input
	// price at Anthropic); nil bills them at InputPer1kUSD.
	CacheWrite1hPer1kUSD *float64 `json:"cacheWrite1hPer1kUSD,omitempty"`
}

// Alias names a model for the rest of the IR.
type Alias struct {
	// Name is the alias.
	Name string `json:"name"`
	// Model is the exact model id the alias resolves to.
	Model string `json:"model"`
}

// Budget caps spend.
type Budget struct {
	// Name is the budget's key in the IR.
	Name string `json:"name"`
	// MaxUSD caps cost in US dollars; zero means no cost cap.
	MaxUSD float64 `json:"maxUSD,omitempty"`
	// MaxTotalTokens caps input plus output tokens; zero means no token cap.
	MaxTotalTokens int64 `json:"maxTotalTokens,omitempty"`
	// Scope is "run", "thread", "key", "tenant" or "global".
	Scope string `json:"scope"`
	// Window is the reset window: a fixed length or "day" / "month";
	// empty means the budget never resets.
	Window string `json:"window,omitempty"`
	// TimeZone is the IANA time zone of a calendar window; empty means UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// AppliesTo is "all" for a budget every call is charged to; empty
	// for one only the agents, evals and routes that name it are.
	AppliesTo string `json:"appliesTo,omitempty"`
}

// RateLimit caps the requests and tokens per minute of model calls.
type RateLimit struct {
	// Name is the limit's key in the IR.
	Name string `json:"name"`
	// Scope is "key", "tenant" or "model".
	Scope string `json:"scope"`
	// Model restricts a model-scoped limit to one model id.
	Model string `json:"model,omitempty"`
	// RequestsPerMinute caps calls per minute; zero means no cap.
	RequestsPerMinute int64 `json:"requestsPerMinute,omitempty"`
	// TokensPerMinute caps tokens per minute; zero means no cap.
	TokensPerMinute int64 `json:"tokensPerMinute,omitempty"`
}

// Tool is a function an agent may call.
type Tool struct {
	// Name is the tool's name as the model sees it.
	Name string `json:"name"`
	// Description tells the model when to call the tool.
	Description string `json:"description"`
	// Input is the JSON Schema of the tool's arguments.
	Input json.RawMessage `json:"input"`
	// Effects is "read" or "write".
	Effects string `json:"effects"`
	// Approval is the tool's shorthand in the approval policy, "never" or
	// "always"; empty leaves its calls to the policy's default.
	Approval string `json:"approval,omitempty"`
	// Timeout bounds one call of the tool.
	Timeout Duration `json:"timeout"`
	// MaxObservationBytes bounds what the model reads of one call's
	// result; zero means the runtime's default (32 KiB).
	MaxObservationBytes int `json:"maxObservationBytes,omitempty"`
	// Implementation says where the code behind the tool comes from; nil
	// means Go code registered under the tool's name.
	Implementation *ToolImplementation `json:"implementation,omitempty"`
}

// Approvals is the approval policy of tool calls: ordered rules and a
// default.
type Approvals struct {
	// Default is "allow", "deny" or "ask".
	Default string `json:"default"`
	// Rules are tried in order; the first that matches decides.
	Rules []ApprovalRule `json:"rules"`
}

// ApprovalRule matches calls by tool and condition, and decides them.
type ApprovalRule struct {
	// Tool is a tool's name or a glob.
	Tool string `json:"tool"`
	// When is a CEL condition; empty means every call of the tool.
	When string `json:"when,omitempty"`
	// Action is "allow", "deny" or "ask".
	Action string `json:"action"`
	// Reason says why.
	Reason string `json:"reason,omitempty"`
}

// ToolImplementation is how a tool is implemented: Go code registered by
// name, or a tool kind (runtime/kind) that needs no code.
type ToolImplementation struct {
	// Kind is the tool kind, one of kind.Names(kind.Tools).
	Kind string `json:"kind"`
	// Config is the implementation's block, kind included, which lowering
	// decodes into the kind's typed configuration.
	Config Config `json:"-"`
}

// MarshalJSON writes the implementation as its block.
func (t ToolImplementation) MarshalJSON() ([]byte, error) { return t.Config.object("", nil) }

// Skill is a skill an IR's skills entry found: a folder holding a
// SKILL.md, as Load read it.
type Skill struct {
	// Name is the name its front matter gives.
	Name string `json:"name"`
	// Description is what the prompt of an agent listing it carries.
	Description string `json:"description"`
	// AllowedTools are the tools its instructions use.
	AllowedTools []string `json:"allowedTools,omitempty"`
	// Dir is the folder, slash-separated and relative to the IR file's
	// directory.
	Dir string `json:"dir"`
	// Files are the folder's files besides SKILL.md, relative to Dir.
	Files []string `json:"files,omitempty"`
}

// Agent is a model-driven loop.
type Agent struct {
	// Name is the agent's key in the IR.
	Name string `json:"name"`
	// Description says what the agent does.
	Description string `json:"description,omitempty"`
	// Model is the alias the agent starts on.
	Model string `json:"model"`
	// Ladder lists aliases from most to least capable; empty means the
	// agent cannot degrade.
	Ladder []string `json:"ladder,omitempty"`
	// Fallbacks are the aliases the gateway tries, in order, when a model
	// call fails with a provider error, whichever rung the agent is on.
	// Each is a chat model that serves the agent as its model does.
	Fallbacks []string `json:"fallbacks"`
	// OnBudgetExhausted is "fail" or "degrade".
	OnBudgetExhausted string `json:"onBudgetExhausted"`
	// Instructions is the system prompt; when InstructionsFile is set, Load
	// reads the file into it.
	Instructions string `json:"instructions,omitempty"`
	// InstructionsFile is the file the instructions came from, relative to
	// the IR file's directory; empty when they were inline.
	InstructionsFile string `json:"instructionsFile,omitempty"`
	// Tools names the tools the agent may call.
	Tools []string `json:"tools"`
	// Handoffs names the agents the conversation may be transferred to.
	Handoffs []string `json:"handoffs"`
	// Delegates names the agents this agent may call as tools.
	Delegates []string `json:"delegates"`
	// MaxSteps bounds the model calls of one run.
	MaxSteps int `json:"maxSteps"`
	// Budget names the budget the agent is charged to; empty means none.
	Budget string `json:"budget,omitempty"`
	// Retrievers names the retrievers the agent may search.
	Retrievers []string `json:"retrievers"`
	// Skills names the skills the agent may load.
	Skills []string `json:"skills,omitempty"`
	// Memory configures the agent's memory scopes; nil means none.
	Memory *Memory `json:"memory,omitempty"`
	// Compaction is the agent's compaction policy; nil means none.
	Compaction *Compaction `json:"compaction,omitempty"`
	// Output is the JSON Schema the final answer must satisfy; nil means
	// free text.
	Output json.RawMessage `json:"output,omitempty"`
	// Temperature is the sampling temperature; nil means the provider's.
	Temperature *float64 `json:"temperature,omitempty"`
	// PromptCache is the agent's prompt-caching policy; nil means mode
	// "auto".
	PromptCache *PromptCache `json:"promptCache,omitempty"`
	// Guardrails names the guardrails the agent runs, after the service's.
	Guardrails []string `json:"guardrails,omitempty"`
	// Timeouts bound the agent's runs and steps; nil means the service's
	// defaults.
	Timeouts *Timeouts `json:"timeouts,omitempty"`
}

// Compaction is an agent's compaction policy: what happens when its thread
// outgrows the context window.
type Compaction struct {
	// Model is the alias that writes the summaries.
	Model string `json:"model"`
	// Trigger is the request size, in estimated input tokens, above which
	// the thread is compacted; zero means the default, derived from the
	// agent's models (rules.CompactionBounds).
	Trigger int `json:"trigger,omitempty"`
	// KeepTurns is how many of the newest turns stay verbatim.
	KeepTurns int `json:"keepTurns"`
	// SummaryTokens bounds a summary's length; zero means the default
	// (rules.SummaryTokens).
	SummaryTokens int `json:"summaryTokens,omitempty"`
	// Instructions is the summariser's system prompt; empty means the
	// runtime's.
	Instructions string `json:"instructions,omitempty"`
}

// PromptCache is an agent's prompt-caching policy.
type PromptCache struct {
	// Mode is "auto" (tools, system prompt and history), "off" or
	// "explicit" (the parts in At).
	Mode string `json:"mode"`
	// TTL is the lifetime of the cache entries written: "5m" or "1h".
	TTL string `json:"ttl"`
	// At lists the parts an explicit policy caches: "tools", "system",
	// "history".
	At []string `json:"at,omitempty"`
}

// Timeouts bound the time a run takes; a zero field means no bound of its
// own.
type Timeouts struct {
	// Run bounds one drive of a run, from its start, resume, recovery or
	// continuation until it ends or pauses.
	Run Duration `json:"run,omitempty"`
	// Step bounds one step: a model call and the tool calls it asks for.
	Step Duration `json:"step,omitempty"`
}

// Budget exhaustion policies.
const (
	OnBudgetFail    = "fail"
	OnBudgetDegrade = "degrade"
)

// Memory configures an agent's memory scopes.
type Memory struct {
	// Thread is the conversation's own history; nil means untrimmed.
	Thread *ThreadMemory `json:"thread,omitempty"`
	// User is memory about one user across threads; nil means none.
	User *StoredMemory `json:"user,omitempty"`
	// Global is memory shared by every user; nil means none.
	Global *StoredMemory `json:"global,omitempty"`
}

// ThreadMemory is the thread scope: kept in the checkpoint, trimmed.
type ThreadMemory struct {
	// TokenBudget is the most tokens of history sent to the model.
	TokenBudget int `json:"tokenBudget"`
}

// StoredMemory is a memory scope kept in a store.
type StoredMemory struct {
	// Store names the store holding the scope.
	Store string `json:"store"`
	// TokenBudget is the most tokens of this memory injected per request.
	TokenBudget int `json:"tokenBudget"`
}

// Store holds vectors and memory.
type Store struct {
	// Name is the store's key in the IR.
	Name string `json:"name"`
	// Kind is the store kind, one of kind.Names(kind.Stores).
	Kind string `json:"kind"`
	// Distance is "cosine", "l2" or "inner_product", whatever the kind.
	Distance string `json:"distance"`
	// Config is the store's block, kind and distance included, which
	// lowering decodes into the kind's typed configuration.
	Config Config `json:"-"`
}

// MarshalJSON writes the store as its name and its block.
func (s Store) MarshalJSON() ([]byte, error) { return s.Config.object("name", s.Name) }

// Retriever turns files into chunks, embeds and searches them.
type Retriever struct {
	// Name is the retriever's key in the IR.
	Name string `json:"name"`
	// Source says which files are ingested.
	Source Source `json:"source"`
	// Chunking says how files are cut.
	Chunking Chunking `json:"chunking"`
	// EmbedModel is the alias of the embedding model.
	EmbedModel string `json:"embedModel"`
	// Store names the store holding the chunks.
	Store string `json:"store"`
	// TopK is how many chunks one search returns.
	TopK int `json:"topK"`
	// Rerank is "none" or "lexical".
	Rerank string `json:"rerank"`
	// Retrieval says how a search ranks chunks.
	Retrieval Retrieval `json:"retrieval"`
}

// Retrieval says how a retriever's searches rank chunks; the runtime's
// retrieval.Ranking documents each field and owns their rules.
type Retrieval struct {
	// Mode is "hybrid", "vector" or "lexical".
	Mode string `json:"mode"`
	// Fusion is "rrf" or "weighted".
	Fusion string `json:"fusion"`
	// RRFK is reciprocal-rank fusion's k.
	RRFK float64 `json:"rrfK"`
	// Weights weigh the vector and the lexical ranking.
	Weights Weights `json:"weights"`
	// Depth is how many candidates each stage retrieves.
	Depth int `json:"depth"`
	// Collapse is "none" or "document".
	Collapse string `json:"collapse"`
	// BM25 are the lexical ranking's parameters.
	BM25 BM25 `json:"bm25"`
}

// Weights weigh the two rankings of a hybrid search.
type Weights struct {
	// Vector weighs the vector ranking.
	Vector float64 `json:"vector"`
	// Lexical weighs the lexical ranking.
	Lexical float64 `json:"lexical"`
}

// BM25 are Okapi BM25's parameters.
type BM25 struct {
	// K1 is the term-frequency saturation.
	K1 float64 `json:"k1"`
	// B is the length normalisation.
	B float64 `json:"b"`
}

// The source kind and chunking strategy that are built.
const (
	SourceFiles = "files"
	ChunkFixed  = "fixed"
)

// Rerank kinds.
const (
	RerankNone    = "none"
	RerankLexical = "lexical"
)

// Source names the documents a retriever ingests.
type Source struct {
	// Kind is where the documents come from; SourceFiles is the one kind
	// built.
	Kind string `json:"kind"`
	// Files are glob patterns relative to the IR file's directory.
	Files []string `json:"files"`
	// Exclude are glob patterns of files to leave out.
	Exclude []string `json:"exclude"`
	// OnInvalid is "fail" or "skip": what an ingest does with a file it
	// cannot read as text.
	OnInvalid string `json:"onInvalid,omitempty"`
}

// Chunking says how files are cut into chunks, in characters.
type Chunking struct {
	// Strategy is how cut points are chosen; ChunkFixed is the one
	// strategy built.
	Strategy string `json:"strategy"`
	// Size is the most characters of one chunk.
	Size int `json:"size"`
	// Overlap is how many characters consecutive chunks share.
	Overlap int `json:"overlap"`
}

// Service configures the generated HTTP service.
type Service struct {
	// Listen is the address to listen on.
	Listen string `json:"listen"`
	// Entry names the agent answering requests that name none; empty means
	// requests must name one.
	Entry string `json:"entry,omitempty"`
	// Expose lists the aliases the service serves directly, without an
	// agent; nil means none.
	Expose *Expose `json:"expose,omitempty"`
	// Auth protects the service.
	Auth Auth `json:"auth"`
	// AllowedHosts are the Host names a loopback service answers besides
	// loopback ones.
	AllowedHosts []string `json:"allowedHosts,omitempty"`
	// AllowedOrigins are the origins whose pages may call /mcp.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// State says where checkpoints, memory and the ledger live.
	State State `json:"state"`
	// Timeouts are the run and step timeouts of every agent that sets
	// none; nil means none.
	Timeouts *Timeouts `json:"timeouts,omitempty"`
	// Guardrails names the guardrails every agent runs, before its own.
	Guardrails []string `json:"guardrails,omitempty"`
}

// Guardrail is a declared check on a run's input, tool arguments, tool
// results or output (schema #Guardrail; package guard says what each
// field means).
type Guardrail struct {
	// Name is its key in the IR.
	Name string `json:"name"`
	// Kind is pattern, cel, schema, go or model.
	Kind string `json:"kind"`
	// Points are where it checks.
	Points []string `json:"points"`
	// Action is block, redact, ask or log.
	Action string `json:"action"`
	// Message is what a block tells the caller, or an ask the person.
	Message string `json:"message,omitempty"`
	// Patterns, Words and Builtins are a pattern guardrail's.
	Patterns []string `json:"patterns,omitempty"`
	Words    []string `json:"words,omitempty"`
	Builtins []string `json:"builtins,omitempty"`
	// When is a cel guardrail's condition.
	When string `json:"when,omitempty"`
	// Schema is a schema guardrail's JSON Schema.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Func names a go guardrail's registered function.
	Func string `json:"func,omitempty"`
	// Tools limits the tool points to these tools.
	Tools []string `json:"tools,omitempty"`
	// Stream is hold or posthoc, for an output guardrail; empty means hold.
	Stream string `json:"stream,omitempty"`
	// Replacement is what a redaction writes.
	Replacement string `json:"replacement,omitempty"`
	// Beside lets an input guardrail run beside the first model call.
	Beside bool `json:"beside,omitempty"`
	// Model is the alias that judges, for a model guardrail.
	Model string `json:"model,omitempty"`
	// Agent is the agent that judges, for a model guardrail judged by an
	// agent rather than an alias.
	Agent string `json:"agent,omitempty"`
	// Prompt tells a model guardrail's model what trips it.
	Prompt string `json:"prompt,omitempty"`
	// Verdict is the JSON Schema of a model guardrail's answer; empty
	// means the default verdict.
	Verdict json.RawMessage `json:"verdict,omitempty"`
	// OnError is trip or pass: what a model guardrail does without a
	// verdict; empty means trip.
	OnError string `json:"onError,omitempty"`
	// Timeout bounds a model guardrail's call; zero means the runtime's
	// default.
	Timeout Duration `json:"timeout,omitempty"`
}

// Expose lists the aliases a service serves directly at
// /v1/chat/completions, as an LLM gateway.
type Expose struct {
	// Aliases are the chat aliases served directly, in the order listed.
	Aliases []string `json:"aliases"`
	// Budget names the budget every direct call charges; empty means none.
	Budget string `json:"budget,omitempty"`
	// Fallbacks are, by exposed alias, the aliases tried in order when a
	// call on it fails.
	Fallbacks map[string][]string `json:"fallbacks,omitempty"`
}

// Key is an API key the service accepts.
type Key struct {
	// Name is the key's name in the IR, which records and logs show.
	Name string `json:"name"`
	// Roles are what the key may do: caller, approver, operator, admin.
	Roles []string `json:"roles"`
	// Tenant is the tenant whose runs the key sees; empty for none.
	Tenant string `json:"tenant,omitempty"`
	// SecretEnv names the environment variable holding the secret.
	SecretEnv string `json:"secretEnv,omitempty"`
	// SecretSHA256 is the secret's SHA-256 in lower-case hex.
	SecretSHA256 string `json:"secretSHA256,omitempty"`
}

// Auth protects the service.
type Auth struct {
	// Kind is "none" or "bearer".
	Kind string `json:"kind"`
	// TokenEnv names the environment variable holding the bearer token.
	TokenEnv string `json:"tokenEnv,omitempty"`
}

// State says where durable state lives.
type State struct {
	// Kind is "memory" or "postgres".
	Kind string `json:"kind"`
	// DSNEnv names the environment variable holding the PostgreSQL DSN.
	DSNEnv string `json:"dsnEnv,omitempty"`
	// Retention bounds the runs a memory-state service keeps; nil means
	// the runtime's defaults.
	Retention *Retention `json:"retention,omitempty"`
}

// Retention bounds the runs a memory-state service keeps. A zero field
// means the runtime's default.
type Retention struct {
	// Finished is how long an ended run is kept after its last write.
	Finished Duration `json:"finished,omitempty"`
	// MaxFinished is the most ended runs kept.
	MaxFinished int `json:"maxFinished,omitempty"`
	// Paused is how long a paused or running run is kept after its last
	// write.
	Paused Duration `json:"paused,omitempty"`
}

// Config is the block of an element of a kind (a provider, a store, a
// tool's implementation, a resource) as JSON: the fields the user wrote,
// every default filled in, with the IR's names, which are the names of the
// kind's typed configuration in the runtime (runtime/kind). The loader
// fills it with the element's whole value; lowering decodes it into the
// kind's configuration, so that ir spells no kind's fields.
type Config json.RawMessage

// String returns the string at the dot-separated JSON path in the block,
// and whether there is one.
func (c Config) String(path string) (string, bool) { return kind.Field(c, path) }

// object returns the block as a JSON object, its fields in the block's
// order after a first field key (skipped when empty) of value val: how an
// element with a name of its own (the key of its section) is written.
func (c Config) object(key string, val any) ([]byte, error) {
	body := bytes.TrimSpace(c)
	if len(body) == 0 {
		body = []byte("{}")
	}
	if key == "" {
		return body, nil
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("the block is not a JSON object")
	}
	head, err := json.Marshal(map[string]any{key: val})
	if err != nil {
		return nil, err
	}
	rest := bytes.TrimSpace(body[1:])
	if !bytes.Equal(rest, []byte("}")) {
		head[len(head)-1] = ','
	} else {
		rest = nil
	}
	return append(head, rest...), nil
}

// Duration is a time.Duration written in the IR as a Go duration string.
type Duration time.Duration

// UnmarshalJSON parses a Go duration string such as "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// Std returns the duration as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Provider returns the provider with the given name.
func (d *Document) Provider(name string) (*Provider, bool) { return find(d.Providers, name) }

// Model returns the model with the given id.
func (d *Document) Model(id string) (*Model, bool) { return find(d.Models, id) }

// Budget returns the budget with the given name.
func (d *Document) Budget(name string) (*Budget, bool) { return find(d.Budgets, name) }

// Tool returns the tool with the given name.
func (d *Document) Tool(name string) (*Tool, bool) { return find(d.Tools, name) }

// Agent returns the agent with the given name.
func (d *Document) Agent(name string) (*Agent, bool) { return find(d.Agents, name) }

// Store returns the store with the given name.
func (d *Document) Store(name string) (*Store, bool) { return find(d.Stores, name) }

// Retriever returns the retriever with the given name.
func (d *Document) Retriever(name string) (*Retriever, bool) { return find(d.Retrievers, name) }

// Eval returns the eval with the given name.
func (d *Document) Eval(name string) (*Eval, bool) { return find(d.Evals, name) }

// Resolve returns the model an alias names.
func (d *Document) Resolve(alias string) (*Model, bool) {
	a, ok := find(d.Aliases, alias)
	if !ok {
		return nil, false
	}
	return d.Model(a.Model)
}

// AliasNames returns the aliases, sorted.
func (d *Document) AliasNames() []string { return names(d.Aliases) }

// AgentNames returns the agent names, sorted.
func (d *Document) AgentNames() []string { return names(d.Agents) }

// EvalNames returns the eval names, sorted.
func (d *Document) EvalNames() []string { return names(d.Evals) }

// named is what every sorted section holds.
type named interface {
	*Provider | *Model | *Alias | *Budget | *Tool | *Agent | *Store | *Retriever | *Eval
}

func key[T named](v T) string {
	switch x := any(v).(type) {
	case *Provider:
		return x.Name
	case *Model:
		return x.ID
	case *Alias:
		return x.Name
	case *Budget:
		return x.Name
	case *Tool:
		return x.Name
	case *Agent:
		return x.Name
	case *Store:
		return x.Name
	case *Retriever:
		return x.Name
	case *Eval:
		return x.Name
	}
	panic("unreachable")
}

func find[T named](s []T, name string) (T, bool) {
	i, ok := slices.BinarySearchFunc(s, name, func(v T, n string) int { return strings.Compare(key(v), n) })
	if !ok {
		var zero T
		return zero, false
	}
	return s[i], true
}

func names[T named](s []T) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = key(v)
	}
	return out
}

// rules spells a retriever's Retrieval as the values runtime/rules
// checks.
func (r Retrieval) rules() rules.Ranking {
	return rules.Ranking{
		Mode: r.Mode, Fusion: r.Fusion, Collapse: r.Collapse, RRFK: r.RRFK,
		VectorWeight: r.Weights.Vector, LexicalWeight: r.Weights.Lexical,
		Depth: r.Depth, BM25K1: r.BM25.K1, BM25B: r.BM25.B,
	}
}
