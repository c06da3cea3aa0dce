package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/kind"
)

// BenchmarkCall measures what calling a tool through MCP adds to a call:
// the same echo as a Go tool (direct), and as the test server's tool over
// stdio (a child process) and over streamable HTTP (in process, on
// loopback). The difference of each to direct is MCP's added latency:
//
//	go test -run '^$' -bench BenchmarkCall -benchtime 2000x ./runtime/agents/tools/mcp/
func BenchmarkCall(b *testing.B) {
	args := json.RawMessage(`{"text":"hello"}`)
	run := func(b *testing.B, impl agents.Implementation) {
		ctx := context.Background()
		for b.Loop() {
			if out, err := impl.Call(ctx, args); err != nil || out != "hello" {
				b.Fatalf("%q, %v", out, err)
			}
		}
	}
	b.Run("direct", func(b *testing.B) {
		run(b, agents.Typed(func(_ context.Context, in struct {
			Text string `json:"text"`
		}) (string, error) {
			return in.Text, nil
		}))
	})
	over := func(b *testing.B, env kind.Env) {
		tools, err := mcp.Kind{Server: "srv"}.NewTools(context.Background(), agents.Tool{Name: "echo"}, env)
		if err != nil {
			b.Fatal(err)
		}
		run(b, tools[0].Implementation)
	}
	b.Run("stdio", func(b *testing.B) {
		s, lookup := stdioServer("serve")
		over(b, envFor(b, s, lookup))
	})
	b.Run("http", func(b *testing.B) {
		s, lookup := httpServer(b, nil)
		over(b, envFor(b, s, lookup))
	})
}
