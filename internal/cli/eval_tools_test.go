package cli_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// ordersServer is an MCP server with a tool that reads (lookup_order,
// annotated readOnlyHint) and two that write (refund, declared write in
// the app; cancel_order, left to the server, which gives no
// readOnlyHint), each counting the calls that reach it.
type ordersServer struct {
	url                     string
	lookups, refunds, voids atomic.Int64
}

func newOrdersServer(t *testing.T) *ordersServer {
	t.Helper()
	s := &ordersServer{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "orders", Version: "1"}, nil)
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "lookup_order", Description: "Look an order up.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, orderIn) (*sdk.CallToolResult, any, error) {
			s.lookups.Add(1)
			return text(`{"order":"A-1","paid":20.00}`), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "refund", Description: "Refund an order."},
		func(context.Context, *sdk.CallToolRequest, orderIn) (*sdk.CallToolResult, any, error) {
			s.refunds.Add(1)
			return text("REAL REFUND ISSUED"), nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "cancel_order", Description: "Cancel an order."},
		func(context.Context, *sdk.CallToolRequest, orderIn) (*sdk.CallToolResult, any, error) {
			s.voids.Add(1)
			return text("REAL CANCELLATION"), nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	s.url = ts.URL
	return s
}

type orderIn struct {
	Order string `json:"order" jsonschema:"the order id"`
}

// orderOpsApp writes the order-ops style application: an agent that looks
// an order up and refunds it through the MCP server, with an eval whose
// tools block is evalTools, and returns its path.
func orderOpsApp(t *testing.T, url, evalTools string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"script.json": `{"agents": {"ops": [
  {"toolCalls": [{"name": "lookup_order", "arguments": {"order": "A-1"}}]},
  {"toolCalls": [{"name": "refund", "arguments": {"order": "A-1"}}]},
  {"answer": true, "text": "Refunded 20.00 USD for order A-1."}
]}}`,
		"cases.jsonl": `{"id": "one", "input": "Refund order A-1", "expected": "refunded 20.00"}
{"id": "two", "input": "Please refund A-1", "expected": "20.00 USD", "tools": [{"tool": "refund", "args": {"order": "A-1"}, "result": {"refund": "R-CASE"}}]}
`,
		"app.cue": `name: "order-ops"
version: "0.1.0"
providers: fake: {kind: "fake", seed: 0, script: "script.json"}
models: "fake-2024-01-01": {provider: "fake", contextWindow: 4096, maxOutputTokens: 256, cost: inputPer1kUSD: 0, capabilities: ["tools"]}
aliases: m: "fake-2024-01-01"
mcpServers: orders: {transport: "http", url: "` + url + `"}
tools: {
	lookup_order: implementation: {kind: "mcp", server: "orders"}
	refund: {implementation: {kind: "mcp", server: "orders"}, effects: "write"}
	cancel_order: implementation: {kind: "mcp", server: "orders"}
}
agents: ops: {model: "m", instructions: "Refund orders.", tools: ["lookup_order", "refund", "cancel_order"]}
evals: refunds: {
	dataset: "cases.jsonl"
	target: agent: "ops"
	runs: 2
	metrics: ["normalized_contains"]
` + evalTools + `
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "app.cue")
}

// TestEvalStubsMCPWriteTool is the order-ops trial: aidgen eval of an agent
// whose MCP server has a tool that writes makes no call of it (the stub
// stops it before the server), calls the tool that reads, and the JSON
// report lists every call of every case with its mode — a case's own
// answer first, the eval's stub otherwise.
func TestEvalStubsMCPWriteTool(t *testing.T) {
	srv := newOrdersServer(t)
	path := orderOpsApp(t, srv.url, `	tools: {
		refund: {mode: "stub", result: {refund: "R-STUB"}}
		cancel_order: mode: "stub"
	}`)
	report := filepath.Join(t.TempDir(), "report.json")
	code, out, errOut := run(t, "eval", "--progress", "none", "-v", "--json", report, path)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if n := srv.refunds.Load(); n != 0 {
		t.Errorf("the eval reached the write tool's server %d times, want 0", n)
	}
	if n := srv.lookups.Load(); n != 4 {
		t.Errorf("the read tool was called %d times, want 4 (2 cases × 2 runs, live)", n)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Evals []struct {
			CaseResults []struct {
				ID   string `json:"id"`
				Runs []struct {
					Answer    string `json:"answer"`
					ToolCalls []struct {
						Tool, Mode, Args, Result, Error string
					} `json:"toolCalls"`
				} `json:"runs"`
			} `json:"caseResults"`
		} `json:"evals"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Evals) != 1 || len(r.Evals[0].CaseResults) != 2 {
		t.Fatalf("report has %+v, want 1 eval of 2 cases", r.Evals)
	}
	want := map[string]string{"one": `{"refund":"R-STUB"}`, "two": `{"refund":"R-CASE"}`}
	for _, c := range r.Evals[0].CaseResults {
		if len(c.Runs) != 2 {
			t.Fatalf("case %s has %d runs, want 2", c.ID, len(c.Runs))
		}
		for k, run := range c.Runs {
			if len(run.ToolCalls) != 2 {
				t.Fatalf("case %s run %d lists %d tool calls, want 2: %+v", c.ID, k, len(run.ToolCalls), run.ToolCalls)
			}
			look, ref := run.ToolCalls[0], run.ToolCalls[1]
			if look.Tool != "lookup_order" || look.Mode != "live" || look.Result != `{"order":"A-1","paid":20.00}` {
				t.Errorf("case %s run %d: first call %+v, want lookup_order live with the server's answer", c.ID, k, look)
			}
			if ref.Tool != "refund" || ref.Mode != "stub" || ref.Args != `{"order":"A-1"}` || ref.Result != want[c.ID] {
				t.Errorf("case %s run %d: second call %+v, want refund stub answering %s", c.ID, k, ref, want[c.ID])
			}
			if run.Answer != "Refunded 20.00 USD for order A-1." {
				t.Errorf("case %s run %d: answer %q", c.ID, k, run.Answer)
			}
		}
	}
	for _, line := range []string{
		`  two: expected "20.00 USD"`,
		`      tool refund [stub] {"order":"A-1"} → "{\"refund\":\"R-CASE\"}"`,
		`      tool lookup_order [live] {"order":"A-1"}`,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("-v output lacks %q:\n%s", line, out)
		}
	}
}

// TestEvalRefusesUnstubbedWriteTool: an eval that says nothing of a tool
// that writes fails vet at the target, saying how to declare its stub;
// one that writes by the server's word (no effects declared, no
// readOnlyHint) is refused when the eval starts, before any call.
func TestEvalRefusesUnstubbedWriteTool(t *testing.T) {
	srv := newOrdersServer(t)
	path := orderOpsApp(t, srv.url, `	tools: cancel_order: mode: "stub"`)
	code, _, errOut := run(t, "vet", path)
	for _, want := range []string{
		"app.cue:15:17: evals.refunds.target.agent: target agent \"ops\" can call tool \"refund\", which writes",
		`declare tools: refund: {mode: "stub", fixture: "<rows>.json"} in eval "refunds"`,
		`mode: "live" to let the eval call it`,
	} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("vet: exit %d, stderr lacks %q:\n%s", code, want, errOut)
		}
	}

	path = orderOpsApp(t, srv.url, `	tools: refund: {mode: "stub", result: "ok"}`)
	if code, _, errOut := run(t, "vet", path); code != 0 {
		t.Fatalf("vet: exit %d: %s", code, errOut)
	}
	code, out, errOut := run(t, "eval", "--progress", "none", path)
	if code != 2 || !strings.Contains(errOut, `eval "refunds": target agent "ops" can call tool "cancel_order", which writes`) {
		t.Errorf("eval: exit %d, want 2 naming cancel_order:\n%s%s", code, out, errOut)
	}
	if n := srv.voids.Load() + srv.refunds.Load() + srv.lookups.Load(); n != 0 {
		t.Errorf("a refused eval made %d tool calls", n)
	}
}
