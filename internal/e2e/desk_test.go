package e2e_test

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// serviceToken is the bearer token the desk variant's service accepts
// (service.auth reads it from AID_E2E_TOKEN).
const serviceToken = "tok-e2e-desk"

// desk is examples/support-desk behind a bearer token, with a concierge
// served by the test's OpenAI-compatible upstream.
func desk() variant {
	return variant{name: "desk", overlay: "desk.cue", replace: map[string]string{"@UPSTREAM@": upstream.URL}}
}

// TestSupportDesk builds support-desk with aidgen build, compiles it, runs
// the binary, and drives it as a client would: the refund flow pauses for
// approval and is resumed, a handoff and a delegate are in the stored run, a
// streamed answer, a retrieval-backed answer from the upstream model with its
// cost in the ledger, retriever search, auth refusals, an oversized body, and
// a clean stop on SIGTERM.
func TestSupportDesk(t *testing.T) {
	bin, dir := build(t, desk())
	fileExists(t, filepath.Join("..", "..", "examples", "support-desk", "docs", "refunds.md"))
	p := start(t, bin, dir, "AID_E2E_TOKEN="+serviceToken, "AID_E2E_UPSTREAM_KEY="+upstreamKey)
	client := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey(serviceToken), option.WithMaxRetries(0))

	t.Run("refund pauses for approval and resumes", func(t *testing.T) {
		var resp *http.Response
		cc, err := client.Chat.Completions.New(withTimeout(t), openai.ChatCompletionNewParams{
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("I want a refund for order AB-123456")},
			User:     openai.String("customer-1"),
		}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		runID := resp.Header.Get("X-Aid-Run-Id")
		if runID == "" {
			t.Fatal("no X-Aid-Run-Id header")
		}
		ch := cc.Choices[0]
		// A pause is a message that says what waits and how to approve
		// it, not a call the client would run.
		if ch.FinishReason != "stop" || len(ch.Message.ToolCalls) != 0 || !strings.Contains(ch.Message.Content, "tool issue_refund waits") ||
			!strings.Contains(ch.Message.Content, "POST /v1/runs/"+runID+"/resume") {
			t.Fatalf("paused answer: finish %q, tool calls %+v, content %q", ch.FinishReason, ch.Message.ToolCalls, ch.Message.Content)
		}
		if cc.Model != "billing" {
			t.Errorf("model = %q, want billing (the handoff's target)", cc.Model)
		}

		var rec runRecord
		p.doJSON(t, "GET", "/v1/runs/"+runID, serviceToken, "", http.StatusOK, &rec)
		if rec.Status != "paused" || rec.Pending == nil || rec.Pending.Tool != "issue_refund" {
			t.Fatalf("stored run: status %q pending %+v", rec.Status, rec.Pending)
		}
		// The handoff: triage transferred, and the path grew.
		if !slices.Equal(rec.Path, []string{"triage", "billing"}) {
			t.Errorf("path = %v, want [triage billing]", rec.Path)
		}
		if _, _, _, ok := rec.toolCall("triage", "transfer_to_billing"); !ok {
			t.Errorf("no transfer_to_billing by triage in the steps")
		}
		// The delegate: billing asked the researcher, whose answer came back
		// as one observation, and the path did not change.
		obs, del, _, ok := rec.toolCall("billing", "delegate_to_researcher")
		if !ok || len(del) == 0 || string(del) == "null" || !strings.Contains(obs, "30 days") {
			t.Errorf("delegate_to_researcher by billing: found %v, delegate %s, observation %q", ok, del, obs)
		}
		if rec.CostUSD <= 0 {
			t.Errorf("paused run cost %v, want > 0", rec.CostUSD)
		}

		var done runRecord
		p.doJSON(t, "POST", "/v1/runs/"+runID+"/resume", serviceToken, `{"action":"approve"}`, http.StatusOK, &done)
		if done.Status != "completed" || done.Agent != "billing" {
			t.Fatalf("resumed run: status %q agent %q", done.Status, done.Agent)
		}
		var out struct {
			Answer   string `json:"answer"`
			Refunded bool   `json:"refunded"`
		}
		if err := json.Unmarshal([]byte(done.Answer), &out); err != nil || !out.Refunded || !strings.Contains(out.Answer, "59.90") {
			t.Errorf("answer %q (%v), want billing's JSON output with the refund", done.Answer, err)
		}
		obs, _, approval, ok := done.toolCall("billing", "issue_refund")
		if !ok || len(approval) == 0 || string(approval) == "null" || obs == "" {
			t.Errorf("issue_refund: found %v, approval %s, observation %q", ok, approval, obs)
		}

		// A second decision on a finished run is refused.
		status, _, b := p.do(t, "POST", "/v1/runs/"+runID+"/resume", serviceToken, strings.NewReader(`{"action":"approve"}`))
		if status != http.StatusConflict || errorCode(t, b) != "run_not_paused" {
			t.Errorf("second resume: status %d %s", status, b)
		}
	})

	t.Run("user memory needs a user", func(t *testing.T) {
		status, _, b := p.do(t, "POST", "/v1/chat/completions", serviceToken, strings.NewReader(`{"messages":[{"role":"user","content":"I want a refund"}]}`))
		if status != http.StatusBadRequest || errorCode(t, b) != "invalid_request" {
			t.Errorf("triage without a user: status %d %s, want 400 invalid_request", status, b)
		}
	})

	t.Run("stream", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(withTimeout(t), openai.ChatCompletionNewParams{
			Model:         "tech",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("I cannot log in")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "stop" || !strings.Contains(acc.Choices[0].Message.Content, "Reset your password") {
			t.Fatalf("streamed answer: %+v", acc.ChatCompletion)
		}
		if acc.Model != "tech" || acc.Usage.TotalTokens == 0 {
			t.Errorf("model %q usage %+v", acc.Model, acc.Usage)
		}
	})

	t.Run("upstream answer from retrieval, charged to the ledger", func(t *testing.T) {
		callsBefore, _ := upstream.stats()
		spentBefore, _ := metric(t, p, serviceToken, `aid_budget_spent_usd{budget="daily",scope="global"}`) // absent: nothing spent yet
		var resp *http.Response
		cc, err := client.Chat.Completions.New(withTimeout(t), openai.ChatCompletionNewParams{
			Model:    "concierge",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("How long do I have to return order AB-123456?")},
		}, option.WithResponseInto(&resp))
		calls, problems := upstream.stats()
		if len(problems) > 0 {
			t.Fatalf("the upstream refused requests: %q", problems)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := cc.Choices[0].Message.Content; got != upstreamAnswer || cc.Choices[0].FinishReason != "stop" {
			t.Fatalf("answer %q finish %q", got, cc.Choices[0].FinishReason)
		}
		if calls-callsBefore != 2 {
			t.Errorf("upstream calls = %d, want 2 (tool calls, then the answer)", calls-callsBefore)
		}
		if cc.Usage.PromptTokens != 2*upstreamPromptTokens || cc.Usage.CompletionTokens != 2*upstreamCompletionTokens {
			t.Errorf("usage %+v, want the upstream's two calls", cc.Usage)
		}
		var rec runRecord
		p.doJSON(t, "GET", "/v1/runs/"+resp.Header.Get("X-Aid-Run-Id"), serviceToken, "", http.StatusOK, &rec)
		if math.Abs(rec.CostUSD-2*upstreamCallUSD) > 1e-9 {
			t.Errorf("run cost %v, want %v from the pinned price", rec.CostUSD, 2*upstreamCallUSD)
		}
		spent, ok := metric(t, p, serviceToken, `aid_budget_spent_usd{budget="daily",scope="global"}`)
		if !ok {
			t.Fatal("no aid_budget_spent_usd for the daily budget in /metrics")
		}
		// The ledger holds the two model calls and the embedding of the
		// search query (fake-embed: 0.00002 USD per 1k tokens, so well
		// under 1e-5 for one query), charged to the same budget.
		if d := spent - spentBefore; d < 2*upstreamCallUSD || d > 2*upstreamCallUSD+1e-5 {
			t.Errorf("ledger: daily spend went from %v to %v, want +%v and the query's embedding", spentBefore, spent, 2*upstreamCallUSD)
		}
	})

	t.Run("retriever search", func(t *testing.T) {
		var res struct {
			Passages []struct {
				Source string `json:"source"`
				Text   string `json:"text"`
			} `json:"data"`
		}
		status, _, b := p.do(t, "POST", "/v1/retrievers/kb/search", serviceToken, strings.NewReader(`{"query":"refund within 30 days of delivery","k":2}`))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		if len(res.Passages) == 0 || !strings.HasSuffix(res.Passages[0].Source, "refunds.md") {
			t.Errorf("search answered %s, want refunds.md first", b)
		}
	})

	t.Run("auth", func(t *testing.T) {
		for _, c := range []struct{ token, code string }{{"", "missing_api_key"}, {"wrong-token", "invalid_api_key"}} {
			status, _, b := p.do(t, "POST", "/v1/chat/completions", c.token, strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
			if status != http.StatusUnauthorized || errorCode(t, b) != c.code {
				t.Errorf("token %q: status %d %s, want 401 %s", c.token, status, b, c.code)
			}
		}
		wrong := openai.NewClient(option.WithBaseURL(p.base+"/v1/"), option.WithAPIKey("wrong-token"), option.WithMaxRetries(0))
		_, err := wrong.Chat.Completions.New(withTimeout(t), openai.ChatCompletionNewParams{Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var apiErr *openai.Error
		if !asError(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
			t.Errorf("openai client with a wrong key: %v", err)
		}
		// Health and readiness answer without a token, for probes.
		for _, path := range []string{"/healthz", "/readyz"} {
			if status, _, b := p.do(t, "GET", path, "", nil); status != http.StatusOK {
				t.Errorf("%s: status %d %s", path, status, b)
			}
		}
	})

	t.Run("aliases served directly", func(t *testing.T) {
		spentBefore, _ := metric(t, p, serviceToken, `aid_budget_calls{budget="daily",scope="global"}`)
		var resp *http.Response
		cc, err := client.Chat.Completions.New(withTimeout(t), openai.ChatCompletionNewParams{
			Model:    "small",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("How long do I have to ask for a refund?")},
		}, option.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if cc.Model != "fake-small-2024-06-01" || cc.Choices[0].Message.Content == "" || cc.Usage.TotalTokens == 0 || resp.Header.Get("X-Aid-Run-Id") != "" {
			t.Errorf("direct answer %+v (run id %q)", cc, resp.Header.Get("X-Aid-Run-Id"))
		}
		stream := client.Chat.Completions.NewStreaming(withTimeout(t), openai.ChatCompletionNewParams{
			Model:         "large",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Can I get my money back for a gift card?")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" || acc.Model != "fake-large-2024-06-01" || acc.Usage.TotalTokens == 0 {
			t.Errorf("streamed direct answer %+v", acc.ChatCompletion)
		}
		calls, ok := metric(t, p, serviceToken, `aid_budget_calls{budget="daily",scope="global"}`)
		if !ok || calls-spentBefore != 2 {
			t.Errorf("daily budget calls went from %v to %v, want +2", spentBefore, calls)
		}
		var models struct {
			Data []struct{ ID string } `json:"data"`
		}
		p.doJSON(t, "GET", "/v1/models", serviceToken, "", http.StatusOK, &models)
		var ids []string
		for _, m := range models.Data {
			ids = append(ids, m.ID)
		}
		if !slices.Contains(ids, "triage") || !slices.Contains(ids, "small") || !slices.Contains(ids, "large") {
			t.Errorf("models %v, want the agents and the exposed aliases", ids)
		}
	})

	t.Run("oversized body", func(t *testing.T) {
		big := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 2<<20) + `"}]}`
		status, _, b := p.do(t, "POST", "/v1/chat/completions", serviceToken, bytes.NewReader([]byte(big)))
		if status != http.StatusRequestEntityTooLarge || errorCode(t, b) != "body_too_large" {
			t.Errorf("status %d %s, want 413 body_too_large", status, b)
		}
	})

	p.stop(t)
}
