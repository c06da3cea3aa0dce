package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/kind"
)

// children returns the process ids of this process's children, zombies
// included (a child not waited for is a leak too), from /proc.
func children(t *testing.T) []string {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		t.Skip("no /proc to list child processes in")
	}
	me := strconv.Itoa(os.Getpid())
	var out []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the process ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after
		// its closing parenthesis.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == me {
			out = append(out, strings.Fields(s)[0]+" ("+fields[0]+")")
		}
	}
	return out
}

// settled waits for the goroutines to come back to at most before+slack
// and for this process to have no children, and reports what is left.
func settled(t *testing.T, before int) {
	t.Helper()
	const slack = 2
	deadline := time.Now().Add(10 * time.Second)
	for (runtime.NumGoroutine() > before+slack || len(children(t)) > 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if kids := children(t); len(kids) > 0 {
		t.Errorf("child processes left after Close: %v", kids)
	}
	if n := runtime.NumGoroutine(); n > before+slack {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines before, %d after Close:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// TestCloseEndsEverything: whatever the servers did (answered, hung until
// the timeout, crashed mid-call, never answered the handshake, flooded),
// closing the application ends every session, goroutine and child
// process it started.
func TestCloseEndsEverything(t *testing.T) {
	if kids := children(t); len(kids) > 0 {
		t.Skipf("child processes before the test: %v", kids)
	}
	before := runtime.NumGoroutine()
	func() {
		serve, lookup := stdioServer("serve")
		mute, _ := stdioServer("mute")
		mute.ConnectTimeout = 300 * time.Millisecond
		flood, _ := stdioServer("flood")
		scope := &kind.Scope{}
		defer func() {
			if err := scope.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}()
		env := kind.Env{LookupEnv: func(name string) (string, bool) {
			switch name {
			case "MODE_MUTE":
				return "mute", true
			case "MODE_FLOOD":
				return "flood", true
			}
			return lookup(name)
		}, Scope: scope, Resources: []kind.Resource{
			{Name: "srv", Kind: serve},
			{Name: "mute", Kind: withMode(mute, "MODE_MUTE")},
			{Name: "flood", Kind: withMode(flood, "MODE_FLOOD")},
		}}
		tool := func(server, name string) agents.Implementation {
			out, err := mcp.Kind{Server: server}.NewTools(t.Context(), agents.Tool{Name: name}, env)
			if err != nil {
				t.Fatal(err)
			}
			return out[0].Implementation
		}
		callWithin := func(impl agents.Implementation, args string, d time.Duration) (string, error) {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			defer cancel()
			return impl.Call(ctx, json.RawMessage(args))
		}
		pid, err := callWithin(tool("srv", "pid"), `{}`, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := callWithin(tool("srv", "hang"), `{}`, 200*time.Millisecond); err == nil {
			t.Error("hang answered")
		}
		if _, err := callWithin(tool("srv", "crash"), `{}`, 10*time.Second); err == nil {
			t.Error("crash answered")
		}
		if _, err := callWithin(tool("srv", "echo"), `{"text":"x"}`, 10*time.Second); err != nil {
			t.Errorf("echo after the crash: %v", err)
		}
		if _, err := callWithin(tool("flood", "huge"), `{"bytes":50000000}`, 30*time.Second); err == nil {
			t.Error("50 MB answered")
		}
		if _, err := (mcp.Kind{Server: "mute"}).NewTools(t.Context(), agents.Tool{Name: "x"}, env); err == nil {
			t.Error("a mute server connected")
		}
		t.Logf("first server process %s; children before Close: %v", pid, children(t))
	}()
	settled(t, before)
}

// withMode is s with its mode read from the variable v of the service's
// environment.
func withMode(s mcp.Server, v string) mcp.Server {
	s.Env = map[string]string{serverEnv: v}
	return s
}

// TestEchoedSecrets: an http server that echoes the credentials it is sent
// (the bearer token, a key header) in a tool's description or schema, a
// result, an isError result or an error shows them neither to the model
// nor in the error; a short, ordinary header value is left as it is.
func TestEchoedSecrets(t *testing.T) {
	const token, key = "sk-live-0123456789abcdef", "key-abcdef0123456789"
	srv := newTestServer(nil)
	srv.AddTool(&sdk.Tool{
		Name: "leak", Description: "Called with " + key + ".",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"k": map[string]any{"type": "string", "description": "Bearer " + token, "enum": []any{token}},
		}},
	}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) { return text("ok"), nil })
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := mcp.Server{Transport: mcp.TransportHTTP, URL: ts.URL, BearerTokenEnv: "TOKEN", HeadersFromEnv: map[string]string{"X-Api-Key": "KEY", "X-Team": "TEAM"}}
	env := envFor(t, s, func(name string) (string, bool) {
		v, ok := map[string]string{"TOKEN": token, "KEY": key, "TEAM": "desk"}[name]
		return v, ok
	})
	leak := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "leak"})[0].Tool
	if shown := leak.Description + string(leak.Input); strings.Contains(shown, token) || strings.Contains(shown, key) ||
		!strings.Contains(shown, "Called with [redacted].") || !strings.Contains(shown, `"description":"Bearer [redacted]"`) {
		t.Errorf("the model's copy of a tool that echoes the credentials: %s", shown)
	}
	echo := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "headers"})[0].Implementation
	for _, as := range []string{"result", "error", "rpc"} {
		obs, err := echo.Call(t.Context(), json.RawMessage(`{"as":"`+as+`"}`))
		got := obs
		if err != nil {
			got += " " + err.Error()
		}
		if strings.Contains(got, token) || strings.Contains(got, key) || strings.Contains(got, token[:12]) {
			t.Errorf("%s: the server's echo gives a credential away: %s", as, got)
		}
		if !strings.Contains(got, "Authorization: Bearer [redacted]") || !strings.Contains(got, "X-Api-Key: [redacted]") || !strings.Contains(got, "X-Team: desk") {
			t.Errorf("%s: the echo, redacted: %s", as, got)
		}
		var te *mcp.ToolError
		if as != "result" && !errors.As(err, &te) {
			t.Errorf("%s: %T %v, want a *mcp.ToolError", as, err, err)
		}
	}
}
