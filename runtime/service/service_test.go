package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/service"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/client_golang/prometheus"
)

func TestAuthRefusals(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("x")}}}})
	body := `{"model":"triage","messages":[{"role":"user","content":"q"}]}`
	tests := []struct {
		name, auth string
		code       string
	}{
		{"no header", "", service.CodeMissingAPIKey},
		{"basic scheme", "Basic dXNlcjpwYXNz", service.CodeMissingAPIKey},
		{"empty bearer", "Bearer ", service.CodeMissingAPIKey},
		{"wrong token", "Bearer sk-wrong", service.CodeInvalidAPIKey},
		{"token prefix", "Bearer " + token[:len(token)-1], service.CodeInvalidAPIKey},
		{"token suffix", "Bearer " + token + "x", service.CodeInvalidAPIKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/chat/completions", "/v1/agents/triage/runs", "/v1/models", "/metrics", "/v1/runs/x"} {
				method := "POST"
				if path == "/v1/models" || path == "/metrics" || path == "/v1/runs/x" {
					method = "GET"
				}
				req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
				if tt.auth != "" {
					req.Header.Set("Authorization", tt.auth)
				}
				resp, err := e.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				code, typ, _ := servicetest.APIError(t, b)
				if resp.StatusCode != 401 || code != tt.code || typ != service.TypeAuthentication || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s: %d %s", path, resp.StatusCode, b)
				}
			}
		})
	}
	if e.fake.Calls() != 0 || e.spend(t).Calls != 0 {
		t.Error("a refused request reached the provider")
	}
	// The SDK with a wrong key gets the error object.
	_, err := e.clientPtr(option.WithAPIKey("sk-nope")).Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "triage", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("q")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 401 || oe.Code != service.CodeInvalidAPIKey {
		t.Errorf("sdk: %v", err)
	}
	// Probes need no token.
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := e.srv.Client().Get(e.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

func TestTokensNeverLogged(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("x")}}, Loop: true}})
	wrong := "sk-wrong-4b1e0c5a9d"
	e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"q"}]}`)
	e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":`)
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+wrong)
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	logs := e.logs.String()
	if strings.Count(logs, `"msg":"request"`) != 3 {
		t.Fatalf("want 3 request lines:\n%s", logs)
	}
	for _, secret := range []string{token, wrong, "Bearer"} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("error answer contains %q: %s", secret, b)
		}
	}
}

func TestOversizedBody(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("x")}}},
		svc:  func(c *service.Config) { c.Limits.MaxBodyBytes = 1024 },
	})
	big := `{"model":"triage","messages":[{"role":"user","content":"` + strings.Repeat("a", 2048) + `"}]}`
	for _, path := range []string{"/v1/chat/completions", "/v1/agents/triage/runs", "/v1/runs/x/resume", "/v1/retrievers/kb/search"} {
		status, _, body := e.do(t, "POST", path, big)
		if path == "/v1/retrievers/kb/search" {
			// The retriever is unknown: refused before the body is read.
			if code, _, _ := servicetest.APIError(t, body); status != 404 || code != service.CodeRetrieverNotFound {
				t.Errorf("%s: %d %s", path, status, body)
			}
			continue
		}
		if code, _, _ := servicetest.APIError(t, body); status != http.StatusRequestEntityTooLarge || code != service.CodeBodyTooLarge {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	if e.fake.Calls() != 0 || e.spend(t).Calls != 0 {
		t.Error("an oversized request reached the provider")
	}
	// Just under the limit passes.
	status, _, body := e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"`+strings.Repeat("a", 900)+`"}]}`)
	if status != 200 {
		t.Errorf("under the limit: %d %s", status, body)
	}
}

func TestModels(t *testing.T) {
	e := newEnv(t, options{agents: []agents.Agent{
		{Name: "triage", Model: "large", Instructions: "a"}, {Name: "billing", Model: "large", Instructions: "b"},
	}})
	c := e.clientPtr()
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy != "aid" {
			t.Errorf("model %+v", m)
		}
	}
	if strings.Join(ids, ",") != "billing,triage" {
		t.Errorf("ids %v", ids)
	}
	m, err := c.Models.Get(context.Background(), "billing")
	if err != nil || m.ID != "billing" {
		t.Errorf("get: %+v %v", m, err)
	}
	_, err = c.Models.Get(context.Background(), "ghost")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != service.CodeModelNotFound {
		t.Errorf("get ghost: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	const latency = 30 * time.Millisecond
	e := newEnv(t, options{
		fake:    fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("x")}}, Loop: true, Latency: latency},
		agents:  []agents.Agent{{Name: "triage", Model: "large", Instructions: "a", Budget: "daily"}},
		budgets: []gatewayBudget{{Name: "daily", MaxUSD: 10, Scope: "run"}},
		// A cool-down gives "large" a route: its one deployment reports.
		models: func(m []gatewayModel) { m[0].CoolDown = time.Minute },
	})
	for range 3 {
		e.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"q"}]}`)
	}
	e.do(t, "POST", "/v1/chat/completions", `{"model":"ghost","messages":[{"role":"user","content":"q"}]}`)
	e.do(t, "GET", "/v1/nowhere", "")
	status, hdr, body := e.do(t, "GET", "/metrics", "")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %s", status, hdr)
	}
	m := string(body)
	for _, want := range []string{
		`aid_http_requests_total{agent="triage",code="200",final_agent="triage",route="POST /v1/chat/completions"} 3`,
		`aid_http_requests_total{agent="",code="404",final_agent="",route="POST /v1/chat/completions"} 1`,
		`aid_http_requests_total{agent="",code="404",final_agent="",route="unmatched"} 1`,
		`aid_http_request_duration_seconds_count{agent="triage",route="POST /v1/chat/completions"} 3`,
		`aid_service_added_latency_seconds_count{agent="triage",route="POST /v1/chat/completions"} 3`,
		`aid_runs_total{agent="triage",final_agent="triage",status="completed"} 3`,
		`aid_budget_calls{budget="daily",scope="run"} 3`,
		`aid_ledger_up 1`,
		`aid_deployment_calls_total{alias="large",deployment="fake",model="m-large",provider="fake"} 3`,
		`aid_deployment_failures_total{alias="large",deployment="fake",model="m-large",provider="fake"} 0`,
		`aid_deployment_cooldowns_total{alias="large",deployment="fake",model="m-large",provider="fake"} 0`,
		`aid_deployment_in_flight{alias="large",deployment="fake",model="m-large",provider="fake"} 0`,
		`aid_deployment_cooling{alias="large",deployment="fake",model="m-large",provider="fake"} 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("missing %s", want)
		}
	}
	if strings.Contains(m, "ghost") {
		t.Error("an unknown agent name became a label value")
	}
	// The added latency excludes the provider's latency: each request
	// waited at least latency on the (instrumented) fake.
	total := sample(t, m, `aid_http_request_duration_seconds_sum{agent="triage",route="POST /v1/chat/completions"}`)
	added := sample(t, m, `aid_service_added_latency_seconds_sum{agent="triage",route="POST /v1/chat/completions"}`)
	if total-added < 3*latency.Seconds() || added < 0 {
		t.Errorf("total %.4fs added %.4fs: the difference must cover 3 × %v of provider time", total, added, latency)
	}
	spent := sample(t, m, `aid_budget_spent_usd{budget="daily",scope="run"}`)
	if ledger := e.spend(t).Total.USD(); spent <= 0 || spent != ledger {
		t.Errorf("spent metric %v, ledger %v", spent, ledger)
	}
}

// sample reads one sample's value from a Prometheus text exposition.
func sample(t *testing.T, exposition, series string) float64 {
	t.Helper()
	v, ok := servicetest.Metric(exposition, series)
	if !ok {
		t.Fatalf("no series %s", series)
	}
	return v
}

func TestPrivateRegistries(t *testing.T) {
	// Two services in one process, each with its own series.
	a := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("x")}}}})
	b := newEnv(t, options{})
	a.do(t, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"q"}]}`)
	_, _, m := b.do(t, "GET", "/metrics", "")
	if strings.Contains(string(m), `aid_runs_total{`) {
		t.Errorf("service b sees a's runs:\n%s", grep(string(m), "aid_runs_total"))
	}
	// A registry given by the caller receives the series.
	reg := prometheus.NewRegistry()
	newEnv(t, options{svc: func(c *service.Config) { c.Registry = reg }})
	mfs, err := reg.Gather()
	if err != nil || len(mfs) == 0 {
		t.Errorf("caller's registry: %d families, %v", len(mfs), err)
	}
}

func TestReadyz(t *testing.T) {
	var dbDown error
	e := newEnv(t, options{svc: func(c *service.Config) {
		c.ReadyChecks = []service.ReadyCheck{{Name: "database", Check: func(context.Context) error { return dbDown }}}
	}})
	status, _, body := e.do(t, "GET", "/readyz", "")
	if status != 200 || !strings.Contains(string(body), `"database":"ok"`) || !strings.Contains(string(body), `"run_store":"ok"`) {
		t.Errorf("%d %s", status, body)
	}
	dbDown = errors.New("connection refused")
	status, _, body = e.do(t, "GET", "/readyz", "")
	if code, _, _ := servicetest.APIError(t, body); status != 503 || code != service.CodeNotReady || !strings.Contains(string(body), `"database":"failing"`) {
		t.Errorf("%d %s", status, body)
	}
	// The cause goes to the log, not to the unauthenticated answer.
	if strings.Contains(string(body), "connection refused") || !strings.Contains(e.logs.String(), "connection refused") {
		t.Errorf("answer %s\nlogs %s", body, e.logs.String())
	}
}

func TestConfigRefusals(t *testing.T) {
	base := newEnv(t, options{})
	good := func() service.Config {
		return service.Config{Gateway: base.gw, Agents: base.runtime, Auth: service.Auth{Kind: service.AuthNone}, Listen: "127.0.0.1:0"}
	}
	tests := []struct {
		name     string
		mut      func(*service.Config)
		insecure bool
		field    string
	}{
		{"no gateway", func(c *service.Config) { c.Gateway = nil }, false, "Gateway"},
		{"no agents", func(c *service.Config) { c.Agents = nil }, false, "Agents"},
		{"unknown entry", func(c *service.Config) { c.Entry = "ghost" }, false, "Entry"},
		{"no auth kind", func(c *service.Config) { c.Auth = service.Auth{} }, false, "Auth.Kind"},
		{"unknown auth kind", func(c *service.Config) { c.Auth.Kind = "basic" }, false, "Auth.Kind"},
		{"bearer without tokens", func(c *service.Config) { c.Auth.Kind = service.AuthBearer }, false, "Auth.Tokens"},
		{"empty token", func(c *service.Config) { c.Auth = service.Auth{Kind: service.AuthBearer, Tokens: []string{""}} }, false, "Auth.Tokens"},
		{"none with tokens", func(c *service.Config) { c.Auth.Tokens = []string{"t"} }, false, "Auth.Tokens"},
		{"nil retriever", func(c *service.Config) { c.Retrievers = map[string]agents.Searcher{"kb": nil} }, false, "Retrievers"},
		{"nil ready check", func(c *service.Config) { c.ReadyChecks = []service.ReadyCheck{{Name: "db"}} }, false, "ReadyChecks"},
		{"none on every interface", func(c *service.Config) { c.Listen = ":8080" }, true, ""},
		{"none on a public address", func(c *service.Config) { c.Listen = "10.1.2.3:8080" }, true, ""},
		{"none on a host name", func(c *service.Config) { c.Listen = "example.internal:8080" }, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.mut(&cfg)
			_, err := service.New(cfg)
			var insecure *service.InsecureListenError
			var ce *service.ConfigError
			switch {
			case tt.insecure && !errors.As(err, &insecure):
				t.Errorf("err = %v, want *InsecureListenError", err)
			case !tt.insecure && (!errors.As(err, &ce) || ce.Field != tt.field):
				t.Errorf("err = %v, want *ConfigError on %s", err, tt.field)
			}
		})
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		cfg := good()
		cfg.Listen = addr
		if _, err := service.New(cfg); err != nil {
			t.Errorf("%s: %v", addr, err)
		}
	}
	// Bearer auth may listen anywhere.
	cfg := good()
	cfg.Listen, cfg.Auth = ":8080", service.Auth{Kind: service.AuthBearer, Tokens: []string{"t"}}
	if _, err := service.New(cfg); err != nil {
		t.Error(err)
	}
}

// publicListener pretends to listen on a routable address.
type publicListener struct{ net.Listener }

func (publicListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80} }

func TestServeRefusesPublicListenerWithoutAuth(t *testing.T) {
	base := newEnv(t, options{})
	svc, err := service.New(service.Config{Gateway: base.gw, Agents: base.runtime, Auth: service.Auth{Kind: service.AuthNone}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = svc.Serve(context.Background(), publicListener{ln})
	var insecure *service.InsecureListenError
	if !errors.As(err, &insecure) || insecure.Addr != "10.1.2.3:80" {
		t.Fatalf("err = %v", err)
	}
	if _, err := ln.Accept(); err == nil {
		t.Error("the refused listener is still open")
	}
}

// serve runs svc on a loopback listener until the returned cancel; wait
// returns Serve's error.
func serve(t *testing.T, svc *service.Service) (url string, cancel func(), wait func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, ln) }()
	return "http://" + ln.Addr().String(), cancel, func() error { return <-done }
}

func TestShutdownFinishesInFlightRuns(t *testing.T) {
	before := runtime.NumGoroutine()
	e := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("done")}}, Latency: 300 * time.Millisecond}})
	url, cancel, wait := serve(t, e.svc)
	type result struct {
		status int
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/v1/agents/triage/runs", strings.NewReader(`{"input":"q"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- result{status: resp.StatusCode, body: string(b)}
	}()
	servicetest.WaitFor(t, func() bool { return inFlight(e) })
	cancel()
	if err := wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	r := <-got
	if r.err != nil || r.status != 200 || !strings.Contains(r.body, `"answer":"done"`) {
		t.Fatalf("in-flight run: %+v", r)
	}
	// New connections are refused once Serve returned.
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("still accepting after shutdown")
	}
	http.DefaultClient.CloseIdleConnections()
	e.srv.Close()
	noLeak(t, before)
}

// TestShutdownInterruptsRunsAfterDrainTimeout: a run still going when the
// drain timeout expires is interrupted, not failed. Its request is answered
// 503 shutting_down naming the run, the store keeps it running, and a second
// service on the same store recovers it to the end.
func TestShutdownInterruptsRunsAfterDrainTimeout(t *testing.T) {
	before := runtime.NumGoroutine()
	store := agents.NewInMemoryStore()
	e := newEnv(t, options{
		store: store,
		fake:  fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("never")}}, Latency: time.Minute},
		svc:   func(c *service.Config) { c.Limits.DrainTimeout = 50 * time.Millisecond },
	})
	url, cancel, wait := serve(t, e.svc)
	type result struct {
		status int
		runID  string
		body   string
		err    error
	}
	got := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/v1/agents/triage/runs", strings.NewReader(`{"input":"q"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- result{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- result{status: resp.StatusCode, runID: resp.Header.Get("X-Aid-Run-Id"), body: string(b)}
	}()
	servicetest.WaitFor(t, func() bool { return inFlight(e) })
	cancel()
	if err := wait(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("serve: %v, want the drain timeout", err)
	}
	r := <-got
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.runID == "" {
		t.Fatalf("interrupted request: %+v", r)
	}
	var body struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
		Error  struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	id := r.runID
	if body.RunID != id || body.Status != string(agents.StatusRunning) || body.Error.Code != service.CodeShuttingDown ||
		!strings.Contains(body.Error.Message, id) || !strings.Contains(body.Error.Message, "can be recovered") {
		t.Fatalf("interrupted answer: %s", r.body)
	}
	if logs := e.logs.String(); !strings.Contains(logs, `"msg":"run interrupted by shutdown`) || !strings.Contains(logs, id) {
		t.Fatalf("no log line for the interrupted run:\n%s", logs)
	}
	// The interrupted run stays running, ready for Recover.
	rec, err := store.LoadRun(context.Background(), id)
	if err != nil || rec.Status != agents.StatusRunning {
		t.Fatalf("interrupted run %s: %s %v", id, rec.Status, err)
	}
	// A second service on the same store continues it.
	e2 := newEnv(t, options{store: store, fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("recovered")}}}})
	res, err := e2.runtime.Drive(context.Background(), id, agents.DriveOptions{})
	if err != nil || res.Status != agents.StatusCompleted || res.Answer != "recovered" {
		t.Fatalf("recover: %s %q %v", res.Status, res.Answer, err)
	}
	status, _, b := e2.do(t, "GET", "/v1/runs/"+id, "")
	if status != http.StatusOK || !strings.Contains(string(b), `"status":"completed"`) {
		t.Fatalf("GET the recovered run: %d %s", status, b)
	}
	http.DefaultClient.CloseIdleConnections()
	e.srv.Close()
	e2.srv.Close()
	e2.srv.Client().CloseIdleConnections()
	noLeak(t, before)
}

// TestClientDisconnectFailsRun: a client that goes away cancels its run
// without the shutdown's cause, so the run is saved as failed.
func TestClientDisconnectFailsRun(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("never")}}, Latency: time.Minute}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/agents/triage/runs", strings.NewReader(`{"input":"q"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := e.srv.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	servicetest.WaitFor(t, func() bool { return inFlight(e) })
	cancel()
	<-done
	servicetest.WaitFor(t, func() bool { return strings.Contains(e.logs.String(), `"run_id"`) })
	id := between(e.logs.String(), `"run_id":"`, `"`)
	rec, err := e.runtime.Store().LoadRun(context.Background(), id)
	if err != nil || rec.Status != agents.StatusFailed {
		t.Fatalf("run of a client that went away %s: %s %v", id, rec.Status, err)
	}
}

// inFlight reports whether the fake has received a request (the run is
// waiting on it).
func inFlight(e *env) bool { return len(e.fake.Requests()) > 0 }

// noLeak fails when goroutines of the service or its server outlive it.
func noLeak(t *testing.T, before int) {
	t.Helper()
	servicetest.NoLeak(t, before, 2, "runtime/service.", "net/http.(*conn).serve", "net/http.(*Server).Serve")
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	out, _, _ := strings.Cut(rest, to)
	return out
}

// TestWrongMethod checks that a known route asked with another method
// answers 405 with the methods it takes in Allow, and that an unknown path
// is still 404.
func TestWrongMethod(t *testing.T) {
	e := newEnv(t, options{})
	for _, c := range []struct {
		method, path, allow string
	}{
		{"GET", "/v1/chat/completions", "POST"},
		{"DELETE", "/v1/runs/run_1", "GET, HEAD"},
		{"GET", "/v1/runs/run_1/resume", "POST"},
		{"PUT", "/v1/agents/triage/runs", "POST"},
		{"POST", "/v1/models", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		status, hdr, body := e.do(t, c.method, c.path, "")
		code, typ, _ := servicetest.APIError(t, body)
		if status != http.StatusMethodNotAllowed || code != service.CodeMethodNotAllowed || typ != service.TypeInvalidRequest || hdr.Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q %s; want 405 Allow %q", c.method, c.path, status, hdr.Get("Allow"), body, c.allow)
		}
	}
	status, hdr, body := e.do(t, "GET", "/v1/nowhere", "")
	if code, _, _ := servicetest.APIError(t, body); status != http.StatusNotFound || code != service.CodeRouteNotFound || hdr.Get("Allow") != "" {
		t.Errorf("unknown path: %d %s %s", status, hdr, body)
	}
}

// TestNoInternalsReachClients sends bodies that do not fit their route and
// makes the runtime fail in ways a client cannot act on: every answer names
// the field and the type it must have in words, with param set, and a 500
// says "internal error" with the request's id, never the error's text,
// which the log line of that request carries instead.
func TestNoInternalsReachClients(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("x")}}}})
	chat := func(msgs string) string { return `{"model":"triage","messages":[` + msgs + `]}` }
	u := `{"role":"user","content":"q"}`
	for _, tt := range []struct {
		name, path, body, code, param, msg string
	}{
		{"model a number", "/v1/chat/completions", `{"model": 123, "messages": [` + u + `]}`, service.CodeInvalidJSON, "model", "model must be a string, not a number"},
		{"stream a string", "/v1/chat/completions", `{"model":"triage","stream":"yes","messages":[` + u + `]}`, service.CodeInvalidJSON, "stream", "stream must be true or false, not a string"},
		{"n a fraction", "/v1/chat/completions", `{"model":"triage","n":1.5,"messages":[` + u + `]}`, service.CodeInvalidJSON, "n", "n must be an integer, not 1.5"},
		{"messages an object", "/v1/chat/completions", `{"model":"triage","messages":{}}`, service.CodeInvalidJSON, "messages", "messages must be an array, not an object"},
		{"a role a number", "/v1/chat/completions", chat(u + `,{"role":7,"content":"x"},` + u), service.CodeInvalidJSON, "messages[1].role", "messages[1].role must be a string, not a number"},
		{"a tool call name a number", "/v1/chat/completions", chat(u + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":3,"arguments":"{}"}}]},` + u),
			service.CodeInvalidJSON, "messages[1].tool_calls[0].function.name", "must be a string, not a number"},
		{"content a number", "/v1/chat/completions", chat(`{"role":"user","content":5}`), service.CodeInvalidRequest, "messages[0].content", "content must be a string, null or an array of text parts"},
		{"content parts not objects", "/v1/chat/completions", chat(u + `,{"role":"assistant","content":[1]},` + u), service.CodeInvalidRequest, "messages[1].content", "content must be a string"},
		{"body an array", "/v1/chat/completions", `[1]`, service.CodeInvalidJSON, "", "the request body must be an object, not an array"},
		{"body empty", "/v1/chat/completions", ``, service.CodeInvalidJSON, "", "request body is empty"},
		{"body cut short", "/v1/chat/completions", `{"model":"tri`, service.CodeInvalidJSON, "", "it ends before the value does"},
		{"syntax", "/v1/chat/completions", `{"model" "triage"}`, service.CodeInvalidJSON, "", "invalid character"},
		{"unknown field", "/v1/agents/triage/runs", `{"input":"q","inptu":"q"}`, service.CodeInvalidJSON, "inptu", `unknown field "inptu"`},
		{"history role a number", "/v1/agents/triage/runs", `{"input":"q","history":[{"role":1}]}`, service.CodeInvalidJSON, "history[0].role", "history[0].role must be a string, not a number"},
		{"k a string", "/v1/retrievers/kb/search", `{"query":"q","k":"5"}`, service.CodeInvalidJSON, "k", "k must be an integer, not a string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if strings.Contains(tt.path, "retrievers") {
				e := newEnv(t, options{searchers: map[string]agents.Searcher{"kb": agents.SearchFunc(func(context.Context, string, int) ([]retrieval.Hit, error) { return nil, nil })}})
				status, _, body := e.do(t, "POST", tt.path, tt.body)
				checkClean(t, status, body, 400, tt.code, tt.param, tt.msg)
				return
			}
			status, _, body := e.do(t, "POST", tt.path, tt.body)
			checkClean(t, status, body, 400, tt.code, tt.param, tt.msg)
		})
	}

	// A failure the client cannot act on: the store's error names the
	// database, its user and host.
	leak := errors.New(`pgstore: load run run_x: failed to connect to user=admin database=runs: db.internal:5432: password authentication failed`)
	f := newEnv(t, options{store: failingStore{err: leak}})
	for _, req := range []struct{ method, path, body string }{
		{"GET", "/v1/runs/run_x", ""},
		{"POST", "/v1/chat/completions", chat(u)},
		{"POST", "/v1/agents/triage/runs", `{"input":"q"}`},
	} {
		status, hdr, body := f.do(t, req.method, req.path, req.body)
		id := hdr.Get("X-Request-Id")
		checkClean(t, status, body, 500, service.CodeServer, "", "internal error (request "+id+")")
		logged := false
		for _, l := range strings.Split(f.logs.String(), "\n") {
			if strings.Contains(l, `"request_id":"`+id+`"`) && strings.Contains(l, "db.internal:5432") && strings.Contains(l, `"level":"ERROR"`) {
				logged = true
			}
		}
		if !logged {
			t.Errorf("%s %s: no log line with request id %s and the error:\n%s", req.method, req.path, id, f.logs)
		}
	}
}

// checkClean checks an error answer and that it shows nothing of Go.
func checkClean(t *testing.T, status int, body []byte, wantStatus int, code, param, msg string) {
	t.Helper()
	gotCode, _, gotParam := servicetest.APIError(t, body)
	gotMsg := errMessage(t, body)
	if status != wantStatus || gotCode != code || gotParam != param || !strings.Contains(gotMsg, msg) {
		t.Errorf("got %d %s param %q %q; want %d %s param %q saying %q", status, gotCode, gotParam, gotMsg, wantStatus, code, param, msg)
	}
	for _, internal := range []string{"json:", "Go ", "struct", "unmarshal", "chatRequest", "wireMessage", "service.", "pgstore", "5432", "admin"} {
		if strings.Contains(string(body), internal) {
			t.Errorf("the answer shows %q: %s", internal, body)
		}
	}
}

// failingStore is a run store whose every operation fails with err.
type failingStore struct{ err error }

func (s failingStore) CreateRun(context.Context, agents.RunRecord) (agents.RunRecord, error) {
	return agents.RunRecord{}, s.err
}
func (s failingStore) UpdateRun(context.Context, agents.RunRecord) (agents.RunRecord, error) {
	return agents.RunRecord{}, s.err
}
func (s failingStore) LoadRun(context.Context, string) (agents.RunRecord, error) {
	return agents.RunRecord{}, s.err
}
func (s failingStore) RecordCall(context.Context, agents.CallRecord) error { return s.err }
func (s failingStore) FinishCall(context.Context, string, string, agents.CallResult) error {
	return s.err
}
func (s failingStore) Call(context.Context, string, string) (agents.CallRecord, error) {
	return agents.CallRecord{}, s.err
}
func (s failingStore) Calls(context.Context, string) ([]agents.CallRecord, error) { return nil, s.err }
func (s failingStore) RequestCancel(context.Context, string, agents.CancelRequest) (agents.Status, error) {
	return "", s.err
}
func (s failingStore) WatchCancel(context.Context, string, func(agents.CancelRequest)) error {
	return s.err
}
func (s failingStore) AddGrant(context.Context, agents.Grant) error { return s.err }
func (s failingStore) Grants(context.Context, string) ([]agents.Grant, error) {
	return nil, s.err
}
