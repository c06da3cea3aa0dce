package http_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	toolhttp "github.com/aidgen/aid/runtime/agents/tools/http"
	"github.com/aidgen/aid/runtime/agents/tooltest"
	"github.com/aidgen/aid/runtime/kind"
)

const secret = "s3cr3t-token"

var lookupSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`)

// hostile is a server with one handler per path: well-behaved, failing,
// slow, huge and redirecting.
func hostile(t *testing.T) *httptest.Server {
	t.Helper()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a redirect reached another host")
		_, _ = io.WriteString(w, "stolen")
	}))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want a JSON POST, got "+r.Method+" "+r.Header.Get("Content-Type"), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "auth="+r.Header.Get("Authorization")+" x="+r.Header.Get("X-Team")+" body="+string(body))
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no such order", http.StatusNotFound)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, strings.Repeat("é", 10_000))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		// The server notices a gone client only once the body is read.
		_, _ = io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	mux.HandleFunc("/trickle", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "partial ")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, _ *http.Request) {
		// Longer than the server buffers before chunking: no length.
		_, _ = io.WriteString(w, strings.Repeat("x", 4096))
	})
	mux.HandleFunc("/sized", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "10000000")
		for range 10 {
			if _, err := io.WriteString(w, strings.Repeat("x", 1_000_000)); err != nil {
				return // the tool hung up, as it should
			}
		}
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPTool(t *testing.T) {
	srv := hostile(t)
	t.Setenv("AID_TEST_TOKEN", "Bearer "+secret)
	opts := toolhttp.Options{
		Headers:          map[string]string{"X-Team": "desk"},
		HeadersFromEnv:   map[string]string{"Authorization": "AID_TEST_TOKEN"},
		MaxResponseBytes: 1024,
	}
	tests := []struct {
		name    string
		path    string
		opts    func(toolhttp.Options) toolhttp.Options
		timeout time.Duration
		want    string // the observation, or a part of the error
		status  int    // the *HTTPStatusError's code
		wantErr error  // errors.Is
		exact   bool   // the observation is want, not merely ends with it
	}{
		{name: "2xx body is the observation", path: "/ok", want: `auth=Bearer ` + secret + ` x=desk body={"id":"A"}`},
		{name: "4xx", path: "/missing", want: "http status 404 Not Found: no such order", status: 404},
		{name: "5xx body is cut", path: "/broken", want: "http status 503 Service Unavailable: éé", status: 503},
		{name: "slow server past the timeout", path: "/slow", timeout: 50 * time.Millisecond, want: "post to", wantErr: context.DeadlineExceeded},
		{name: "slow body past the timeout", path: "/trickle", timeout: 50 * time.Millisecond, want: "read response from", wantErr: context.DeadlineExceeded},
		// A 2xx body longer than MaxResponseBytes is an error, never a
		// document cut short as if it were whole: with its size when the
		// server says it, else with the bound it passed.
		{name: "huge body of a known size", path: "/sized", want: "the response is 10000000 bytes, more than the 1024 the tool reads", wantErr: toolhttp.ErrResponseTooLarge},
		{name: "huge body of an unknown size", path: "/huge", want: "the response is more than the 1024 bytes the tool reads", wantErr: toolhttp.ErrResponseTooLarge},
		{name: "body exactly at the limit", path: "/huge", opts: func(o toolhttp.Options) toolhttp.Options { o.MaxResponseBytes = 4096; return o }, want: strings.Repeat("x", 4096), exact: true},
		{name: "same-host redirect", path: "/hop", want: `body={"id":"A"}`},
		{name: "redirect to another host", path: "/away", want: "only follows redirects on its own host"},
		{name: "redirect loop", path: "/loop", want: "stopped after 3 redirects"},
		{name: "redirects off", path: "/hop", opts: func(o toolhttp.Options) toolhttp.Options { o.MaxRedirects = -1; return o }, want: "redirects are not followed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := opts
			if tt.opts != nil {
				o = tt.opts(o)
			}
			impl, err := toolhttp.New(srv.URL+tt.path, o)
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			out, err := impl.Call(ctx, json.RawMessage(`{"id":"A"}`))
			if strings.HasPrefix(tt.name, "2xx") || tt.name == "same-host redirect" || tt.exact {
				if err != nil || !strings.HasSuffix(out, tt.want) || (tt.exact && out != tt.want) {
					t.Fatalf("got %q, %v; want %q", out, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %q, %v; want an error containing %q", out, err, tt.want)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the error leaks the secret header: %v", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v is not %v", err, tt.wantErr)
			}
			var se *toolhttp.StatusError
			if got := errors.As(err, &se); got != (tt.status != 0) || (got && se.StatusCode != tt.status) {
				t.Fatalf("status error %v, want status %d", err, tt.status)
			}
			if tt.status == 503 && len(se.Body) > 520 {
				t.Fatalf("error body not cut: %d bytes", len(se.Body))
			}
		})
	}
}

func TestHTTPToolRejects(t *testing.T) {
	tests := []struct {
		name, url string
		opts      toolhttp.Options
		want      string
	}{
		{"relative url", "/orders", toolhttp.Options{}, "not an absolute http or https url"},
		{"other scheme", "ftp://example.test/x", toolhttp.Options{}, "not an absolute http or https url"},
		{"password hidden", "ftp://u:hunter2@example.test/x", toolhttp.Options{}, "u:xxxxx@"},
		{"unset variable", "http://example.test", toolhttp.Options{HeadersFromEnv: map[string]string{"Authorization": "AID_TEST_SURELY_UNSET"}}, "environment variable AID_TEST_SURELY_UNSET is not set"},
		{"bad header name", "http://example.test", toolhttp.Options{Headers: map[string]string{"Bad Header": "x"}}, `invalid header name "Bad Header"`},
		{"negative limit", "http://example.test", toolhttp.Options{MaxResponseBytes: -1}, "negative MaxResponseBytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := toolhttp.New(tt.url, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// Through a run, an http tool's failures are observations the model reads,
// and the tool's timeout reaches the request.
func TestHTTPToolInARun(t *testing.T) {
	srv := hostile(t)
	impls := map[string]agents.Implementation{}
	var tools []agents.Tool
	for _, name := range []string{"ok", "missing", "slow"} {
		impl, err := toolhttp.New(srv.URL+"/"+name, toolhttp.Options{})
		if err != nil {
			t.Fatal(err)
		}
		impls[name] = impl
		tools = append(tools, agents.Tool{Name: name, Description: "d", Input: lookupSchema, Timeout: 100 * time.Millisecond})
	}
	res, _ := tooltest.Run(t, tools, impls,
		tooltest.Call("1", "ok", `{"id":"A"}`), tooltest.Call("2", "missing", `{"id":"B"}`), tooltest.Call("3", "slow", `{"id":"C"}`))
	got := res.Steps[0].ToolCalls
	if !strings.HasSuffix(got[0].Observation, `body={"id":"A"}`) || got[0].ErrorKind != "" {
		t.Errorf("ok: %+v", got[0])
	}
	if got[1].Observation != "error: tool missing failed: http status 404 Not Found: no such order\n" || got[1].ErrorKind != agents.KindToolFailed {
		t.Errorf("missing: %q %s", got[1].Observation, got[1].ErrorKind)
	}
	if got[2].ErrorKind != agents.KindTimeout {
		t.Errorf("slow: %+v", got[2])
	}
	if res.Status != agents.StatusCompleted {
		t.Fatalf("status %s", res.Status)
	}
}

// A password in the url reaches the server but never an observation.
func TestHTTPToolHidesURLPassword(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens any more: the request fails
	impl, err := toolhttp.New("http://user:"+secret+"@"+addr+"/x", toolhttp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = impl.Call(t.Context(), json.RawMessage(`{}`))
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "user:xxxxx@") {
		t.Fatalf("error %v", err)
	}
}

// TestURLEnv builds the kind's tool from its configuration: the URL comes
// from url, or from the variable urlEnv names when the tool is built, and
// exactly one of the two is set.
func TestURLEnv(t *testing.T) {
	srv := hostile(t)
	vars := map[string]string{"ORDERS_URL": srv.URL + "/ok", "EMPTY_URL": "", "BAD_URL": "orders.internal/ok"}
	env := kind.Env{LookupEnv: func(n string) (string, bool) { v, ok := vars[n]; return v, ok }}
	decl := agents.Tool{Name: "lookup", Description: "d", Input: lookupSchema}
	for _, k := range []toolhttp.Kind{{URL: srv.URL + "/ok"}, {URLEnv: "ORDERS_URL"}} {
		built, err := k.NewTools(t.Context(), decl, env)
		if err != nil || len(built) != 1 {
			t.Fatalf("%+v: %v, %d tools", k, err, len(built))
		}
		got, err := built[0].Implementation.Call(t.Context(), json.RawMessage(`{"id":"A"}`))
		if err != nil || !strings.HasSuffix(got, `body={"id":"A"}`) {
			t.Errorf("%+v: %q, %v", k, got, err)
		}
	}
	for _, tt := range []struct {
		k    toolhttp.Kind
		want string
	}{
		{toolhttp.Kind{}, "set one of url and urlEnv"},
		{toolhttp.Kind{URL: srv.URL, URLEnv: "ORDERS_URL"}, "set either url or urlEnv, not more than one"},
		{toolhttp.Kind{URLEnv: "AID_TEST_SURELY_UNSET"}, "environment variable AID_TEST_SURELY_UNSET is not set"},
		{toolhttp.Kind{URLEnv: "EMPTY_URL"}, "environment variable EMPTY_URL is not set"},
		{toolhttp.Kind{URLEnv: "BAD_URL"}, `not an absolute http or https url (the url is environment variable BAD_URL's)`},
	} {
		if _, err := tt.k.NewTools(t.Context(), decl, env); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: %v, want %q", tt.k, err, tt.want)
		}
	}
}
