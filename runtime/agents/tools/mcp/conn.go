package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/kind"
)

// Bounds of a connection.
const (
	// MaxResponseBytes bounds one message from a server: a JSON-RPC line
	// of a stdio server (the SDK's own bound) and an HTTP response body or
	// server-sent event. A larger message fails the call, and, on stdio,
	// the connection, which is then reconnected.
	MaxResponseBytes = sdk.DefaultMaxLineLength
	// minBackoff and maxBackoff bound the wait before reconnecting to a
	// server whose connection dropped or could not be opened; the wait
	// doubles with each failure in a row.
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
	// stderrLines is how many of a stdio server's last stderr lines are
	// kept, to explain a server that exits.
	stderrLines = 5
	// terminateAfter is how long closing a stdio server waits for it to
	// exit before signalling it.
	terminateAfter = 2 * time.Second
)

// conn is the application's connection to one server: the current
// session, reopened with backoff when it drops, and the server's tools.
type conn struct {
	name      string
	transport string
	timeout   time.Duration
	newT      func() sdk.Transport
	client    *sdk.Client
	log       *slog.Logger
	stderr    *tailWriter // nil for http
	// secrets is what redact hides: an http server's token, header values
	// and client secret (the first static of them), then the OAuth tokens
	// issued to it, the newest maxTokenSecrets kept. It is replaced, never
	// changed in place, under secretsMu, and read without a lock.
	secrets   atomic.Pointer[[]string]
	secretsMu sync.Mutex
	static    int

	dial chan struct{} // a one-slot semaphore: one connection attempt at a time

	mu       sync.Mutex
	sess     *sdk.ClientSession
	tools    map[string]*sdk.Tool // the tools the current session lists
	first    map[string]*sdk.Tool // the tools listed at start-up
	stale    bool                 // the server said its tools changed
	failures int                  // connection failures in a row
	retryAt  time.Time
	lastErr  error
	closed   bool

	tokens   atomic.Int64
	progress sync.Map // progress token (string) → func(agents.ToolProgress)
}

// dial connects to the server for the first time and reads its tools.
// ctx bounds the attempt; the connection lives until close.
func dial(ctx context.Context, name string, s Server, env kind.Env) (*conn, error) {
	c := &conn{
		name:      name,
		transport: s.Transport,
		timeout:   s.ConnectTimeout,
		log:       env.Log().With("mcp_server", name),
		dial:      make(chan struct{}, 1),
	}
	if c.timeout <= 0 {
		c.timeout = DefaultConnectTimeout
	}
	var err error
	if c.newT, err = c.transportOf(s, env); err != nil {
		if ae := authError(err); ae != nil {
			return nil, ae
		}
		return nil, fmt.Errorf("MCP server %q: %w", name, err)
	}
	c.client = sdk.NewClient(&sdk.Implementation{Name: "aid", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			c.mu.Lock()
			c.stale = true
			c.mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			if req.Params == nil {
				return
			}
			key := fmt.Sprint(req.Params.ProgressToken)
			if report, ok := c.progress.Load(key); ok {
				report.(func(agents.ToolProgress))(agents.ToolProgress{Progress: req.Params.Progress, Total: req.Params.Total, Message: req.Params.Message})
			}
		},
	})
	sess, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.first = c.tools
	c.mu.Unlock()
	_ = sess
	return c, nil
}

// transportOf returns how to make the server's transport, once per
// connection: the environment and headers are read here, once.
func (c *conn) transportOf(s Server, env kind.Env) (func() sdk.Transport, error) {
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			return nil, errors.New("a stdio server needs a command")
		}
		path := s.Command
		if !strings.ContainsRune(path, filepath.Separator) && !strings.ContainsRune(path, '/') {
			p, err := exec.LookPath(path)
			if err != nil {
				return nil, fmt.Errorf("command %q: %w", s.Command, err)
			}
			path = p
		}
		environ := []string{} // not nil: a nil Env would inherit the service's
		var errs []error
		for _, k := range slices.Sorted(maps.Keys(s.Env)) {
			v, ok := env.Lookup(s.Env[k])
			if !ok {
				errs = append(errs, fmt.Errorf("env %s: environment variable %s is not set", k, s.Env[k]))
				continue
			}
			environ = append(environ, k+"="+v)
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		dir := s.Dir
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = env.Files.Name(dir)
		}
		c.stderr = &tailWriter{log: c.log}
		args := slices.Clone(s.Args)
		return func() sdk.Transport {
			cmd := exec.Command(path, args...)
			cmd.Env, cmd.Dir, cmd.Stderr = environ, dir, c.stderr
			return &sdk.CommandTransport{Command: cmd, TerminateDuration: terminateAfter}
		}, nil
	case TransportHTTP:
		if s.URL == "" {
			return nil, errors.New("an http server needs a url")
		}
		header := http.Header{}
		var errs []error
		if s.BearerTokenEnv != "" {
			v, ok := env.Lookup(s.BearerTokenEnv)
			if !ok {
				errs = append(errs, fmt.Errorf("bearerTokenEnv: environment variable %s is not set", s.BearerTokenEnv))
			}
			header.Set("Authorization", "Bearer "+v)
			c.addSecret(v)
		}
		for _, h := range slices.Sorted(maps.Keys(s.HeadersFromEnv)) {
			v, ok := env.Lookup(s.HeadersFromEnv[h])
			if !ok {
				errs = append(errs, fmt.Errorf("header %s: environment variable %s is not set", h, s.HeadersFromEnv[h]))
				continue
			}
			header.Set(h, v)
			c.addSecret(v)
		}
		if s.OAuth != nil && (s.BearerTokenEnv != "" || header.Get("Authorization") != "") {
			errs = append(errs, errors.New("oauth sets the Authorization header: leave bearerTokenEnv and an Authorization header out"))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		var authz *authorizer
		if s.OAuth != nil {
			var err error
			// The token endpoint is not the server: it gets none of the
			// server's headers.
			if authz, err = c.newAuthorizer(s, env, kind.HTTPClient(env.HTTPClient)); err != nil {
				return nil, err
			}
		}
		cp := *kind.HTTPClient(env.HTTPClient)
		hc := &cp
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		bt := &boundedTransport{base: base, header: header, max: MaxResponseBytes}
		if authz != nil {
			bt.answered = authz.answered
		}
		hc.Transport = bt
		return func() sdk.Transport {
			t := &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: hc, MaxEventSize: MaxResponseBytes}
			if authz != nil {
				t.OAuthHandler = authz
			}
			return t
		}, nil
	}
	return nil, fmt.Errorf("unknown transport %q; the transports are %q and %q", s.Transport, TransportStdio, TransportHTTP)
}

// open connects a new session and lists its tools, within the connection
// timeout. The caller holds the dial slot or is dial.
func (c *conn) open(ctx context.Context) (*sdk.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	sess, err := c.client.Connect(ctx, c.newT(), nil)
	if err != nil {
		return nil, c.failed(fmt.Errorf("connecting: %w", c.explain(ctx, err)))
	}
	tools, err := c.listTools(ctx, sess)
	if err != nil {
		_ = sess.Close()
		return nil, c.failed(fmt.Errorf("listing its tools: %w", c.explain(ctx, err)))
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_ = sess.Close()
		return nil, kind.ErrScopeClosed
	}
	c.sess, c.tools, c.stale, c.lastErr = sess, tools, false, nil
	c.mu.Unlock()
	go c.watch(sess)
	return sess, nil
}

// explain is err, with what the context says when it ended the attempt
// and what a stdio server last wrote on its standard error.
func (c *conn) explain(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		err = fmt.Errorf("no answer within %v: %w", c.timeout, err)
	}
	if c.stderr != nil {
		if tail := c.stderr.tail(); tail != "" {
			err = fmt.Errorf("%w; the server's last words on stderr: %s", err, tail)
		}
	}
	return err
}

// failed records a failed connection attempt, so that the next waits out
// the backoff, and returns err naming the server: the OAuth error it
// carries, which names it, when it carries one.
func (c *conn) failed(err error) error {
	if ae := authError(err); ae != nil {
		err = ae
	} else {
		err = fmt.Errorf("MCP server %q (%s): %w", c.name, c.transport, err)
	}
	c.mu.Lock()
	c.failures++
	c.retryAt = time.Now().Add(backoff(c.failures))
	c.lastErr = err
	c.mu.Unlock()
	return err
}

// backoff is the wait before the next attempt after n failures in a row.
func backoff(n int) time.Duration {
	d := minBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// watch notices the end of sess (the server exited or dropped the
// connection), so that the next call reconnects.
func (c *conn) watch(sess *sdk.ClientSession) {
	err := sess.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != sess || c.closed {
		return
	}
	c.sess = nil
	c.failures++
	c.retryAt = time.Now().Add(backoff(c.failures))
	msg := "the connection closed"
	if err != nil && !errors.Is(err, io.EOF) {
		msg += ": " + err.Error()
	}
	if c.stderr != nil {
		if tail := c.stderr.tail(); tail != "" {
			msg += "; the server's last words on stderr: " + tail
		}
	}
	c.lastErr = fmt.Errorf("MCP server %q (%s): %s", c.name, c.transport, msg)
	c.log.Warn("MCP server disconnected; reconnecting on the next call", "error", c.lastErr, "retry_in", time.Until(c.retryAt).Round(time.Millisecond))
}

// session returns the current session, reconnecting when the last one
// dropped: after the backoff, which the call waits out when its context
// allows, and failing at once with the last error otherwise. It never
// waits beyond ctx.
func (c *conn) session(ctx context.Context) (*sdk.ClientSession, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, kind.ErrScopeClosed
		}
		if c.sess != nil {
			s := c.sess
			c.mu.Unlock()
			return s, nil
		}
		wait, last := time.Until(c.retryAt), c.lastErr
		c.mu.Unlock()
		if wait > 0 {
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return nil, fmt.Errorf("%w; the next reconnection is in %v", last, wait.Round(time.Millisecond))
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		select {
		case c.dial <- struct{}{}:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		c.mu.Lock()
		ready, due := c.sess != nil, !time.Now().Before(c.retryAt)
		c.mu.Unlock()
		if ready || !due { // another call reconnected, or failed, meanwhile
			<-c.dial
			continue
		}
		sess, err := c.open(ctx)
		<-c.dial
		if err != nil {
			return nil, err
		}
		c.log.Info("MCP server reconnected")
		return sess, nil
	}
}

// ready is the server's readiness check (kind.Check, for /readyz): the
// session, reconnected first when it dropped and its backoff ends within
// ctx, answers a ping. A session that does not is dropped, as after a
// failed call, so that the next call or check reconnects.
func (c *conn) ready(ctx context.Context) error {
	sess, err := c.session(ctx)
	if err != nil {
		return err
	}
	if err := sess.Ping(ctx, nil); err != nil {
		c.drop(sess, err)
		return fmt.Errorf("MCP server %q (%s): ping: %w", c.name, c.transport, c.redactErr(err))
	}
	return nil
}

// drop ends sess after a call failed for a reason that leaves it in doubt,
// so that the next call reconnects (after the backoff).
func (c *conn) drop(sess *sdk.ClientSession, why error) {
	c.mu.Lock()
	if c.sess != sess {
		c.mu.Unlock()
		return
	}
	c.sess = nil
	c.failures++
	c.retryAt = time.Now().Add(backoff(c.failures))
	c.lastErr = fmt.Errorf("MCP server %q (%s): the connection was dropped after a failed call: %w", c.name, c.transport, why)
	c.mu.Unlock()
	c.log.Warn("MCP server connection dropped after a failed call; reconnecting on the next call", "error", why)
	go sess.Close() // a stdio server may take terminateAfter to stop
}

// markStale makes the next look-up of a tool list the server's tools
// again.
func (c *conn) markStale(sess *sdk.ClientSession) {
	c.mu.Lock()
	if c.sess == sess {
		c.stale = true
	}
	c.mu.Unlock()
}

// succeeded resets the backoff after a call the server answered.
func (c *conn) succeeded() {
	c.mu.Lock()
	c.failures = 0
	c.mu.Unlock()
}

// startTools returns the tools the server offered at start-up.
func (c *conn) startTools() map[string]*sdk.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.first
}

// tool returns the server's current definition of the named tool,
// listing its tools again when it said they changed.
func (c *conn) tool(ctx context.Context, sess *sdk.ClientSession, name string) (*sdk.Tool, error) {
	c.mu.Lock()
	stale, tools := c.stale, c.tools
	c.mu.Unlock()
	if stale {
		list, err := c.listTools(ctx, sess)
		if err != nil {
			return nil, fmt.Errorf("MCP server %q said its tools changed, and listing them failed: %w", c.name, err)
		}
		c.mu.Lock()
		if c.sess == sess {
			c.tools, c.stale = list, false
		}
		c.mu.Unlock()
		tools = list
	}
	t, ok := tools[name]
	if !ok {
		return nil, notOffered(c.name, name, tools)
	}
	return t, nil
}

// close ends the session and stops reconnecting.
func (c *conn) close() error {
	c.mu.Lock()
	sess := c.sess
	c.sess, c.closed = nil, true
	c.mu.Unlock()
	if sess == nil {
		return nil
	}
	err := sess.Close()
	if err == nil || errors.Is(err, io.EOF) || isExit(err) {
		return nil
	}
	if c.transport == TransportHTTP {
		// Closing sends the server a DELETE of the session, a courtesy a
		// server that is gone cannot receive: the session ends here anyway.
		c.log.Warn("MCP server not told that its session ended", "error", err)
		return nil
	}
	return fmt.Errorf("closing MCP server %q: %w", c.name, err)
}

// isExit reports whether err is a child process's exit status, which is
// how a stdio server ended by closing reports itself.
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

// listTools reads every page of a session's tools, each redacted
// (redactTool): every use of a tool list, the model's copy and
// `aidgen describe` alike, starts from this one.
func (c *conn) listTools(ctx context.Context, sess *sdk.ClientSession) (map[string]*sdk.Tool, error) {
	out := map[string]*sdk.Tool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out[t.Name] = c.redactTool(t)
	}
	return out, nil
}

// minSecret is the length from which a credential sent to an http server
// is hidden in what the server answers: a shorter value (a team name in a
// header) would hide ordinary words, and guards nothing worth guarding.
const minSecret = 8

// maxTokenSecrets is how many of the OAuth tokens issued to a server
// redact hides: the newest, which include every token still good, so
// that a long-lived connection whose tokens are refreshed keeps a bounded
// list.
const maxTokenSecrets = 16

// addSecret makes redact hide v, a credential sent to the server for as
// long as the connection lives.
func (c *conn) addSecret(v string) {
	if len(v) < minSecret {
		return
	}
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	old := c.secretList()
	next := make([]string, 0, len(old)+1)
	next = append(next, old[:c.static]...)
	next = append(next, v)
	next = append(next, old[c.static:]...)
	c.static++
	c.secrets.Store(&next)
}

// addToken makes redact hide v, an OAuth token issued for the server,
// forgetting the oldest token beyond maxTokenSecrets.
func (c *conn) addToken(v string) {
	if len(v) < minSecret {
		return
	}
	c.secretsMu.Lock()
	defer c.secretsMu.Unlock()
	old := c.secretList()
	if slices.Contains(old, v) {
		return
	}
	tokens := old[c.static:]
	if len(tokens) >= maxTokenSecrets {
		tokens = tokens[len(tokens)-maxTokenSecrets+1:]
	}
	next := make([]string, 0, c.static+len(tokens)+1)
	next = append(next, old[:c.static]...)
	next = append(next, tokens...)
	next = append(next, v)
	c.secrets.Store(&next)
}

// secretList is the current list of secrets redact hides.
func (c *conn) secretList() []string {
	if p := c.secrets.Load(); p != nil {
		return *p
	}
	return nil
}

// redact is s with every credential sent to an http server (its bearer
// token, its headers' values) replaced by "[redacted]", so that a server
// that echoes them, in a result or an error, shows them neither to the
// model nor to whoever reads the run. A stdio server's environment is not
// hidden: it is the server's to use as it says (a folder, a user name).
func (c *conn) redact(s string) string {
	for _, v := range c.secretList() {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// redactTool is t with every credential sent to an http server hidden
// (redact) in each string it holds but its name: its title, description,
// annotations and schemas, keys included, so that a server that echoes
// them in its tool list shows them neither to the model nor in
// `aidgen describe`. The name is kept: it is what a call sends back, and a
// declaration names it. The strings are redacted after decoding, so a
// credential the JSON escapes is hidden too.
func (c *conn) redactTool(t *sdk.Tool) *sdk.Tool {
	if len(c.secretList()) == 0 {
		return t
	}
	b, err := json.Marshal(t)
	if err != nil {
		return t // a tool the SDK decoded encodes; nothing to hide otherwise
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return t
	}
	b, err = json.Marshal(c.redactJSON(v))
	if err != nil {
		return t
	}
	out := &sdk.Tool{}
	if err := json.Unmarshal(b, out); err != nil {
		return t
	}
	out.Name = t.Name
	return out
}

// redactJSON is the decoded JSON value v with redact applied to each
// string in it, object keys included.
func (c *conn) redactJSON(v any) any {
	switch v := v.(type) {
	case string:
		return c.redact(v)
	case []any:
		for i, e := range v {
			v[i] = c.redactJSON(e)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[c.redact(k)] = c.redactJSON(e)
		}
		return out
	}
	return v
}

// redactErr is err, or, when its message gives a credential away, an error
// with the message redacted and nothing of err kept.
func (c *conn) redactErr(err error) error {
	if err == nil {
		return nil
	}
	if msg := err.Error(); c.redact(msg) != msg {
		return errors.New(c.redact(msg))
	}
	return err
}

// newToken returns a progress token unique in the connection.
func (c *conn) newToken() string {
	return "aid-" + strconv.FormatInt(c.tokens.Add(1), 10)
}

// boundedTransport sends an http server's headers with every request and
// refuses a response body larger than max: the SDK reads a JSON response
// whole.
type boundedTransport struct {
	base   http.RoundTripper
	header http.Header
	max    int64
	// answered, when set, is told of each response the server sent to a
	// request, for the OAuth handler to know which tokens it accepted.
	answered func(req *http.Request, status int)
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, v := range t.header {
			req.Header[k] = v
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if t.answered != nil {
		t.answered(req, resp.StatusCode)
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, fmt.Errorf("the response has %d bytes, more than the %d an MCP message may have", resp.ContentLength, t.max)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.max}
	}
	return resp, nil
}

// limitedBody fails a read past its limit instead of cutting the body.
type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the response is larger than the %d bytes an MCP message may have", MaxResponseBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		// Check that the body ends here.
		var one [1]byte
		if m, _ := b.ReadCloser.Read(one[:]); m > 0 {
			return n, fmt.Errorf("the response is larger than the %d bytes an MCP message may have", MaxResponseBytes)
		}
	}
	return n, err
}

// tailWriter keeps the last lines a stdio server writes on its standard
// error and logs each, cut to a bounded length.
type tailWriter struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte
	lines   []string
}

const maxStderrLine = 512

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if room := maxStderrLine - len(w.partial); room > 0 {
				w.partial = append(w.partial, p[:min(room, len(p))]...)
			}
			break
		}
		if room := maxStderrLine - len(w.partial); room > 0 {
			w.partial = append(w.partial, p[:min(room, i)]...)
		}
		line := strings.TrimSpace(string(w.partial))
		w.partial = w.partial[:0]
		p = p[i+1:]
		if line == "" {
			continue
		}
		w.log.Debug("MCP server stderr", "line", line)
		w.lines = append(w.lines, line)
		if len(w.lines) > stderrLines {
			w.lines = w.lines[1:]
		}
	}
	return n, nil
}

// tail returns the last lines written, joined.
func (w *tailWriter) tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	lines := slices.Clone(w.lines)
	if s := strings.TrimSpace(string(w.partial)); s != "" {
		lines = append(lines, s)
	}
	return strings.Join(lines, " | ")
}
