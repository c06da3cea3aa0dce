package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/servicetest"
)

// nodeResult is what openai/client.mjs prints.
type nodeResult struct {
	Ran    []string `json:"ran"`
	Answer struct {
		FinishReason string            `json:"finish_reason"`
		Content      string            `json:"content"`
		ToolCalls    []json.RawMessage `json:"tool_calls"`
		Aid          struct {
			RunID   string `json:"run_id"`
			Pending struct {
				Tool      string `json:"tool"`
				ResumeURL string `json:"resume_url"`
			} `json:"pending"`
		} `json:"aid"`
	} `json:"answer"`
	Streamed struct {
		Content      string `json:"content"`
		FinishReason string `json:"finish_reason"`
		ToolCalls    int    `json:"tool_calls"`
		Aid          struct {
			Pending struct {
				Tool string `json:"tool"`
			} `json:"pending"`
		} `json:"aid"`
	} `json:"streamed"`
}

// TestStockNodeClientLoop drives the generated support desk with the
// official OpenAI Node client (pinned in openai/package.json) and the loop
// every client writes: while the answer asks for tool calls, run them and
// send their results. The refund pauses for a person's approval; the loop
// must not take it for a call of its own: it ends at once with a message
// naming the tool and the resume URL, finish_reason stop and the pending
// call in aid, streamed or not.
func TestStockNodeClientLoop(t *testing.T) {
	dir := servicetest.NPM(t, "openai", "the official OpenAI Node client")
	bin, work := build(t, desk())
	p := start(t, bin, work, "AID_E2E_TOKEN="+serviceToken, "AID_E2E_UPSTREAM_KEY="+upstreamKey)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "client.mjs"), p.base+"/v1", serviceToken)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\n%s%s", err, out.String(), errOut.String())
	}
	var r nodeResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("client output %q: %v", out.String(), err)
	}
	a := r.Answer
	if len(r.Ran) != 0 || a.FinishReason != "stop" || len(a.ToolCalls) != 0 || a.Aid.Pending.Tool != "issue_refund" ||
		!strings.Contains(a.Content, "tool issue_refund waits") || !strings.Contains(a.Content, "POST "+a.Aid.Pending.ResumeURL) || a.Aid.Pending.ResumeURL != "/v1/runs/"+a.Aid.RunID+"/resume" {
		t.Errorf("the client ran %v; answer %+v", r.Ran, a)
	}
	s := r.Streamed
	if s.FinishReason != "stop" || s.ToolCalls != 0 || s.Aid.Pending.Tool != "issue_refund" || !strings.Contains(s.Content, "tool issue_refund waits") {
		t.Errorf("streamed %+v", s)
	}
}
