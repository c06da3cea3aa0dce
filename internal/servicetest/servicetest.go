// Package servicetest is the harness the tests of a service share: the
// in-process service of runtime/service, the process around it in
// runtime/serve, a generated service run as a child in internal/e2e, and
// the end-to-end cases of internal/cases. It sends requests and reads
// answers, the OpenAI-shaped errors and the Prometheus metrics, keeps a
// service's log, and waits for a condition or for the goroutines of a
// stopped service to end. It is for tests only.
package servicetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is a log sink safe for concurrent writes: a service's stderr,
// written by its logger while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the JSON log lines written so far.
func (s *Buffer) Lines() []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(s.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// LogLine returns the first JSON log line whose msg is msg.
func (s *Buffer) LogLine(msg string) (map[string]any, bool) {
	for _, m := range s.Lines() {
		if m["msg"] == msg {
			return m, true
		}
	}
	return nil, false
}

// Do sends one request to url with client, with a bearer token unless
// token is empty, a JSON content type when there is a body, and header
// (name, value pairs), and returns the status, the headers and the body.
// It fails the test when the request cannot be sent or its answer read.
func Do(t testing.TB, client *http.Client, method, url, token string, body io.Reader, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, url, err)
	}
	return resp.StatusCode, resp.Header, b
}

// DoJSON sends body (JSON; none when empty) and decodes an answer of
// status want into out, when out is not nil; another status fails the
// test.
func DoJSON(t testing.TB, client *http.Client, method, url, token, body string, want int, out any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	status, _, b := Do(t, client, method, url, token, r)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, url, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, url, b, err)
		}
	}
}

// ErrorBody is an OpenAI-shaped error body, for a test that decodes one
// where it cannot fail (off its goroutine).
type ErrorBody struct {
	// Error is the error object.
	Error struct {
		Code    string  `json:"code"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Message string  `json:"message"`
	} `json:"error"`
}

// APIError decodes an OpenAI-shaped error body: its code, type and param.
// It fails the test when the body is not one, or has no message.
func APIError(t testing.TB, body []byte) (code, typ, param string) {
	t.Helper()
	var v ErrorBody
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if v.Error.Message == "" {
		t.Errorf("error without a message: %s", body)
	}
	if v.Error.Param != nil {
		param = *v.Error.Param
	}
	return v.Error.Code, v.Error.Type, param
}

// ErrorOnly is APIError for an answer that must be the error alone: it
// also fails the test when the body carries anything beside the error and
// the aid extension (a run with zero fields, say).
func ErrorOnly(t testing.TB, body []byte) (code, typ, param string) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	for k := range fields {
		if k != "error" && k != "aid" {
			t.Errorf("error body with %q beside the error: %s", k, body)
		}
	}
	return APIError(t, body)
}

// Metric reads one sample of a Prometheus exposition: the value of the
// line that starts with series (the name and its labels), and whether
// there is one (a budget nothing was charged to has no series).
func Metric(exposition, series string) (float64, bool) {
	for _, l := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// WaitFor polls cond until it holds, failing the test after 10 seconds.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
	}
}

// NoLeak waits for the goroutines of a stopped service to end: until no
// goroutine's stack holds one of markers and there are at most before +
// slack goroutines (slack for those a client the test keeps may still
// hold). After 10 seconds it fails the test, showing every stack.
func NoLeak(t testing.TB, before, slack int, markers ...string) {
	t.Helper()
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		leaked := false
		for _, m := range markers {
			leaked = leaked || strings.Contains(stacks, m)
		}
		if !leaked && runtime.NumGoroutine() <= before+slack {
			return
		}
	}
	t.Errorf("goroutines leaked (%d before, %d now):\n%s", before, runtime.NumGoroutine(), stacks)
}

// GoCommand is the go command run in dir as a user builds a generated
// service: no workspace, no network (the module cache only), go.mod as
// written, the local toolchain.
func GoCommand(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local")
	return cmd
}
