package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
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
	Asked []string `json:"asked"`
	Tools []struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"inputSchema"`
	} `json:"tools"`
	Tech, Refund, Bad struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent map[string]any `json:"structuredContent"`
		Meta              map[string]any `json:"_meta"`
	}
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
		if len(r.Asked) != 1 || !strings.Contains(r.Asked[0], "billing wants to call issue_refund") {
			t.Errorf("asked %q", r.Asked)
		}
		if r.Refund.IsError || r.Refund.Meta["aid/status"] != "completed" || r.Refund.StructuredContent["refunded"] != true {
			t.Errorf("refund: %+v", r.Refund)
		}
	})
}
