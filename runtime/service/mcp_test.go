package service_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/service"
)

// bearer adds the service's token to every request.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	return b.base.RoundTrip(r)
}

// mcpClient connects the go-sdk client to the service's /mcp in a
// 2025-06-18 session, with the token, answering elicitations with elicit
// when it is set.
func (e *env) mcpClient(t *testing.T, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)) *sdk.ClientSession {
	t.Helper()
	opts := &sdk.ClientOptions{ElicitationHandler: elicit}
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, opts)
	hc := &http.Client{Transport: bearer{e.srv.Client().Transport}}
	sess, err := c.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.srv.URL + service.MCPPath, HTTPClient: hc}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-06-18"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess
}

// refundDesk is a service whose billing agent answers with structured
// output, and whose refunds need approval.
// countedRefunds is the desks' issue_refund, counting its calls in n.
func countedRefunds(n *atomic.Int32) map[string]agents.Implementation {
	return map[string]agents.Implementation{"issue_refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
		n.Add(1)
		return `{"refund_id":"RF-1"}`, nil
	})}
}

func refundDesk(t *testing.T, steps ...fake.Step) *env {
	return refundDeskWith(t, nil, steps...)
}

// refundDeskWith is refundDesk with its options edited by edit.
func refundDeskWith(t *testing.T, edit func(*options), steps ...fake.Step) *env {
	refund := agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return `{"refund_id":"RF-1"}`, nil })
	o := options{
		fake: fake.Config{Agents: map[string][]fake.Step{"billing": steps}},
		agents: []agents.Agent{
			{Name: "billing", Description: "Refunds orders.", Model: "large", Instructions: "Refund.", Tools: []string{"issue_refund"},
				Output: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"},"refunded":{"type":"boolean"}},"required":["answer","refunded"]}`)},
			{Name: "triage", Model: "large", Instructions: "Answer."},
		},
		tools: []agents.Tool{{Name: "issue_refund", Description: "Refund.", Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways,
			Input: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)}},
		impls: map[string]agents.Implementation{"issue_refund": refund},
	}
	if edit != nil {
		edit(&o)
	}
	return newEnv(t, o)
}

var refundSteps = []fake.Step{
	calls(call("c1", "issue_refund", `{"order_id":"AB-1"}`)),
	answer(`{"answer":"Refunded.","refunded":true}`),
}

func TestMCPListAndCall(t *testing.T) {
	e := refundDesk(t, answer(`{"answer":"Nothing to refund.","refunded":false}`))
	sess := e.mcpClient(t, nil)
	var names []string
	var billing *sdk.Tool
	for tool, err := range sess.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Name == "billing" {
			billing = tool
		}
	}
	if strings.Join(names, ",") != "billing,triage" || billing == nil {
		t.Fatalf("tools %q", names)
	}
	if !strings.HasPrefix(billing.Description, "Refunds orders.") || billing.Meta[service.MetaOutputSchema] == nil {
		t.Errorf("billing: %+v", billing)
	}
	res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-1?", "user_id": "u1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*sdk.TextContent).Text != `{"answer":"Nothing to refund.","refunded":false}` || res.Meta[service.MetaStatus] != "completed" || res.Meta[service.MetaRunID] == "" {
		t.Errorf("result %+v", res)
	}
	if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"answer":"Nothing to refund.","refunded":false}` {
		t.Errorf("structured content %s", got)
	}
	// Bad input is a tool error with the API's code.
	res, err = sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if aerr, _ := res.Meta[service.MetaError].(map[string]any); !res.IsError || aerr["code"] != service.CodeInvalidJSON || aerr["param"] != "text" || !strings.HasPrefix(res.Content[0].(*sdk.TextContent).Text, service.CodeInvalidJSON+": ") {
		t.Errorf("bad input: %+v, %v", res, err)
	}
	// A field of the wrong type is named in the client's terms, never in
	// Go's, as the HTTP API names it.
	res, err = sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*sdk.TextContent).Text; !res.IsError || !strings.Contains(text, "message must be a string, not a number") || strings.Contains(text, "Go") || strings.Contains(text, "mcpInput") {
		t.Errorf("a message of the wrong type: %q", text)
	}
	// An empty message is refused with the param it lacks.
	res, err = sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": " "}})
	if err != nil {
		t.Fatal(err)
	}
	if aerr, _ := res.Meta[service.MetaError].(map[string]any); !res.IsError || aerr["code"] != service.CodeInvalidRequest || aerr["param"] != "message" {
		t.Errorf("an empty message: %+v", res)
	}
}

// TestMCPAuth: /mcp is behind the service's bearer auth.
func TestMCPAuth(t *testing.T) {
	e := refundDesk(t, refundSteps...)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, _ := http.NewRequest("POST", e.srv.URL+service.MCPPath, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %d", resp.StatusCode)
	}
}

// TestMCPPausedWithoutElicitation: a client that cannot answer
// elicitations gets the pending call and the run id, and the runs API
// resumes the run.
func TestMCPPausedWithoutElicitation(t *testing.T) {
	e := refundDesk(t, refundSteps...)
	sess := e.mcpClient(t, nil)
	res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-1"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Meta[service.MetaRunID].(string)
	pending, _ := res.Meta[service.MetaPending].(map[string]any)
	text := res.Content[0].(*sdk.TextContent).Text
	if res.IsError || res.Meta[service.MetaStatus] != "paused" || id == "" || pending["tool"] != "issue_refund" || !strings.Contains(text, "POST /v1/runs/"+id+"/resume") {
		t.Fatalf("paused result %+v", res)
	}
	status, _, body := e.do(t, "POST", "/v1/runs/"+id+"/resume", `{"action":"approve"}`)
	if status != 200 || !strings.Contains(string(body), `"status":"completed"`) {
		t.Errorf("resume: %d %s", status, body)
	}
}

// TestMCPElicitation: a client that answers elicitations is asked to
// decide the paused call, and the call returns the resumed run's answer;
// a rejection reaches the model, a cancel leaves the run paused.
func TestMCPElicitation(t *testing.T) {
	for _, tt := range []struct {
		name, action, decision, status string
		observation                    string
	}{
		{"approve", "accept", "approve", "completed", `{"refund_id":"RF-1"}`},
		{"reject", "accept", "reject", "completed", "error: a human rejected this call: too late"},
		{"cancel", "cancel", "", "paused", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := refundDesk(t, refundSteps...)
			var mu sync.Mutex
			var asked []string
			sess := e.mcpClient(t, func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				mu.Lock()
				asked = append(asked, req.Params.Message)
				mu.Unlock()
				return &sdk.ElicitResult{Action: tt.action, Content: map[string]any{"decision": tt.decision, "feedback": "too late"}}, nil
			})
			res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "billing", Arguments: map[string]any{"message": "refund AB-1"}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Meta[service.MetaStatus] != tt.status || res.IsError {
				t.Fatalf("result %+v", res)
			}
			if len(asked) != 1 || !strings.Contains(asked[0], `billing wants to call issue_refund with {"order_id":"AB-1"}`) {
				t.Errorf("asked %q", asked)
			}
			if tt.observation == "" {
				return
			}
			rec, err := e.runtime.Store().LoadRun(t.Context(), res.Meta[service.MetaRunID].(string))
			if err != nil {
				t.Fatal(err)
			}
			if got := rec.Checkpoint.Steps[0].ToolCalls[0].Observation; got != tt.observation {
				t.Errorf("the call's observation %q, want %q", got, tt.observation)
			}
		})
	}
}

// TestMCPBudget: a budget refusal is a tool error with the HTTP API's
// code.
func TestMCPBudget(t *testing.T) {
	e := newEnv(t, options{
		fake:    fake.Config{Agents: map[string][]fake.Step{"triage": {answer("hi")}}},
		agents:  []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Budget: "tiny"}},
		budgets: []gateway.Budget{{Name: "tiny", MaxUSD: 0.000001, Scope: gateway.ScopeRun}},
	})
	sess := e.mcpClient(t, nil)
	res, err := sess.CallTool(t.Context(), &sdk.CallToolParams{Name: "triage", Arguments: map[string]any{"message": "hello"}})
	if err != nil {
		t.Fatal(err)
	}
	aerr, _ := res.Meta[service.MetaError].(map[string]any)
	if !res.IsError || aerr["code"] != service.CodeBudgetExceeded || !strings.HasPrefix(res.Content[0].(*sdk.TextContent).Text, service.CodeBudgetExceeded+": ") {
		t.Errorf("result %+v", res)
	}
}
