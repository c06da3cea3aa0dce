package app_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	a, err := app.Assemble(t.Context(), d, app.Options{Implementations: goTools()})
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
	if _, err := app.Assemble(t.Context(), d, app.Options{Implementations: goTools()}); err == nil || !strings.Contains(err.Error(), `tool "files": server "db" is not declared`) {
		t.Errorf("a tool naming an undeclared server: %v", err)
	}
}
