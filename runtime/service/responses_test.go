package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/servicetest"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/service"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// specClient is an openai-go client of e's service behind the spec's
// validation proxy.
func (e *env) specClient(t testing.TB) (openai.Client, *httptest.Server) {
	srv := e.specServer(t)
	return openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0), option.WithHTTPClient(srv.Client())), srv
}

func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: openai.String(s)}
}

// TestResponsesText: a string input runs the agent named by model; the
// answer is one message with the agent's text, status completed, the
// run's usage with its cached tokens, and the metadata and instructions
// sent; the client's instructions follow the agent's own in the request.
func TestResponsesText(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {{Text: "Paris.",
		Usage: &gateway.Usage{InputTokens: 40, CachedInputTokens: 32, OutputTokens: 2, TotalTokens: 42}}}}}})
	c, _ := e.specClient(t)
	res, err := c.Responses.New(t.Context(), responses.ResponseNewParams{
		Model: "triage", Input: textInput("Capital of France?"), Instructions: openai.String("Be brief."),
		Metadata: map[string]string{"ticket": "T-1"}, MaxOutputTokens: openai.Int(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "completed" || res.OutputText() != "Paris." || res.Model != "triage" || res.Metadata["ticket"] != "T-1" ||
		res.Instructions.OfString != "Be brief." || res.MaxOutputTokens != 64 || !strings.HasPrefix(res.ID, "resp_") {
		t.Errorf("response %+v", res)
	}
	if u := res.Usage; u.InputTokens != 40 || u.InputTokensDetails.CachedTokens != 32 || u.OutputTokens != 2 || u.TotalTokens != 42 {
		t.Errorf("usage %+v", u)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls", len(reqs))
	}
	m := reqs[0].Messages
	if len(m) != 3 || m[0].Content != "Answer." || m[1].Role != gateway.RoleSystem || m[1].Content != "Be brief." || m[2].Content != "Capital of France?" || reqs[0].MaxOutputTokens != 64 {
		t.Errorf("request %+v", reqs[0])
	}
	got, err := c.Responses.Get(t.Context(), res.ID, responses.ResponseGetParams{})
	if err != nil || got.OutputText() != "Paris." || got.Status != "completed" || got.Metadata["ticket"] != "T-1" || got.Output[0].ID != res.Output[0].ID {
		t.Errorf("GET: %+v, %v", got, err)
	}
}

// TestResponsesClientToolRoundTrip: a client function tool is offered
// beside the agent's own; the model's call of it ends the response with a
// function_call item; the client's function_call_output, sent with
// previous_response_id, continues the thread in a new response whose run
// carries the whole thread.
func TestResponsesClientToolRoundTrip(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Script: []fake.Step{
			calls(call("call_w", "get_weather", `{"city":"Paris"}`)),
			answer("It is sunny in Paris."),
		}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Tools: []string{"lookup"}}},
		tools:  []agents.Tool{{Name: "lookup", Description: "Look up.", Input: json.RawMessage(`{"type":"object"}`), Effects: agents.EffectsRead}},
		impls:  map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "x", nil })},
	})
	c, _ := e.specClient(t)
	tool := responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: "get_weather", Description: openai.String("Weather of a city."),
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, Strict: openai.Bool(false)}}
	first, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("Weather in Paris?"), Tools: []responses.ToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Status != "completed" || len(first.Output) != 1 || first.Output[0].Type != "function_call" {
		t.Fatalf("first response %+v", first.Output)
	}
	fc := first.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || fc.CallID != "call_w" || fc.Arguments != `{"city":"Paris"}` || len(first.Tools) != 1 || first.Tools[0].Name != "get_weather" {
		t.Errorf("function call %+v, tools %+v", fc, first.Tools)
	}
	if tools := e.fake.Requests()[0].Tools; len(tools) != 2 || tools[0].Name != "lookup" || tools[1].Name != "get_weather" {
		t.Errorf("the model was offered %+v", tools)
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("18°C, sunny")
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	second, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}, Tools: []responses.ToolUnionParam{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != "completed" || second.OutputText() != "It is sunny in Paris." || second.PreviousResponseID != first.ID || second.ID == first.ID {
		t.Errorf("second response %+v", second)
	}
	m := e.fake.Requests()[1].Messages
	if len(m) != 4 || m[1].Content != "Weather in Paris?" || len(m[2].ToolCalls) != 1 || m[3].Role != gateway.RoleTool || m[3].ToolCallID != "call_w" || m[3].Content != "18°C, sunny" {
		t.Errorf("the continuation sent %+v", m)
	}
	// An output for a call nobody made is refused, as OpenAI refuses it.
	bad := responses.ResponseInputItemParamOfFunctionCallOutput("x")
	bad.OfFunctionCallOutput.CallID = openai.String("call_nobody")
	_, err = c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", PreviousResponseID: openai.String(first.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{bad}}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "call_nobody") {
		t.Errorf("an output for no call: %v", err)
	}
}

// TestResponsesStream: the spec's event sequence, with sequence numbers,
// the agent's own tool call as an mcp_call item, and the text as deltas;
// the completed response equals what GET shows.
func TestResponsesStream(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "lookup", `{"q":"a"}`)),
			answer("Found it."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Tools: []string{"lookup"}}},
		tools:  []agents.Tool{{Name: "lookup", Description: "Look up.", Input: json.RawMessage(`{"type":"object"}`), Effects: agents.EffectsRead}},
		impls:  map[string]agents.Implementation{"lookup": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "row 1", nil })},
	})
	c, _ := e.specClient(t)
	stream := c.Responses.NewStreaming(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("find a")})
	var types []string
	var text string
	var done responses.Response
	for stream.Next() {
		ev := stream.Current()
		if n := len(types); n == 0 || ev.Type != "response.output_text.delta" || types[n-1] != ev.Type {
			types = append(types, ev.Type) // the deltas, as many as the model's pieces, count once
		}
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			done = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done", "response.mcp_call.in_progress",
		"response.mcp_call.completed", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta", "response.output_text.done",
		"response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types, " ") != strings.Join(want, " ") {
		t.Errorf("events\n got %v\nwant %v", types, want)
	}
	if text != "Found it." || done.Status != "completed" || len(done.Output) != 2 || done.Output[0].Type != "mcp_call" || done.Output[1].Type != "message" {
		t.Errorf("text %q, response %+v", text, done.Output)
	}
	if mc := done.Output[0].AsMcpCall(); mc.Name != "lookup" || mc.Output != "row 1" || mc.ServerLabel != "triage" {
		t.Errorf("mcp_call %+v", mc)
	}
	got, err := c.Responses.Get(t.Context(), done.ID, responses.ResponseGetParams{})
	if err != nil || len(got.Output) != 2 || got.Output[1].ID != done.Output[1].ID || got.Output[0].ID != done.Output[0].ID {
		t.Errorf("GET %+v, %v", got, err)
	}
}

// TestResponsesStreamKeepAlive: a tool call longer than the keep-alive
// interval gets comment lines, which the client ignores.
func TestResponsesStreamKeepAlive(t *testing.T) {
	release := make(chan struct{})
	e := newEnv(t, options{
		fake:   fake.Config{Agents: map[string][]fake.Step{"triage": {calls(call("c1", "slow", `{}`)), answer("done")}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Tools: []string{"slow"}}},
		tools:  []agents.Tool{{Name: "slow", Description: "Slow.", Input: json.RawMessage(`{"type":"object"}`), Effects: agents.EffectsRead}},
		impls: map[string]agents.Implementation{"slow": agents.ToolFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			select {
			case <-release:
				return "ok", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})},
		svc: func(c *service.Config) { c.Limits.StreamKeepAlive = 20 * time.Millisecond },
	})
	srv := e.specServer(t)
	req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+"/v1/responses", strings.NewReader(`{"model":"triage","input":"go","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(b.String(), ": keep-alive") {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			t.Fatalf("the stream ended without a keep-alive: %v\n%s", err, b.String())
		}
	}
	close(release)
	rest, _ := readRest(resp)
	if !strings.Contains(rest, "response.completed") {
		t.Errorf("stream after the keep-alive: %s", rest)
	}
}

func readRest(resp *http.Response) (string, error) {
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String(), nil
		}
	}
}

// TestResponsesApproval: a call that needs approval pauses the run; the
// response is incomplete, its last item an mcp_approval_request, and
// aid.pending says why. Continuing it is refused while it waits; an
// approver's mcp_approval_response resumes it in place, and then it can be
// continued.
func TestResponsesApproval(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {
			calls(call("c1", "refund", `{"order":"A1"}`)),
			answer("Refunded."),
		}}},
		agents: []agents.Agent{{Name: "triage", Model: "large", Instructions: "Answer.", Tools: []string{"refund"}}},
		tools:  []agents.Tool{{Name: "refund", Description: "Refund.", Input: json.RawMessage(`{"type":"object"}`), Effects: agents.EffectsWrite, Approval: agents.ApprovalAlways}},
		impls:  map[string]agents.Implementation{"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) { return "refunded", nil })},
		svc: func(c *service.Config) {
			c.Auth.Tokens = nil
			c.Auth.Keys = []service.Key{
				{Name: "caller", Secret: token, Roles: []service.Role{service.RoleCaller}},
				{Name: "desk", Secret: token + "-desk", Roles: []service.Role{service.RoleCaller, service.RoleApprover}},
			}
		},
	})
	c, _ := e.specClient(t)
	// The spec's MCPApprovalResponse requires a request_id it does not
	// define, which the official clients do not send: requests that carry
	// one go through a proxy that checks the answers only.
	srv := e.answerServer(t)
	paused, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("refund A1")})
	if err != nil {
		t.Fatal(err)
	}
	n := len(paused.Output)
	if paused.Status != "incomplete" || n == 0 || paused.Output[n-1].Type != "mcp_approval_request" {
		t.Fatalf("paused response %s %+v", paused.Status, paused.Output)
	}
	ar := paused.Output[n-1].AsMcpApprovalRequest()
	if ar.Name != "refund" || ar.Arguments != `{"order":"A1"}` {
		t.Errorf("approval request %+v", ar)
	}
	var ext struct {
		Aid struct {
			Status  string `json:"status"`
			Pending struct {
				Reason    string `json:"reason"`
				ResumeURL string `json:"resume_url"`
			} `json:"pending"`
		} `json:"aid"`
	}
	if err := json.Unmarshal([]byte(paused.RawJSON()), &ext); err != nil || ext.Aid.Status != "paused" || ext.Aid.Pending.Reason != "approval" || ext.Aid.Pending.ResumeURL != "" {
		t.Errorf("aid extension of a pause, to a caller: %+v %v", ext, err)
	}
	_, err = c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", PreviousResponseID: openai.String(paused.ID), Input: textInput("and?")})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "response_paused" {
		t.Errorf("continuing a paused response: %v", err)
	}
	approve := responses.ResponseInputItemUnionParam{OfMcpApprovalResponse: &responses.ResponseInputItemMcpApprovalResponseParam{ApprovalRequestID: ar.ID, Approve: true}}
	input := responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{approve}}
	// A caller may not decide.
	caller := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(token), option.WithMaxRetries(0), option.WithHTTPClient(srv.Client()))
	_, err = caller.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", PreviousResponseID: openai.String(paused.ID), Input: input})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 403 {
		t.Errorf("a caller's approval: %v", err)
	}
	desk := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey(token+"-desk"), option.WithMaxRetries(0), option.WithHTTPClient(srv.Client()))
	done, err := desk.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", PreviousResponseID: openai.String(paused.ID), Input: input})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != "completed" || done.OutputText() != "Refunded." || done.ID != paused.ID {
		t.Errorf("resumed response %s %q %s", done.Status, done.OutputText(), done.ID)
	}
	got, err := c.Responses.Get(t.Context(), paused.ID, responses.ResponseGetParams{})
	if err != nil || got.Status != "completed" {
		t.Errorf("GET after the approval: %+v %v", got, err)
	}
}

// TestResponsesLifecycle: DELETE forgets a response (GET is then 404, in
// the spec's error shape); store false forgets it once answered; cancel
// of an ended response is a conflict; ids no run can have are not found.
func TestResponsesLifecycle(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Loop: true, Agents: map[string][]fake.Step{"triage": {answer("ok")}}}})
	c, _ := e.specClient(t)
	res, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Responses.Delete(t.Context(), res.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Responses.Get(t.Context(), res.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "response_not_found" {
		t.Errorf("GET of a deleted response: %v", err)
	}
	gone, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("hi"), Store: openai.Bool(false)})
	if err != nil || gone.Status != "completed" {
		t.Fatalf("store false: %+v %v", gone, err)
	}
	if _, err = c.Responses.Get(t.Context(), gone.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("GET of a response not stored: %v", err)
	}
	kept, _ := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("hi")})
	if _, err = c.Responses.Cancel(t.Context(), kept.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != 409 {
		t.Errorf("cancel of a completed response: %v", err)
	}
	for _, id := range []string{"resp_x", "run_0123", "resp_" + strings.Repeat("A", 32)} {
		if _, err = c.Responses.Get(t.Context(), id, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
			t.Errorf("GET %s: %v", id, err)
		}
	}
}

// TestResponsesBadRequests: what the service refuses, each in the spec's
// error shape with the param named.
func TestResponsesBadRequests(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Loop: true, Agents: map[string][]fake.Step{"triage": {answer("ok")}}}})
	srv := e.answerServer(t)
	for _, tt := range []struct{ body, param, code string }{
		{`{"model":"triage"}`, "input", "invalid_request"},
		{`{"model":"triage","input":[]}`, "input", "invalid_request"},
		{`{"model":"triage","input":[{"type":"input_image","image_url":"x"}]}`, "input[0].type", "unsupported_parameter"},
		{`{"model":"triage","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type", "unsupported_parameter"},
		{`{"model":"triage","input":"x","tools":[{"type":"web_search"}]}`, "tools[0].type", "unsupported_parameter"},
		{`{"model":"triage","input":"x","max_output_tokens":3}`, "max_output_tokens", "invalid_request"},
		{`{"model":"triage","input":"x","text":{"format":{"type":"json_schema","name":"a"}}}`, "text.format.schema", "invalid_request"},
		{`{"model":"triage","input":"x","previous_response_id":"resp_nope"}`, "previous_response_id", "response_not_found"},
		{`{"model":"triage","input":"x","stream":true,"background":true}`, "background", "unsupported_parameter"},
		{`{"model":"triage","input":[{"type":"function_call_output","call_id":"c","output":"x"}]}`, "input", "invalid_request"},
		{`{"model":"nobody","input":"x"}`, "model", "model_not_found"},
	} {
		status, _, b := servicetest.Do(t, srv.Client(), "POST", srv.URL+"/v1/responses", token, strings.NewReader(tt.body))
		var eb struct {
			Error struct {
				Param *string `json:"param"`
				Code  string  `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(b, &eb)
		if status/100 != 4 || eb.Error.Code != tt.code || eb.Error.Param == nil || *eb.Error.Param != tt.param {
			t.Errorf("%s: %d %s", tt.body, status, b)
		}
	}
}

// TestResponsesJSONFormat: text.format json_schema asks the model for the
// schema and validates the answer, as an agent's output schema does.
func TestResponsesJSONFormat(t *testing.T) {
	e := newEnv(t, options{fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer(`{"city":"Paris"}`)}}}})
	c, _ := e.specClient(t)
	res, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("where?"),
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigParamOfJSONSchema("place",
			map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}})}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OutputText() != `{"city":"Paris"}` || res.Text.Format.Type != "json_schema" || res.Text.Format.Name != "place" {
		t.Errorf("response %+v", res)
	}
	if f := e.fake.Requests()[0].ResponseFormat; f == nil || f.Name != "place" {
		t.Errorf("the model was asked for %+v", f)
	}
}

// TestResponsesBackground: background true queues the run and answers the
// response queued at once; GET follows it to completed, with the answer.
func TestResponsesBackground(t *testing.T) {
	e := newEnv(t, options{
		fake: fake.Config{Agents: map[string][]fake.Step{"triage": {answer("Done in the background.")}}},
		svc:  withLocalQueue(t, jobs.Config{}),
	})
	c, _ := e.specClient(t)
	res, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "triage", Input: textInput("work"), Background: openai.Bool(true),
		Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != "queued" || !res.Background || res.Metadata["k"] != "v" {
		t.Fatalf("background response %+v", res)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.Responses.Get(t.Context(), res.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == "completed" {
			if got.OutputText() != "Done in the background." || got.Metadata["k"] != "v" {
				t.Errorf("completed %+v", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
