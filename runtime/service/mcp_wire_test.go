package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
)

// wire speaks the streamable HTTP transport by hand, to see what a client
// library would hide: statuses, content types, and which messages arrive.
type wire struct {
	t   *testing.T
	e   *env
	sid string // the session, once initialized
}

// post sends one JSON-RPC message in the session, with the headers a
// 2025-06-18 client sends.
func (w *wire) post(body string) *http.Response {
	w.t.Helper()
	resp, err := w.send(body)
	if err != nil {
		w.t.Fatal(err)
	}
	return resp
}

// send is post, for a goroutine: it returns its error.
func (w *wire) send(body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(w.t.Context(), "POST", w.e.srv.URL+service.MCPPath, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if w.sid != "" {
		req.Header.Set("Mcp-Session-Id", w.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	}
	return w.e.srv.Client().Do(req)
}

// initialize opens a 2025-06-18 session.
func (w *wire) initialize() {
	w.t.Helper()
	resp := w.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	w.sid = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || w.sid == "" {
		w.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	resp = w.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		w.t.Fatalf("notifications/initialized: %d", resp.StatusCode)
	}
}

// TestMCPUnknownMethod: in an initialized 2025-era session, a request of a
// method the server does not know is answered as JSON-RPC says, error
// -32601 with the request's id, in the transport's content type, not as
// an HTTP 400 in plain text; a notification of an unknown method is
// accepted and ignored.
func TestMCPUnknownMethod(t *testing.T) {
	e := refundDesk(t, refundSteps...)
	w := &wire{t: t, e: e}
	w.initialize()
	resp := w.post(`{"jsonrpc":"2.0","id":7,"method":"frobnicate/now","params":{}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &msg) != nil ||
		msg.JSONRPC != "2.0" || string(msg.ID) != "7" || msg.Error.Code != -32601 || !strings.Contains(msg.Error.Message, "frobnicate/now") {
		t.Errorf("unknown method: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	resp = w.post(`{"jsonrpc":"2.0","method":"notifications/frobnicated"}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(body) != 0 {
		t.Errorf("unknown notification: %d %s", resp.StatusCode, body)
	}
	// The session still works.
	resp = w.post(`{"jsonrpc":"2.0","id":8,"method":"tools/list"}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"billing"`) {
		t.Errorf("tools/list after: %d %s", resp.StatusCode, body)
	}
}

// TestMCPSessionRequired: a request that needs a session, sent without
// one, is answered 400.
func TestMCPSessionRequired(t *testing.T) {
	e := refundDesk(t, refundSteps...)
	w := &wire{t: t, e: e}
	w.initialize()
	w.sid = ""
	resp := w.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"billing","arguments":{"message":"hi"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Mcp-Session-Id") {
		t.Errorf("tools/call without a session: %d %s", resp.StatusCode, body)
	}
}

// TestMCPCancelledCall: a tools/call the client cancels
// (notifications/cancelled) gets no response, as the protocol asks, and
// is logged as a cancel, not as an error.
func TestMCPCancelledCall(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	wait := agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return "", ctx.Err()
	})
	e := newEnv(t, options{
		fake:   fake.Config{Agents: map[string][]fake.Step{"triage": {calls(call("c1", "wait", `{}`)), answer("done")}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Tools: []string{"wait"}}},
		tools:  []agents.Tool{{Name: "wait", Description: "Waits.", Input: json.RawMessage(`{"type":"object"}`)}},
		impls:  map[string]agents.Implementation{"wait": wait},
	})
	w := &wire{t: t, e: e}
	w.initialize()
	// The answer's headers come with its first event: the call is sent
	// and read on a goroutine of its own.
	stream := make(chan string, 1)
	go func() {
		call, err := w.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"triage","arguments":{"message":"hi"}}}`)
		if err != nil {
			stream <- err.Error()
			return
		}
		defer call.Body.Close()
		b, _ := io.ReadAll(call.Body)
		stream <- fmt.Sprintf("%d %s", call.StatusCode, b)
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run never called its tool")
	}
	resp := w.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"the user gave up"}}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("notifications/cancelled: %d", resp.StatusCode)
	}
	var got string
	select {
	case got = <-stream:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call's stream never ended")
	}
	if strings.Contains(got, `"id":3`) {
		t.Errorf("the cancelled call got a response: %s", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		line, ok := e.logs.LogLine("MCP tool call cancelled by the client")
		if ok {
			if line["level"] != "INFO" || line["agent"] != "triage" {
				t.Errorf("the cancel is logged as %v", line)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancel is not logged: %s", e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range e.logs.Lines() {
		if l["level"] == "ERROR" {
			t.Errorf("logged at ERROR: %v", l)
		}
	}
}

// TestMCPSessionCap: with Limits.MaxMCPSessions open, a new session
// closes the one idle longest, and sessions past the bound cost nothing:
// opening many more leaves as many goroutines as before.
func TestMCPSessionCap(t *testing.T) {
	const max = 3
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("hi")}}},
		svc:  func(c *service.Config) { c.Limits.MaxMCPSessions = max },
	})
	open := func() *wire {
		w := &wire{t: t, e: e}
		w.initialize()
		return w
	}
	list := func(w *wire) int {
		resp := w.post(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	ws := []*wire{open(), open(), open()}
	time.Sleep(5 * time.Millisecond)
	if got := list(ws[0]); got != http.StatusOK { // ws[1] is now the idlest
		t.Fatalf("tools/list: %d", got)
	}
	ws = append(ws, open())
	for i, want := range []int{http.StatusOK, http.StatusNotFound, http.StatusOK, http.StatusOK} {
		if got := list(ws[i]); got != want {
			t.Errorf("session %d: tools/list %d, want %d", i, got, want)
		}
	}
	if _, ok := e.logs.LogLine("MCP session closed to make room for a new one"); !ok {
		t.Error("closing the idlest session is not logged")
	}
	before := runtime.NumGoroutine()
	for range 50 {
		open()
	}
	var after int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if after = runtime.NumGoroutine(); after <= before+5 {
			break
		}
	}
	if after > before+5 {
		t.Errorf("%d goroutines after opening 50 sessions past the bound of %d, %d before", after, max, before)
	}
}

// BenchmarkMCPCall measures a tools/call on /mcp through the go-sdk
// client, the run included (the fake answers at once): what the endpoint
// and its guard add to a call.
func BenchmarkMCPCall(b *testing.B) {
	e := newEnv(b, options{})
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	hc := &http.Client{Transport: bearer{e.srv.Client().Transport}}
	sess, err := c.Connect(b.Context(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + service.MCPPath, HTTPClient: hc}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	b.ReportAllocs()
	for b.Loop() {
		res, err := sess.CallTool(b.Context(), &sdk.CallToolParams{Name: "triage", Arguments: map[string]any{"message": "hi"}})
		if err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
}

// TestMCPStateless: a 2026-07-28 client is served without a session, so
// that two replicas behind a round-robin proxy answer its requests in
// turn; a 2025-06-18 client on the same endpoint still gets a session.
func TestMCPStateless(t *testing.T) {
	replicas := []*env{
		newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("from one")}}}}),
		newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("from two")}}}}),
	}
	rr, proxy := newRoundRobin(t, replicas...)
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: proxy.URL + service.MCPPath, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if v := sess.InitializeResult().ProtocolVersion; v != "2026-07-28" || sess.ID() != "" {
		t.Fatalf("protocol %q, session %q; want 2026-07-28 without a session", v, sess.ID())
	}
	answers := map[string]bool{}
	for range 4 {
		res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "triage", Arguments: map[string]any{"message": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		answers[res.Content[0].(*sdk.TextContent).Text] = true
	}
	rr.mu.Lock()
	seen := maps.Clone(rr.served)
	rr.mu.Unlock()
	if !answers["from one"] || !answers["from two"] || seen[0] == 0 || seen[1] == 0 {
		t.Errorf("answers %v, requests per replica %v: want both replicas to answer", answers, seen)
	}
	// A run that pauses answers a client that takes no elicitations with
	// the pending call and the run id, resumable over the runs API (one
	// that does is asked in the result: TestMCPDecisionAcrossReplicas).
	desk := refundDesk(t, refundSteps...)
	c = sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	s2, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: desk.srv.URL + service.MCPPath, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	res, err := s2.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-1"}})
	if err != nil || res.Meta[service.MetaStatus] != "paused" || res.Meta[service.MetaRunID] == "" {
		t.Errorf("a paused run, sessionless: %v %+v", err, res)
	}
	if _, warned := desk.logs.LogLine("MCP elicitation failed; the run stays paused"); warned {
		t.Error("a sessionless request tried to elicit")
	}
	// A 2025-06-18 client still gets a session.
	if s := replicas[0].mcpClient(t, nil); s.ID() == "" || s.InitializeResult().ProtocolVersion != "2025-06-18" {
		t.Errorf("a 2025-06-18 client: session %q, protocol %q", s.ID(), s.InitializeResult().ProtocolVersion)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// panickyStore panics when a run is created: a bug anywhere below an MCP
// request's handler.
type panickyStore struct{ agents.Store }

func (panickyStore) CreateRun(context.Context, agents.RunRecord) (agents.RunRecord, error) {
	panic("store bug: secret-internal-detail")
}

// TestMCPHandlerPanic: a panic while handling an MCP request (the SDK runs
// each in a goroutine and recovers nothing) is answered as a JSON-RPC
// internal error that names nothing internal, logged with its stack, and
// the process goes on serving; it ended the process.
func TestMCPHandlerPanic(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Script: []fake.Step{answer("hi")}}, store: panickyStore{agents.NewInMemoryStore()}})
	w := &wire{t: t, e: e}
	w.initialize()
	resp := w.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"triage","arguments":{"message":"hello"}}}`)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"code":-32603`) || !strings.Contains(string(body), `"id":2`) || strings.Contains(string(body), "secret-internal-detail") {
		t.Fatalf("answer %d %s", resp.StatusCode, body)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "mcp: handler panicked") || !strings.Contains(logs, "secret-internal-detail") || !strings.Contains(logs, "goroutine") {
		t.Errorf("log: %s", logs)
	}
	resp = w.post(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"triage"`) {
		t.Fatalf("after the panic: %d %s", resp.StatusCode, body)
	}
}
