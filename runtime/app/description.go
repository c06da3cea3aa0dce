package app

import (
	"encoding/json"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Description is an application as plain data: everything Assemble needs
// to build its runtime, with no function, interface or runtime object in
// it. aidgen fills it by lowering an app file (internal/lower); a generated
// service holds it as a Go literal and calls the same Assemble, so the
// interpreter and the generated service cannot wire an application
// differently, and a service never parses CUE at start-up.
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
	// Service configures the HTTP service of a generated application.
	Service Service
}

// Provider kinds.
const (
	ProviderOpenAICompatible = "openai-compatible"
	ProviderFake             = "fake"
)

// Provider is an endpoint that serves models. Kind decides which of the
// other fields apply.
type Provider struct {
	// Name is what models' Provider refers to.
	Name string
	// Kind is ProviderOpenAICompatible or ProviderFake.
	Kind string
	// BaseURL is the API root of an openai-compatible provider.
	BaseURL string
	// APIKeyEnv names the environment variable holding an openai-compatible
	// provider's key; the key itself is never in a description.
	APIKeyEnv string
	// Timeout bounds one HTTP attempt; zero means the adapter's default.
	Timeout time.Duration
	// MaxRetries is how many times a retryable failure of an
	// openai-compatible provider is retried. A fake never fails
	// transiently, so Assemble gives it one attempt whatever this says.
	MaxRetries int
	// Seed seeds a fake provider's answer key coin and embeddings.
	Seed int64
	// Latency delays every call of a fake provider.
	Latency time.Duration
	// AnswerKey, when set, makes a fake answer a dataset's expected answers
	// with a known accuracy, for evals.
	AnswerKey *AnswerKey
	// Script is a fake's agent script file (fake.LoadScript's format):
	// what each agent answers at each step. Empty means no script.
	Script string
}

// AnswerKey configures a fake provider's eval mode.
type AnswerKey struct {
	// Dataset is the eval dataset holding the expected answers.
	Dataset string
	// Accuracy is the probability of a correct answer, in [0, 1].
	Accuracy float64
}

// Tool implementation kinds.
const (
	// ToolGo is Go code registered by name in Options.Implementations; the
	// default.
	ToolGo = "go"
	// ToolHTTP POSTs the call's arguments to a URL (agents.HTTPTool).
	ToolHTTP = "http"
	// ToolFixture answers from argument → result rows in a file
	// (agents.FixtureTool).
	ToolFixture = "fixture"
)

// Tool is a declared tool and how it is implemented.
type Tool struct {
	// Decl is what the model sees and how the runtime treats calls.
	Decl agents.Tool
	// Implementation says where the code behind the tool comes from.
	Implementation ToolImplementation
}

// ToolImplementation says how a tool is implemented: by Go code registered
// under the tool's name, or by a kind that needs no code.
type ToolImplementation struct {
	// Kind is ToolGo (or empty), ToolHTTP or ToolFixture.
	Kind string
	// URL is where an http tool POSTs.
	URL string
	// HeadersFromEnv maps a header of an http tool to the environment
	// variable holding its value.
	HeadersFromEnv map[string]string
	// File is a fixture tool's rows (agents.LoadFixture's format).
	File string
}

// Eval is one sampled evaluation.
type Eval struct {
	// Name is the eval's name.
	Name string
	// Dataset is the dataset file.
	Dataset string
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
	// State says where runs, checkpoints and memory live.
	State State
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
