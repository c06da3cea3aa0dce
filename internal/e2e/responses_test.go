package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// nodeResponses is what openai/responses.mjs prints.
type nodeResponses struct {
	Plain struct {
		Status string `json:"status"`
		Text   string `json:"text"`
		Usage  struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	} `json:"plain"`
	Streamed struct {
		Types  []string `json:"types"`
		Text   string   `json:"text"`
		Status string   `json:"status"`
		Seq    []int    `json:"seq"`
	} `json:"streamed"`
	RoundTrip struct {
		FirstStatus  string   `json:"firstStatus"`
		Ran          []string `json:"ran"`
		ServerCalls  []string `json:"serverCalls"`
		SecondStatus string   `json:"secondStatus"`
		Text         string   `json:"text"`
		Previous     string   `json:"previous"`
		FirstID      string   `json:"firstID"`
	} `json:"roundTrip"`
	Paused struct {
		Status string `json:"status"`
		Last   struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"last"`
	} `json:"paused"`
}

// TestNodeClientResponses drives the built support desk with the official
// OpenAI Node client's responses.create (pinned in openai/package.json):
// plain, streamed, a client function tool round trip through the
// upstream-served concierge continued with previous_response_id, and the
// refund that pauses for approval.
func TestNodeClientResponses(t *testing.T) {
	dir := servicetest.NPM(t, "openai", "the official OpenAI Node client")
	bin, work := build(t, desk())
	p := start(t, bin, work, "AID_E2E_TOKEN="+serviceToken, "AID_E2E_UPSTREAM_KEY="+upstreamKey)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "responses.mjs"), p.base+"/v1", serviceToken, clientTool, clientToolResult)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("node responses.mjs: %v\n%s%s", err, out.String(), errOut.String())
	}
	if _, problems := upstream.stats(); len(problems) > 0 {
		t.Fatalf("the upstream refused requests: %q", problems)
	}
	var r nodeResponses
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("client output %q: %v", out.String(), err)
	}
	if r.Plain.Status != "completed" || !strings.Contains(r.Plain.Text, "Reset your password") || r.Plain.Usage.TotalTokens == 0 {
		t.Errorf("plain %+v", r.Plain)
	}
	s := r.Streamed
	if s.Status != "completed" || !strings.Contains(s.Text, "Reset your password") || len(s.Types) < 4 ||
		s.Types[0] != "response.created" || s.Types[1] != "response.in_progress" || s.Types[len(s.Types)-1] != "response.completed" {
		t.Errorf("streamed %+v", s)
	}
	for i, n := range s.Seq {
		if n != i {
			t.Fatalf("sequence numbers %v", s.Seq)
		}
	}
	rt := r.RoundTrip
	if rt.FirstStatus != "completed" || !slices.Equal(rt.Ran, []string{clientTool}) || len(rt.ServerCalls) != 2 ||
		rt.SecondStatus != "completed" || rt.Text != upstreamAnswer || rt.Previous != rt.FirstID {
		t.Errorf("round trip %+v", rt)
	}
	if r.Paused.Status != "incomplete" || r.Paused.Last.Type != "mcp_approval_request" || r.Paused.Last.Name != "issue_refund" {
		t.Errorf("paused %+v", r.Paused)
	}
}

// TestGoClientResponses drives the built support desk with openai-go's
// Responses client: a response, the same streamed and accumulated, and
// GET of it.
func TestGoClientResponses(t *testing.T) {
	bin, work := build(t, desk())
	p := start(t, bin, work, "AID_E2E_TOKEN="+serviceToken, "AID_E2E_UPSTREAM_KEY="+upstreamKey)
	client := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey(serviceToken), option.WithMaxRetries(0))
	params := responses.ResponseNewParams{Model: "tech", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("I cannot log in")}, User: openai.String("customer-1")}
	res, err := client.Responses.New(withTimeout(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" || !strings.Contains(res.OutputText(), "Reset your password") {
		t.Fatalf("response %s %q", res.Status, res.OutputText())
	}
	stream := client.Responses.NewStreaming(withTimeout(t), params)
	var text string
	var done responses.Response
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if done.Status != "completed" || done.OutputText() != text || !strings.Contains(text, "Reset your password") {
		t.Errorf("streamed %q, completed %s %q", text, done.Status, done.OutputText())
	}
	got, err := client.Responses.Get(withTimeout(t), done.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != done.OutputText() {
		t.Errorf("GET %v: %v", got, err)
	}
}
