package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMCPSessions is Limits.MaxMCPSessions when it is zero.
const DefaultMaxMCPSessions = 1000

// The JSON-RPC error codes the guard answers with.
const (
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
	rpcServerBusy     = -32000
)

// statelessVersion is the first protocol revision without sessions: its
// requests carry no session id, and the SDK answers them itself.
const statelessVersion = "2026-07-28"

// notHandled starts the plain-text answer the SDK's handler gives a
// request of a method it does not know (jsonrpc2.ErrNotHandled, which it
// does not export); TestMCPUnknownMethod fails if an upgrade changes it.
const notHandled = "JSON RPC not handled"

// mcpGuard stands in front of the SDK's streamable HTTP handler and does
// what the protocol asks of a 2025-era session that the handler does not:
// a request of an unknown method gets a JSON-RPC error, not an HTTP 400 in
// plain text; a request that needs a session and names none is answered
// 400, where the handler would open an uninitialized session for it; a
// call the client cancels gets no response. And it bounds the sessions
// the handler keeps: at most max, the one idle longest closed to make
// room for a new one.
type mcpGuard struct {
	next      http.Handler // the 2025 revisions', with sessions
	stateless http.Handler // the 2026-07-28 revision's, without
	sessions  func() iter.Seq[*sdk.ServerSession]
	max       int
	maxBody   int64
	logger    *slog.Logger

	mu      sync.Mutex
	open    map[string]*mcpSession // by session id, for the sessions the guard saw opened
	opening int                    // initializes in flight, each a session to come
}

// mcpSession is what the guard knows of a session.
type mcpSession struct {
	last  time.Time           // when a POST of the session last began or ended
	busy  int                 // POSTs of the session in flight
	calls map[string]*mcpCall // its calls in flight, by JSON-RPC id
}

// mcpCall is a call in flight: cancel ends its POST's stream, done is
// closed when the POST's handler returned.
type mcpCall struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// rpcMessage is what the guard reads of a JSON-RPC message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
		Task      json.RawMessage `json:"task"`
	} `json:"params"`
}

func (g *mcpGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.stateless != nil && r.Header.Get("MCP-Protocol-Version") >= statelessVersion {
		g.stateless.ServeHTTP(w, r)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Method != http.MethodPost {
		g.next.ServeHTTP(w, r) // a session's stream (GET) or its end (DELETE)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.maxBody))
	if err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			http.Error(w, fmt.Sprintf("request body exceeds %d bytes", mbe.Limit), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg rpcMessage
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &msg) != nil || msg.Method == "" {
		g.next.ServeHTTP(w, r) // a batch, a response, or malformed: the SDK's to answer
		return
	}
	call := len(msg.ID) > 0 && string(msg.ID) != "null"
	if msg.Method == "tools/call" && len(msg.Params.Task) > 0 {
		if body, err = taskInMeta(trimmed, msg.Params.Task); err != nil {
			writeRPCError(w, http.StatusBadRequest, msg.ID, rpcInvalidParams, err.Error())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	legacy := r.Header.Get("MCP-Protocol-Version") < statelessVersion
	switch {
	case sid == "" && msg.Method == "initialize":
		g.initialize(w, r, msg)
		return
	case sid == "" && legacy:
		writeRPCError(w, http.StatusBadRequest, msg.ID, rpcInvalidRequest,
			fmt.Sprintf("%s needs the Mcp-Session-Id header of an initialized session; open one with initialize", msg.Method))
		return
	case sid == "":
		g.next.ServeHTTP(w, r)
		return
	}
	s := g.begin(sid)
	defer g.end(sid)
	if msg.Method == "notifications/cancelled" {
		g.cancelled(r.Context(), sid, msg.Params.RequestID)
	}
	if call && s != nil {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c := &mcpCall{cancel: cancel, done: make(chan struct{})}
		defer close(c.done)
		id := string(msg.ID)
		g.mu.Lock()
		s.calls[id] = c
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			if s.calls[id] == c {
				delete(s.calls, id)
			}
			g.mu.Unlock()
		}()
		r = r.WithContext(ctx)
	}
	uw := &unknownMethodWriter{ResponseWriter: w}
	g.next.ServeHTTP(uw, r)
	uw.finish(msg, call)
}

// cancelled ends the stream of the session's call id before the SDK
// learns of the cancellation: the handler's response then finds no stream
// to go to and is dropped, as the protocol asks ("SHOULD NOT send a
// response for the cancelled request"), where the SDK would send it.
func (g *mcpGuard) cancelled(ctx context.Context, sid string, id json.RawMessage) {
	g.mu.Lock()
	var c *mcpCall
	if s := g.open[sid]; s != nil {
		c = s.calls[string(id)]
	}
	g.mu.Unlock()
	if c == nil {
		return // answered already, or not a call of this session
	}
	c.cancel()
	// The POST's handler returns once its context ends; should it not, the
	// cancel is passed on anyway, and the response may then be sent.
	t := time.NewTimer(mcpCancelWait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// mcpCancelWait bounds the wait for a cancelled call's stream to end.
const mcpCancelWait = 5 * time.Second

// begin notes a POST of the session, which is then not idle; it returns
// the session, or nil when the guard did not see it opened.
func (g *mcpGuard) begin(sid string) *mcpSession {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.open[sid]
	if s != nil {
		s.busy++
		s.last = time.Now()
	}
	return s
}

// end notes the end of a POST of the session.
func (g *mcpGuard) end(sid string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.open[sid]; s != nil {
		s.busy--
		s.last = time.Now()
	}
}

// initialize opens a session, first closing the one idle longest when
// max are open; when every open session has a POST in flight, the new one
// is refused 503.
func (g *mcpGuard) initialize(w http.ResponseWriter, r *http.Request, msg rpcMessage) {
	closing, ok := g.admit()
	if !ok {
		w.Header().Set("Retry-After", "1")
		writeRPCError(w, http.StatusServiceUnavailable, msg.ID, rpcServerBusy,
			fmt.Sprintf("the service has %d MCP sessions open, each with a request in flight; try again shortly", g.max))
		return
	}
	for _, ss := range closing {
		// Closing waits for the session's requests, which are none but
		// its stream, which closing ends.
		_ = ss.Close()
	}
	defer func() {
		sid := w.Header().Get("Mcp-Session-Id")
		g.mu.Lock()
		defer g.mu.Unlock()
		g.opening--
		if sid != "" {
			g.open[sid] = &mcpSession{last: time.Now(), calls: map[string]*mcpCall{}}
		}
	}()
	g.next.ServeHTTP(w, r)
}

// admit makes room for a new session: it forgets the sessions that ended,
// and, when max are open or opening, picks the one idle longest to close
// (the caller closes it, outside the lock). It reports false when none
// can be closed.
func (g *mcpGuard) admit() (closing []*sdk.ServerSession, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	live := map[string]*sdk.ServerSession{}
	for ss := range g.sessions() {
		live[ss.ID()] = ss
	}
	for sid := range g.open {
		if live[sid] == nil {
			delete(g.open, sid)
		}
	}
	for len(live)+g.opening >= g.max {
		var victim *sdk.ServerSession
		var since time.Time
		for sid, ss := range live {
			s := g.open[sid]
			if s != nil && s.busy > 0 {
				continue
			}
			var last time.Time // a session the guard did not see opened is the idlest
			if s != nil {
				last = s.last
			}
			if victim == nil || last.Before(since) {
				victim, since = ss, last
			}
		}
		if victim == nil {
			return nil, false
		}
		delete(live, victim.ID())
		delete(g.open, victim.ID())
		g.logger.Info("MCP session closed to make room for a new one", "session_id", victim.ID(), "idle", time.Since(since).Round(time.Millisecond), "max_sessions", g.max)
		closing = append(closing, victim)
	}
	g.opening++
	return closing, true
}

// taskInMeta moves a tools/call's params.task (MCP tasks, 2025-11-25),
// which the SDK does not decode, into the params' _meta, where mcpTasks
// reads it.
func taskInMeta(body, task json.RawMessage) ([]byte, error) {
	var t struct {
		TTL *float64 `json:"ttl"`
	}
	if json.Unmarshal(task, &t) != nil || bytes.TrimSpace(task)[0] != '{' {
		return nil, errors.New("params.task must be an object, with an optional ttl in milliseconds")
	}
	var m map[string]json.RawMessage
	var params map[string]json.RawMessage
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(m["params"], &params); err != nil {
		return nil, err
	}
	if raw := params["_meta"]; len(raw) > 0 && json.Unmarshal(raw, &meta) != nil {
		return nil, errors.New("params._meta must be an object")
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	meta[metaTaskParams] = task
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	delete(params, "task")
	if m["params"], err = json.Marshal(params); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// writeRPCError answers a JSON-RPC error with id.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// unknownMethodWriter holds back a plain-text 400, so that finish can
// answer the SDK's refusal of an unknown method as JSON-RPC asks; every
// other answer passes through as it is written.
type unknownMethodWriter struct {
	http.ResponseWriter
	held *bytes.Buffer // the body of a held-back 400
}

func (w *unknownMethodWriter) WriteHeader(code int) {
	if code == http.StatusBadRequest && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held = &bytes.Buffer{}
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *unknownMethodWriter) Write(b []byte) (int, error) {
	if w.held != nil {
		return w.held.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection, for streams.
func (w *unknownMethodWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes what was held back: the refusal of an unknown method as
// the JSON-RPC error -32601 for a call, in the transport's application/json,
// or 202 for a notification, which JSON-RPC never answers; any other 400
// as it was.
func (w *unknownMethodWriter) finish(msg rpcMessage, call bool) {
	if w.held == nil {
		return
	}
	if !strings.HasPrefix(w.held.String(), notHandled) {
		w.ResponseWriter.WriteHeader(http.StatusBadRequest)
		_, _ = w.ResponseWriter.Write(w.held.Bytes())
		return
	}
	w.Header().Del("X-Content-Type-Options")
	if !call {
		w.Header().Del("Content-Type")
		w.ResponseWriter.WriteHeader(http.StatusAccepted)
		return
	}
	writeRPCError(w.ResponseWriter, http.StatusOK, msg.ID, rpcMethodNotFound, fmt.Sprintf("method %q not found", msg.Method))
}
