package postgres_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/serve"
	"github.com/aidgen/aid/runtime/serve/postgres"
	"github.com/aidgen/aid/runtime/service"
)

// TestServiceDatabaseOutage serves an application whose runs, budget
// ledger and memory live in PostgreSQL behind a proxy, and cuts the
// database: between requests, and in the middle of one. Every request that
// needs it answers 503 dependency_unavailable with Retry-After and
// X-Should-Retry: true, naming no connection detail (user, database, host,
// port), while its log line keeps the detail; once the database is back
// the same process serves again.
func TestServiceDatabaseOutage(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	proxy, viaProxy := pgtest.NewProxy(t, dsn)
	pu, _ := url.Parse(viaProxy)
	_, port, _ := net.SplitHostPort(pu.Host)
	dbName := strings.TrimPrefix(pu.Path, "/")

	desc := app.Description{
		Name: "desk", Version: "0.1.0", Dir: t.TempDir(),
		Providers: []app.Provider{{Name: "fake", Kind: fake.Kind{Seed: 1, Latency: 400 * time.Millisecond}}},
		Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "fake-1", Provider: "fake", Kind: gateway.KindChat,
			ContextWindow: 8192, MaxOutputTokens: 64, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}}},
		Budgets: []gateway.Budget{{Name: "b", MaxUSD: 100, Scope: gateway.ScopeGlobal}},
		Agents:  []agents.Agent{{Name: "desk", Model: "m", Instructions: "Answer.", MaxSteps: 2, Budget: "b"}},
		Service: app.Service{Listen: "127.0.0.1:0", Entry: "desk", Auth: app.Auth{Kind: "none"},
			State: app.State{Kind: app.StatePostgres, DSNEnv: "DESK_DSN"}},
	}
	logs := &servicetest.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- serve.Run(ctx, desc, serve.Options{OpenState: postgres.OpenState}, serve.Process{
			LookupEnv: func(k string) (string, bool) {
				if k == "DESK_DSN" {
					return viaProxy, true
				}
				return "", false
			},
			Stderr: logs,
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the service did not stop")
		}
	})
	var base string
	for deadline := time.Now().Add(30 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, l := range logs.Lines() {
			if l["msg"] == "serving" {
				base = "http://" + l["addr"].(string)
			}
		}
		select {
		case code := <-done:
			t.Fatalf("the service exited %d:\n%v", code, logs.Lines())
		default:
		}
	}
	if base == "" {
		t.Fatal("the service is not serving")
	}
	chat := `{"model":"desk","messages":[{"role":"user","content":"hello"}]}`
	call := func(method, path, body string) (*http.Response, []byte) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, body := call("POST", "/v1/chat/completions", chat)
	if resp.StatusCode != 200 {
		t.Fatalf("before the outage: %d %s", resp.StatusCode, body)
	}
	runID := resp.Header.Get("X-Aid-Run-Id")

	unavailable := func(what string, resp *http.Response, body []byte) {
		t.Helper()
		var e struct {
			Error struct {
				Message, Type, Code string
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Type != service.TypeUnavailable || e.Error.Code != service.CodeUnavailable ||
			resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Should-Retry") != "true" {
			t.Errorf("%s: %d %s %s, Retry-After %q, X-Should-Retry %q", what, resp.StatusCode, resp.Header, body, resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"))
		}
		for _, detail := range []string{"127.0.0.1", port, dbName, "postgres", "user=", "5432", "EOF", "pgstore", "pgledger"} {
			if strings.Contains(string(body), detail) {
				t.Errorf("%s: the answer names %q: %s", what, detail, body)
			}
		}
		id := resp.Header.Get("X-Request-Id")
		for _, l := range logs.Lines() {
			if l["request_id"] == id {
				if msg, _ := l["error"].(string); !strings.Contains(msg, " unavailable: ") {
					t.Errorf("%s: the log line lacks the error: %v", what, l)
				}
				return
			}
		}
		t.Errorf("%s: no log line for request %s", what, id)
	}

	// Between requests.
	proxy.Cut()
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chat},
		{"POST", "/v1/agents/desk/runs", `{"input":"hello"}`},
		{"GET", "/v1/runs/" + runID, ""},
		{"POST", "/v1/chat/completions", chat}, // a second time: the pool now fails to connect
	} {
		resp, body := call(r.method, r.path, r.body)
		unavailable(r.method+" "+r.path, resp, body)
	}
	detailed := false
	for _, l := range logs.Lines() {
		msg, _ := l["error"].(string)
		detailed = detailed || strings.Contains(msg, "127.0.0.1:"+port)
	}
	if !detailed {
		t.Errorf("no log line names the database's address:\n%v", logs.Lines())
	}
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	if resp, body := call("POST", "/v1/chat/completions", chat); resp.StatusCode != 200 {
		t.Fatalf("after the database came back: %d %s\n%v", resp.StatusCode, body, logs.Lines()[len(logs.Lines())-3:])
	}

	// In the middle of a run: cut once its record is written, while the
	// model is answering.
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var before int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM aid_agent_runs`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		resp *http.Response
		body []byte
	}
	got := make(chan answer, 1)
	go func() {
		resp, body := call("POST", "/v1/chat/completions", chat)
		got <- answer{resp, body}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM aid_agent_runs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run never started")
		}
	}
	proxy.Cut()
	a := <-got
	unavailable("a run cut in the middle", a.resp, a.body)
	if err := proxy.Restore(); err != nil {
		t.Fatal(err)
	}
	if resp, body := call("POST", "/v1/chat/completions", chat); resp.StatusCode != 200 {
		t.Fatalf("after the second outage: %d %s", resp.StatusCode, body)
	}
}
