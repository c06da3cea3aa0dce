package service_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

const token = "sk-aid-test-7f3c9e1d2b"

// env is a service over a fake provider, served by an httptest server.
type env struct {
	fake    *fake.Provider
	gw      *gateway.Gateway
	runtime *agents.Runtime
	svc     *service.Service
	srv     *httptest.Server
	logs    *servicetest.Buffer
}

// options adjust newEnv.
type options struct {
	fake      fake.Config
	agents    []agents.Agent
	tools     []agents.Tool
	impls     map[string]agents.Implementation
	budgets   []gateway.Budget
	searchers map[string]agents.Searcher
	memory    map[string]agents.MemoryStore
	store     agents.Store // the runtime's run store; a fresh in-memory one when nil
	svc       func(*service.Config)
	approvals policy.Policy
	guards    []guard.Guardrail           // the declared guardrails, which o.agents name
	models    func([]gateway.PinnedModel) // edits the catalog when set
}

func catalog() []gateway.PinnedModel {
	caps := []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming}
	return []gateway.PinnedModel{
		{Alias: "large", Spec: gateway.ModelSpec{ID: "m-large", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 100, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.01, OutputPer1kUSD: 0.03}}},
		{Alias: "embed", Spec: gateway.ModelSpec{ID: "m-embed", Provider: "fake", Kind: gateway.KindEmbedding, Dimensions: 64, Cost: gateway.CostProfile{InputPer1kUSD: 0.0001}}},
		{Alias: "small", Spec: gateway.ModelSpec{ID: "m-small", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 50, Capabilities: caps, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}},
		{Alias: "plain", Spec: gateway.ModelSpec{ID: "m-plain", Provider: "fake", ContextWindow: 8000, MaxOutputTokens: 50, Cost: gateway.CostProfile{InputPer1kUSD: 0.001, OutputPer1kUSD: 0.002}}},
	}
}

func newEnv(t testing.TB, o options) *env {
	t.Helper()
	o.fake.Record = true
	o.fake.Analyzer = analysis.English{} // the environment's models embed
	p, err := fake.New(o.fake)
	if err != nil {
		t.Fatal(err)
	}
	models := catalog()
	if o.models != nil {
		o.models(models)
	}
	gw, err := gateway.New(gateway.Config{
		Models: models, Providers: map[string]gateway.Provider{"fake": service.InstrumentProvider(p)},
		Budgets: o.budgets, Retry: gateway.RetryPolicy{MaxAttempts: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.agents == nil {
		o.agents = []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer."}}
	}
	searchers := map[string]agents.Searcher{}
	for name, s := range o.searchers {
		searchers[name] = service.InstrumentSearcher(s)
	}
	rt, err := agents.New(agents.Config{
		Gateway: gw, Agents: o.agents, Tools: o.tools, Implementations: service.InstrumentTools(o.impls),
		Retrievers: searchers, Budgets: o.budgets, MemoryStores: o.memory, Store: o.store, Approvals: o.approvals, Conditions: cel.Language{},
		Guardrails: o.guards,
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &servicetest.Buffer{}
	cfg := service.Config{
		Gateway: gw, Agents: rt, Retrievers: searchers, Entry: o.agents[0].Name,
		Auth:   service.Auth{Kind: service.AuthBearer, Tokens: []string{token}},
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if o.svc != nil {
		o.svc(&cfg)
	}
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return &env{fake: p, gw: gw, runtime: rt, svc: svc, srv: srv, logs: logs}
}

// client is an openai-go client of the service that does not retry.
func (e *env) client(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(e.srv.URL + "/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0),
		option.WithHTTPClient(e.srv.Client()),
	}
	return openai.NewClient(append(base, opts...)...)
}

// do sends a request with the token and returns the status, headers and
// body.
func (e *env) do(t testing.TB, method, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	return servicetest.Do(t, e.srv.Client(), method, e.srv.URL+path, token, strings.NewReader(body), hdr...)
}

// sseEvent is one named server-sent event of a runs stream.
type sseEvent struct{ name, data string }

// sse POSTs body to path accepting server-sent events and returns the
// stream's events in order.
func (e *env) sse(t testing.TB, path, body string) []sseEvent {
	t.Helper()
	status, hdr, b := e.do(t, "POST", path, body, "Accept", "text/event-stream")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("POST %s: %d %s %s", path, status, hdr, b)
	}
	var out []sseEvent
	for _, ev := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		name, rest, _ := strings.Cut(ev, "\n")
		out = append(out, sseEvent{strings.TrimPrefix(name, "event: "), strings.TrimPrefix(rest, "data: ")})
	}
	return out
}

// errMessage is the message of an error answer.
func errMessage(t testing.TB, body []byte) string {
	t.Helper()
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return v.Error.Message
}

// spend is the ledger's settled spend.
func (e *env) spend(t testing.TB) gateway.SpendSummary {
	t.Helper()
	s, err := e.gw.Spend(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func answer(text string) fake.Step { return fake.Step{Text: text} }

func calls(cs ...gateway.ToolCall) fake.Step { return fake.Step{ToolCalls: cs} }

func call(id, name, args string) gateway.ToolCall {
	return gateway.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

func (e *env) clientPtr(opts ...option.RequestOption) *openai.Client {
	c := e.client(opts...)
	return &c
}

type gatewayBudget = gateway.Budget

// gatewayModel lets tests edit the catalog without importing the gateway.
type gatewayModel = gateway.PinnedModel
