package app

import (
	"encoding/json"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Description is an application as plain data: everything Assemble needs
// to build its runtime, with no function or runtime object in it. The only
// interfaces are the fields holding a kind's configuration (Provider.Kind,
// Tool.Kind, retrieval.StoreConfig.Kind, kind.Resource.Kind), whose values
// are plain data of the kind's own type. aidgen fills it by lowering an app
// file (internal/lower); a generated service holds it as a Go literal and
// calls the same Assemble, so the interpreter and the generated service
// cannot wire an application differently, and a service never parses CUE
// at start-up.
//
// References between sections (an agent's model alias, a tool an agent
// lists, the store of a retriever) are names, resolved by Assemble. Files
// (datasets, fixtures, scripts, baselines, retriever sources) are relative
// to Dir unless absolute.
type Description struct {
	// Name names the application.
	Name string
	// Version is the application's semantic version.
	Version string
	// Dir is the directory relative file names are resolved against: the
	// app file's directory for aidgen, the service's for a generated one.
	// Empty means the working directory.
	Dir string
	// Providers are the endpoints that serve models.
	Providers []Provider
	// Models is the pinned catalog: every alias and the exact model it
	// resolves to.
	Models []gateway.PinnedModel
	// Budgets are the spend caps agents and evals name.
	Budgets []gateway.Budget
	// RateLimits cap requests and tokens per minute per key, tenant or
	// model deployment.
	RateLimits []gateway.RateLimit
	// Tools are the tools agents may call, with how each is implemented.
	Tools []Tool
	// Agents are the model-driven loops.
	Agents []agents.Agent
	// Stores hold vectors (for retrievers) and memory (for agents).
	Stores []retrieval.StoreConfig
	// Retrievers turn files into searchable chunks. Their Source.Dir is
	// relative to Dir.
	Retrievers []retrieval.Config
	// Evals are the sampled evaluations.
	Evals []Eval
	// Resources are the named app-level declarations a kind owns and its
	// elements share (the servers of tools of one kind), which Assemble
	// lends every kind through kind.Env.Resources.
	Resources []kind.Resource
	// Service configures the HTTP service of a generated application.
	Service Service
	// Approvals is the approval policy of every call of a declared tool
	// (agents.Config.Approvals).
	Approvals policy.Policy
	// Guardrails are the declared guardrails (agents.Config.Guardrails);
	// agents name theirs in agents.Agent.Guardrails, and
	// Service.Guardrails names every agent's.
	Guardrails []guard.Guardrail
	// Skills are the skills agents may load (agents.Agent.Skills), by
	// name. Their instructions and files are read through the
	// application's files when it is assembled, so that a generated
	// service carries them embedded like its other files.
	Skills []Skill
}

// Skill is a skill: what an agent's prompt lists of it, and where its
// folder is.
type Skill struct {
	// Name is how agents list it.
	Name string
	// Description is what the prompt of an agent listing it carries.
	Description string
	// AllowedTools are the tools its instructions use.
	AllowedTools []string
	// Dir is its folder, holding its SKILL.md, slash-separated and
	// relative to the description's Dir.
	Dir string
	// Files are the folder's files besides SKILL.md, relative to Dir,
	// which the model reads with read_skill_file.
	Files []string
}

// Provider is an endpoint that serves models.
type Provider struct {
	// Name is what models' Provider refers to.
	Name string
	// Kind is the configuration of the provider's kind
	// (a package of its own under runtime/gateway, such as
	// openaicompat.Kind), which builds
	// the adapter.
	Kind gateway.ProviderKind
}

// Tool is a declared tool and how it is implemented.
type Tool struct {
	// Decl is what the model sees and how the runtime treats calls.
	Decl agents.Tool
	// Kind is the configuration of the tool kind that implements the tool
	// without Go code (http.Kind, fixture.Kind, under
	// runtime/agents/tools); nil means Go code registered under the tool's
	// name in Options.Implementations.
	Kind agents.ToolKind
}

// Eval is one sampled evaluation.
type Eval struct {
	// Name is the eval's name.
	Name string
	// Dataset is the dataset file; empty when FromRuns is set.
	Dataset string
	// FromRuns, when set, says which recorded runs the cases are sampled
	// from instead of a dataset file (its File relative to the
	// description's directory); App.Eval leaves the run's Dataset nil
	// for the caller (aidgen eval) to sample with runtime/eval/fromruns.
	FromRuns *eval.RunsSource
	// Target is what answers each case.
	Target EvalTarget
	// Runs is how many times each case is sampled.
	Runs int
	// Concurrency bounds the samples in flight.
	Concurrency int
	// Metrics are the metric names computed for every sample.
	Metrics []string
	// Judge configures the llm_judge metric; nil when unused.
	Judge *Judge
	// Schema is the JSON Schema json_schema_valid checks.
	Schema json.RawMessage
	// Budget names the budget the eval's calls are charged to; empty means
	// none.
	Budget string
	// Baseline is the baseline file; empty means the eval reports without
	// gating.
	Baseline string
	// Thresholds are the gates.
	Thresholds []eval.Threshold
	// Approvals decides the calls that pause a sample's run for approval
	// (an agent target only): approve or reject each, up to
	// eval.MaxSampleDecisions per sample; a case's own approvals override
	// it. Empty leaves a paused run without an answer, and its sample
	// fails.
	Approvals eval.Approvals
	// Tools declares what the tools an agent target can call do in the
	// eval (eval.ToolMode): a tool left out is live when it reads and a
	// stub when it writes, and App.Eval refuses an eval whose target can
	// reach a tool that writes without a declared mode.
	Tools []EvalTool
}

// EvalTool declares what one tool does in an eval.
type EvalTool struct {
	// Tool names a declared tool: for a declaration that imports a
	// server's tools whole, the plan is every imported tool's.
	Tool string
	// Mode is the tool's mode.
	Mode eval.ToolMode
	// Stub, for a stub that answers from rows matched by argument, is the
	// configuration of the tool kind whose tool answers in the real
	// tool's place (fixture.Kind, whose file holds the rows); nil for
	// none.
	Stub agents.ToolKind
	// Result, for a stub without Stub, answers every call the case does
	// not answer (a JSON string is the observation as is, anything else
	// its compact JSON).
	Result json.RawMessage
}

// EvalTarget is what answers an eval's cases: exactly one of Agent, Model
// and Retriever.
type EvalTarget struct {
	// Agent names the agent that answers each case, one run per sample.
	Agent string
	// Model is the alias that answers each case.
	Model string
	// Retriever names the retriever searched with each case's input. The
	// answer is the ranking of the hits' source files, scored by ranked
	// metrics (recall@K, mrr@K, ndcg@K, see eval.ParseRetrievalMetric)
	// against the source paths the case expects. A retriever whose store is
	// in memory is ingested before the first search; a persistent store is
	// searched as it was last indexed.
	Retriever string
	// K is how many chunks a retriever target retrieves; zero means the
	// retriever's TopK.
	K int
	// Prompt is the text/template rendering a case as a model target's
	// user message; empty sends the input as is.
	Prompt string
	// System is a model target's system message.
	System string
	// Fallbacks are the aliases a model target's calls fall back to, in
	// order (an agent target uses its agent's own fallbacks).
	Fallbacks []string
}

// Judge configures the llm_judge metric.
type Judge struct {
	// Model is the judging alias.
	Model string
	// Rubric tells the judge how to score.
	Rubric string
	// Fallbacks are the aliases the judge's calls fall back to, in order.
	Fallbacks []string
	// Calibration, when set, declares the human labels the judge is
	// measured against (its Labels relative to the description's
	// directory); the judge then scores verdicts and may gate.
	Calibration *eval.CalibrationSource
}

// Service configures the HTTP service of a generated application.
type Service struct {
	// Listen is the address to listen on.
	Listen string
	// Entry names the agent answering requests that name none.
	Entry string
	// Expose lists the aliases the service serves directly, without an
	// agent; the zero value exposes none.
	Expose Expose
	// Auth protects the service.
	Auth Auth
	// AllowedHosts are the Host names a service on loopback answers
	// besides loopback ones (service.Config.AllowedHosts).
	AllowedHosts []string
	// AllowedOrigins are the origins whose pages may call /mcp
	// (service.Config.AllowedOrigins).
	AllowedOrigins []string
	// State says where runs, checkpoints and memory live.
	State State
	// Timeouts are the run and step timeouts of every agent that sets
	// none (agents.Config.Timeouts), wherever the application runs.
	Timeouts agents.Timeouts
	// Guardrails names the guardrails every agent runs, before its own
	// (agents.Config.DefaultGuardrails).
	Guardrails []string
}

// Expose lists the aliases a service serves directly at
// /v1/chat/completions, as an LLM gateway (service.Config.Aliases).
type Expose struct {
	// Aliases are the exposed aliases, each with its fallbacks.
	Aliases []ExposedAlias
	// Budget names the budget every direct call charges; empty means none.
	Budget string
}

// ExposedAlias is an alias served directly and the aliases its calls fall
// back to, in order.
type ExposedAlias struct {
	// Alias is the exposed alias.
	Alias string
	// Fallbacks are the aliases tried in order when a call on it fails.
	Fallbacks []string
}

// Auth protects the service.
type Auth struct {
	// Kind is "none" or "bearer".
	Kind string
	// TokenEnv names the environment variable holding a bearer token.
	TokenEnv string
	// Keys are the declared API keys, sorted by name.
	Keys []Key
}

// Key is a declared API key (service.Key), with where its secret is
// rather than the secret.
type Key struct {
	// Name names the key.
	Name string
	// Roles are what the key may do: caller, approver, operator, admin.
	Roles []string
	// Tenant is the key's tenant; empty for none.
	Tenant string
	// SecretEnv names the environment variable holding the secret; or
	// SecretSHA256 is its SHA-256 in hex.
	SecretEnv    string
	SecretSHA256 string
}

// State kinds.
const (
	StateMemory   = "memory"
	StatePostgres = "postgres"
)

// State says where durable state lives.
type State struct {
	// Kind is StateMemory (or empty) or StatePostgres.
	Kind string
	// DSNEnv names the environment variable holding the PostgreSQL DSN.
	DSNEnv string
	// Retention bounds the runs kept in memory when Kind is StateMemory; a
	// zero field takes agents' default.
	Retention agents.Retention
}
