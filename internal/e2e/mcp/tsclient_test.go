package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/serve"
)

const serviceToken = "tok-e2e-mcp"

// serveDesk serves examples/support-desk, behind a bearer token, in this
// process as a generated service does (serve.Run), and returns its /mcp
// URL.
func serveDesk(t *testing.T) string {
	t.Helper()
	doc, err := ir.Load(filepath.Join("..", "..", "..", "examples", "support-desk", "app.cue"))
	if err != nil {
		t.Fatal(err)
	}
	desc, err := lower.Document(doc)
	if err != nil {
		t.Fatal(err)
	}
	desc.Service.Auth = app.Auth{Kind: "bearer", TokenEnv: "AID_E2E_TOKEN"}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &servicetest.Buffer{}
	done := make(chan int, 1)
	env := map[string]string{"AID_E2E_TOKEN": serviceToken}
	go func() {
		done <- serve.Run(ctx, desc, serve.Options{}, serve.Process{
			Args:      []string{"-listen", "127.0.0.1:0"},
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
			Stderr:    logs,
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
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m, ok := logs.LogLine("serving"); ok {
			return "http://" + m["addr"].(string) + "/mcp"
		}
		select {
		case code := <-done:
			t.Fatalf("the service stopped with %d:\n%s", code, logs)
		default:
		}
	}
	t.Fatalf("the service is not serving:\n%s", logs)
	return ""
}

// tsResult is what client.mjs prints.
type tsResult struct {
	Asked []struct {
		Message string         `json:"message"`
		Meta    map[string]any `json:"meta"`
	} `json:"asked"`
	// With "task": the server's capabilities, the tools' execution, what
	// the task's stream yielded, and the tasks listed after.
	Capabilities map[string]any   `json:"capabilities"`
	Execution    []map[string]any `json:"execution"`
	Stream       []struct {
		Type    string         `json:"type"`
		Task    map[string]any `json:"task"`
		Result  *tsCall        `json:"result"`
		Message string         `json:"message"`
	} `json:"stream"`
	Tasks []map[string]any `json:"tasks"`
	Tools []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	Tech, Refund, Bad tsCall
}

// tsCall is a tool's result.
type tsCall struct {
	IsError bool `json:"isError"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	Meta              map[string]any `json:"_meta"`
}

// runClient runs client.mjs against url and decodes what it saw.
func runClient(t *testing.T, url string, args ...string) tsResult {
	t.Helper()
	dir := modules(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, "client.mjs"), url, serviceToken}, args...)...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs: %v\n%s\n%s", err, out.String(), errb.String())
	}
	var r tsResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("client.mjs printed %q: %v", out.String(), err)
	}
	return r
}

// TestTypeScriptClient: the official TypeScript client lists the support
// desk's agents as tools at /mcp, calls one that answers, and one whose run
// pauses for approval: without elicitation it gets the pending call and
// the run id, which the runs API resumes; with elicitation it is asked and
// its approval completes the run in the same call.
func TestTypeScriptClient(t *testing.T) {
	url := serveDesk(t)

	t.Run("without elicitation", func(t *testing.T) {
		r := runClient(t, url)
		var names []string
		for _, tool := range r.Tools {
			names = append(names, tool.Name)
			if tool.InputSchema["required"].([]any)[0] != "message" {
				t.Errorf("%s's input schema: %v", tool.Name, tool.InputSchema)
			}
		}
		if strings.Join(names, ",") != "billing,researcher,tech,triage" {
			t.Errorf("tools %q", names)
		}
		if r.Tech.IsError || !strings.Contains(r.Tech.Content[0].Text, "Reset your password") || r.Tech.Meta["aid/status"] != "completed" {
			t.Errorf("tech: %+v", r.Tech)
		}
		pending, _ := r.Refund.Meta["aid/pending"].(map[string]any)
		runID, _ := r.Refund.Meta["aid/run_id"].(string)
		if r.Refund.IsError || r.Refund.Meta["aid/status"] != "paused" || pending["tool"] != "issue_refund" || runID == "" ||
			!strings.Contains(r.Refund.Content[0].Text, "POST /v1/runs/"+runID+"/resume") {
			t.Fatalf("refund: %+v", r.Refund)
		}
		if aerr, _ := r.Bad.Meta["aid/error"].(map[string]any); !r.Bad.IsError || aerr["code"] != "invalid_json" || aerr["param"] != "text" {
			t.Errorf("bad input: %+v", r.Bad)
		}
		base := strings.TrimSuffix(url, "/mcp")
		status, _, body := servicetest.Do(t, http.DefaultClient, "POST", base+"/v1/runs/"+runID+"/resume", serviceToken, strings.NewReader(`{"action":"approve"}`))
		if status != 200 || !strings.Contains(string(body), `"status":"completed"`) || !strings.Contains(string(body), `refunded`) {
			t.Errorf("resume: %d %s", status, body)
		}
	})

	t.Run("with elicitation", func(t *testing.T) {
		r := runClient(t, url, "elicit")
		if len(r.Asked) != 1 || !strings.Contains(r.Asked[0].Message, "billing wants to call issue_refund") {
			t.Errorf("asked %q", r.Asked)
		}
		if r.Refund.IsError || r.Refund.Meta["aid/status"] != "completed" || r.Refund.StructuredContent["refunded"] != true {
			t.Errorf("refund: %+v", r.Refund)
		}
	})

	// The client (2025-11-25) is offered tasks, calls the agent as a
	// task, polls it, waits in tasks/result when it needs input, is asked
	// there (the elicitation names the task), and gets the tool's result;
	// its task is listed, completed.
	t.Run("as a task", func(t *testing.T) {
		r := runClient(t, url, "task")
		tasks, _ := r.Capabilities["tasks"].(map[string]any)
		if tasks["list"] == nil || tasks["cancel"] == nil {
			t.Errorf("capabilities %v", r.Capabilities)
		}
		for _, ex := range r.Execution {
			if ex["taskSupport"] != "optional" {
				t.Errorf("execution %v", r.Execution)
			}
		}
		var kinds []string
		var id string
		for _, m := range r.Stream {
			kinds = append(kinds, m.Type)
			if m.Type == "taskCreated" {
				id, _ = m.Task["taskId"].(string)
			}
		}
		if len(r.Stream) < 3 || id == "" || r.Stream[0].Type != "taskCreated" || kinds[len(kinds)-1] != "result" || !slices.Contains(kinds, "taskStatus") {
			t.Fatalf("stream %q: %+v", kinds, r.Stream)
		}
		if len(r.Asked) != 1 || !strings.Contains(r.Asked[0].Message, "issue_refund") {
			t.Fatalf("asked %+v", r.Asked)
		}
		if rel, _ := r.Asked[0].Meta["io.modelcontextprotocol/related-task"].(map[string]any); rel["taskId"] != id {
			t.Errorf("the elicitation's _meta %v; want the task %s", r.Asked[0].Meta, id)
		}
		res := r.Stream[len(r.Stream)-1].Result
		if res == nil || res.IsError || res.Meta["aid/status"] != "completed" || res.Meta["aid/run_id"] != id || res.StructuredContent["refunded"] != true {
			t.Errorf("result %+v", res)
		}
		if len(r.Tasks) == 0 || r.Tasks[0]["taskId"] != id || r.Tasks[0]["status"] != "completed" {
			t.Errorf("tasks %v", r.Tasks)
		}
	})
}
