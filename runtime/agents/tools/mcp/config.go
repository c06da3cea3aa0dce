package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/rules"
)

// The transports of Server.Transport.
const (
	// TransportStdio starts the server as a child process and speaks to it
	// over its standard input and output.
	TransportStdio = "stdio"
	// TransportHTTP speaks the streamable HTTP transport to a URL.
	TransportHTTP = "http"
)

// DefaultConnectTimeout bounds connecting to a server and reading its
// tools when Server.ConnectTimeout is zero.
const DefaultConnectTimeout = 30 * time.Second

// Server is the configuration of an MCP server, an entry of the IR section
// mcpServers: a resource (kind.ResourceKind) that every tool of kind mcp
// naming it shares, connected once per application. It is plain data, so a
// generated service holds it as a literal.
type Server struct {
	// Transport is TransportStdio or TransportHTTP.
	Transport string `json:"transport"`
	// Command is the program a stdio server runs, looked up on the
	// service's PATH when it has no slash.
	Command string `json:"command,omitempty"`
	// Args are the command's arguments.
	Args []string `json:"args,omitempty"`
	// Dir is the stdio server's working directory, relative to the
	// application's directory; that directory when empty.
	Dir string `json:"dir,omitempty"`
	// Env is the stdio server's whole environment: each variable the child
	// gets, mapped to the variable of the service's environment it is read
	// from. The child inherits nothing else.
	Env map[string]string `json:"env,omitempty"`
	// URL is an http server's endpoint.
	URL string `json:"url,omitempty"`
	// BearerTokenEnv names the variable holding the token an http server
	// is sent as "Authorization: Bearer <token>".
	BearerTokenEnv string `json:"bearerTokenEnv,omitempty"`
	// HeadersFromEnv maps a header sent with every request to an http
	// server to the variable holding its value.
	HeadersFromEnv map[string]string `json:"headersFromEnv,omitempty"`
	// OAuth, when set, authorizes an http server's requests with OAuth 2.1
	// tokens instead of a static bearer token.
	OAuth *OAuth `json:"oauth,omitempty"`
	// ConnectTimeout bounds connecting and reading the server's tools, at
	// start-up and at each reconnection; zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration `json:"connectTimeout,omitempty"`
}

// ResourceKind implements kind.ResourceKind: a server is declared in the
// IR section mcpServers.
func (Server) ResourceKind() string { return kind.ResourceMCPServers }

// Kind is the configuration of a tool of kind mcp, as the IR spells it
// (implementation: {kind: "mcp", server, tool, import}): one tool of a
// server, or, with Import, the server's tools whole. It implements
// agents.ToolKind.
type Kind struct {
	// Server names the entry of mcpServers that offers the tool.
	Server string `json:"server"`
	// Tool is the server's name for the tool; the declared tool's name when
	// empty. It is empty with Import.
	Tool string `json:"tool,omitempty"`
	// Import, when set, offers the model the server's tools instead of one.
	Import *Import `json:"import,omitempty"`
}

// Import is a server's tools imported whole.
type Import struct {
	// Allow lists the server's tools to import; all of them when empty.
	Allow []string `json:"allow,omitempty"`
	// Prefix is put before each imported tool's name.
	Prefix string `json:"prefix,omitempty"`
}

// ToolKind implements agents.ToolKind.
func (Kind) ToolKind() string { return kind.ToolMCP }

// connKey is the key of a server's connection in the application's
// kind.Scope.
type connKey struct{ server string }

// NewTools implements agents.ToolKind. It connects to the server the first
// time one of the application's tools names it (later tools share the
// connection, which the application's Close ends), reads its tools and
// returns the declared one, or the imported ones, each with the server's
// description (unless decl has one) and input schema, decl's approval and
// timeout, and decl's effects, or, when decl has none, EffectsRead for a
// tool the server annotates readOnlyHint and EffectsWrite otherwise. A tool
// the server does not offer is a *NotOfferedError; one whose input schema
// is not an object (rules.ToolInput) is refused, or, when the server's
// tools are imported without an allowlist, left out and logged.
func (k Kind) NewTools(ctx context.Context, decl agents.Tool, env kind.Env) ([]agents.BuiltTool, error) {
	c, err := connect(ctx, k.Server, env)
	if err != nil {
		return nil, err
	}
	offered := c.startTools()
	if k.Import == nil {
		name := cmp.Or(k.Tool, decl.Name)
		t, ok := offered[name]
		if !ok {
			return nil, notOffered(k.Server, name, offered)
		}
		if err := callable(k.Server, t); err != nil {
			return nil, err
		}
		return []agents.BuiltTool{c.built(decl, decl.Name, t, false)}, nil
	}
	names := k.Import.Allow
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(offered))
	}
	var out []agents.BuiltTool
	var errs []string
	for _, name := range names {
		t, ok := offered[name]
		if !ok {
			return nil, notOffered(k.Server, name, offered)
		}
		if err := callable(k.Server, t); err != nil {
			if len(k.Import.Allow) > 0 { // asked for by name: refused, as when declared
				errs = append(errs, err.Error())
				continue
			}
			c.log.Warn("MCP server tool not imported", "tool", name, "error", err)
			continue
		}
		as := k.Import.Prefix + name
		if !validToolName(as) {
			errs = append(errs, fmt.Sprintf("MCP server %q offers tool %q, and %q is not a name the model API accepts (^[a-zA-Z0-9_-]{1,%d}$): leave it out of import.allow, or declare it as a tool of its own", k.Server, name, as, rules.MaxToolName))
			continue
		}
		out = append(out, c.built(decl, as, t, true))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("MCP server %q offers no tools to import", k.Server)
	}
	return out, nil
}

// connect returns the application's connection to the named server,
// opening it the first time.
func connect(ctx context.Context, name string, env kind.Env) (*conn, error) {
	s, err := serverOf(env, name)
	if err != nil {
		return nil, err
	}
	// A server that cannot be reached is kept as its error, so that the
	// application's other tools of that server fail at once rather than
	// each wait out the connect timeout again.
	d, err := kind.Shared(env.Scope, connKey{name}, func() (dialed, func() error, error) {
		c, err := dial(ctx, name, s, env)
		if err != nil {
			return dialed{err: err}, nil, nil
		}
		// Every server the application connects to is required: its tools
		// are offered to the model, which cannot be told they are gone.
		env.Scope.AddCheck("mcp_server:"+name, c.ready)
		return dialed{conn: c}, c.close, nil
	})
	if err != nil {
		return nil, err
	}
	return d.conn, d.err
}

// serverOf is the configuration of the named server of env's resources.
func serverOf(env kind.Env, name string) (Server, error) {
	r, ok := env.Resource(kind.ResourceMCPServers, name)
	if !ok {
		return Server{}, fmt.Errorf("MCP server %q is not declared in mcpServers", name)
	}
	s, ok := r.(Server)
	if !ok {
		return Server{}, fmt.Errorf("MCP server %q: configuration %T is not an mcp.Server", name, r)
	}
	return s, nil
}

// dialed is the outcome of connecting to a server at start-up.
type dialed struct {
	conn *conn
	err  error
}

// built is the BuiltTool for the server's tool t, offered to the model as
// as; imported says whether decl is an import, whose description is not
// the tool's.
func (c *conn) built(decl agents.Tool, as string, t *sdk.Tool, imported bool) agents.BuiltTool {
	tool := define(c.name, decl, as, definitionOf(t), imported)
	return agents.BuiltTool{Tool: tool, Implementation: &remoteTool{conn: c, name: t.Name, schema: tool.Input}}
}

// definition is what a server said of a tool, its credentials redacted:
// what the tool the model is offered and its effects follow from, and
// what a run's recording keeps of it (agents.LearnedDefinition), so that
// a replay builds the same tool without the server (Kind.RecordedTools).
type definition struct {
	// Name is the server's name for the tool.
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// ReadOnly is the tool's readOnlyHint annotation.
	ReadOnly bool `json:"readOnlyHint,omitempty"`
}

// definitionOf is the definition of the server's tool t, which listTools
// has already redacted.
func definitionOf(t *sdk.Tool) definition {
	d := definition{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schemaOf(t), ReadOnly: EffectsOf(t) == agents.EffectsRead}
	if d.Title == "" && t.Annotations != nil {
		d.Title = t.Annotations.Title
	}
	return d
}

// source is the agents.LearnedDefinition.Source of a server's tools.
func source(server string) string { return fmt.Sprintf("MCP server %q", server) }

// define is the tool decl provides from the server's definition d,
// offered to the model as as: the server's description unless decl has
// one (an import's never has), the server's input schema, and decl's
// effects, or, when it states none, read only for a tool the server
// annotates readOnlyHint and write otherwise (EffectsOf).
func define(server string, decl agents.Tool, as string, d definition, imported bool) agents.Tool {
	tool := decl
	tool.Name = as
	if imported || tool.Description == "" {
		tool.Description = cmp.Or(strings.TrimSpace(d.Description), strings.TrimSpace(d.Title), fmt.Sprintf("Tool %s of MCP server %s.", d.Name, server))
	}
	tool.Input = d.InputSchema
	if tool.Effects == "" {
		tool.Effects = agents.EffectsWrite
		if d.ReadOnly {
			tool.Effects = agents.EffectsRead
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("mcp: definition of tool %q: %v", d.Name, err)) // plain data, its schema valid JSON
	}
	tool.Learned = &agents.LearnedDefinition{Source: source(server), Definition: b}
	return tool
}

// RecordedTools implements agents.LearnedToolKind: the tools decl
// provides, built from the definitions the server gave in a recorded run
// as NewTools builds them from its tools/list, without connecting to it.
// A tool the recording does not hold, which no agent of the run was
// offered, is left out of an import, and a declared one is decl as it
// stands: a replay that reaches an agent offering it finds that its
// request differs.
func (k Kind) RecordedTools(decl agents.Tool, learned []agents.LearnedTool) ([]agents.Tool, error) {
	src := source(k.Server)
	defs := map[string]definition{}
	for _, l := range learned {
		if l.Source != src {
			continue
		}
		var d definition
		if err := json.Unmarshal(l.Definition, &d); err != nil || d.Name == "" {
			return nil, fmt.Errorf("the recording's definition of tool %q of MCP server %q is not one this version reads", l.Tool, k.Server)
		}
		if _, seen := defs[d.Name]; !seen {
			defs[d.Name] = d
		}
	}
	if k.Import == nil {
		d, ok := defs[cmp.Or(k.Tool, decl.Name)]
		if !ok {
			return []agents.Tool{decl}, nil
		}
		return []agents.Tool{define(k.Server, decl, decl.Name, d, false)}, nil
	}
	names := k.Import.Allow
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(defs))
	}
	var out []agents.Tool
	for _, name := range names {
		if d, ok := defs[name]; ok {
			out = append(out, define(k.Server, decl, k.Import.Prefix+name, d, true))
		}
	}
	return out, nil
}

// callable checks a server's tool against the rule of every tool's input
// schema (rules.ToolInput): a tool no call can fit is refused at start-up,
// not at each call.
func callable(server string, t *sdk.Tool) error {
	if ps := rules.ToolInput(schemaOf(t)); len(ps) > 0 {
		return fmt.Errorf("MCP server %q offers tool %q, which cannot be called: %s", server, t.Name, ps[0].Msg)
	}
	return nil
}

// EffectsOf is the effects of a server's tool whose declaration states
// none: read only when the server annotates it readOnlyHint: true, which
// the protocol defines as a tool that does not modify its environment;
// write otherwise, since a tool without annotations may do anything.
func EffectsOf(t *sdk.Tool) agents.Effects {
	if t.Annotations != nil && t.Annotations.ReadOnlyHint {
		return agents.EffectsRead
	}
	return agents.EffectsWrite
}

// schemaOf is a tool's input schema as JSON; a tool that has none takes an
// object.
func schemaOf(t *sdk.Tool) json.RawMessage {
	if t.InputSchema == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	b, err := json.Marshal(t.InputSchema)
	if err != nil || string(b) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return b
}

// validToolName reports whether the model API accepts name as a function
// name.
func validToolName(name string) bool {
	if name == "" || len(name) > rules.MaxToolName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// NotOfferedError reports a tool the application declares that its server
// does not offer.
type NotOfferedError struct {
	// Server is the server's name in mcpServers.
	Server string
	// Tool is the server's name for the tool, as declared.
	Tool string
	// Offered are the names of the tools the server offers, sorted.
	Offered []string
}

func (e *NotOfferedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "MCP server %q offers no tool %q", e.Server, e.Tool)
	if s := rules.Suggest(e.Tool, e.Offered); s != "" {
		fmt.Fprintf(&b, " (did you mean %q?)", s)
	}
	if len(e.Offered) == 0 {
		b.WriteString("; it offers no tools")
	} else {
		fmt.Fprintf(&b, "; it offers %s", strings.Join(e.Offered, ", "))
	}
	return b.String()
}

func notOffered(server, tool string, offered map[string]*sdk.Tool) error {
	return &NotOfferedError{Server: server, Tool: tool, Offered: slices.Sorted(maps.Keys(offered))}
}
