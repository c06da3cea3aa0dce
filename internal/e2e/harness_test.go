package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/servicetest"
)

// work holds every variant's app copy, generated module and binary; TestMain
// removes it.
var work string

// upstream is the OpenAI-compatible server the desk variant's concierge
// talks to; its URL is written into the app file before the build.
var upstream *upstreamServer

// hold is the endpoint of the replicas variant's hold tool: it holds every
// request until its client goes away, and counts them.
var hold *holdServer

// slow is the endpoint of the replicas variant's stamp, slow_read and
// slow_write tools (see newSlowServer).
var slow *slowServer

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aid-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	work = dir
	upstream = newUpstream()
	hold = newHoldServer()
	slow = newSlowServer()
	code := m.Run()
	upstream.Close()
	if claudeMock != nil {
		claudeMock.Close()
	}
	hold.Close()
	slow.Close()
	os.RemoveAll(work)
	os.Exit(code)
}

// variant is one generated service: examples/support-desk with an overlay
// appended to its app file.
type variant struct {
	name    string            // directory under work
	overlay string            // file under testdata/e2e appended to app.cue
	extra   []string          // files under testdata/e2e copied beside app.cue
	replace map[string]string // placeholders in the overlay
}

// built is the outcome of building one variant, once per test binary.
type built struct {
	once     sync.Once
	bin, dir string // the binary, and the generated module it runs in
	err      error
}

var (
	buildsMu sync.Mutex
	builds   = map[string]*built{}
)

// build generates and compiles a variant once per test binary run, so that
// every test of it shares one go build. The binary runs in the generated
// module's directory, whose description names the app directory relative to
// it, as aidgen build wrote it.
func build(t *testing.T, v variant) (bin, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a generated service with the go command")
	}
	buildsMu.Lock()
	b, ok := builds[v.name]
	if !ok {
		b = &built{}
		builds[v.name] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() { b.bin, b.dir, b.err = doBuild(v) })
	if b.err != nil {
		t.Fatalf("building %s: %v", v.name, b.err)
	}
	return b.bin, b.dir
}

func doBuild(v variant) (string, string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", "", err
	}
	appDir := filepath.Join(work, v.name, "app")
	if err := os.CopyFS(appDir, os.DirFS(filepath.Join(root, "examples", "support-desk"))); err != nil {
		return "", "", fmt.Errorf("copying the example: %w", err)
	}
	overlay, err := os.ReadFile(filepath.Join(root, "testdata", "e2e", v.overlay))
	if err != nil {
		return "", "", err
	}
	text := string(overlay)
	for k, val := range v.replace {
		text = strings.ReplaceAll(text, k, val)
	}
	appFile := filepath.Join(appDir, "app.cue")
	f, err := os.OpenFile(appFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", "", err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return "", "", err
	}
	if err := f.Close(); err != nil {
		return "", "", err
	}
	for _, name := range v.extra {
		b, err := os.ReadFile(filepath.Join(root, "testdata", "e2e", name))
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(appDir, name), b, 0o644); err != nil {
			return "", "", err
		}
	}

	// The real CLI, as a user runs it from this checkout.
	svcDir := filepath.Join(work, v.name, "service")
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"build", appFile, "-o", svcDir, "--runtime", root}, strings.NewReader(""), &out, &errOut); code != 0 {
		return "", "", fmt.Errorf("aidgen build exited %d:\n%s%s", code, out.String(), errOut.String())
	}

	// Built as a user builds it: no workspace, no network, no -race (the
	// child is not what is under test for races; this process is).
	bin := filepath.Join(work, v.name, "bin", v.name)
	if b, err := servicetest.GoCommand(svcDir, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return bin, svcDir, nil
}

// proc is a running generated service.
type proc struct {
	base   string
	cmd    *exec.Cmd
	stderr *servicetest.Buffer
	done   chan struct{}
	err    error // the Wait result, once done is closed
}

// freePort picks a loopback port the kernel has just handed out. The service
// logs the address it was given, not the one it bound, so it is given a
// concrete port.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// start runs the binary in dir with env added to the test's environment,
// on a fresh loopback port, and waits until /readyz answers 200. The
// cleanup kills a process the test did not stop, and prints its log when the
// test failed.
func start(t *testing.T, bin, dir string, env ...string) *proc {
	t.Helper()
	addr := freePort(t)
	cmd := exec.Command(bin, "-listen", addr)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	p := &proc{base: "http://" + addr, cmd: cmd, stderr: &servicetest.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stderr, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of %s:\n%s", p.base, p.stderr.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.done:
			t.Fatalf("service exited before it was ready (%v):\n%s", p.err, p.stderr.String())
		default:
		}
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("service not ready after 60s (last: %v):\n%s", err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM and requires a clean exit (status 0) within the
// drain.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("service did not exit within 30s of SIGTERM:\n%s", p.stderr.String())
	}
	if p.err != nil {
		t.Fatalf("service exited with %v after SIGTERM:\n%s", p.err, p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), `"msg":"serving"`) {
		t.Errorf("the log has no serving line:\n%s", p.stderr.String())
	}
}

// do sends one request with an optional bearer token and returns the status,
// the headers and the body.
func (p *proc) do(t *testing.T, method, path, token string, body io.Reader) (int, http.Header, []byte) {
	t.Helper()
	return servicetest.Do(t, http.DefaultClient, method, p.base+path, token, body)
}

// doJSON sends a request and decodes a JSON answer of the wanted status
// into out.
func (p *proc) doJSON(t *testing.T, method, path, token, body string, want int, out any) {
	t.Helper()
	servicetest.DoJSON(t, http.DefaultClient, method, p.base+path, token, body, want, out)
}

// errorCode decodes an error body's code.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	code, _, _ := servicetest.APIError(t, b)
	return code
}

// runRecord is what GET /v1/runs/{id} and POST /v1/runs/{id}/resume answer,
// as far as these tests read it.
type runRecord struct {
	RunID   string   `json:"run_id"`
	Agent   string   `json:"agent"`
	Status  string   `json:"status"`
	Path    []string `json:"path"`
	Answer  string   `json:"answer"`
	CostUSD float64  `json:"cost_usd"`
	Steps   []struct {
		Agent     string  `json:"agent"`
		CostUSD   float64 `json:"cost_usd"`
		ToolCalls []struct {
			Name        string          `json:"name"`
			Done        bool            `json:"done"`
			Observation string          `json:"observation"`
			Approval    json.RawMessage `json:"approval"`
			Delegate    json.RawMessage `json:"delegate"`
		} `json:"tool_calls"`
	} `json:"steps"`
	Pending *struct {
		Tool string `json:"tool"`
	} `json:"pending"`
}

// toolCall finds the first call of the named tool made by agent.
func (r runRecord) toolCall(agent, tool string) (obs string, delegate, approval json.RawMessage, ok bool) {
	for _, s := range r.Steps {
		if s.Agent != agent {
			continue
		}
		for _, c := range s.ToolCalls {
			if c.Name == tool {
				return c.Observation, c.Delegate, c.Approval, true
			}
		}
	}
	return "", nil, nil, false
}

// metric reads one sample of /metrics whose line starts with prefix (name
// and labels), and whether it is there: a budget nothing was charged to has
// no series.
func metric(t *testing.T, p *proc, token, prefix string) (float64, bool) {
	t.Helper()
	status, _, b := p.do(t, "GET", "/metrics", token, nil)
	if status != http.StatusOK {
		t.Fatalf("/metrics: status %d: %s", status, b)
	}
	return servicetest.Metric(string(b), prefix)
}

// withTimeout is a context for one client call.
func withTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fileExists reports whether the example still has the file a test relies
// on, so that a renamed document fails with a clear message.
func fileExists(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s is gone; the e2e tests rely on it", path)
	}
}

// asError is errors.As for a typed target.
func asError[T error](err error, target *T) bool { return errors.As(err, target) }
