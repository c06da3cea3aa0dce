package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/kind"
)

// Kind is the configuration of a tool of kind http, as the IR spells it
// (implementation: {kind: "http", url or urlEnv, headersFromEnv}): a tool
// an application declares and no Go code implements. It is plain data, so a
// generated service holds it as a literal.
type Kind struct {
	// URL is where the arguments are POSTed: an absolute http or https URL.
	// Exactly one of URL and URLEnv is set.
	URL string `json:"url,omitempty"`
	// URLEnv names the environment variable holding the URL, read when the
	// tool is built (when the service starts), so that one application
	// file serves dev and prod and the URL is not baked into a generated
	// service.
	URLEnv string `json:"urlEnv,omitempty"`
	// HeadersFromEnv maps a header sent with every call to the environment
	// variable holding its value, so that secrets stay out of the
	// application.
	HeadersFromEnv map[string]string `json:"headersFromEnv,omitempty"`
}

// ToolKind implements agents.ToolKind.
func (Kind) ToolKind() string { return kind.ToolHTTP }

// NewTools implements agents.ToolKind: the tool decl, POSTing to URL (or
// to the URL in the variable URLEnv names) with the environment's HTTP
// client and the headers read, once, from the environment's variables.
func (k Kind) NewTools(_ context.Context, decl agents.Tool, env kind.Env) ([]agents.BuiltTool, error) {
	target, err := k.url(env)
	if err != nil {
		return nil, err
	}
	impl, err := New(target, Options{Client: env.HTTPClient, HeadersFromEnv: k.HeadersFromEnv, LookupEnv: env.Lookup})
	if err != nil {
		if k.URLEnv != "" {
			err = fmt.Errorf("%w (the url is environment variable %s's)", err, k.URLEnv)
		}
		return nil, err
	}
	return []agents.BuiltTool{{Tool: decl, Implementation: impl}}, nil
}

// url returns where the tool POSTs: URL, or the value of the variable
// URLEnv names. Exactly one of the two is set (the kind's kind.Info.OneOf,
// which vet checks too).
func (k Kind) url(env kind.Env) (string, error) {
	info, _ := kind.Lookup(kind.Tools, kind.ToolHTTP)
	data, err := json.Marshal(k)
	if err != nil {
		return "", fmt.Errorf("http tool: %w", err)
	}
	if ps := info.CheckOneOf(data); len(ps) > 0 {
		return "", fmt.Errorf("http tool: %s", ps[0].Msg)
	}
	if k.URLEnv == "" {
		return k.URL, nil
	}
	v, ok := env.Lookup(k.URLEnv)
	if !ok || v == "" {
		return "", fmt.Errorf("http tool: urlEnv: environment variable %s is not set", k.URLEnv)
	}
	return v, nil
}

// Defaults of Options.
const (
	// DefaultMaxResponseBytes bounds the body an http tool reads:
	// agents.MaxObservationBytesLimit, so that no tool's bound is cut short
	// by it.
	DefaultMaxResponseBytes = agents.MaxObservationBytesLimit
	// DefaultMaxRedirects bounds the same-host redirects an http tool
	// follows.
	DefaultMaxRedirects = 3
	// errorBodyBytes bounds the part of a non-2xx body quoted in the error
	// observation.
	errorBodyBytes = 512
)

// Options configures New.
type Options struct {
	// Client sends the requests; nil means a client on kind.DefaultTransport. The
	// tool uses a copy whose redirect policy is replaced by its own. Leave
	// Client.Timeout zero: the tool's timeout reaches the request through
	// its context.
	Client *http.Client
	// Headers are sent with every request, for example an API key. Their
	// values never appear in observations, errors or logs.
	Headers map[string]string
	// HeadersFromEnv maps a header name to the environment variable that
	// holds its value, so that secrets stay out of the app file. The
	// variables are read once, by New; an unset one is an error naming the
	// variable.
	HeadersFromEnv map[string]string
	// LookupEnv reads HeadersFromEnv's variables; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// MaxResponseBytes bounds the response body read, to bound the memory
	// a call holds; zero means DefaultMaxResponseBytes. A longer 2xx body
	// is a *TooLargeError observation naming its size when the server
	// announced it (Content-Length, then nothing is read), never the part
	// read passed off as the document. A body within the bound becomes
	// the observation, which the runtime cuts to the tool's
	// MaxObservationBytes like any other, with a marker counting the bytes
	// cut from the whole body.
	MaxResponseBytes int64
	// MaxRedirects bounds the redirects followed, which must stay on the
	// URL's scheme and host; zero means DefaultMaxRedirects, negative
	// follows none.
	MaxRedirects int
}

// StatusError is the error of an http tool whose server answered with a
// status outside 2xx. The model reads it as the observation.
type StatusError struct {
	// StatusCode is the HTTP status code.
	StatusCode int
	// Status is the status line, such as "503 Service Unavailable".
	Status string
	// Body is the start of the response body, cut to a few hundred bytes.
	Body string
}

// Error implements error.
func (e *StatusError) Error() string {
	if e.Body == "" {
		return "http status " + e.Status
	}
	return "http status " + e.Status + ": " + e.Body
}

// New returns an implementation that POSTs the call's arguments as
// JSON to target and makes the response body the observation: the tool kind
// an app names so that no code is needed. A status outside 2xx is an error
// observation with the status and the start of the body; a failed request
// (refused connection, the tool's timeout, a refused redirect) is an error
// observation too. Redirects are followed only to the same scheme and host,
// at most MaxRedirects times, so a tool cannot be bounced to another server
// with its headers.
func New(target string, opts Options) (agents.Implementation, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("http tool: parse url: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http tool: url %q is not an absolute http or https url", u.Redacted())
	}
	if opts.MaxResponseBytes < 0 {
		return nil, fmt.Errorf("http tool: negative MaxResponseBytes %d", opts.MaxResponseBytes)
	}
	t := &httpTool{url: u.String(), shown: u.Redacted(), header: make(http.Header), max: opts.MaxResponseBytes}
	if t.max == 0 {
		t.max = DefaultMaxResponseBytes
	}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(opts.Headers)) {
		v := opts.Headers[name]
		if !validHeaderName(name) {
			errs = append(errs, fmt.Errorf("http tool: invalid header name %q", name))
			continue
		}
		t.header.Set(name, v)
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, name := range slices.Sorted(maps.Keys(opts.HeadersFromEnv)) {
		env := opts.HeadersFromEnv[name]
		if !validHeaderName(name) {
			errs = append(errs, fmt.Errorf("http tool: invalid header name %q", name))
			continue
		}
		v, ok := lookup(env)
		if !ok {
			errs = append(errs, fmt.Errorf("http tool: header %s: environment variable %s is not set", name, env))
			continue
		}
		t.header.Set(name, v)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.header.Set("Content-Type", "application/json")
	if t.header.Get("Accept") == "" {
		t.header.Set("Accept", "application/json, text/plain;q=0.9, */*;q=0.5")
	}
	cp := *kind.HTTPClient(opts.Client)
	c := &cp
	maxRedirects := opts.MaxRedirects
	if maxRedirects == 0 {
		maxRedirects = DefaultMaxRedirects
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		switch {
		case maxRedirects < 0:
			return errors.New("redirects are not followed")
		case len(via) > maxRedirects:
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		case req.URL.Scheme != first.Scheme || req.URL.Host != first.Host:
			return fmt.Errorf("redirect to %s://%s refused: an http tool only follows redirects on its own host", req.URL.Scheme, req.URL.Host)
		}
		return nil
	}
	t.client = c
	return t, nil
}

type httpTool struct {
	url, shown string // shown is the url without a password
	header     http.Header
	client     *http.Client
	max        int64
}

// Call implements agents.Implementation.
func (t *httpTool) Call(ctx context.Context, args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(args))
	if err != nil {
		return "", fmt.Errorf("build request: %w", err)
	}
	req.Header = t.header.Clone()
	resp, err := t.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			// url.Error quotes the url as given; show it without a password.
			err = ue.Err
		}
		return "", fmt.Errorf("post to %s: %w", t.shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes+1))
		return "", &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, Body: cut(string(body), errorBodyBytes)}
	}
	// A body past the bound is refused whole: what the tool read of it
	// would look like the document itself to the model, and the loop's
	// marker would count only the bytes read. A body whose length the
	// server announces is refused before it is read.
	if resp.ContentLength > t.max {
		return "", &TooLargeError{URL: t.shown, Size: resp.ContentLength, Limit: t.max}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.max+1))
	if err != nil {
		return "", fmt.Errorf("read response from %s: %w", t.shown, err)
	}
	if int64(len(body)) > t.max {
		return "", &TooLargeError{URL: t.shown, Size: -1, Limit: t.max}
	}
	return string(body), nil
}

// ErrResponseTooLarge is what a *TooLargeError matches with errors.Is.
var ErrResponseTooLarge = errors.New("response too large")

// TooLargeError is the error of an http tool whose server answered 2xx
// with a body longer than Options.MaxResponseBytes. The model reads it as
// the observation; the body is not shown, since a part of it would pass
// for the whole.
type TooLargeError struct {
	// URL is where the tool posted, without a password.
	URL string
	// Size is the body's length as the server announced it (its
	// Content-Length); -1 when it did not, and the tool stopped reading
	// past Limit.
	Size int64
	// Limit is the tool's MaxResponseBytes.
	Limit int64
}

// Error implements error.
func (e *TooLargeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("response from %s: the response is more than the %d bytes the tool reads", e.URL, e.Limit)
	}
	return fmt.Sprintf("response from %s: the response is %d bytes, more than the %d the tool reads", e.URL, e.Size, e.Limit)
}

// Is reports whether target is ErrResponseTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrResponseTooLarge }

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}
