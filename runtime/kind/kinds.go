package kind

import (
	"encoding/json"
	"slices"
	"strings"
)

// Point is an extension point: what a kind is a kind of.
type Point string

// The extension points.
const (
	// Providers are the provider kinds, which serve models
	// (gateway.ProviderKind).
	Providers Point = "provider"
	// Tools are the tool kinds, which implement declared tools without Go
	// code (agents.ToolKind).
	Tools Point = "tool"
	// Stores are the store kinds, which hold retrievers' vectors and
	// agents' memory (retrieval.StoreKind, agents.MemoryStoreKind).
	Stores Point = "store"
	// Resources are the resource kinds: named app-level declarations of
	// their own IR section that the elements of another kind share, such as
	// a server several tools call (ResourceKind). A resource kind's name is
	// its section's.
	Resources Point = "resource"
)

// The names of the kinds that are built, as the IR spells them. Each is
// the name a kind's configuration reports (ProviderKind, ToolKind,
// StoreKind methods) and the key of its decoder in internal/lower.
const (
	// ProviderAnthropic speaks Anthropic's Messages API
	// (runtime/gateway/anthropic).
	ProviderAnthropic = "anthropic"
	// ProviderOpenAICompatible speaks the OpenAI HTTP API
	// (runtime/gateway/openaicompat).
	ProviderOpenAICompatible = "openai-compatible"
	// ProviderFake is the deterministic, keyless provider of tests, examples
	// and evals (runtime/gateway/fake).
	ProviderFake = "fake"

	// ToolGo is Go code registered under the tool's name: the default,
	// which has no configuration and no package of its own.
	ToolGo = "go"
	// ToolHTTP POSTs the call's arguments to a URL
	// (runtime/agents/tools/http).
	ToolHTTP = "http"
	// ToolFixture answers from argument → result rows in a file
	// (runtime/agents/tools/fixture).
	ToolFixture = "fixture"
	// ToolMCP calls the tools of a Model Context Protocol server
	// (runtime/agents/tools/mcp).
	ToolMCP = "mcp"
	// ToolSandbox runs the model's shell commands in an isolated,
	// resource-limited environment (runtime/agents/tools/sandbox).
	ToolSandbox = "sandbox"

	// ResourceMCPServers are the Model Context Protocol servers that tools
	// of kind mcp call, declared in the IR section of that name
	// (runtime/agents/tools/mcp).
	ResourceMCPServers = "mcpServers"

	// StoreMemory keeps vectors and memory in the process
	// (runtime/retrieval/memory; agents' memory in such a store is
	// runtime/agents' in-process memory).
	StoreMemory = "memory"
	// StorePGVector keeps them in PostgreSQL with pgvector
	// (runtime/retrieval/pgvector).
	StorePGVector = "pgvector"
)

// Info is what the parts of aid that cannot import a kind's package know
// about it.
type Info struct {
	// Point is the extension point the kind plugs into.
	Point Point
	// Name is the kind's name, as the IR spells it.
	Name string
	// Deferred marks a kind a user will reasonably write that is not
	// built: the schema accepts it so that vet reports it as not built
	// (Principle 3) rather than as a typo, and lowering refuses it with a
	// *DeferredError in the same words.
	Deferred bool
	// Files are the fields of the kind's configuration that name a file
	// relative to the app file, as dot-separated JSON paths ("script",
	// "answerKey.dataset"): vet checks that each exists, and aidgen build
	// embeds each in the service. The JSON names are the IR's, which the
	// kind's configuration shares.
	Files []string
	// Refs are the fields of the kind's configuration that name an entry of
	// another section (a resource), which vet resolves.
	Refs []Ref
	// OneOf are groups of fields of the kind's configuration (dot-separated
	// JSON paths) of which exactly one is set, such as the http tool's url
	// and urlEnv. The rule lives in CheckOneOf, which vet calls on the IR's
	// block and the kind's constructor on its configuration.
	OneOf [][]string
	// Imports, for a tool kind whose declaration may stand for several
	// tools, says how their names follow from the declaration (Tools); nil
	// for a kind whose declaration is one tool of its own name.
	Imports *Imports
	// NoSampling, for a provider kind, says that its API takes no sampling
	// parameters (temperature, top_p): its adapter cannot send them, so
	// vet refuses an agent that declares one on a model the kind serves,
	// rather than let the value be dropped.
	NoSampling bool
}

// Imports says how a tool declaration of a kind stands for several tools,
// as an MCP server's tools imported under a prefix: when the declaration's
// configuration sets Field, it stands for one tool per name the string list
// at Allow holds, with the string at Prefix before each, or, when the list
// is empty or unset, for every tool the kind finds when the application
// starts, which no file names. Paths are dot-separated JSON paths.
type Imports struct {
	// Field is the field whose presence makes the declaration an import.
	Field string
	// Allow is the list of the names imported.
	Allow string
	// Prefix is the string put before each imported name.
	Prefix string
}

// Tools returns the names of the tools a declaration of the kind with the
// JSON configuration data stands for: (nil, false) when it is one tool of
// its own name; (names, true) when it imports the named tools; (nil, true)
// when it imports tools whose names are known only when the application
// starts.
func (i Info) Tools(data []byte) (names []string, imports bool) {
	if i.Imports == nil {
		return nil, false
	}
	if _, ok := value(data, i.Imports.Field); !ok {
		return nil, false
	}
	prefix, _ := Field(data, i.Imports.Prefix)
	list, _ := value(data, i.Imports.Allow)
	items, _ := list.([]any)
	for _, it := range items {
		if n, ok := it.(string); ok {
			names = append(names, prefix+n)
		}
	}
	return names, true
}

// Problem is a field of a kind's configuration that breaks a rule its Info
// states.
type Problem struct {
	// Field is the offending field's dot-separated JSON path; empty for the
	// configuration as a whole.
	Field string
	// Msg says what is wrong and what to change.
	Msg string
}

// CheckOneOf returns a Problem for each group of OneOf of which the JSON
// object data (a kind's configuration, or its IR block: their JSON names
// are the same) sets no field to a non-empty string, at the configuration,
// or several, at the second one set.
func (i Info) CheckOneOf(data []byte) []Problem {
	var ps []Problem
	for _, group := range i.OneOf {
		var set []string
		for _, f := range group {
			if v, ok := Field(data, f); ok && v != "" {
				set = append(set, f)
			}
		}
		switch len(set) {
		case 0:
			ps = append(ps, Problem{Msg: "set one of " + orList(group, "and")})
		case 1:
		default:
			ps = append(ps, Problem{Field: set[1], Msg: "set either " + orList(set, "or") + ", not more than one"})
		}
	}
	return ps
}

// orList writes fields as "a, b and c" (conj "and") or "a, b or c".
func orList(fields []string, conj string) string {
	if len(fields) == 1 {
		return fields[0]
	}
	return strings.Join(fields[:len(fields)-1], ", ") + " " + conj + " " + fields[len(fields)-1]
}

// Ref is a field of a kind's configuration that names an entry of an IR
// section.
type Ref struct {
	// Field is the field's dot-separated JSON path.
	Field string
	// Section is the top-level IR section the name must be a key of.
	Section string
	// What is how messages call an entry of the section ("MCP server").
	What string
}

// kinds is the list of every kind, built and deferred, by extension point:
// the one place aid's own code spells a kind's name. Keep each point's
// entries sorted by name.
var kinds = []Info{
	// The Messages API of version 2026-10-21 (anthropic-sdk-go/v2) has no
	// temperature or top_p.
	{Point: Providers, Name: ProviderAnthropic, NoSampling: true},
	{Point: Providers, Name: "azure-openai", Deferred: true},
	{Point: Providers, Name: "bedrock", Deferred: true},
	{Point: Providers, Name: ProviderFake, Files: []string{"answerKey.dataset", "script"}},
	{Point: Providers, Name: "gemini", Deferred: true},
	{Point: Providers, Name: ProviderOpenAICompatible},
	{Point: Providers, Name: "vertex", Deferred: true},

	{Point: Tools, Name: ToolFixture, Files: []string{"file"}},
	{Point: Tools, Name: ToolGo},
	{Point: Tools, Name: ToolHTTP, OneOf: [][]string{{"url", "urlEnv"}}},
	{Point: Tools, Name: ToolMCP, Refs: []Ref{{Field: "server", Section: ResourceMCPServers, What: "MCP server"}},
		Imports: &Imports{Field: "import", Allow: "import.allow", Prefix: "import.prefix"}},
	{Point: Tools, Name: ToolSandbox},

	{Point: Resources, Name: ResourceMCPServers},

	{Point: Stores, Name: StoreMemory},
	{Point: Stores, Name: StorePGVector},
	{Point: Stores, Name: "pinecone", Deferred: true},
	{Point: Stores, Name: "qdrant", Deferred: true},
	{Point: Stores, Name: "weaviate", Deferred: true},
}

// Names returns the names of the built kinds of an extension point, sorted.
// It returns a new slice on every call, so that no caller can change the
// list another sees.
func Names(p Point) []string { return names(p, false) }

// Deferred returns the names of the kinds of an extension point that the
// schema accepts and that are not built, sorted, in a new slice.
func Deferred(p Point) []string { return names(p, true) }

func names(p Point, deferred bool) []string {
	var out []string
	for _, k := range kinds {
		if k.Point == p && k.Deferred == deferred {
			out = append(out, k.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Lookup returns what is known of the named kind of an extension point,
// built or deferred.
func Lookup(p Point, name string) (Info, bool) {
	for _, k := range kinds {
		if k.Point == p && k.Name == name {
			k.Files = slices.Clone(k.Files)
			k.Refs = slices.Clone(k.Refs)
			k.OneOf = slices.Clone(k.OneOf)
			for i := range k.OneOf {
				k.OneOf[i] = slices.Clone(k.OneOf[i])
			}
			return k, true
		}
	}
	return Info{}, false
}

// IsDeferred reports whether name is a deferred kind of the extension
// point.
func IsDeferred(p Point, name string) bool {
	k, ok := Lookup(p, name)
	return ok && k.Deferred
}

// Field returns the string at the dot-separated JSON path field of the
// JSON object data, and whether there is one: how the parts of aid that
// cannot import a kind read the fields its Info names, in its
// configuration or in its IR block alike, whose JSON names are the same.
func Field(data []byte, field string) (string, bool) {
	v, _ := value(data, field)
	s, ok := v.(string)
	return s, ok
}

// value returns the JSON value at the dot-separated path field of the JSON
// object data, decoded, and whether there is one.
func value(data []byte, field string) (any, bool) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, false
	}
	for _, k := range strings.Split(field, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}
