package app

import (
	"path/filepath"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
)

// Description is an application as plain data: everything Assemble needs
// to build its runtime, with no function or runtime object in it. Its
// evals are not in it: a service runs none, and aidgen eval assembles an
// application with them (package runtime/app/appeval), so that a service
// does not link the eval package and its statistics. The only
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
	// Resources are the named app-level declarations a kind owns and its
	// elements share (the servers of tools of one kind), which Assemble
	// lends every kind through kind.Env.Resources.
	Resources []kind.Resource
	// Service configures the HTTP service of a generated application.
	Service Service
	// Approvals is the approval policy of every call of a declared tool
	// (agents.Config.Approvals).
	Approvals policy.Policy
	// Conditions compiles the conditions of the approval rules (When) and
	// of guardrails of kind cel: cel.Language (package
	// runtime/agents/policy/cel) when there are any, nil otherwise, so
	// that a service without them does not link CEL
	// (agents.Config.Conditions).
	Conditions policy.Language
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

// Path resolves a file name of the description against its directory:
// an absolute name is kept, a relative one is relative to Dir.
func (d *Description) Path(name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(d.Dir, filepath.FromSlash(name))
}
