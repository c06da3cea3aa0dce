package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/kind"
)

// transports runs f against the test server over stdio (a child process)
// and over streamable HTTP (in process).
func transports(t *testing.T, f func(t *testing.T, env kind.Env, o *observed)) {
	t.Run("stdio", func(t *testing.T) {
		s, lookup := stdioServer("serve")
		f(t, envFor(t, s, lookup), nil)
	})
	t.Run("http", func(t *testing.T) {
		o := &observed{}
		s, lookup := httpServer(t, o)
		f(t, envFor(t, s, lookup), o)
	})
}

// build is Kind.NewTools for decl, failing the test on an error.
func build(t *testing.T, env kind.Env, k mcp.Kind, decl agents.Tool) []agents.BuiltTool {
	t.Helper()
	out, err := k.NewTools(t.Context(), decl, env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// call calls the one tool k builds for the declared name with args.
func call(t *testing.T, env kind.Env, name, args string, timeout time.Duration) (string, error) {
	t.Helper()
	tools := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: name})
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	return tools[0].Implementation.Call(ctx, json.RawMessage(args))
}

func TestTools(t *testing.T) {
	transports(t, func(t *testing.T, env kind.Env, _ *observed) {
		// One tool: the server's description and schema, effects from its
		// annotation, the IR's approval and timeout.
		got := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo", Approval: agents.ApprovalAlways, Timeout: time.Second})
		if len(got) != 1 {
			t.Fatalf("%d tools", len(got))
		}
		tool := got[0].Tool
		if tool.Name != "echo" || tool.Description != "Echo the text." || tool.Effects != agents.EffectsRead || tool.Approval != agents.ApprovalAlways || tool.Timeout != time.Second {
			t.Errorf("echo: %+v", tool)
		}
		if !strings.Contains(string(tool.Input), `"text"`) || !strings.Contains(string(tool.Input), `"required":["text"]`) {
			t.Errorf("echo's schema is not the server's: %s", tool.Input)
		}
		obs, err := got[0].Implementation.Call(t.Context(), json.RawMessage(`{"text":"hi there"}`))
		if err != nil || obs != "hi there" {
			t.Errorf("echo = %q, %v", obs, err)
		}

		// A tool without readOnlyHint writes; the IR's effects win; the
		// tool field maps a declared name to the server's; a description
		// in the IR replaces the server's.
		w := build(t, env, mcp.Kind{Server: "srv", Tool: "write_note"}, agents.Tool{Name: "note"})[0].Tool
		r := build(t, env, mcp.Kind{Server: "srv", Tool: "write_note"}, agents.Tool{Name: "note", Effects: agents.EffectsRead, Description: "Jot."})[0].Tool
		if w.Effects != agents.EffectsWrite || r.Effects != agents.EffectsRead || w.Name != "note" || r.Description != "Jot." {
			t.Errorf("write_note: %+v; with effects read: %+v", w, r)
		}
		// A tool with a title and no description is described by its title.
		if f := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "forecast"})[0].Tool; f.Description != "Weather forecast" {
			t.Errorf("forecast's description: %q", f.Description)
		}

		// An import with an allowlist and a prefix.
		imp := build(t, env, mcp.Kind{Server: "srv", Import: &mcp.Import{Allow: []string{"echo", "write_note"}, Prefix: "srv_"}}, agents.Tool{Name: "all", Approval: agents.ApprovalAlways})
		var names []string
		for _, b := range imp {
			names = append(names, b.Tool.Name+":"+string(b.Tool.Effects)+":"+string(b.Tool.Approval))
		}
		if !slices.Equal(names, []string{"srv_echo:read:always", "srv_write_note:write:always"}) {
			t.Errorf("import: %q", names)
		}
		// An import without allowlist takes every tool, sorted.
		all := build(t, env, mcp.Kind{Server: "srv", Import: &mcp.Import{}}, agents.Tool{Name: "all"})
		if len(all) < 10 || all[0].Tool.Name != "crash" {
			t.Errorf("import of all: %d tools, first %q", len(all), all[0].Tool.Name)
		}

		// A tool the server does not offer names the server, the tool, a
		// likely intended name and what it offers.
		_, err = mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "ecko"}, env)
		var no *mcp.NotOfferedError
		if !errors.As(err, &no) || !strings.Contains(err.Error(), `MCP server "srv" offers no tool "ecko" (did you mean "echo"?); it offers crash, echo, environ, fail, forecast,`) {
			t.Errorf("a tool not offered: %v", err)
		}
		_, err = mcp.Kind{Server: "srv", Import: &mcp.Import{Allow: []string{"echo", "wrte_note"}}}.NewTools(t.Context(), agents.Tool{Name: "all"}, env)
		if !errors.As(err, &no) || no.Tool != "wrte_note" {
			t.Errorf("an import allowing a tool not offered: %v", err)
		}
		_, err = mcp.Kind{Server: "nope"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, env)
		if err == nil || !strings.Contains(err.Error(), `MCP server "nope" is not declared in mcpServers`) {
			t.Errorf("an undeclared server: %v", err)
		}
	})
}

func TestContent(t *testing.T) {
	transports(t, func(t *testing.T, env kind.Env, _ *observed) {
		for _, tt := range []struct {
			tool, args string
			want       string
			wantErr    string
		}{
			{tool: "forecast", args: `{}`, want: `{"city":"Oslo","temp_c":-3.5}`},
			{tool: "media", args: `{}`, want: "Here is the chart.\n" +
				"[image: image/png, 1234 bytes, not shown]\n" +
				"[audio: audio/wav, 10 bytes, not played]\n" +
				`[resource link: file:///tmp/report.pdf "report", application/pdf]` + "\n" +
				"[resource: file:///tmp/a.txt, text/plain, 15 characters of text, not shown]"},
			{tool: "fail", args: `{}`, wantErr: "the disk is full"},
		} {
			obs, err := call(t, env, tt.tool, tt.args, 10*time.Second)
			if tt.wantErr != "" {
				var te *mcp.ToolError
				if !errors.As(err, &te) || err.Error() != tt.wantErr || te.Tool != tt.tool || te.Server != "srv" {
					t.Errorf("%s: %q, %v; want the tool error %q", tt.tool, obs, err, tt.wantErr)
				}
				continue
			}
			if err != nil || obs != tt.want {
				t.Errorf("%s = %q, %v\nwant %q", tt.tool, obs, err, tt.want)
			}
		}
	})
}

// TestTimeoutCancels: a call to a tool that never answers ends at the
// tool's timeout, the server is told to cancel it, and the session serves
// the next call.
func TestTimeoutCancels(t *testing.T) {
	transports(t, func(t *testing.T, env kind.Env, o *observed) {
		start := time.Now()
		_, err := call(t, env, "hang", `{}`, 300*time.Millisecond)
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
			t.Fatalf("a hanging call: %v after %v", err, time.Since(start))
		}
		if o != nil {
			deadline := time.Now().Add(5 * time.Second)
			for !o.wasCancelled("hang") && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if !o.wasCancelled("hang") {
				t.Error("the server was not told to cancel the call")
			}
		}
		if obs, err := call(t, env, "echo", `{"text":"still here"}`, 10*time.Second); err != nil || obs != "still here" {
			t.Errorf("the next call: %q, %v", obs, err)
		}
	})
}

// TestHugeAnswer: an answer of 50 MB fails the call, never reaching the
// model, and the server answers the next call.
func TestHugeAnswer(t *testing.T) {
	flooder, lookup := stdioServer("flood")
	for name, s := range map[string]mcp.Server{"stdio": flooder, "http": floodHTTP(t)} {
		t.Run(name, func(t *testing.T) {
			env := envFor(t, s, lookup)
			obs, err := call(t, env, "huge", `{"bytes":50000000}`, 30*time.Second)
			if err == nil || obs != "" {
				t.Fatalf("a 50 MB answer: %d bytes, %v", len(obs), err)
			}
			t.Log(err)
			obs, err = call(t, env, "huge", `{"bytes":1000}`, 30*time.Second)
			if err != nil || len(obs) != 1000 {
				t.Errorf("a 1000-byte answer after it: %d bytes, %v", len(obs), err)
			}
		})
	}
}

// TestCrashMidCall: a stdio server that exits during a call fails the call
// at once with an error naming the server, and the next call reconnects.
func TestCrashMidCall(t *testing.T) {
	s, lookup := stdioServer("serve")
	env := envFor(t, s, lookup)
	start := time.Now()
	_, err := call(t, env, "crash", `{}`, 20*time.Second)
	if err == nil || !strings.Contains(err.Error(), `MCP server "srv"`) || time.Since(start) > 10*time.Second {
		t.Fatalf("a crash mid-call: %v after %v", err, time.Since(start))
	}
	obs, err := call(t, env, "echo", `{"text":"back"}`, 20*time.Second)
	if err != nil || obs != "back" {
		t.Errorf("the call after the crash: %q, %v", obs, err)
	}
}

// TestToolListChanges: a tool the server stops offering after start-up
// fails its next call naming what the server offers now.
func TestToolListChanges(t *testing.T) {
	transports(t, func(t *testing.T, env kind.Env, _ *observed) {
		echo := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation
		if _, err := call(t, env, "retire_echo", `{}`, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		var err error
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) { // the notification arrives on its own
			if _, err = echo.Call(t.Context(), json.RawMessage(`{"text":"x"}`)); err != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		var no *mcp.NotOfferedError
		if !errors.As(err, &no) || slices.Contains(no.Offered, "echo") || !slices.Contains(no.Offered, "write_note") {
			t.Errorf("calling a retired tool: %v", err)
		}
	})
}

// TestStdioEnvironment: a stdio server sees only the variables its
// configuration names, never the service's.
func TestStdioEnvironment(t *testing.T) {
	t.Setenv("SERVICE_SECRET", "s3cr3t")
	s, lookup := stdioServer("serve")
	obs, err := call(t, envFor(t, s, lookup), "environ", `{}`, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if obs != "AID_MCP_TEST_SERVER=serve\nGREETING=hello" {
		t.Errorf("the server's environment:\n%s", obs)
	}
	s.Env["X"] = "UNSET_VARIABLE"
	_, err = mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, envFor(t, s, lookup))
	if err == nil || !strings.Contains(err.Error(), "env X: environment variable UNSET_VARIABLE is not set") {
		t.Errorf("an unset variable: %v", err)
	}
}

// TestStartupFailures: a server that never answers, one that exits at
// once and one that is not there each fail start-up within the connect
// timeout, naming the server and what went wrong.
func TestStartupFailures(t *testing.T) {
	mute, lookupMute := stdioServer("mute")
	mute.ConnectTimeout = 300 * time.Millisecond
	exit, lookupExit := stdioServer("exit")
	for _, tt := range []struct {
		name   string
		s      mcp.Server
		lookup func(string) (string, bool)
		want   string
	}{
		{"mute", mute, lookupMute, "no answer within 300ms"},
		{"exit", exit, lookupExit, "cannot open the database: permission denied"},
		{"missing command", mcp.Server{Transport: mcp.TransportStdio, Command: "aid-no-such-mcp-server"}, lookupMute, `command "aid-no-such-mcp-server"`},
		{"refused http", mcp.Server{Transport: mcp.TransportHTTP, URL: "http://127.0.0.1:1/mcp", ConnectTimeout: 2 * time.Second}, lookupMute, `MCP server "srv" (http): connecting`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, err := mcp.Kind{Server: "srv"}.NewTools(t.Context(), agents.Tool{Name: "echo"}, envFor(t, tt.s, tt.lookup))
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `"srv"`) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %v", time.Since(start))
			}
		})
	}
}

// TestOneConnection: every tool of one server in an application shares one
// session, and closing the application ends it.
func TestOneConnection(t *testing.T) {
	s, lookup := stdioServer("serve")
	scope := &kind.Scope{}
	env := kind.Env{LookupEnv: lookup, Scope: scope, Resources: []kind.Resource{{Name: "srv", Kind: s}}}
	a := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation
	b := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "environ"})[0].Implementation
	if _, err := a.Call(t.Context(), json.RawMessage(`{"text":"x"}`)); err != nil {
		t.Fatal(err)
	}
	obs, err := b.Call(t.Context(), json.RawMessage(`{}`))
	if err != nil || !strings.Contains(obs, "GREETING=hello") {
		t.Fatal(obs, err)
	}
	if err := scope.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Call(t.Context(), json.RawMessage(`{"text":"x"}`)); !errors.Is(err, kind.ErrScopeClosed) {
		t.Errorf("a call after Close: %v", err)
	}
}

// TestHTTPServerGone: an http server that goes away during a call fails
// the call before its timeout, and one that comes back at the same address
// is reconnected by the next call.
func TestHTTPServerGone(t *testing.T) {
	s, hs, ln := closableHTTPServer(t)
	env := envFor(t, s, nil)
	hang := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "hang"})[0].Implementation
	echo := build(t, env, mcp.Kind{Server: "srv"}, agents.Tool{Name: "echo"})[0].Implementation

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		_, err := hang.Call(ctx, json.RawMessage(`{}`))
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the call is in flight
	start := time.Now()
	hs.Close() // the server goes away, connections and all
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the call in flight: %v", err)
		}
		t.Logf("the call failed after %v: %v", time.Since(start), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight hangs after its server went away")
	}

	// The server comes back at the same address.
	ln2, err := net.Listen("tcp", ln.Addr().String())
	if err != nil {
		t.Skipf("cannot listen again on %s: %v", ln.Addr(), err)
	}
	hs2 := &http.Server{Handler: sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return newTestServer(nil) }, nil)}
	go hs2.Serve(ln2)
	defer hs2.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var obs string
	for ctx.Err() == nil { // the first calls may meet the old session's end
		if obs, err = echo.Call(ctx, json.RawMessage(`{"text":"again"}`)); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || obs != "again" {
		t.Errorf("after the server came back: %q, %v", obs, err)
	}
}

// TestInputSchemaNotAnObject: a server tool whose input schema is not an
// object, which no call can fit, is refused at start-up naming the server
// and the tool when declared or allowed by name, and skipped, logged, when
// the server's tools are imported whole.
func TestInputSchemaNotAnObject(t *testing.T) {
	logs := &syncLog{}
	env := envFor(t, floodHTTP(t), func(string) (string, bool) { return "", false })
	env.Logger = slog.New(slog.NewTextHandler(logs, nil))
	for _, k := range []mcp.Kind{
		{Server: "srv"},
		{Server: "srv", Import: &mcp.Import{Allow: []string{"huge", "shout"}, Prefix: "f_"}},
	} {
		_, err := k.NewTools(t.Context(), agents.Tool{Name: "shout"}, env)
		if err == nil || !strings.Contains(err.Error(), `MCP server "srv" offers tool "shout"`) || !strings.Contains(err.Error(), `type: "object"`) {
			t.Errorf("%+v: %v, want the tool refused naming the server and the tool", k, err)
		}
	}
	got := build(t, env, mcp.Kind{Server: "srv", Import: &mcp.Import{Prefix: "f_"}}, agents.Tool{Name: "f"})
	if len(got) != 1 || got[0].Tool.Name != "f_huge" {
		t.Errorf("imported %+v, want f_huge alone", got)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "tool=shout") || !strings.Contains(l, "mcp_server=srv") {
		t.Errorf("the skipped tool is not logged: %s", l)
	}
}

// syncLog is a log written by goroutines and read by the test.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
