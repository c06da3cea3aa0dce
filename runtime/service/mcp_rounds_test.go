package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/service"
)

// roundRobin is a reverse proxy that sends each request to the next live
// replica in turn, and remembers which one served the last tools/call.
type roundRobin struct {
	t        *testing.T
	replicas []*env
	mu       sync.Mutex
	next     int
	dead     map[int]bool
	lastCall int
	served   map[int]int
}

func newRoundRobin(t *testing.T, replicas ...*env) (*roundRobin, *httptest.Server) {
	rr := &roundRobin{t: t, replicas: replicas, dead: map[int]bool{}, served: map[int]int{}, lastCall: -1}
	srv := httptest.NewServer(rr)
	t.Cleanup(srv.Close)
	return rr, srv
}

func (rr *roundRobin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rr.mu.Lock()
	i := rr.next % len(rr.replicas)
	for rr.dead[i] {
		rr.next++
		i = rr.next % len(rr.replicas)
	}
	rr.next++
	rr.served[i]++
	if bytes.Contains(body, []byte(`"tools/call"`)) {
		rr.lastCall = i
	}
	rr.mu.Unlock()
	httputil.NewSingleHostReverseProxy(mustURL(rr.t, rr.replicas[i].srv.URL)).ServeHTTP(w, r)
}

// kill stops the replica that served the last tools/call: its server
// closes with its connections, and the proxy sends it nothing more.
func (rr *roundRobin) kill() int {
	rr.mu.Lock()
	i := rr.lastCall
	rr.dead[i] = true
	rr.mu.Unlock()
	rr.replicas[i].srv.CloseClientConnections()
	rr.replicas[i].srv.Close()
	return i
}

// TestMCPDecisionAcrossReplicas is the acceptance for paused runs
// at the 2026-07-28 revision: two replicas share a run store behind a
// round-robin proxy; a 2026-07-28 client calls an agent tool whose run
// pauses for approval, and is asked for the decision in the call's result
// (an input request naming the run in its request state); the replica
// that started the run is killed before the person answers; the client's
// retry, with the approval, reaches the other replica, which resumes the
// run from the store and answers. The refund runs once.
func TestMCPDecisionAcrossReplicas(t *testing.T) {
	store := agents.NewInMemoryStore()
	var refunds atomic.Int32
	shared := func(o *options) {
		o.store = store
		o.impls = countedRefunds(&refunds)
	}
	a, b := refundDeskWith(t, shared, refundSteps...), refundDeskWith(t, shared, refundSteps...)
	rr, proxy := newRoundRobin(t, a, b)

	var asked []string
	killed := -1
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked = append(asked, req.Params.Message)
			killed = rr.kill()
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
		},
	})
	sess, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: proxy.URL + service.MCPPath, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if v := sess.InitializeResult().ProtocolVersion; v != "2026-07-28" || sess.ID() != "" {
		t.Fatalf("protocol %q, session %q; want 2026-07-28 without a session", v, sess.ID())
	}
	res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !strings.Contains(asked[0], "issue_refund") || !strings.Contains(asked[0], "AB-1") {
		t.Fatalf("asked %q; want one question about issue_refund of AB-1", asked)
	}
	if res.IsError || res.Meta[service.MetaStatus] != "completed" || res.Content[0].(*sdk.TextContent).Text != `{"answer":"Refunded.","refunded":true}` {
		t.Fatalf("result after the approval: %+v %v", res, res.Content)
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("the refund ran %d times; want 1", n)
	}
	rr.mu.Lock()
	retryOn := rr.lastCall
	rr.mu.Unlock()
	if killed < 0 || retryOn == killed {
		t.Errorf("the run started on replica %d (killed) and was decided on %d; want another replica", killed, retryOn)
	}
	runID, _ := res.Meta[service.MetaRunID].(string)
	rec, err := store.LoadRun(t.Context(), runID)
	if err != nil || rec.Status != agents.StatusCompleted {
		t.Fatalf("run %q in the store: %v %+v", runID, err, rec.Status)
	}
}

// TestMCPDecisionRetryIsChecked: the retry that brings a decision is
// authorised like POST /v1/runs/{id}/resume, whatever its request state
// says: a key that may not decide is refused, another tenant's run is not
// found, a state that names a call the run does not wait on decides
// nothing (it is asked about the one it does), a state this service never gave is refused, and a person who
// declines leaves the run paused. The client here does the retries by
// hand, as a hostile one would.
func TestMCPDecisionRetryIsChecked(t *testing.T) {
	var refunds atomic.Int32
	e := refundDeskWith(t, func(o *options) {
		o.impls = countedRefunds(&refunds)
		// /mcp takes the caller role; the desks may also decide.
		o.svc = func(c *service.Config) {
			c.Auth.Keys = append(tenantKeys(),
				service.Key{Name: "desk", Roles: []service.Role{service.RoleCaller, service.RoleApprover}, Tenant: "acme", Secret: deskKey},
				service.Key{Name: "globex-desk", Roles: []service.Role{service.RoleCaller, service.RoleApprover}, Tenant: "globex", Secret: globexDesk})
		}
	}, refundSteps...)
	connect := func(key string) *sdk.ClientSession {
		c := sdk.NewClient(&sdk.Implementation{Name: "hostile", Version: "1"}, &sdk.ClientOptions{
			MultiRoundTrip: &sdk.MultiRoundTripOptions{Disabled: true},
			ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				t.Error("the client was asked outside a result")
				return &sdk.ElicitResult{Action: "cancel"}, nil
			},
		})
		sess, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + service.MCPPath, HTTPClient: &http.Client{Transport: keyed{key}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		return sess
	}
	ops, frontend, globex := connect(deskKey), connect(frontendKey), connect(globexDesk)
	approve := sdk.InputResponseMap{"aid/decision": &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}}
	retry := func(sess *sdk.ClientSession, state string, answer sdk.InputResponseMap) *sdk.CallToolResult {
		t.Helper()
		res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{}, RequestState: state, InputResponses: answer})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	errCode := func(res *sdk.CallToolResult) string {
		b, _ := json.Marshal(res.Meta[service.MetaError])
		var ae struct{ Code string }
		_ = json.Unmarshal(b, &ae)
		return ae.Code
	}

	// A caller's run pauses; the caller is not asked (it may not decide).
	res, err := frontend.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-1"}})
	if err != nil || res.NeedsInput() || res.Meta[service.MetaStatus] != "paused" {
		t.Fatalf("the caller's call: %v %+v", err, res)
	}
	runID := res.Meta[service.MetaRunID].(string)
	pending, _ := json.Marshal(res.Meta[service.MetaPending])
	var p struct {
		CallID string `json:"call_id"`
	}
	_ = json.Unmarshal(pending, &p)
	state := "aid.run.v1:" + runID + ":" + p.CallID
	if p.CallID == "" {
		t.Fatalf("no call id in the pending call %s", pending)
	}

	// The caller forges the retry: refused for its role.
	if res := retry(frontend, state, approve); !res.IsError || errCode(res) != service.CodeInsufficientRole {
		t.Errorf("the caller's forged approval: %+v", res)
	}
	// Another tenant's approver finds no such run.
	if res := retry(globex, state, approve); !res.IsError || errCode(res) != service.CodeRunNotFound {
		t.Errorf("another tenant's approval: %+v", res)
	}
	// A state this service never gave.
	for _, bad := range []string{"run_x", "aid.run.v1:", "aid.run.v1:" + runID, "aid.run.v1::c1"} {
		if res := retry(ops, bad, approve); !res.IsError || errCode(res) != service.CodeInvalidRequest {
			t.Errorf("state %q: %+v", bad, res)
		}
	}
	// A call the run does not wait on decides nothing: the answer asks
	// about the call it does wait on.
	if res := retry(ops, "aid.run.v1:"+runID+":c9", approve); res.IsError || !res.NeedsInput() || res.RequestState != state {
		t.Errorf("a stale call id: %+v", res)
	}
	// Declined: still paused.
	if res := retry(ops, state, sdk.InputResponseMap{"aid/decision": &sdk.ElicitResult{Action: "decline"}}); res.IsError || res.Meta[service.MetaStatus] != "paused" {
		t.Errorf("declined: %+v", res)
	}
	// No answer at all: still paused.
	if res := retry(ops, state, nil); res.IsError || res.Meta[service.MetaStatus] != "paused" {
		t.Errorf("no answer: %+v", res)
	}
	if n := refunds.Load(); n != 0 {
		t.Fatalf("%d refunds before anyone allowed approved", n)
	}
	// The approver: decided, once; a replay of the same retry decides
	// nothing more.
	if res := retry(ops, state, approve); res.IsError || res.Meta[service.MetaStatus] != "completed" {
		t.Fatalf("the approver's retry: %+v %v", res, res.Content)
	}
	if res := retry(ops, state, approve); !res.IsError || errCode(res) != service.CodeRunNotPaused {
		t.Errorf("the same retry again: %+v", res)
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("the refund ran %d times; want 1", n)
	}
	rec, err := e.runtime.Store().LoadRun(t.Context(), runID)
	if err != nil || rec.Status != agents.StatusCompleted {
		t.Fatalf("run: %v %v", err, rec.Status)
	}

	// An approver's own call is asked in the result, with a request state
	// that names the run and its call.
	res, err = ops.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-2"}})
	if err != nil || !res.NeedsInput() || !strings.HasPrefix(res.RequestState, "aid.run.v1:"+res.Meta[service.MetaRunID].(string)+":") {
		t.Fatalf("the approver's call: %v %+v", err, res)
	}
	if _, ok := res.InputRequests["aid/decision"].(*sdk.ElicitParams); !ok {
		t.Errorf("input requests %+v; want aid/decision, a form", res.InputRequests)
	}
}

const (
	deskKey    = "sk-desk-acme-51d0"
	globexDesk = "sk-desk-globex-c3a8"
)

// keyed adds a bearer key to every request.
type keyed struct{ key string }

func (k keyed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return http.DefaultTransport.RoundTrip(r)
}
