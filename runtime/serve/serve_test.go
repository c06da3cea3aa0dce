package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/memory"
	"github.com/aidgen/aid/runtime/serve"
	"github.com/aidgen/aid/runtime/service"
)

// docsDir returns a directory holding the one document the test
// application's retriever ingests.
func docsDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "docs", "refunds.md"), []byte("# Refunds\n\nRefunds take five business days.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// desk is a small application on the fake provider: one agent and one
// retriever over docs/*.md in dir, in a memory store, listening on
// loopback without auth.
func desk(dir string) app.Description {
	return app.Description{
		Name: "desk", Version: "0.1.0", Dir: dir,
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1, Analyzer: analysis.English{}}}},
		Models: []gateway.PinnedModel{
			{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", Kind: gateway.KindChat, ContextWindow: 8192, MaxOutputTokens: 64}},
			{Alias: "embed", Spec: gateway.ModelSpec{ID: "fake-embed-1", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 16}},
		},
		Agents:     []agents.Agent{{Name: "desk", Model: "m", Instructions: "Answer.", MaxSteps: 2}},
		Stores:     []retrieval.StoreConfig{{Name: "kb", Distance: retrieval.DistanceCosine, Kind: memory.Kind{}}},
		Retrievers: []retrieval.Config{{Name: "kb", Source: retrieval.Source{Files: []string{"docs/*.md"}}, ChunkSize: 200, EmbedModel: "embed", Store: "kb", TopK: 2}},
		Service:    app.Service{Listen: "127.0.0.1:0", Entry: "desk", Auth: app.Auth{Kind: "none"}},
	}
}

// env is an environment of the given variables only.
func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// running is a Run in progress.
type running struct {
	stderr *servicetest.Buffer
	cancel context.CancelFunc
	code   chan int
}

func start(t *testing.T, desc app.Description, opts serve.Options, args []string, vars map[string]string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{stderr: &servicetest.Buffer{}, cancel: cancel, code: make(chan int, 1)}
	go func() {
		r.code <- serve.Run(ctx, desc, opts, serve.Process{Args: args, LookupEnv: env(vars), Stderr: r.stderr})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.code:
		case <-time.After(30 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	return r
}

// serving waits until the service logs that it serves (or Run returns)
// and returns the "serving" log line.
func (r *running) serving(t *testing.T) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m, ok := r.stderr.LogLine("serving"); ok {
			return m
		}
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("Run returned %d before serving:\n%s", code, r.stderr)
		default:
		}
	}
	t.Fatalf("not serving after 30s:\n%s", r.stderr)
	return nil
}

// stop cancels the Run and returns its exit code.
func (r *running) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.code:
		r.code <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
		return -1
	}
}

// exit waits for a Run that must stop by itself and returns its code.
func (r *running) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.code:
		r.code <- code
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not stop by itself:\n%s", r.stderr)
		return -1
	}
}

func search(t *testing.T, client *http.Client, addr, token string) int {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/retrievers/kb/search", strings.NewReader(`{"query":"how long do refunds take"}`))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct{ Text string } `json:"data"`
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		if len(body.Data) == 0 || !strings.Contains(body.Data[0].Text, "five business days") {
			t.Errorf("search found %+v; want the ingested document", body.Data)
		}
	}
	return resp.StatusCode
}

// TestRunServesAndStops starts the service with each way of configuring
// it, checks which setting won, searches the retriever ingested at start,
// and stops it: exit code 0 and no goroutine left.
func TestRunServesAndStops(t *testing.T) {
	docs := docsDir(t)
	empty := t.TempDir()
	embedded := fstest.MapFS{"app/docs/refunds.md": {Data: []byte("# Refunds\n\nRefunds take five business days.\n")}}
	inApp := func(d app.Description) app.Description { d.Dir = "app"; return d }
	for _, c := range []struct {
		name       string
		desc       func(app.Description) app.Description
		files      fs.FS
		args       []string
		vars       map[string]string
		wantListen string
		token      string
		wantSpans  bool
	}{
		{name: "app file", wantListen: "127.0.0.1:0"},
		{name: "env over app file",
			desc: func(d app.Description) app.Description { d.Service.Listen, d.Dir = "app.invalid:1", empty; return d },
			vars: map[string]string{"AID_LISTEN": "127.0.0.1:0", "AID_APP_DIR": docs}, wantListen: "127.0.0.1:0"},
		{name: "flag over env",
			args: []string{"-listen", "localhost:0", "-app-dir", docs, "-log-level", "debug"},
			vars: map[string]string{"AID_LISTEN": "env.invalid:1", "AID_APP_DIR": empty}, wantListen: "localhost:0"},
		{name: "bearer tokens rotated",
			desc: func(d app.Description) app.Description {
				d.Service.Auth = app.Auth{Kind: "bearer", TokenEnv: "DESK_TOKENS"}
				return d
			},
			vars: map[string]string{"DESK_TOKENS": " old-token , new-token,"}, wantListen: "127.0.0.1:0", token: "new-token"},
		{name: "otel disabled", vars: map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, wantListen: "127.0.0.1:0"},
		{name: "otel exporter none", vars: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, wantListen: "127.0.0.1:0"},
		{name: "otel console exporter", vars: map[string]string{"OTEL_TRACES_EXPORTER": "console"}, wantListen: "127.0.0.1:0", wantSpans: true},
		{name: "embedded files", desc: inApp, files: embedded, wantListen: "127.0.0.1:0"},
		{name: "app dir over embedded files", desc: inApp, files: fstest.MapFS{}, args: []string{"-app-dir", docs}, wantListen: "127.0.0.1:0"},
		{name: "env app dir over embedded files", desc: inApp, files: fstest.MapFS{}, vars: map[string]string{"AID_APP_DIR": docs}, wantListen: "127.0.0.1:0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			desc := desk(docs)
			if c.desc != nil {
				desc = c.desc(desc)
			}
			r := start(t, desc, serve.Options{Files: c.files}, c.args, c.vars)
			line := r.serving(t)
			if line["listen"] != c.wantListen {
				t.Errorf("listen = %v, want %s", line["listen"], c.wantListen)
			}
			ingested, ok := r.stderr.LogLine("ingested")
			if !ok || ingested["retriever"] != "kb" || !strings.Contains(ingested["stats"].(string), "Files:1") {
				t.Errorf("ingest at start: %v; want kb with its one file\n%s", ingested, r.stderr)
			}
			client := &http.Client{Transport: &http.Transport{}}
			addr := line["addr"].(string)
			if got := search(t, client, addr, c.token); got != http.StatusOK {
				t.Errorf("search: status %d, want 200", got)
			}
			if c.token != "" {
				if got := search(t, client, addr, "old-token"); got != http.StatusOK {
					t.Errorf("search with the other token: status %d, want 200", got)
				}
				if got := search(t, client, addr, "wrong"); got != http.StatusUnauthorized {
					t.Errorf("search with a wrong token: status %d, want 401", got)
				}
			}
			client.CloseIdleConnections()
			if code := r.stop(t); code != serve.ExitOK {
				t.Errorf("exit code %d after a clean stop, want 0\n%s", code, r.stderr)
			}
			// The ingest at start embeds through the gateway; with an
			// exporter its span is flushed by the time Run returns.
			if got := strings.Contains(r.stderr.String(), `"Name":"embeddings fake-embed`); got != c.wantSpans {
				t.Errorf("embedding span exported = %v, want %v\n%s", got, c.wantSpans, r.stderr)
			}
			servicetest.NoLeak(t, before, 0)
		})
	}
}

// TestRunFails checks that a service that cannot start exits by itself,
// with exit code 1 (2 for flags) and the reason logged, without waiting
// for a signal.
func TestRunFails(t *testing.T) {
	docs := docsDir(t)
	for _, c := range []struct {
		name     string
		desc     func(app.Description) app.Description
		args     []string
		vars     map[string]string
		wantCode int
		wantLog  string
	}{
		{name: "auth none off loopback", args: []string{"-listen", "0.0.0.0:0"}, wantCode: serve.ExitFailed, wantLog: "0.0.0.0:0"},
		{name: "auth none off loopback by env", vars: map[string]string{"AID_LISTEN": ":0"}, wantCode: serve.ExitFailed, wantLog: "service stopped"},
		{name: "bearer without tokens",
			desc: func(d app.Description) app.Description {
				d.Service.Auth = app.Auth{Kind: "bearer", TokenEnv: "DESK_TOKENS"}
				return d
			},
			vars:     map[string]string{"DESK_TOKENS": " , "},
			wantCode: serve.ExitFailed, wantLog: "set DESK_TOKENS to the accepted token"},
		{name: "otel unknown exporter", vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantCode: serve.ExitFailed, wantLog: "OTEL_TRACES_EXPORTER"},
		{name: "otel grpc", vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantCode: serve.ExitFailed, wantLog: "OTLP over gRPC"},
		{name: "missing documents", args: []string{"-app-dir", filepath.Join(docs, "nowhere")}, wantCode: serve.ExitFailed, wantLog: "ingesting retriever kb"},
		{name: "listen taken", args: []string{"-listen", "127.0.0.1:-1"}, wantCode: serve.ExitFailed, wantLog: "listen on 127.0.0.1:-1"},
		{name: "debug listener off loopback", args: []string{"-debug-listen", "0.0.0.0:0"}, wantCode: serve.ExitFailed, wantLog: "0.0.0.0:0 is not a loopback address"},
		{name: "unknown flag", args: []string{"-port", "8080"}, wantCode: serve.ExitUsage, wantLog: "flag provided but not defined: -port"},
		{name: "bad log level", args: []string{"-log-level", "loud"}, wantCode: serve.ExitUsage, wantLog: "log-level"},
		{name: "bad agent concurrency", args: []string{"-agent-concurrency", "desk"}, wantCode: serve.ExitUsage, wantLog: "want agent=N"},
		{name: "bad workers env", vars: map[string]string{"AID_WORKERS": "many"}, wantCode: serve.ExitUsage, wantLog: `AID_WORKERS="many": want an integer`},
		{name: "rescue before the run timeout", args: []string{"-job-run-timeout", "1m", "-job-rescue-after", "30s"}, wantCode: serve.ExitUsage, wantLog: "must exceed RunTimeout"},
		{name: "state-dsn without postgres state", args: []string{"-state-dsn", "postgres://x"}, wantCode: serve.ExitUsage, wantLog: "-state-dsn"},
		{name: "retention env not a duration", vars: map[string]string{"AID_RETAIN_FINISHED": "an hour"}, wantCode: serve.ExitUsage, wantLog: "AID_RETAIN_FINISHED"},
		{name: "max finished env not a number", vars: map[string]string{"AID_MAX_FINISHED": "many"}, wantCode: serve.ExitUsage, wantLog: "AID_MAX_FINISHED"},
		{name: "negative retention", args: []string{"-retain-paused", "-1h"}, wantCode: serve.ExitUsage, wantLog: "retention of paused runs -1h0m0s is negative"},
		{name: "retention with postgres state",
			desc: func(d app.Description) app.Description {
				d.Service.State = app.State{Kind: app.StatePostgres, DSNEnv: "DESK_DSN"}
				return d
			},
			args: []string{"-max-finished", "10"}, wantCode: serve.ExitUsage, wantLog: "flag provided but not defined: -max-finished"},
		{name: "assembly fails",
			desc: func(d app.Description) app.Description {
				d.Agents[0].Tools = []string{"nowhere"}
				return d
			},
			// Said once: Assemble's error names the application itself.
			wantCode: serve.ExitFailed, wantLog: `"error":"assembling desk: building the agents: agent \"desk\": tool \"nowhere\" is not declared"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			desc := desk(docs)
			if c.desc != nil {
				desc = c.desc(desc)
			}
			r := start(t, desc, serve.Options{}, c.args, c.vars)
			if code := r.exit(t); code != c.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, c.wantCode, r.stderr)
			}
			if !strings.Contains(r.stderr.String(), c.wantLog) {
				t.Errorf("stderr lacks %q:\n%s", c.wantLog, r.stderr)
			}
			if _, ok := r.stderr.LogLine("serving"); ok {
				t.Errorf("logged serving for a service that did not start:\n%s", r.stderr)
			}
		})
	}
}

// TestRunRetention checks where a memory-state service's run retention
// comes from: each flag over its environment variable over the app file,
// defaults for what none sets; the serving line says what won.
func TestRunRetention(t *testing.T) {
	docs := docsDir(t)
	for _, c := range []struct {
		name string
		file agents.Retention
		args []string
		vars map[string]string
		want map[string]any
	}{
		{name: "defaults", want: map[string]any{"finished": "1h0m0s", "max_finished": 10000.0, "paused": "168h0m0s"}},
		{name: "app file", file: agents.Retention{Finished: time.Minute, MaxFinished: 50},
			want: map[string]any{"finished": "1m0s", "max_finished": 50.0, "paused": "168h0m0s"}},
		{name: "env over app file", file: agents.Retention{Finished: time.Minute, MaxFinished: 50},
			vars: map[string]string{"AID_RETAIN_FINISHED": "2m", "AID_MAX_FINISHED": "70", "AID_RETAIN_PAUSED": "24h"},
			want: map[string]any{"finished": "2m0s", "max_finished": 70.0, "paused": "24h0m0s"}},
		{name: "flags over env", file: agents.Retention{Paused: time.Hour},
			args: []string{"-retain-finished", "3m", "-max-finished", "90", "-retain-paused", "48h"},
			vars: map[string]string{"AID_RETAIN_FINISHED": "2m", "AID_MAX_FINISHED": "70", "AID_RETAIN_PAUSED": "24h"},
			want: map[string]any{"finished": "3m0s", "max_finished": 90.0, "paused": "48h0m0s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			desc := desk(docs)
			desc.Service.State.Retention = c.file
			r := start(t, desc, serve.Options{}, c.args, c.vars)
			line := r.serving(t)
			if got := line["retention"]; !reflect.DeepEqual(got, c.want) {
				t.Errorf("retention %v, want %v", got, c.want)
			}
			if code := r.stop(t); code != serve.ExitOK {
				t.Errorf("exit code %d, want 0", code)
			}
		})
	}
}

// TestRunExposesAliases: the app file's exposed aliases are served
// directly and listed beside the agents, and the budget it names is
// charged.
func TestRunExposesAliases(t *testing.T) {
	desc := desk(docsDir(t))
	desc.Budgets = []gateway.Budget{{Name: "gw", MaxUSD: 1, Scope: gateway.ScopeGlobal}}
	desc.Models[0].Spec.Cost = gateway.CostProfile{InputPer1kUSD: 0.001}
	desc.Service.Expose = app.Expose{Aliases: []app.ExposedAlias{{Alias: "m"}}, Budget: "gw"}
	r := start(t, desc, serve.Options{}, nil, nil)
	addr := r.serving(t)["addr"].(string)
	resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Aid struct{ Alias string } `json:"aid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&cc); err != nil || resp.StatusCode != 200 || cc.Model != "fake-1" || cc.Aid.Alias != "m" || len(cc.Choices) != 1 {
		t.Errorf("direct call: %d %+v %v", resp.StatusCode, cc, err)
	}
	resp.Body.Close()
	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `aid_budget_calls{budget="gw",scope="global"} 1`) || !strings.Contains(string(b), `aid_alias_requests_total{alias="m",code="200"} 1`) {
		t.Errorf("metrics after a direct call:\n%s", b)
	}
	resp, err = http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"id":"desk"`) || !strings.Contains(string(b), `"id":"m"`) {
		t.Errorf("models: %s", b)
	}
	if code := r.stop(t); code != serve.ExitOK {
		t.Errorf("exit code %d", code)
	}
}

// TestRunDebugListener: -debug-listen serves the runtime's profiles, in
// pprof's format, on a loopback listener of its own, never on the
// service's, nor on http.DefaultServeMux; it ends with the service.
func TestRunDebugListener(t *testing.T) {
	before := runtime.NumGoroutine()
	r := start(t, desk(docsDir(t)), serve.Options{}, nil, map[string]string{"AID_DEBUG_LISTEN": "127.0.0.1:0"})
	addr := r.serving(t)["addr"].(string)
	line, ok := r.stderr.LogLine("debug listener")
	if !ok {
		t.Fatalf("no debug listener logged:\n%s", r.stderr)
	}
	debug := "http://" + line["addr"].(string)
	client := &http.Client{Transport: &http.Transport{}}
	get := func(url string) (int, []byte) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	gzipped := func(b []byte) bool { return len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b } // pprof's format
	if code, b := get(debug + "/debug/pprof/"); code != 200 || !strings.Contains(string(b), "goroutine") || !strings.Contains(string(b), "heap") {
		t.Errorf("index: %d %s", code, b)
	}
	if code, b := get(debug + "/debug/pprof/heap"); code != 200 || !gzipped(b) {
		t.Errorf("heap: %d, %d bytes", code, len(b))
	}
	if code, b := get(debug + "/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(string(b), "goroutine profile:") {
		t.Errorf("goroutines as text: %d %.200s", code, b)
	}
	if code, b := get(debug + "/debug/pprof/profile?seconds=1"); code != 200 || !gzipped(b) {
		t.Errorf("CPU profile: %d, %d bytes", code, len(b))
	}
	for url, want := range map[string]int{
		debug + "/debug/pprof/profile?seconds=0":   http.StatusBadRequest,
		debug + "/debug/pprof/profile?seconds=1e9": http.StatusBadRequest,
		debug + "/debug/pprof/nothing":             http.StatusNotFound,
		"http://" + addr + "/debug/pprof/":         http.StatusNotFound, // the service's listener
	} {
		if code, b := get(url); code != want {
			t.Errorf("%s: %d %s, want %d", url, code, b, want)
		}
	}
	if _, pattern := http.DefaultServeMux.Handler(httptest.NewRequest("GET", "/debug/pprof/", nil)); pattern != "" {
		t.Errorf("http.DefaultServeMux serves %q: profiles would be served by any program serving it", pattern)
	}
	client.CloseIdleConnections()
	if code := r.stop(t); code != serve.ExitOK {
		t.Errorf("exit code %d\n%s", code, r.stderr)
	}
	servicetest.NoLeak(t, before, 0)
}

// TestRunNonLoopbackIsInsecureListenError checks that the refusal is the
// service's typed error, surfaced in the log as such.
func TestRunNonLoopbackIsInsecureListenError(t *testing.T) {
	_, err := service.New(service.Config{Auth: service.Auth{Kind: service.AuthNone}, Listen: "0.0.0.0:0"})
	var insecure *service.InsecureListenError
	if !errors.As(err, &insecure) {
		t.Fatalf("service.New: %v; want an *InsecureListenError", err)
	}
	r := start(t, desk(docsDir(t)), serve.Options{}, []string{"-listen", "0.0.0.0:0"}, nil)
	if code := r.exit(t); code != serve.ExitFailed {
		t.Errorf("exit code %d, want 1", code)
	}
	if line, ok := r.stderr.LogLine("service stopped"); !ok || line["error"] != insecure.Error() {
		t.Errorf("logged %v, want the error %q", line, insecure.Error())
	}
}

// TestRunState checks the PostgreSQL state wiring without a database: the
// DSN OpenState receives comes from -state-dsn over the variable the app
// file names, and the opened store is the one the service uses.
func TestRunState(t *testing.T) {
	docs := docsDir(t)
	for _, c := range []struct {
		name    string
		args    []string
		vars    map[string]string
		wantDSN string
	}{
		{name: "env", vars: map[string]string{"DESK_DSN": "postgres://env"}, wantDSN: "postgres://env"},
		{name: "flag over env", args: []string{"-state-dsn", "postgres://flag"}, vars: map[string]string{"DESK_DSN": "postgres://env"}, wantDSN: "postgres://flag"},
		{name: "empty flag means env", args: []string{"-state-dsn", ""}, vars: map[string]string{"DESK_DSN": "postgres://env"}, wantDSN: "postgres://env"},
	} {
		t.Run(c.name, func(t *testing.T) {
			desc := desk(docs)
			desc.Service.State = app.State{Kind: app.StatePostgres, DSNEnv: "DESK_DSN"}
			var mu sync.Mutex
			var dsns []string
			opts := serve.Options{OpenState: func(_ context.Context, _ kind.Env, dsn string) (agents.Store, gateway.Ledger, error) {
				mu.Lock()
				defer mu.Unlock()
				dsns = append(dsns, dsn)
				return agents.NewInMemoryStore(), gateway.NewMemoryLedger(), nil
			}}
			r := start(t, desc, opts, c.args, c.vars)
			r.serving(t)
			if code := r.stop(t); code != serve.ExitOK {
				t.Errorf("exit code %d, want 0", code)
			}
			mu.Lock()
			defer mu.Unlock()
			if !reflect.DeepEqual(dsns, []string{c.wantDSN}) {
				t.Errorf("OpenState got DSNs %q, want [%q]", dsns, c.wantDSN)
			}
		})
	}
}

// outside is a store kind that keeps its vectors and memory "outside the
// process" (in memory, for the test), records what it opens with which
// DSN, and counts how often the application closes what it opened.
type outside struct {
	mu     *sync.Mutex
	opened *[]string
	closed *int
}

func newOutside() outside { return outside{&sync.Mutex{}, new([]string), new(int)} }

func (outside) StoreKind() string { return "outside" }
func (outside) InMemory() bool    { return false }

func (o outside) open(env kind.Env, what string) error {
	dsn, _ := env.Lookup("OUT_DSN")
	o.mu.Lock()
	defer o.mu.Unlock()
	*o.opened = append(*o.opened, what+"@"+dsn)
	_, err := kind.Shared(env.Scope, what, func() (bool, func() error, error) {
		return true, func() error {
			o.mu.Lock()
			defer o.mu.Unlock()
			*o.closed++
			return nil
		}, nil
	})
	return err
}

func (o outside) OpenVectorStore(_ context.Context, env kind.Env, name string, d retrieval.Distance, dims int) (retrieval.VectorStore, error) {
	if err := o.open(env, "vectors "+name); err != nil {
		return nil, err
	}
	return memory.NewStore(dims, d)
}

func (o outside) OpenMemoryStore(_ context.Context, env kind.Env, store string) (agents.MemoryStore, error) {
	if err := o.open(env, "memory "+store); err != nil {
		return nil, err
	}
	return agents.NewInMemoryMemory(), nil
}

// TestRunStoresOutsideTheProcess checks that stores whose kind keeps them
// outside the process are opened by their kind, with the environment the
// service reads, for retrievers' vectors and agents' memory alike; that
// such a store is not ingested at start (aidgen index fills it); and that
// what the kind opened is closed once the service has stopped.
func TestRunStoresOutsideTheProcess(t *testing.T) {
	desc := desk(docsDir(t))
	out := newOutside()
	desc.Stores[0].Kind = out
	desc.Stores = append(desc.Stores, retrieval.StoreConfig{Name: "mem", Kind: out})
	desc.Agents[0].Memory = &agents.Memory{Global: &agents.StoredMemory{Store: "mem"}}
	r := start(t, desc, serve.Options{}, nil, map[string]string{"OUT_DSN": "postgres://out"})
	r.serving(t)
	if _, ok := r.stderr.LogLine("ingested"); ok {
		t.Errorf("ingested a store that is not in memory:\n%s", r.stderr)
	}
	out.mu.Lock()
	if want := []string{"memory mem@postgres://out", "vectors kb@postgres://out"}; !slices.Equal(*out.opened, want) || *out.closed != 0 {
		t.Errorf("while serving: opened %q, closed %d; want %q, 0", *out.opened, *out.closed, want)
	}
	out.mu.Unlock()
	if code := r.stop(t); code != serve.ExitOK {
		t.Errorf("exit code %d, want 0", code)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	if *out.closed != 2 {
		t.Errorf("closed %d of the 2 things opened after stopping", *out.closed)
	}
}

// TestAuth checks the bearer tokens read from the environment.
func TestAuth(t *testing.T) {
	bearer := app.Auth{Kind: "bearer", TokenEnv: "T"}
	for _, c := range []struct {
		name    string
		auth    app.Auth
		vars    map[string]string
		want    []string
		wantErr bool
	}{
		{name: "one", auth: bearer, vars: map[string]string{"T": "abc"}, want: []string{"abc"}},
		{name: "list with blanks", auth: bearer, vars: map[string]string{"T": " a , b,,c ,"}, want: []string{"a", "b", "c"}},
		{name: "unset", auth: bearer, wantErr: true},
		{name: "only commas", auth: bearer, vars: map[string]string{"T": ", ,"}, wantErr: true},
		{name: "none ignores the variable", auth: app.Auth{Kind: "none", TokenEnv: "T"}, vars: map[string]string{"T": "abc"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := serve.Auth(c.auth, env(c.vars))
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "set T") {
				t.Errorf("error %q does not name the variable", err)
			}
			if string(got.Kind) != c.auth.Kind || !reflect.DeepEqual(got.Tokens, c.want) {
				t.Errorf("got %+v, want kind %s tokens %q", got, c.auth.Kind, c.want)
			}
		})
	}
}

// TestAuthKeys: a declared key whose variable is set is enabled and turns
// authentication on, also under auth kind none; one whose variable is
// unset is disabled and named for the start-up warning; a key given by
// its hash needs no variable; with none enabled, kind none stays open.
func TestAuthKeys(t *testing.T) {
	keys := []app.Key{
		{Name: "frontend", Roles: []string{"caller"}, Tenant: "acme", SecretEnv: "AID_KEY_FRONTEND"},
		{Name: "ops", Roles: []string{"approver", "operator"}, Tenant: "acme", SecretEnv: "AID_KEY_OPS"},
	}
	got, disabled, err := serve.Auth(app.Auth{Kind: "none", Keys: keys}, env(map[string]string{"AID_KEY_FRONTEND": " sk-f "}))
	want := []service.Key{{Name: "frontend", Roles: []service.Role{service.RoleCaller}, Tenant: "acme", Secret: "sk-f"}}
	if err != nil || got.Kind != service.AuthBearer || !reflect.DeepEqual(got.Keys, want) ||
		len(disabled) != 1 || !strings.Contains(disabled[0], `key "ops" is disabled: AID_KEY_OPS is not set`) {
		t.Fatalf("one key set: %+v %q %v", got, disabled, err)
	}
	got, disabled, err = serve.Auth(app.Auth{Kind: "none", Keys: keys}, env(nil))
	if err != nil || got.Kind != service.AuthNone || len(got.Keys) != 0 || len(disabled) != 2 {
		t.Fatalf("no key set: %+v %q %v", got, disabled, err)
	}
	hashed := []app.Key{{Name: "h", Roles: []string{"admin"}, SecretSHA256: strings.Repeat("ab", 32)}}
	got, disabled, err = serve.Auth(app.Auth{Kind: "none", Keys: hashed}, env(nil))
	if err != nil || got.Kind != service.AuthBearer || len(got.Keys) != 1 || got.Keys[0].SecretSHA256 != strings.Repeat("ab", 32) || len(disabled) != 0 {
		t.Fatalf("a hashed key: %+v %q %v", got, disabled, err)
	}
}

// TestRunBackgroundInProcess starts a memory-state service with the
// queue's flags and environment: it says at start-up that background runs
// are driven in process, with the settings that won, and a background run
// answers 202 and completes.
func TestRunBackgroundInProcess(t *testing.T) {
	r := start(t, desk(docsDir(t)), serve.Options{}, []string{"-workers", "3", "-agent-concurrency", "desk=1"}, map[string]string{"AID_WORKERS": "5", "AID_MAX_QUEUED": "7"})
	line := r.serving(t)
	bg, ok := r.stderr.LogLine("background runs")
	if !ok || bg["jobs"] != "in process" || bg["workers"] != float64(3) || bg["max_queued"] != float64(7) {
		t.Fatalf("start-up line of background runs: %v\n%s", bg, r.stderr)
	}
	if c, _ := bg["agent_concurrency"].(map[string]any); c["desk"] != float64(1) {
		t.Fatalf("agent concurrency %v", bg["agent_concurrency"])
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	base := "http://" + line["addr"].(string)
	resp, err := client.Post(base+"/v1/runs", "application/json", strings.NewReader(`{"input":"hello","background":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id := resp.Header.Get("X-Aid-Run-Id")
	if resp.StatusCode != http.StatusAccepted || id == "" {
		t.Fatalf("background run: %d", resp.StatusCode)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := client.Get(base + "/v1/runs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var run struct{ Status string }
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if run.Status == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background run is %s", run.Status)
		}
	}
	resp, err = client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(metrics), `aid_jobs_waiting{queue="in_process"} 0`) {
		t.Fatalf("metrics lack the in-process queue's depth (%v):\n%s", err, metrics)
	}
	if code := r.stop(t); code != serve.ExitOK {
		t.Fatalf("exit %d\n%s", code, r.stderr)
	}
}

// probed is a store kind that registers a readiness check of what it
// opened, failing while down is set, as the mcp tool kind does for each
// server.
type probed struct {
	outside
	down *atomic.Bool
}

func (p probed) OpenVectorStore(ctx context.Context, env kind.Env, name string, d retrieval.Distance, dims int) (retrieval.VectorStore, error) {
	env.Scope.AddCheck("probe:"+name, func(context.Context) error {
		if p.down.Load() {
			return errors.New("dial tcp db.internal:5432: connection refused")
		}
		return nil
	})
	return p.outside.OpenVectorStore(ctx, env, name, d, dims)
}

// TestReadyzReportsTheKindsChecks: /readyz calls the readiness checks the
// application's kinds registered (a connection to each MCP server), names
// each with its state, and is not ready while one fails, without saying
// why (the log does).
func TestReadyzReportsTheKindsChecks(t *testing.T) {
	desc := desk(docsDir(t))
	p := probed{newOutside(), &atomic.Bool{}}
	desc.Stores[0].Kind = p
	r := start(t, desc, serve.Options{}, nil, nil)
	base := "http://" + r.serving(t)["addr"].(string)
	ready := func() (int, string) {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := ready(); code != http.StatusOK || !strings.Contains(body, `"probe:kb":"ok"`) {
		t.Fatalf("ready: %d %s", code, body)
	}
	p.down.Store(true)
	if code, body := ready(); code != http.StatusServiceUnavailable || !strings.Contains(body, `"probe:kb":"failing"`) || strings.Contains(body, "db.internal") {
		t.Fatalf("a check fails: %d %s", code, body)
	}
}

// TestRunMCPSessionBound: the bound of /mcp's sessions comes from
// -max-mcp-sessions over its environment variable over the default, and
// the serving line says which won; a negative bound is a usage error.
func TestRunMCPSessionBound(t *testing.T) {
	docs := docsDir(t)
	for _, c := range []struct {
		name string
		args []string
		vars map[string]string
		want float64
	}{
		{name: "default", want: service.DefaultMaxMCPSessions},
		{name: "env", vars: map[string]string{serve.EnvMaxMCPSessions: "40"}, want: 40},
		{name: "flag over env", args: []string{"-max-mcp-sessions", "7"}, vars: map[string]string{serve.EnvMaxMCPSessions: "40"}, want: 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := start(t, desk(docs), serve.Options{}, c.args, c.vars)
			if got := r.serving(t)["max_mcp_sessions"]; got != c.want {
				t.Errorf("max_mcp_sessions %v, want %v", got, c.want)
			}
			if code := r.stop(t); code != serve.ExitOK {
				t.Errorf("exit code %d, want 0", code)
			}
		})
	}
	var stderr bytes.Buffer
	code := serve.Run(t.Context(), desk(docs), serve.Options{}, serve.Process{Args: []string{"-max-mcp-sessions", "-1"}, Stderr: &stderr, LookupEnv: func(string) (string, bool) { return "", false }})
	if code != serve.ExitUsage || !strings.Contains(stderr.String(), "-max-mcp-sessions: -1 is negative") {
		t.Errorf("a negative bound: exit %d, %s", code, stderr.String())
	}
}
