package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/analysis"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/service"
)

// The keys of support-desk's model: a caller and an approver-operator of
// acme, a caller of globex; and more for the walls between them.
const (
	frontendKey = "sk-frontend-3b1d"
	opsKey      = "sk-ops-77c2"
	otherKey    = "sk-other-9e04"
	secondKey   = "sk-second-acme-11aa"
	globexOps   = "sk-globex-ops-5f5f"
	approverKey = "sk-approver-only-42"
)

func tenantKeys() []service.Key {
	return []service.Key{
		{Name: "frontend", Roles: []service.Role{service.RoleCaller}, Tenant: "acme", Secret: frontendKey},
		{Name: "ops", Roles: []service.Role{service.RoleApprover, service.RoleOperator}, Tenant: "acme", Secret: opsKey},
		{Name: "other", Roles: []service.Role{service.RoleCaller}, Tenant: "globex", Secret: otherKey},
		{Name: "second", Roles: []service.Role{service.RoleCaller}, Tenant: "acme", Secret: secondKey},
		{Name: "globex-ops", Roles: []service.Role{service.RoleApprover, service.RoleOperator}, Tenant: "globex", Secret: globexOps},
		// A key given by its hash: sha256("sk-approver-only-42").
		{Name: "approver", Roles: []service.Role{service.RoleApprover}, Tenant: "acme", SecretSHA256: sha256Hex(approverKey)},
	}
}

// keyEnv is approvalEnv with the tenant keys, and a refund tool that
// records whom each of its calls was made for.
func keyEnv(t *testing.T, refunds *atomic.Int32, callers *callerLog, more ...func(*service.Config)) *env {
	return newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "refund", `{"order":"A1"}`)),
			answer("Refunded A1."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Refund.", Tools: []string{"refund"}}},
		tools:  []agents.Tool{{Name: "refund", Description: "Refund an order.", Input: refundSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		impls: map[string]agents.Implementation{"refund": agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
			refunds.Add(1)
			c, _ := kind.CallerFrom(ctx)
			callers.add(c)
			return "refunded " + string(args), nil
		})},
		svc: func(c *service.Config) {
			c.Auth.Keys = tenantKeys()
			for _, m := range more {
				m(c)
			}
		},
	})
}

type callerLog struct {
	mu   sync.Mutex
	seen []kind.Caller
}

func (l *callerLog) add(c kind.Caller) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, c)
}

func (l *callerLog) all() []kind.Caller {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.seen)
}

// as sends a request with key.
func (e *env) as(t testing.TB, key, method, path, body string, hdr ...string) (int, http.Header, []byte) {
	t.Helper()
	return servicetest.Do(t, e.srv.Client(), method, e.srv.URL+path, key, strings.NewReader(body), hdr...)
}

// TestApprovalNeedsTheApproverRole is the acceptance: the frontend
// key's run pauses and its answer says so without telling how to approve;
// frontend approving is 403 and the run stays paused; another tenant's
// key finds no run (404); ops approves, and the record, the event log and
// the metrics name ops, with the body's name kept as a claim; the refund
// runs for frontend, who started the run.
func TestApprovalNeedsTheApproverRole(t *testing.T) {
	var refunds atomic.Int32
	var callers callerLog
	e := keyEnv(t, &refunds, &callers)
	status, hdr, body := e.as(t, frontendKey, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Refund A1"}]}`)
	runID := hdr.Get("X-Aid-Run-Id")
	var cc struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Aid struct {
			Status  string          `json:"status"`
			Pending json.RawMessage `json:"pending"`
		} `json:"aid"`
	}
	if err := json.Unmarshal(body, &cc); err != nil || status != 200 || runID == "" || cc.Aid.Status != "paused" {
		t.Fatalf("frontend's chat completion: %d %s", status, body)
	}
	text := cc.Choices[0].Message.Content
	if !strings.Contains(text, runID) || !strings.Contains(text, "waits for approval") ||
		strings.Contains(text, "POST") || strings.Contains(text, "resume") || strings.Contains(string(cc.Aid.Pending), "resume_url") {
		t.Fatalf("a caller's paused answer must say the run waits and name it, never how to approve: %s", body)
	}

	// frontend may not decide: 403, and the run is still paused.
	status, _, body = e.as(t, frontendKey, "POST", "/v1/runs/"+runID+"/resume", `{"action":"approve","by":"frontend-user"}`)
	if code, typ, _ := servicetest.ErrorOnly(t, body); status != http.StatusForbidden || code != service.CodeInsufficientRole || typ != service.TypePermission ||
		!strings.Contains(errMessage(t, body), "approver") {
		t.Fatalf("frontend approving: %d %s", status, body)
	}
	status, _, body = e.as(t, frontendKey, "GET", "/v1/runs/"+runID, "")
	if got := decodeRun(t, body); status != 200 || got.Status != "paused" || got.Pending == nil || got.Pending.ResumeURL != "" || refunds.Load() != 0 {
		t.Fatalf("frontend reading its paused run: %d %s, %d refunds", status, body, refunds.Load())
	}

	// Another tenant's keys find no such run; nor does another caller of
	// acme, whose runs are its own.
	for _, tt := range []struct{ key, method, path, body string }{
		{otherKey, "GET", "/v1/runs/" + runID, ""},
		{otherKey, "GET", "/v1/runs/" + runID + "/events", ""},
		{otherKey, "POST", "/v1/runs/" + runID + "/cancel", ""},
		{globexOps, "POST", "/v1/runs/" + runID + "/resume", `{"action":"approve"}`},
		{globexOps, "POST", "/v1/runs/" + runID + "/continue", ""},
		{globexOps, "GET", "/v1/runs/" + runID, ""},
		{secondKey, "GET", "/v1/runs/" + runID, ""},
	} {
		status, _, body := e.as(t, tt.key, tt.method, tt.path, tt.body)
		if code, _, _ := servicetest.ErrorOnly(t, body); status != http.StatusNotFound || code != service.CodeRunNotFound {
			t.Errorf("%s %s as another's key: %d %s", tt.method, tt.path, status, body)
		}
	}

	// ops reads it with where to decide it, and approves it: the record
	// names ops, the body's name is a claim.
	status, _, body = e.as(t, opsKey, "GET", "/v1/runs/"+runID, "")
	if got := decodeRun(t, body); status != 200 || got.Pending == nil || got.Pending.ResumeURL != "/v1/runs/"+runID+"/resume" {
		t.Fatalf("ops reading the run: %d %s", status, body)
	}
	status, _, body = e.as(t, opsKey, "POST", "/v1/runs/"+runID+"/resume", `{"action":"approve","by":"mallory"}`)
	done := decodeRun(t, body)
	if status != 200 || done.Status != "completed" || refunds.Load() != 1 {
		t.Fatalf("ops approving: %d %s", status, body)
	}
	if a := done.Steps[0].ToolCalls[0].Approval; a == nil || a.By != "ops" || a.ClaimedBy != "mallory" {
		t.Fatalf("approval record %+v", a)
	}
	if got := callers.all(); len(got) != 1 || got[0] != (kind.Caller{Key: "frontend", Tenant: "acme"}) {
		t.Errorf("the refund ran for %+v, want frontend of acme (who started the run)", got)
	}
	status, _, body = e.as(t, opsKey, "GET", "/v1/runs/"+runID+"/events", "")
	rec, err := agents.ReadRecording(strings.NewReader(string(body)))
	if err != nil || status != 200 {
		t.Fatalf("events: %d %v %s", status, err, body)
	}
	if a := rec.Steps[0].ToolCalls[0].Approval; a == nil || a.By != "ops" || a.ClaimedBy != "mallory" {
		t.Errorf("the event log's approval %+v", a)
	}
	_, _, metrics := e.as(t, opsKey, "GET", "/metrics", "")
	if v, ok := servicetest.Metric(string(metrics), `aid_decisions_total{action="approve",key="ops",tenant="acme"}`); !ok || v != 1 {
		t.Errorf("aid_decisions_total for ops: %v %v", v, ok)
	}
}

// TestApproverByHash: a key declared by its secret's SHA-256 decides, and
// a runs stream answered to a caller names the run first, without where
// to decide it.
func TestApproverByHash(t *testing.T) {
	var refunds atomic.Int32
	var callers callerLog
	e := keyEnv(t, &refunds, &callers)
	status, hdr, body := e.as(t, frontendKey, "POST", "/v1/agents/triage/runs", `{"input":"Refund A1"}`, "Accept", "text/event-stream")
	runID := hdr.Get("X-Aid-Run-Id")
	first, _, _ := strings.Cut(string(body), "\n\n")
	if status != 200 || runID == "" || first != "event: run\ndata: {\"run_id\":\""+runID+"\",\"agent\":\"triage\",\"status\":\"running\"}" {
		t.Fatalf("a runs stream's first event must name the run: %d %q\n%s", status, runID, body)
	}
	if strings.Contains(string(body), "resume_url") {
		t.Errorf("a caller's stream says where to decide: %s", body)
	}
	status, _, body = e.as(t, approverKey, "POST", "/v1/runs/"+runID+"/resume", `{"action":"reject","feedback":"no"}`)
	if got := decodeRun(t, body); status != 200 || got.Status != "completed" || refunds.Load() != 0 {
		t.Fatalf("rejecting by the hashed key: %d %s", status, body)
	}
}

// TestListRunsByKey: GET /v1/runs lists what a key may read: a caller its
// own runs, an operator its tenant's, an admin every tenant's; filtered by
// status, paged by cursor.
func TestListRunsByKey(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {answer("Hi.")}}},
		svc:  func(c *service.Config) { c.Auth.Keys = tenantKeys() },
	})
	start := func(key string) string {
		t.Helper()
		status, hdr, body := e.as(t, key, "POST", "/v1/runs", `{"input":"hello"}`)
		if status != 200 {
			t.Fatalf("start: %d %s", status, body)
		}
		return hdr.Get("X-Aid-Run-Id")
	}
	f1, f2, s1, o1 := start(frontendKey), start(frontendKey), start(secondKey), start(otherKey)
	list := func(key, query string) []string {
		t.Helper()
		var ids []string
		after := ""
		for range 10 {
			q := query
			if after != "" {
				q += "&after=" + after
			}
			var page struct {
				Data []struct {
					RunID  string `json:"run_id"`
					Status string `json:"status"`
				} `json:"data"`
				HasMore bool   `json:"has_more"`
				Next    string `json:"next"`
			}
			servicetest.DoJSON(t, e.srv.Client(), "GET", e.srv.URL+"/v1/runs?"+q, key, "", 200, &page)
			for _, r := range page.Data {
				ids = append(ids, r.RunID)
			}
			if !page.HasMore {
				return ids
			}
			after = page.Next
		}
		t.Fatal("more than 10 pages")
		return nil
	}
	for _, tt := range []struct {
		key, query string
		want       []string
	}{
		{frontendKey, "limit=1", []string{f1, f2}},
		{secondKey, "", []string{s1}},
		{otherKey, "status=completed", []string{o1}},
		{opsKey, "status=completed,paused&limit=2", []string{f1, f2, s1}},
		{opsKey, "status=paused", nil},
		{token, "limit=3", []string{f1, f2, s1, o1}},
	} {
		if got := list(tt.key, tt.query); !sameIDs(got, tt.want) {
			t.Errorf("%s ?%s: got %v, want %v", tt.key, tt.query, got, tt.want)
		}
	}
	for _, q := range []string{"status=done", "limit=0x", "limit=1000", "after=zzz"} {
		status, _, body := e.as(t, opsKey, "GET", "/v1/runs?"+q, "")
		if code, _, _ := servicetest.ErrorOnly(t, body); status != 400 || code != service.CodeInvalidRequest {
			t.Errorf("?%s: %d %s", q, status, body)
		}
	}
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestEveryRouteChecksKeysAndRoles sends every API route, /mcp and
// /metrics no key, a key the service does not know, and each key whose
// roles the route does not accept: 401 and 403 in OpenAI's error shape,
// before the handler runs. A key with an accepted role gets past the check.
func TestEveryRouteChecksKeysAndRoles(t *testing.T) {
	e := newEnv(t, options{svc: func(c *service.Config) { c.Auth.Keys = tenantKeys() }})
	routes := service.RouteRoles()
	// The roles each route takes, as the README's table says: written out
	// here so that a route added or a role changed is a decision this test
	// is updated for.
	const (
		caller   = service.RoleCaller
		approver = service.RoleApprover
		operator = service.RoleOperator
	)
	want := map[string][]service.Role{
		"POST /v1/chat/completions":         {caller},
		"POST /v1/responses":                {caller},
		"GET /v1/responses/{id}":            {caller, approver, operator},
		"DELETE /v1/responses/{id}":         {caller, operator},
		"POST /v1/responses/{id}/cancel":    {caller, operator},
		"GET /v1/models":                    {caller, approver, operator},
		"GET /v1/models/{model}":            {caller, approver, operator},
		"POST /v1/agents/{agent}/runs":      {caller},
		"POST /v1/runs":                     {caller},
		"GET /v1/runs":                      {caller, approver, operator},
		"POST /v1/runs/{id}/resume":         {approver},
		"POST /v1/runs/{id}/continue":       {operator},
		"POST /v1/runs/{id}/cancel":         {caller, operator},
		"GET /v1/runs/{id}/events":          {caller, approver, operator},
		"GET /v1/runs/{id}":                 {caller, approver, operator},
		"POST /v1/retrievers/{name}/search": {caller},
	}
	if !reflect.DeepEqual(routes, want) {
		t.Fatalf("the routes' roles:\n got %v\nwant %v", routes, want)
	}
	routes["POST /mcp"] = []service.Role{service.RoleCaller}
	routes["GET /metrics"] = []service.Role{service.RoleOperator}
	keyRoles := map[string][]service.Role{frontendKey: {service.RoleCaller}, approverKey: {service.RoleApprover},
		opsKey: {service.RoleApprover, service.RoleOperator}}
	if len(routes) < 14 {
		t.Fatalf("only %d routes: %v", len(routes), routes)
	}
	for pattern, roles := range routes {
		method, path, _ := strings.Cut(pattern, " ")
		path = strings.NewReplacer("{id}", "run_00000000000000000000000000000000", "{agent}", "triage", "{model}", "triage", "{name}", "kb").Replace(path)
		check := func(key string, wantStatus int, wantCode, wantType string) {
			t.Helper()
			status, hdr, body := e.as(t, key, method, path, `{}`, "Accept", "application/json, text/event-stream")
			code, typ, _ := servicetest.ErrorOnly(t, body)
			if status != wantStatus || code != wantCode || typ != wantType || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
				t.Errorf("%s with key %q: %d %s, want %d %s", pattern, key, status, body, wantStatus, wantCode)
			}
		}
		check("", http.StatusUnauthorized, service.CodeMissingAPIKey, service.TypeAuthentication)
		check("sk-not-a-key", http.StatusUnauthorized, service.CodeInvalidAPIKey, service.TypeAuthentication)
		for key, has := range keyRoles {
			allowed := slices.ContainsFunc(has, func(r service.Role) bool { return slices.Contains(roles, r) })
			if !allowed {
				check(key, http.StatusForbidden, service.CodeInsufficientRole, service.TypePermission)
				continue
			}
			status, _, body := e.as(t, key, method, path, `{}`, "Accept", "application/json")
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				t.Errorf("%s with a key of role %v: %d %s", pattern, has, status, body)
			}
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestBackgroundRunKeepsItsStarter: a run frontend starts in the
// background and ops resumes in the background is driven by a worker as
// frontend's: the refund runs for frontend of acme, and the approval is
// recorded under ops.
func TestBackgroundRunKeepsItsStarter(t *testing.T) {
	var refunds atomic.Int32
	var callers callerLog
	e := keyEnv(t, &refunds, &callers, withLocalQueue(t, jobs.Config{Workers: 1}))
	wait := func(id, want string) {
		t.Helper()
		servicetest.WaitFor(t, func() bool {
			_, _, body := e.as(t, opsKey, "GET", "/v1/runs/"+id, "")
			return decodeRun(t, body).Status == want
		})
	}
	status, hdr, body := e.as(t, frontendKey, "POST", "/v1/runs", `{"input":"Refund A1","background":true}`)
	id := hdr.Get("X-Aid-Run-Id")
	if status != http.StatusAccepted || id == "" {
		t.Fatalf("background start: %d %s", status, body)
	}
	wait(id, "paused")
	if status, _, body := e.as(t, opsKey, "POST", "/v1/runs/"+id+"/resume", `{"action":"approve","background":true}`); status != http.StatusAccepted {
		t.Fatalf("background resume: %d %s", status, body)
	}
	wait(id, "completed")
	if got := callers.all(); len(got) != 1 || got[0] != (kind.Caller{Key: "frontend", Tenant: "acme"}) {
		t.Errorf("the worker ran the refund for %+v, want frontend of acme", got)
	}
	_, _, body = e.as(t, frontendKey, "GET", "/v1/runs/"+id, "")
	if a := decodeRun(t, body).Steps[0].ToolCalls[0].Approval; a == nil || a.By != "ops" {
		t.Errorf("approval %+v", a)
	}
}

// TestThreadsAreTheCallersOwn: ops grants frontend's refund tool for
// frontend's thread t1; frontend's next run in t1 refunds without asking,
// while globex's caller naming the same thread t1 is asked: the grant is
// frontend's thread's, not every thread called t1.
func TestThreadsAreTheCallersOwn(t *testing.T) {
	var refunds atomic.Int32
	var callers callerLog
	e := newEnv(t, options{
		fake: fake.Config{Analyzer: analysis.English{}, Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "refund", `{"order":"A1"}`)), answer("Refunded A1."),
			calls(call("c2", "refund", `{"order":"A2"}`)), answer("Refunded A2."),
			calls(call("c3", "refund", `{"order":"A3"}`)),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Refund.", Tools: []string{"refund"}}},
		tools:  []agents.Tool{{Name: "refund", Description: "Refund an order.", Input: refundSchema, Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		impls: map[string]agents.Implementation{"refund": agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
			refunds.Add(1)
			c, _ := kind.CallerFrom(ctx)
			callers.add(c)
			return "refunded " + string(args), nil
		})},
		svc: func(c *service.Config) { c.Auth.Keys = tenantKeys() },
	})
	start := func(key string) run {
		t.Helper()
		_, _, body := e.as(t, key, "POST", "/v1/runs", `{"input":"Refund","thread_id":"t1"}`)
		return decodeRun(t, body)
	}
	first := start(frontendKey)
	if first.Status != "paused" {
		t.Fatalf("first run: %+v", first)
	}
	if status, _, body := e.as(t, opsKey, "POST", "/v1/runs/"+first.RunID+"/resume", `{"action":"approve","scope":"thread"}`); status != 200 {
		t.Fatalf("grant: %d %s", status, body)
	}
	if second := start(frontendKey); second.Status != "completed" || refunds.Load() != 2 {
		t.Fatalf("frontend's thread keeps the grant: %+v, %d refunds", second, refunds.Load())
	}
	if third := start(otherKey); third.Status != "paused" || refunds.Load() != 2 {
		t.Fatalf("globex's thread t1 is another thread: %+v, %d refunds", third, refunds.Load())
	}
}

// TestMetricsAreSplitByTenant: model calls' spend, tokens and calls, and
// keys' requests, are counted per tenant (the key's, never a request's),
// and /metrics shows a tenant's operator its tenant's series only: not
// another tenant's, nor the application's; an admin key sees them all.
func TestMetricsAreSplitByTenant(t *testing.T) {
	var refunds atomic.Int32
	var callers callerLog
	const rootKey = "sk-root-0a0a"
	e := keyEnv(t, &refunds, &callers, func(c *service.Config) {
		c.Auth.Keys = append(c.Auth.Keys, service.Key{Name: "root", Roles: []service.Role{service.RoleAdmin}, Secret: rootKey})
	})
	for _, key := range []string{frontendKey, otherKey} {
		if st, _, body := e.as(t, key, "POST", "/v1/chat/completions", `{"model":"triage","messages":[{"role":"user","content":"Refund A1"}]}`); st != 200 {
			t.Fatalf("chat: %d %s", st, body)
		}
	}
	scrape := func(key string) string {
		t.Helper()
		st, _, body := e.as(t, key, "GET", "/metrics", "")
		if st != 200 {
			t.Fatalf("/metrics: %d %s", st, body)
		}
		return string(body)
	}
	route := `route="POST /v1/chat/completions"`
	for _, c := range []struct{ key, tenant, other string }{{opsKey, "acme", "globex"}, {globexOps, "globex", "acme"}} {
		m := scrape(c.key)
		if v, ok := servicetest.Metric(m, `aid_tenant_model_calls_total{tenant="`+c.tenant+`"}`); !ok || v != 1 {
			t.Errorf("%s's model calls: %v %v\n%s", c.tenant, v, ok, m)
		}
		if v, ok := servicetest.Metric(m, `aid_tenant_spent_usd_total{tenant="`+c.tenant+`"}`); !ok || v <= 0 {
			t.Errorf("%s's spend: %v %v", c.tenant, v, ok)
		}
		if v, ok := servicetest.Metric(m, `aid_tenant_tokens_total{tenant="`+c.tenant+`"}`); !ok || v <= 0 {
			t.Errorf("%s's tokens: %v %v", c.tenant, v, ok)
		}
		if v, ok := servicetest.Metric(m, `aid_tenant_requests_total{code="200",`+route+`,tenant="`+c.tenant+`"}`); !ok || v != 1 {
			t.Errorf("%s's requests: %v %v", c.tenant, v, ok)
		}
		if strings.Contains(m, `tenant="`+c.other+`"`) || strings.Contains(m, "aid_http_requests_total") || strings.Contains(m, "aid_budget_") {
			t.Errorf("%s's operator sees another tenant's or the application's series:\n%s", c.tenant, m)
		}
	}
	m := scrape(rootKey)
	for _, want := range []string{`aid_tenant_model_calls_total{tenant="acme"} 1`, `aid_tenant_model_calls_total{tenant="globex"} 1`, "aid_http_requests_total{"} {
		if !strings.Contains(m, want) {
			t.Errorf("the admin's /metrics has no %s", want)
		}
	}
}

// plainStore is a run store that cannot list runs: the interface alone,
// with no ListRuns to promote.
type plainStore struct{ agents.Store }

// TestListingNeedsARunLister: a service whose run store cannot list runs
// answers GET /v1/runs 501 not_implemented naming the store, and still
// reads a run by its id.
func TestListingNeedsARunLister(t *testing.T) {
	e := newEnv(t, options{store: plainStore{agents.NewInMemoryStore()}})
	st, hdr, body := e.do(t, "POST", "/v1/runs", `{"input":"hello"}`)
	if st != 200 {
		t.Fatalf("run: %d %s", st, body)
	}
	st, _, body = e.do(t, "GET", "/v1/runs", "")
	if st != http.StatusNotImplemented || !strings.Contains(string(body), `"code":"not_implemented"`) || !strings.Contains(string(body), "plainStore") {
		t.Errorf("listing: %d %s", st, body)
	}
	if st, _, body := e.do(t, "GET", "/v1/runs/"+hdr.Get("X-Aid-Run-Id"), ""); st != 200 {
		t.Errorf("reading the run by id: %d %s", st, body)
	}
}
