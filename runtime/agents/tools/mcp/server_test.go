package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/kind"
)

// serverEnv is the variable that makes the test binary an MCP server over
// stdio (TestMain): its value is the server's mode.
const serverEnv = "AID_MCP_TEST_SERVER"

// TestMain runs the test binary as a stdio MCP server when serverEnv says
// so: "serve" for the test server, "mute" for one that never answers,
// "exit" for one that exits at once, "flood" for floodServer.
func TestMain(m *testing.M) {
	switch os.Getenv(serverEnv) {
	case "":
		os.Exit(m.Run())
	case "serve":
		srv := newTestServer(nil)
		if err := srv.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "mute":
		time.Sleep(time.Hour)
	case "flood":
		flood(os.Stdin, os.Stdout)
		os.Exit(0)
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot open the database: permission denied")
		os.Exit(3)
	}
}

// observed is what the test server saw, for the tests of an in-process
// server.
type observed struct {
	mu        sync.Mutex
	cancelled []string // tools whose call ended by cancellation
}

func (o *observed) cancel(tool string) {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.cancelled = append(o.cancelled, tool)
	o.mu.Unlock()
}

func (o *observed) wasCancelled(tool string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.cancelled, tool)
}

type textIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type emptyIn struct{}

type forecast struct {
	City  string  `json:"city"`
	TempC float64 `json:"temp_c"`
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

// newTestServer is the server the tests talk to, over both transports.
func newTestServer(o *observed) *sdk.Server {
	srv := sdk.NewServer(&sdk.Implementation{Name: "aid-test", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "echo", Description: "Echo the text.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text(in.Text), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "write_note", Description: "Write a note."},
		func(_ context.Context, _ *sdk.CallToolRequest, in textIn) (*sdk.CallToolResult, any, error) {
			return text("noted: " + in.Text), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "forecast", Title: "Weather forecast", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, forecast, error) {
			return nil, forecast{City: "Oslo", TempC: -3.5}, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "media", Description: "Every kind of content."},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{
				&sdk.TextContent{Text: "Here is the chart."},
				&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 1234)},
				&sdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)},
				&sdk.ResourceLink{URI: "file:///tmp/report.pdf", Name: "report", MIMEType: "application/pdf"},
				&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///tmp/a.txt", MIMEType: "text/plain", Text: "secret contents"}},
			}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "fail", Description: "Always fails."},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the disk is full"}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "hang", Description: "Never answers."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ emptyIn) (*sdk.CallToolResult, any, error) {
			<-ctx.Done()
			o.cancel("hang")
			return nil, nil, ctx.Err()
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "progress", Description: "Reports progress."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ emptyIn) (*sdk.CallToolResult, any, error) {
			for i := 1; i <= 3; i++ {
				err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
					ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i),
				})
				if err != nil {
					return nil, nil, err
				}
			}
			// The client's SDK handles notifications on a goroutine of
			// their own and the result on the caller's, and the kind drops
			// progress handled after the call returned: give the
			// notifications time to be handled first.
			time.Sleep(200 * time.Millisecond)
			return text("done"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "crash", Description: "Exits mid-call."},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, any, error) {
			fmt.Fprintln(os.Stderr, "panic: crash requested")
			os.Exit(2)
			return nil, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "environ", Description: "Lists the server's environment.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, any, error) {
			env := os.Environ()
			slices.Sort(env)
			return text(strings.Join(env, "\n")), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "headers", Description: "Echoes the request's headers, credentials and all."},
		func(_ context.Context, req *sdk.CallToolRequest, in struct {
			As string `json:"as"`
		}) (*sdk.CallToolResult, any, error) {
			var h []string
			if req.Extra != nil {
				for k, v := range req.Extra.Header {
					h = append(h, k+": "+strings.Join(v, ","))
				}
			}
			slices.Sort(h)
			echo := strings.Join(h, "\n")
			switch in.As {
			case "error":
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "refused: " + echo}}}, nil, nil
			case "rpc":
				return nil, nil, errors.New("refused: " + echo)
			}
			return text(echo), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "pid", Description: "The server's process id."},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, any, error) {
			return text(strconv.Itoa(os.Getpid())), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "retire_echo", Description: "Stops offering echo."},
		func(context.Context, *sdk.CallToolRequest, emptyIn) (*sdk.CallToolResult, any, error) {
			srv.RemoveTools("echo")
			return text("echo retired"), nil, nil
		})
	return srv
}

// stdioServer is the test binary run as the stdio server in mode.
func stdioServer(mode string) (mcp.Server, func(string) (string, bool)) {
	s := mcp.Server{
		Transport: mcp.TransportStdio, Command: os.Args[0],
		Env: map[string]string{serverEnv: "MODE", "GREETING": "GREETING"},
	}
	lookup := func(name string) (string, bool) {
		switch name {
		case "MODE":
			return mode, true
		case "GREETING":
			return "hello", true
		case "SERVICE_SECRET":
			return "s3cr3t", true
		}
		return "", false
	}
	return s, lookup
}

// httpServer serves the test server in process over streamable HTTP,
// requiring the bearer token "tok".
func httpServer(t testing.TB, o *observed) (mcp.Server, func(string) (string, bool)) {
	t.Helper()
	srv := newTestServer(o)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("X-Team") != "desk" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	s := mcp.Server{
		Transport: mcp.TransportHTTP, URL: ts.URL,
		BearerTokenEnv: "MCP_TOKEN", HeadersFromEnv: map[string]string{"X-Team": "TEAM"},
	}
	lookup := func(name string) (string, bool) {
		switch name {
		case "MCP_TOKEN":
			return "tok", true
		case "TEAM":
			return "desk", true
		}
		return "", false
	}
	return s, lookup
}

// closableHTTPServer serves the test server over streamable HTTP, without
// a token, from a server the test can close (closed with the test too),
// on a listener whose address it can listen on again.
func closableHTTPServer(t testing.TB) (mcp.Server, *http.Server, net.Listener) {
	t.Helper()
	srv := newTestServer(nil)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return mcp.Server{Transport: mcp.TransportHTTP, URL: "http://" + ln.Addr().String()}, hs, ln
}

// envFor is the kind.Env of an application whose only resource is the
// server s, named "srv", closed with the test.
func envFor(t testing.TB, s mcp.Server, lookup func(string) (string, bool)) kind.Env {
	t.Helper()
	scope := &kind.Scope{}
	t.Cleanup(func() {
		if err := scope.Close(); err != nil {
			t.Errorf("closing the scope: %v", err)
		}
	})
	return kind.Env{LookupEnv: lookup, Scope: scope, Resources: []kind.Resource{{Name: "srv", Kind: s}}}
}

// The flood server is a hostile server written by hand, without the SDK
// (which would take long to encode a large answer): it speaks just enough
// JSON-RPC to be connected to and listed, and answers a call of its tool
// "huge" with a text of the size its argument "bytes" asks for. It also
// offers "shout", whose input schema is a string, which no call fits.

// floodRequest is what the flood server reads of a request.
type floodRequest struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Arguments       struct {
			Bytes int `json:"bytes"`
		} `json:"arguments"`
	} `json:"params"`
}

// floodAnswer writes the answer to req.
func floodAnswer(w io.Writer, req floodRequest) {
	switch req.Method {
	case "initialize":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"flood","version":"1"}}}`, req.ID, req.Params.ProtocolVersion)
	case "tools/list":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"huge","description":"Many bytes.","inputSchema":{"type":"object","properties":{"bytes":{"type":"integer"}}}},`+
			`{"name":"shout","description":"Shouts.","inputSchema":{"type":"string"}}]}}`, req.ID)
	case "tools/call":
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
		chunk := []byte(strings.Repeat("x", 1<<16))
		for left := req.Params.Arguments.Bytes; left > 0; left -= len(chunk) {
			if _, err := w.Write(chunk[:min(left, len(chunk))]); err != nil {
				return
			}
		}
		io.WriteString(w, `"}]}}`)
	default:
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, req.ID)
	}
}

// flood serves the flood server over stdio.
func flood(r io.Reader, w io.Writer) {
	dec := json.NewDecoder(r)
	bw := bufio.NewWriter(w)
	for {
		var req floodRequest
		if err := dec.Decode(&req); err != nil {
			return
		}
		if len(req.ID) == 0 {
			continue // a notification
		}
		floodAnswer(bw, req)
		bw.WriteByte('\n')
		if err := bw.Flush(); err != nil {
			return
		}
	}
}

// floodHTTP serves the flood server over streamable HTTP.
func floodHTTP(t testing.TB) mcp.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var req floodRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if len(req.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		floodAnswer(w, req)
	}))
	t.Cleanup(ts.Close)
	return mcp.Server{Transport: mcp.TransportHTTP, URL: ts.URL}
}
