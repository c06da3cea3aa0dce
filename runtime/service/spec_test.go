package service_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The Responses API's schemas, extracted from the official OpenAI OpenAPI
// document by scripts/openai-responses-schema.py.
var (
	specOnce    sync.Once
	specSchemas map[string]*jsonschema.Schema
	specErr     error
)

func specSchema(t testing.TB, name string) *jsonschema.Schema {
	t.Helper()
	specOnce.Do(func() {
		raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "openai", "responses.schema.json"))
		if err != nil {
			specErr = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			specErr = err
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("urn:openai:responses", doc); err != nil {
			specErr = err
			return
		}
		specSchemas = map[string]*jsonschema.Schema{}
		for _, n := range []string{"CreateResponse", "Response", "ResponseStreamEvent", "ErrorResponse"} {
			s, err := c.Compile("urn:openai:responses#/$defs/" + n)
			if err != nil {
				specErr = err
				return
			}
			specSchemas[n] = s
		}
	})
	if specErr != nil {
		t.Fatalf("loading the OpenAI spec's schemas: %v", specErr)
	}
	return specSchemas[name]
}

// checkSpec validates a JSON document against one of the spec's schemas.
func checkSpec(t testing.TB, name string, doc []byte) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Errorf("%s: not JSON: %v: %.300s", name, err, doc)
		return
	}
	if err := specSchema(t, name).Validate(v); err != nil {
		t.Errorf("%s does not validate against the OpenAI spec: %v\n%.2000s", name, err, doc)
	}
}

// specProxy is the spec's validation proxy in front of h, as Prism's is:
// every request to the Responses routes is validated against
// CreateResponse, every answer against Response (or ErrorResponse for an
// error), and every event of a stream against ResponseStreamEvent, with
// its sequence numbers counted from 0 without a gap.
func specProxy(t testing.TB, h http.Handler, requests bool) http.Handler {
	specSchema(t, "Response")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/responses") {
			h.ServeHTTP(w, r)
			return
		}
		if requests && r.Method == http.MethodPost && r.URL.Path == "/v1/responses" {
			body, _ := io.ReadAll(r.Body)
			checkSpec(t, "CreateResponse", body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		tw := &teeWriter{ResponseWriter: w}
		h.ServeHTTP(tw, r)
		status := tw.status
		if status == 0 {
			status = http.StatusOK
		}
		switch ct := tw.Header().Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/event-stream"):
			checkStream(t, tw.buf.Bytes())
		case status >= 400:
			checkSpec(t, "ErrorResponse", tw.buf.Bytes())
		case r.Method == http.MethodDelete:
		default:
			checkSpec(t, "Response", tw.buf.Bytes())
		}
	})
}

// checkStream validates a stream's events.
func checkStream(t testing.TB, b []byte) {
	t.Helper()
	seq := 0
	for _, frame := range strings.Split(string(b), "\n\n") {
		var data string
		for _, line := range strings.Split(frame, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				data = d
			}
		}
		if data == "" {
			continue
		}
		checkSpec(t, "ResponseStreamEvent", []byte(data))
		var ev struct {
			Seq int `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Seq != seq {
			t.Errorf("event %d has sequence_number %d: %.200s", seq, ev.Seq, data)
		}
		seq++
	}
}

// teeWriter keeps a copy of what a handler writes, flushing as it goes.
type teeWriter struct {
	http.ResponseWriter
	status int
	mu     sync.Mutex
	buf    bytes.Buffer
}

func (w *teeWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.buf.Write(b)
	w.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *teeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// answerServer serves e's service behind specProxy checking answers
// only, for requests that break the spec on purpose.
func (e *env) answerServer(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(specProxy(t, e.svc, false))
	t.Cleanup(srv.Close)
	return srv
}

// specServer serves e's service behind specProxy.
func (e *env) specServer(t testing.TB) *httptest.Server {
	srv := httptest.NewServer(specProxy(t, e.svc, true))
	t.Cleanup(srv.Close)
	return srv
}
