package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/kind"
)

// server is a resource kind: a server several tools share.
type server struct {
	Addr string `json:"addr"`
}

func (server) ResourceKind() string { return "servers" }

// session is a server's connection, opened once per application.
type session struct {
	addr   string
	closed bool
}

// viaServer is a tool kind whose tools a server offers: one named tool,
// or, with Prefix, every tool of the server, as MCP's import will.
type viaServer struct {
	Server string `json:"server"`
	Prefix string `json:"prefix,omitempty"`
}

func (viaServer) ToolKind() string { return "via" }

// connects counts the sessions opened across the test.
var connects = map[string]*session{}

func (k viaServer) NewTools(_ context.Context, decl agents.Tool, env kind.Env) ([]agents.BuiltTool, error) {
	r, ok := env.Resource("servers", k.Server)
	if !ok {
		return nil, fmt.Errorf("server %q is not declared", k.Server)
	}
	s, err := kind.Shared(env.Scope, "server/"+k.Server, func() (*session, func() error, error) {
		s := &session{addr: r.(server).Addr}
		connects[k.Server+"@"+s.addr] = s
		return s, func() error { s.closed = true; return nil }, nil
	})
	if err != nil {
		return nil, err
	}
	offered := []string{decl.Name}
	if k.Prefix != "" {
		offered = []string{k.Prefix + "read", k.Prefix + "list"}
	}
	var out []agents.BuiltTool
	for _, name := range offered {
		tool := decl
		tool.Name = name
		out = append(out, agents.BuiltTool{Tool: tool, Implementation: agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
			return name + " via " + s.addr, nil
		})})
	}
	return out, nil
}

// TestResources assembles tools of a kind that share a resource: the
// resource reaches the kind through kind.Env, the connection is opened once
// for two declarations and closed with the application, and a declaration
// that stands for several tools (an import) offers them all to the agents
// that list it.
func TestResources(t *testing.T) {
	d := desk(t)
	d.Resources = []kind.Resource{{Name: "fs", Kind: server{Addr: "unix:/fs.sock"}}}
	d.Tools = append(d.Tools,
		app.Tool{Decl: agents.Tool{Name: "stat", Description: "Stat."}, Kind: viaServer{Server: "fs"}},
		app.Tool{Decl: agents.Tool{Name: "files", Description: "Files."}, Kind: viaServer{Server: "fs", Prefix: "fs_"}},
	)
	d.Agents[0].Tools = append(d.Agents[0].Tools, "stat", "files")
	a, err := assemble(t.Context(), d, app.Options{Implementations: goTools()})
	if err != nil {
		t.Fatal(err)
	}
	s := connects["fs@unix:/fs.sock"]
	if len(connects) != 1 || s == nil {
		t.Fatalf("sessions opened: %v, want one", connects)
	}
	tools := a.Agents.Tools("desk")
	for _, want := range []string{"lookup", "stat", "fs_read", "fs_list"} {
		if !strings.Contains(strings.Join(tools, " "), want) {
			t.Errorf("desk is offered %q, which lacks %s", tools, want)
		}
	}
	if strings.Contains(strings.Join(tools, " "), "files") {
		t.Errorf("desk is offered the import's own name: %q", tools)
	}
	if err := a.Close(); err != nil || !s.closed {
		t.Errorf("Close = %v; the session closed: %v", err, s.closed)
	}

	d.Tools[len(d.Tools)-1].Kind = viaServer{Server: "db"}
	if _, err := assemble(t.Context(), d, app.Options{Implementations: goTools()}); err == nil || !strings.Contains(err.Error(), `tool "files": server "db" is not declared`) {
		t.Errorf("a tool naming an undeclared server: %v", err)
	}
}

// describing is a resource kind that says what it offers.
type describing struct {
	Addr string `json:"addr"`
}

func (describing) ResourceKind() string { return "servers" }

func (d describing) Describe(_ context.Context, env kind.Env, name string, w io.Writer) error {
	if d.Addr == "" {
		return errors.New("unreachable")
	}
	key, _ := env.Lookup("SERVER_KEY")
	_, err := fmt.Fprintf(w, "%s at %s (key %s): read, list\n", name, d.Addr, key)
	return err
}

// TestDescribe asks a resource what it offers, through the environment the
// application would lend its kind, and names what is wrong otherwise: no
// such resource, no resource of the kind, a kind that cannot describe.
func TestDescribe(t *testing.T) {
	d := desk(t)
	d.Resources = []kind.Resource{{Name: "fs", Kind: describing{Addr: "unix:/fs.sock"}}, {Name: "db", Kind: describing{}}, {Name: "plain", Kind: server{}}}
	opts := app.Options{LookupEnv: func(k string) (string, bool) { return "k1", k == "SERVER_KEY" }}
	var out strings.Builder
	if err := app.Describe(t.Context(), d.Description, opts, "servers", "fs", &out); err != nil || out.String() != "fs at unix:/fs.sock (key k1): read, list\n" {
		t.Errorf("Describe = %q, %v", out.String(), err)
	}
	for _, tt := range []struct{ kind, name, want string }{
		{"servers", "db", "unreachable"},
		{"servers", "nope", `no servers resource "nope"; desk has fs, db, plain`},
		{"mcpServers", "fs", "desk declares no mcpServers; its resources are of kind servers"},
	} {
		if err := app.Describe(t.Context(), d.Description, opts, tt.kind, tt.name, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Describe(%s, %s) = %v, want %q", tt.kind, tt.name, err, tt.want)
		}
	}
	d.Resources = []kind.Resource{{Name: "plain", Kind: server{}}}
	if err := app.Describe(t.Context(), d.Description, opts, "servers", "plain", io.Discard); err == nil || !strings.Contains(err.Error(), "cannot describe") {
		t.Errorf("a kind that cannot describe: %v", err)
	}
	d.Resources = nil
	if err := app.Describe(t.Context(), d.Description, opts, "servers", "fs", io.Discard); err == nil || !strings.Contains(err.Error(), "declares no resources") {
		t.Errorf("no resources: %v", err)
	}
}
