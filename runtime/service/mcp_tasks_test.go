package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/internal/pgtest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/pgstore"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/service"
)

// rpcReply is a JSON-RPC response.
type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rawMCP speaks JSON-RPC to /mcp by hand, as a client the Go SDK cannot
// play: tasks, which it does not implement.
type rawMCP struct {
	t       *testing.T
	url     string
	key     string
	version string // 2025-11-25 (a session) or 2026-07-28 (stateless)
	session string
	n       atomic.Int64
}

// newRawSession opens a 2025-11-25 session and returns it with the
// initialize result.
func newRawSession(t *testing.T, url, key string) (*rawMCP, map[string]any) {
	c := &rawMCP{t: t, url: url, key: key, version: "2025-11-25"}
	var init map[string]any
	c.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}}, &init)
	c.post(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	return c, init
}

// newRawStateless is a 2026-07-28 client that declares the tasks
// extension.
func newRawStateless(t *testing.T, url, key string) *rawMCP {
	return &rawMCP{t: t, url: url, key: key, version: "2026-07-28"}
}

// post sends a message and returns the response to it, if any.
func (c *rawMCP) post(msg map[string]any) rpcReply {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(c.t.Context(), "POST", c.url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.key)
	if msg["method"] != "initialize" {
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version >= "2026-07-28" {
		m, _ := msg["method"].(string)
		req.Header.Set("Mcp-Method", m)
		if p, _ := msg["params"].(map[string]any); p != nil {
			if name, _ := p["name"].(string); name != "" {
				req.Header.Set("Mcp-Name", name)
			}
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.session = sid
	}
	var out rpcReply
	if resp.StatusCode == http.StatusAccepted {
		return out
	}
	body := []byte(nil)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id"`) {
				body = []byte(data)
				break
			}
		}
	} else {
		body, _ = io.ReadAll(resp.Body)
	}
	if err := json.Unmarshal(body, &out); err != nil {
		c.t.Fatalf("%v: %d %q", msg["method"], resp.StatusCode, body)
	}
	return out
}

// call sends a request and decodes its result into out; a JSON-RPC error
// is returned.
func (c *rawMCP) call(method string, params map[string]any, out any) *struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
} {
	c.t.Helper()
	if c.version >= "2026-07-28" {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    c.version,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}},
		}
	}
	r := c.post(map[string]any{"jsonrpc": "2.0", "id": c.n.Add(1), "method": method, "params": params})
	if r.Error != nil {
		return r.Error
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			c.t.Fatalf("%s: %s: %v", method, r.Result, err)
		}
	}
	return nil
}

// mustCall is call that fails the test on an error.
func (c *rawMCP) mustCall(method string, params map[string]any, out any) {
	c.t.Helper()
	if e := c.call(method, params, out); e != nil {
		c.t.Fatalf("%s %v: %d %s", method, params, e.Code, e.Message)
	}
}

// task is a task as tasks/get answers it, in either era.
type task struct {
	TaskID        string                     `json:"taskId"`
	Status        string                     `json:"status"`
	StatusMessage string                     `json:"statusMessage"`
	CreatedAt     string                     `json:"createdAt"`
	LastUpdatedAt string                     `json:"lastUpdatedAt"`
	InputRequests map[string]json.RawMessage `json:"inputRequests"`
	Result        *sdk.CallToolResult        `json:"result"`
	ResultType    string                     `json:"resultType"`
}

// await polls tasks/get until the task has the status.
func (c *rawMCP) await(id, status string) task {
	c.t.Helper()
	for {
		var tk task
		c.mustCall("tasks/get", map[string]any{"taskId": id}, &tk)
		if tk.Status == status {
			return tk
		}
		if tk.Status == "completed" || tk.Status == "failed" || tk.Status == "cancelled" {
			c.t.Fatalf("task %s ended %s (%s), want %s", id, tk.Status, tk.StatusMessage, status)
		}
		select {
		case <-c.t.Context().Done():
			c.t.Fatal(c.t.Context().Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// taskDesk is a refund desk with a background queue, its keys: an
// approver desk, a caller, and another tenant's approver.
func taskDesk(t *testing.T, edit func(*options), steps ...fake.Step) *env {
	return refundDeskWith(t, func(o *options) {
		if edit != nil {
			edit(o)
		}
		prev := o.svc
		o.svc = func(c *service.Config) {
			c.Auth.Keys = append(tenantKeys(),
				service.Key{Name: "desk", Roles: []service.Role{service.RoleCaller, service.RoleApprover}, Tenant: "acme", Secret: deskKey},
				service.Key{Name: "globex-desk", Roles: []service.Role{service.RoleCaller, service.RoleApprover}, Tenant: "globex", Secret: globexDesk})
			if prev != nil {
				prev(c)
			}
			withLocalQueue(t, jobs.Config{})(c)
		}
	}, steps...)
}

// TestMCPTaskSession: a 2025-11-25 session is offered tasks (the
// capability, and taskSupport on the agents' tools); a tools/call with
// params.task answers a task at once, whose run is in the store; the
// task waits for input, tasks/result asks the person (an elicitation
// related to the task) and, approved, answers what the call would have,
// with the related task in _meta; tasks/list lists it; cancelling it once
// it ended is refused.
func TestMCPTaskSession(t *testing.T) {
	var refunds atomic.Int32
	e := taskDesk(t, func(o *options) {
		o.impls = countedRefunds(&refunds)
	}, refundSteps...)
	raw, init := newRawSession(t, e.srv.URL+service.MCPPath, deskKey)
	caps, _ := init["capabilities"].(map[string]any)
	tasks, _ := caps["tasks"].(map[string]any)
	if tasks["list"] == nil || tasks["cancel"] == nil || tasks["requests"].(map[string]any)["tools"].(map[string]any)["call"] == nil {
		t.Fatalf("capabilities %v", caps)
	}
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	raw.mustCall("tools/list", map[string]any{}, &list)
	for _, tool := range list.Tools {
		if ex, _ := tool["execution"].(map[string]any); ex["taskSupport"] != "optional" {
			t.Errorf("tool %v: want execution.taskSupport optional", tool)
		}
	}
	var created struct{ Task task }
	raw.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-1"}, "task": map[string]any{"ttl": 60000}}, &created)
	id := created.Task.TaskID
	if id == "" || created.Task.Status != "working" || created.Task.CreatedAt == "" {
		t.Fatalf("created %+v", created)
	}
	if _, err := e.runtime.Store().LoadRun(t.Context(), id); err != nil {
		t.Fatalf("the task's run: %v", err)
	}
	if tk := raw.await(id, "input_required"); !strings.Contains(tk.StatusMessage, "issue_refund") {
		t.Errorf("input_required: %+v", tk)
	}

	// The Go SDK has no tasks: tasks/result as a custom method, on a
	// session of the same key, which answers the elicitation.
	var asked []*sdk.ElicitRequest
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			asked = append(asked, req)
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
		},
	})
	if err := sdk.AddSendingCustomMethod[*taskIDParams, *sdk.CallToolResult](c, "tasks/result"); err != nil {
		t.Fatal(err)
	}
	sess, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + service.MCPPath, HTTPClient: &http.Client{Transport: keyed{deskKey}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	res, err := sdk.CallCustomMethod[*taskIDParams, *sdk.CallToolResult](t.Context(), sess, "tasks/result", &taskIDParams{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !strings.Contains(asked[0].Params.Message, "issue_refund") {
		t.Fatalf("asked %v", asked)
	}
	if rel, _ := asked[0].Params.Meta["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != id {
		t.Errorf("the elicitation's _meta %v: want the related task", asked[0].Params.Meta)
	}
	if res.IsError || res.Meta[service.MetaStatus] != "completed" || res.Content[0].(*sdk.TextContent).Text != `{"answer":"Refunded.","refunded":true}` {
		t.Fatalf("result %+v", res)
	}
	if rel, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != id {
		t.Errorf("the result's _meta %v: want the related task", res.Meta)
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("%d refunds; want 1", n)
	}
	raw.await(id, "completed")
	var listed struct {
		Tasks      []task `json:"tasks"`
		NextCursor string `json:"nextCursor"`
	}
	raw.mustCall("tasks/list", map[string]any{}, &listed)
	if len(listed.Tasks) != 1 || listed.Tasks[0].TaskID != id || listed.Tasks[0].Status != "completed" {
		t.Errorf("tasks/list %+v", listed)
	}
	if e := raw.call("tasks/cancel", map[string]any{"taskId": id}, nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "completed") {
		t.Errorf("cancelling a completed task: %+v", e)
	}
	if e := raw.call("tasks/list", map[string]any{"cursor": "nonsense"}, nil); e == nil || e.Code != -32602 {
		t.Errorf("a cursor never given: %+v", e)
	}
	// A 2025-06-18 session has no tasks.
	old := e.mcpClient(t, nil)
	if _, err := old.CallTool(t.Context(), &sdk.CallToolParams{Name: "triage", Arguments: map[string]any{"message": "hi"}}); err != nil {
		t.Errorf("a plain call in a 2025-06-18 session: %v", err)
	}
}

type taskIDParams struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
}

// TestMCPTaskAcrossReplicas is the acceptance for tasks: two
// replicas share a run store (one PostgreSQL database, each replica with
// its own pool; or one in-memory store) behind a round-robin proxy; a
// 2026-07-28 client that takes tasks calls an agent tool and gets a task;
// the task waits for a decision (an input request in tasks/get); the
// replica that started it is killed; the client approves (tasks/update)
// and collects the result (tasks/get) through the other replica. The
// refund runs once.
func TestMCPTaskAcrossReplicas(t *testing.T) {
	t.Run("store=memory", func(t *testing.T) {
		store := agents.NewInMemoryStore()
		taskAcrossReplicas(t, store, store)
	})
	t.Run("store=postgres", func(t *testing.T) {
		dsn := pgtest.NewDatabase(t) // skips without AID_TEST_DATABASE_URL
		open := func() agents.Store {
			s, err := pgstore.Open(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		a := open()
		taskAcrossReplicas(t, a, open())
	})
}

func taskAcrossReplicas(t *testing.T, storeA, storeB agents.Store) {
	var refunds atomic.Int32
	replica := func(store agents.Store) *env {
		return taskDesk(t, func(o *options) {
			o.store = store
			o.impls = countedRefunds(&refunds)
		}, refundSteps...)
	}
	a, b := replica(storeA), replica(storeB)
	rr, proxy := newRoundRobin(t, a, b)
	c := newRawStateless(t, proxy.URL+service.MCPPath, deskKey)

	var created task
	c.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-1"}}, &created)
	if created.ResultType != "task" || created.TaskID == "" || created.Status != "working" {
		t.Fatalf("created %+v", created)
	}
	tk := c.await(created.TaskID, "input_required")
	var form struct {
		Method string `json:"method"`
		Params struct {
			Message string `json:"message"`
		} `json:"params"`
	}
	var key string
	for k, v := range tk.InputRequests {
		key = k
		_ = json.Unmarshal(v, &form)
	}
	if len(tk.InputRequests) != 1 || form.Method != "elicitation/create" || !strings.Contains(form.Params.Message, "issue_refund") {
		t.Fatalf("input requests %s", tk.InputRequests)
	}
	killed := rr.kill()
	c.mustCall("tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"decision": "approve"}},
	}}, nil)
	done := c.await(created.TaskID, "completed")
	if done.Result == nil || done.Result.IsError || done.Result.Content[0].(*sdk.TextContent).Text != `{"answer":"Refunded.","refunded":true}` {
		t.Fatalf("result %+v", done.Result)
	}
	if n := refunds.Load(); n != 1 {
		t.Errorf("the refund ran %d times; want 1", n)
	}
	rr.mu.Lock()
	served := rr.served[1-killed]
	rr.mu.Unlock()
	if served == 0 {
		t.Errorf("replica %d served nothing", 1-killed)
	}
	// The same answer again decides nothing more: acknowledged, ignored.
	c.mustCall("tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{
		key: map[string]any{"action": "accept", "content": map[string]any{"decision": "approve"}},
	}}, nil)
	if n := refunds.Load(); n != 1 {
		t.Errorf("after a replayed update the refund ran %d times; want 1", n)
	}
}

// TestMCPTaskIsTheKeys: a task is its key's own. Another key's task,
// another tenant's, a task id that never was and a malformed one are all
// the same -32602 not found, in both eras; a caller key that may not
// decide is never asked and cannot decide by tasks/update; a client of
// 2026-07-28 without the extension is refused the methods.
func TestMCPTaskIsTheKeys(t *testing.T) {
	e := taskDesk(t, nil, refundSteps...)
	url := e.srv.URL + service.MCPPath
	desk := newRawStateless(t, url, deskKey)
	var created task
	desk.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-1"}}, &created)
	desk.await(created.TaskID, "input_required")

	globex := newRawStateless(t, url, globexDesk)
	frontend := newRawStateless(t, url, frontendKey)
	oldGlobex, _ := newRawSession(t, url, globexDesk)
	for _, c := range []*rawMCP{globex, frontend, oldGlobex} {
		for _, id := range []string{created.TaskID, "run_nonexistent", "", "../../etc", strings.Repeat("x", 5000)} {
			for _, m := range []string{"tasks/get", "tasks/cancel"} {
				e := c.call(m, map[string]any{"taskId": id}, nil)
				if e == nil || e.Code != -32602 || strings.Contains(e.Message, "acme") {
					t.Errorf("%s %s of %.20q: %+v", c.version, m, id, e)
				}
			}
		}
		if c.version >= "2026-07-28" {
			if e := c.call("tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{}}, nil); e == nil || e.Code != -32602 {
				t.Errorf("another key's update: %+v", e)
			}
		}
	}
	// Requests without params: no task named.
	for i, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		r := oldGlobex.post(map[string]any{"jsonrpc": "2.0", "id": 100 + i, "method": m})
		if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "taskId is required") {
			t.Errorf("%s without params: %+v %s", m, r.Error, r.Result)
		}
	}
	if r := globex.post(map[string]any{"jsonrpc": "2.0", "id": 200, "method": "tasks/update"}); r.Error == nil {
		t.Errorf("tasks/update without params: %s", r.Result)
	}
	if r := oldGlobex.post(map[string]any{"jsonrpc": "2.0", "id": 201, "method": "tasks/list"}); r.Error != nil {
		t.Errorf("tasks/list without params: %+v", r.Error)
	}
	var none struct{ Tasks []task }
	oldGlobex.mustCall("tasks/list", map[string]any{}, &none)
	if len(none.Tasks) != 0 {
		t.Errorf("another tenant lists %+v", none.Tasks)
	}

	// A caller's own task: it waits on someone else's decision, so it is
	// working for the caller, and its answer is refused.
	var mine task
	frontend.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-2"}}, &mine)
	for {
		var tk task
		frontend.mustCall("tasks/get", map[string]any{"taskId": mine.TaskID}, &tk)
		if strings.Contains(tk.StatusMessage, "may not decide") {
			if tk.Status != "working" || tk.InputRequests != nil {
				t.Errorf("the caller's paused task: %+v", tk)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec, _ := e.runtime.Store().LoadRun(t.Context(), mine.TaskID)
	callID := rec.Checkpoint.Pending.Step.ToolCalls[0].ID
	if e := frontend.call("tasks/update", map[string]any{"taskId": mine.TaskID, "inputResponses": map[string]any{
		"aid/decision:" + callID: map[string]any{"action": "accept", "content": map[string]any{"decision": "approve"}},
	}}, nil); e == nil || !strings.Contains(e.Message, service.CodeInsufficientRole) {
		t.Errorf("the caller's own approval: %+v", e)
	}
	if rec, _ := e.runtime.Store().LoadRun(t.Context(), mine.TaskID); rec.Status != agents.StatusPaused {
		t.Errorf("after a refused approval the run is %s", rec.Status)
	}

	// Without the extension, a 2026-07-28 client gets no task and no
	// tasks methods.
	plain := newRawStateless(t, url, deskKey)
	r := plain.post(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": map[string]any{"taskId": created.TaskID, "_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}}})
	if r.Error == nil || r.Error.Code != -32021 {
		t.Errorf("tasks/get without the extension: %+v %s", r.Error, r.Result)
	}
}

// TestMCPTaskCancel: tasks/cancel cancels the run; a cancelled task stays
// cancelled and its result is an error; a cancel that races the run's
// completion either cancels it or is refused because it completed, and
// the task's status never changes after.
func TestMCPTaskCancel(t *testing.T) {
	e := taskDesk(t, nil, refundSteps...)
	url := e.srv.URL + service.MCPPath
	raw, _ := newRawSession(t, url, deskKey)
	var created struct{ Task task }
	raw.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-1"}, "task": map[string]any{}}, &created)
	id := created.Task.TaskID
	raw.await(id, "input_required")
	var cancelled task
	raw.mustCall("tasks/cancel", map[string]any{"taskId": id}, &cancelled)
	if cancelled.Status != "cancelled" {
		t.Fatalf("cancelled %+v", cancelled)
	}
	if e := raw.call("tasks/result", map[string]any{"taskId": id}, nil); e == nil || !strings.Contains(e.Message, "cancelled") {
		t.Errorf("a cancelled task's result: %+v", e)
	}
	if e := raw.call("tasks/cancel", map[string]any{"taskId": id}, nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "cancelled") {
		t.Errorf("cancelling it again: %+v", e)
	}

	// params.task that is not an object.
	for _, bad := range []any{"soon", 5, []any{}, nil} {
		if e := raw.call("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "hi"}, "task": bad}, nil); e == nil || e.Code != -32602 || !strings.Contains(e.Message, "params.task") {
			t.Errorf("task %v: %+v", bad, e)
		}
	}

	// 2026-07-28: tasks/cancel acknowledges; the task is cancelled.
	c := newRawStateless(t, url, deskKey)
	var next task
	c.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-2"}}, &next)
	c.await(next.TaskID, "input_required")
	var ack map[string]any
	c.mustCall("tasks/cancel", map[string]any{"taskId": next.TaskID}, &ack)
	if ack["resultType"] != "complete" {
		t.Errorf("ack %v", ack)
	}
	var got2 task
	c.mustCall("tasks/get", map[string]any{"taskId": next.TaskID}, &got2)
	if got2.Status != "cancelled" || got2.Result != nil {
		t.Errorf("after tasks/cancel: %+v", got2)
	}

	// The race: a run that answers at once, cancelled as it runs.
	race := taskDesk(t, nil, answer(`{"answer":"Nothing to refund.","refunded":false}`))
	for range 5 {
		raw, _ := newRawSession(t, race.srv.URL+service.MCPPath, deskKey)
		var created struct{ Task task }
		raw.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "hi"}, "task": map[string]any{}}, &created)
		var got task
		ce := raw.call("tasks/cancel", map[string]any{"taskId": created.Task.TaskID}, &got)
		var after task
		raw.mustCall("tasks/get", map[string]any{"taskId": created.Task.TaskID}, &after)
		switch {
		case ce == nil && got.Status == "cancelled" && after.Status == "cancelled":
		case ce != nil && ce.Code == -32602 && strings.Contains(ce.Message, "completed") && after.Status == "completed":
		case ce == nil && got.Status == "working":
			// Asked of a run another worker drives: it stops when it sees it.
		default:
			t.Errorf("cancel: %+v %+v, then %+v", ce, got, after)
		}
	}
}

// TestMCPTaskResultEndsWithItsContext: tasks/result on a task that never
// ends (paused, and the key may not decide it) waits until the client
// gives up, and then ends; the task is untouched.
func TestMCPTaskResultEndsWithItsContext(t *testing.T) {
	e := taskDesk(t, nil, refundSteps...)
	url := e.srv.URL + service.MCPPath
	raw, _ := newRawSession(t, url, frontendKey)
	var created struct{ Task task }
	raw.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "refund AB-1"}, "task": map[string]any{}}, &created)
	id := created.Task.TaskID
	for {
		rec, err := e.runtime.Store().LoadRun(t.Context(), id)
		if err == nil && rec.Status == agents.StatusPaused {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	if err := sdk.AddSendingCustomMethod[*taskIDParams, *sdk.CallToolResult](c, "tasks/result"); err != nil {
		t.Fatal(err)
	}
	sess, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: keyed{frontendKey}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	var got error
	go func() {
		defer wg.Done()
		_, got = sdk.CallCustomMethod[*taskIDParams, *sdk.CallToolResult](ctx, sess, "tasks/result", &taskIDParams{TaskID: id})
	}()
	for {
		if _, ok := e.logs.LogLine("MCP task result awaited"); ok {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !errors.Is(got, context.Canceled) {
		t.Errorf("tasks/result after the client gave up: %v", got)
	}
	var tk task
	raw.mustCall("tasks/get", map[string]any{"taskId": id}, &tk)
	if tk.Status != "working" || !strings.Contains(tk.StatusMessage, "may not decide") {
		t.Errorf("the task after: %+v", tk)
	}
}

// TestMCPNoTasksWithoutAQueue: a service without a background queue
// offers no tasks: no capability, no taskSupport, a tools/call with
// params.task answers as a plain call (as the protocol asks of a server
// that declared none), and the tasks methods are not found.
func TestMCPNoTasksWithoutAQueue(t *testing.T) {
	e := refundDesk(t, answer(`{"answer":"Nothing to refund.","refunded":false}`))
	raw, init := newRawSession(t, e.srv.URL+service.MCPPath, token)
	if caps, _ := init["capabilities"].(map[string]any); caps["tasks"] != nil {
		t.Errorf("capabilities %v", caps)
	}
	var list struct {
		Tools []map[string]any `json:"tools"`
	}
	raw.mustCall("tools/list", map[string]any{}, &list)
	if list.Tools[0]["execution"] != nil {
		t.Errorf("tool %v", list.Tools[0])
	}
	var res sdk.CallToolResult
	raw.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "hi"}, "task": map[string]any{}}, &res)
	if res.IsError || res.Meta[service.MetaStatus] != "completed" {
		t.Errorf("a call with params.task: %+v", res)
	}
	if e := raw.call("tasks/get", map[string]any{"taskId": res.Meta[service.MetaRunID]}, nil); e == nil || e.Code != -32601 {
		t.Errorf("tasks/get: %+v", e)
	}
}

// TestMCPTaskListPages: tasks/list pages the key's tasks, newest first,
// with an opaque cursor, and no task twice.
func TestMCPTaskListPages(t *testing.T) {
	e := taskDesk(t, nil, answer(`{"answer":"Nothing to refund.","refunded":false}`))
	raw, _ := newRawSession(t, e.srv.URL+service.MCPPath, deskKey)
	made := map[string]bool{}
	for range agents.DefaultListRuns + 1 {
		var created struct{ Task task }
		raw.mustCall("tools/call", map[string]any{"name": "billing", "arguments": map[string]any{"message": "hi"}, "task": map[string]any{}}, &created)
		made[created.Task.TaskID] = true
	}
	seen := map[string]bool{}
	var pages []int
	for cursor := ""; ; {
		var page struct {
			Tasks      []task `json:"tasks"`
			NextCursor string `json:"nextCursor"`
		}
		raw.mustCall("tasks/list", map[string]any{"cursor": cursor}, &page)
		pages = append(pages, len(page.Tasks))
		for _, tk := range page.Tasks {
			if seen[tk.TaskID] || !made[tk.TaskID] {
				t.Errorf("task %s listed twice or never made", tk.TaskID)
			}
			seen[tk.TaskID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != len(made) || len(pages) != 2 {
		t.Errorf("pages %v, %d of %d tasks listed", pages, len(seen), len(made))
	}
}
