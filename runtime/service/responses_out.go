package service

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
)

// DefaultStreamKeepAlive is Limits.StreamKeepAlive when it is zero.
const DefaultStreamKeepAlive = 15 * time.Second

// responseObject is the Responses API's Response object.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	CompletedAt        *int64             `json:"completed_at"`
	Status             string             `json:"status"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Store              bool               `json:"store"`
	Background         bool               `json:"background"`
	Temperature        *float64           `json:"temperature"`
	TopP               *float64           `json:"top_p"`
	Text               responseText       `json:"text"`
	ToolChoice         any                `json:"tool_choice"`
	Tools              []functionTool     `json:"tools"`
	Metadata           map[string]string  `json:"metadata"`
	Usage              *responseUsage     `json:"usage,omitempty"`
	// Aid is aid's extension: the run behind the response, and for a
	// paused one the call it waits on (aid.status paused, aid.pending
	// with its reason).
	Aid *aidExt `json:"aid,omitempty"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type responseText struct {
	Format any `json:"format"`
}

type textFormatJSON struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
	Strict      bool            `json:"strict"`
}

type functionTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type responseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens     int64 `json:"cached_tokens"`
		CacheWriteTokens int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

func responseUsageOf(u gateway.Usage) *responseUsage {
	out := &responseUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	out.InputTokensDetails.CachedTokens = u.CachedInputTokens
	if out.TotalTokens == 0 {
		out.TotalTokens = u.InputTokens + u.OutputTokens
	}
	return out
}

// The output items.
type (
	messageItem struct {
		Type    string     `json:"type"`
		ID      string     `json:"id"`
		Status  string     `json:"status"`
		Role    string     `json:"role"`
		Content []textPart `json:"content"`
	}
	textPart struct {
		Type        string     `json:"type"`
		Text        string     `json:"text"`
		Annotations []struct{} `json:"annotations"`
		Logprobs    []struct{} `json:"logprobs"`
	}
	functionCallItem struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}
	// mcpCallItem shows a call of the agent's own tools: the type for a
	// call the server ran, which a client shows and never runs.
	mcpCallItem struct {
		Type        string  `json:"type"`
		ID          string  `json:"id"`
		ServerLabel string  `json:"server_label"`
		Name        string  `json:"name"`
		Arguments   string  `json:"arguments"`
		Output      *string `json:"output"`
		Status      string  `json:"status"`
	}
	// approvalItem is a call of the agent's tools that waits for
	// approval.
	approvalRequestItem struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		ServerLabel string `json:"server_label"`
		Name        string `json:"name"`
		Arguments   string `json:"arguments"`
	}
)

func newTextPart(text string) textPart {
	return textPart{Type: "output_text", Text: text, Annotations: []struct{}{}, Logprobs: []struct{}{}}
}

func messageID(runID string, step int) string {
	return fmt.Sprintf("msg_%s_%d", strings.TrimPrefix(runID, runPrefix), step)
}

func mcpItem(agent string, c *agents.ToolCallRecord, status string) mcpCallItem {
	it := mcpCallItem{Type: "mcp_call", ID: mcpItemPrefix + c.ID, ServerLabel: agent, Name: c.Name, Arguments: c.Arguments, Status: status}
	if c.Done {
		obs := c.Observation
		it.Output = &obs
		it.Status = "completed"
		if c.ErrorKind != "" {
			it.Status = "failed"
		}
	}
	return it
}

// outputOf renders a run's steps as output items, in order: each step's
// text as a message (the text an agent with an output schema, or a run
// with a client format, wrote before its answer is withheld, as the
// runtime withholds it), its calls of the agent's own tools as mcp_call
// items, its calls of client tools as function_call items, and a paused
// call as an mcp_approval_request.
func (s *Service) outputOf(runID string, steps []agents.StepRecord, status agents.Status, cp *agents.Checkpoint, format bool) []any {
	var pending *agents.ToolCallRecord
	if status == agents.StatusPaused && cp != nil && cp.Pending != nil {
		steps = append(steps[:len(steps):len(steps)], cp.Pending.Step)
		if c, ok := cp.Pending.Call(); ok {
			pending = &c
		}
	}
	out := make([]any, 0, len(steps)+1)
	for i := range steps {
		st := &steps[i]
		final := i == len(steps)-1 && status == agents.StatusCompleted
		withheld := format
		if a, ok := s.cfg.Agents.Agent(st.Agent); ok && len(a.Output) > 0 {
			withheld = true
		}
		if st.Text != "" && (final || !withheld) {
			out = append(out, messageItem{Type: "message", ID: messageID(runID, st.Number), Status: "completed", Role: "assistant",
				Content: []textPart{newTextPart(st.Text)}})
		}
		for j := range st.ToolCalls {
			c := &st.ToolCalls[j]
			switch {
			case c.Client:
				out = append(out, functionCallItem{Type: "function_call", ID: "fc_" + c.ID, CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Status: "completed"})
			case c.Done:
				out = append(out, mcpItem(st.Agent, c, ""))
			}
		}
	}
	if pending != nil {
		out = append(out, approvalRequestItem{Type: "mcp_approval_request", ID: approvalPrefix + pending.ID, ServerLabel: cp.Agent, Name: pending.Name, Arguments: pending.Arguments})
	}
	return out
}

// statusOf maps a run's status to a response's: a completed run whose
// answer was cut by its bound is incomplete (max_output_tokens); a paused
// run, or one that stopped early and can be continued (max_steps,
// timed_out), is incomplete without a reason of the specification's (aid
// says which in aid.status); a run that failed is failed.
func statusOf(st agents.Status, steps []agents.StepRecord) (string, *incompleteDetails, *responseError) {
	switch st {
	case agents.StatusCompleted:
		if n := len(steps); n > 0 && steps[n-1].Truncated {
			return "incomplete", &incompleteDetails{Reason: "max_output_tokens"}, nil
		}
		return "completed", nil, nil
	case agents.StatusPaused, agents.StatusMaxSteps, agents.StatusTimedOut:
		return "incomplete", nil, nil
	case agents.StatusCancelled:
		return "cancelled", nil, nil
	case agents.StatusRunning:
		return "in_progress", nil, nil
	case agents.StatusQueued:
		return "queued", nil, nil
	}
	return "failed", nil, &responseError{Code: "server_error", Message: fmt.Sprintf("the run ended %s", st)}
}

// baseResponse is the response object of a run before any output: what
// the client asked, as the run keeps it (agents.ClientRequest).
func baseResponse(runID, agent string, created int64, c *agents.ClientRequest) responseObject {
	out := responseObject{
		ID: responseID(runID), Object: "response", CreatedAt: created, Status: "in_progress", Model: agent,
		Output: []any{}, ParallelToolCalls: true, Store: true, Text: responseText{Format: map[string]string{"type": "text"}},
		ToolChoice: "auto", Tools: []functionTool{}, Metadata: map[string]string{},
	}
	if c == nil {
		return out
	}
	if c.Instructions != "" {
		ins := c.Instructions
		out.Instructions = &ins
	}
	if c.MaxOutputTokens > 0 {
		n := c.MaxOutputTokens
		out.MaxOutputTokens = &n
	}
	if c.Previous != "" {
		p := responseID(c.Previous)
		out.PreviousResponseID = &p
	}
	if f := c.Format; f != nil {
		out.Text.Format = textFormatJSON{Type: "json_schema", Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict}
	}
	switch tc := c.ToolChoice; tc.Mode {
	case "":
	case gateway.ToolChoiceTool:
		out.ToolChoice = map[string]string{"type": "function", "name": tc.Name}
	default:
		out.ToolChoice = string(tc.Mode)
	}
	for _, t := range c.Tools {
		params := t.Parameters
		if len(params) == 0 {
			params = json.RawMessage("null")
		}
		out.Tools = append(out.Tools, functionTool{Type: "function", Name: t.Name, Description: t.Description, Parameters: params})
	}
	for k, v := range c.Metadata {
		out.Metadata[k] = v
	}
	return out
}

// responseOfResult renders the outcome of a run just driven; c is what
// the client asked of it.
func (s *Service) responseOfResult(res agents.RunResult, c *agents.ClientRequest, req *responsesRequest, decider bool) responseObject {
	if res.Checkpoint != nil && res.Checkpoint.Client != nil {
		c = res.Checkpoint.Client
	}
	entry := res.Agent
	if len(res.Path) > 0 {
		entry = res.Path[0]
	}
	out := baseResponse(res.RunID, entry, time.Now().Unix(), c)
	out.Status, out.IncompleteDetails, out.Error = statusOf(res.Status, res.Steps)
	out.Output = s.outputOf(res.RunID, res.Steps, res.Status, res.Checkpoint, c != nil && c.Format != nil)
	out.Usage = responseUsageOf(res.Usage)
	if out.Status == "completed" || out.Status == "incomplete" {
		now := time.Now().Unix()
		out.CompletedAt = &now
	}
	if req != nil && req.Store != nil {
		out.Store = *req.Store
	}
	out.Aid = extOf(res, decider)
	return out
}

// responseOfRecord renders a stored run, as GET /v1/responses/{id} shows
// it.
func (s *Service) responseOfRecord(rec agents.RunRecord, decider bool) responseObject {
	cp := &rec.Checkpoint
	out := baseResponse(rec.RunID, rec.Agent, unix(rec.CreatedAt), cp.Client)
	steps := cp.Steps
	out.Status, out.IncompleteDetails, out.Error = statusOf(rec.Status, steps)
	out.Output = s.outputOf(rec.RunID, steps, rec.Status, cp, cp.Client != nil && cp.Client.Format != nil)
	out.Usage = responseUsageOf(cp.Usage.Usage())
	if out.Status == "completed" || out.Status == "incomplete" {
		t := unix(rec.UpdatedAt)
		out.CompletedAt = &t
	}
	ext := &aidExt{RunID: rec.RunID, Status: string(rec.Status), Agent: cp.Agent, Path: cp.Path}
	if rec.Status == agents.StatusPaused {
		ext.Pending = pendingOf(cp, decider)
	}
	out.Aid = ext
	return out
}

// responseStream answers a response with stream true: the specification's
// events, each with its sequence_number, as the run goes. The stream opens
// at the run's first event, so that a request refused before the run
// starts gets an HTTP error; then response.created and
// response.in_progress, an output item per step's text (added, its content
// part, output_text deltas, done), per call of the agent's own tools
// (mcp_call: added, arguments, in progress, completed or failed, done),
// per call of a client tool (function_call: added, arguments delta and
// done, done), per paused call (mcp_approval_request), and the end:
// response.completed, response.incomplete or response.failed with the
// whole response. While nothing is written for Limits.StreamKeepAlive (a
// long tool call), a keep-alive comment is.
type responseStream struct {
	s       *Service
	w       http.ResponseWriter
	r       *http.Request
	req     *responsesRequest
	client  *agents.ClientRequest
	runID   string
	created int64
	sse     *sse
	seq     int
	items   int            // output items announced
	msg     *streamMessage // the message item open, if any
	calls   map[string]int // the output index of each mcp_call announced, by call id
	quit    chan struct{}
	wg      sync.WaitGroup
}

type streamMessage struct {
	index int
	id    string
	step  int
	text  strings.Builder
}

func (s *Service) newResponseStream(w http.ResponseWriter, r *http.Request, req *responsesRequest, c *agents.ClientRequest, runID string) *responseStream {
	return &responseStream{s: s, w: w, r: r, req: req, client: c, runID: runID, created: time.Now().Unix()}
}

// send writes one event with the next sequence number.
func (rs *responseStream) send(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = rs.seq
	rs.seq++
	rs.sse.event(typ, fields)
}

// open starts the stream: headers, response.created, response.in_progress
// and the keep-alive.
func (rs *responseStream) open() {
	if rs.sse != nil {
		return
	}
	rs.w.Header().Set("X-Aid-Run-Id", rs.runID)
	rs.sse = newSSE(rs.w, rs.s.limits.WriteTimeout)
	base := baseResponse(rs.runID, rs.agent(), rs.created, rs.client)
	rs.send("response.created", map[string]any{"response": base})
	rs.send("response.in_progress", map[string]any{"response": base})
	rs.quit = make(chan struct{})
	rs.wg.Add(1)
	go rs.keepAlive(rs.quit, rs.s.limits.StreamKeepAlive)
}

func (rs *responseStream) agent() string {
	if rs.req.Model != "" {
		return rs.req.Model
	}
	return rs.s.cfg.Entry
}

// keepAlive writes a comment whenever the stream has been silent for
// every, until stop.
func (rs *responseStream) keepAlive(quit <-chan struct{}, every time.Duration) {
	defer rs.wg.Done()
	t := time.NewTicker(every / 2)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-rs.r.Context().Done():
			return
		case <-t.C:
			rs.sse.keepAlive(every)
		}
	}
}

// stop ends the keep-alive; the handler defers it.
func (rs *responseStream) stop() {
	if rs.quit != nil {
		close(rs.quit)
		rs.quit = nil
	}
	rs.wg.Wait()
}

// closeMessage ends the open message item, if any.
func (rs *responseStream) closeMessage() {
	m := rs.msg
	if m == nil {
		return
	}
	rs.msg = nil
	text := m.text.String()
	rs.send("response.output_text.done", map[string]any{"item_id": m.id, "output_index": m.index, "content_index": 0, "text": text, "logprobs": []struct{}{}})
	rs.send("response.content_part.done", map[string]any{"item_id": m.id, "output_index": m.index, "content_index": 0, "part": newTextPart(text)})
	rs.send("response.output_item.done", map[string]any{"output_index": m.index,
		"item": messageItem{Type: "message", ID: m.id, Status: "completed", Role: "assistant", Content: []textPart{newTextPart(text)}}})
}

// event is the run's hook; the runtime calls it one event at a time.
func (rs *responseStream) event(ev agents.Event) {
	if ev.Depth != 0 {
		return // a delegated run's doings are an observation of the caller's
	}
	switch ev.Kind {
	case agents.EventDriven:
		rs.open()
	case agents.EventText:
		if ev.Text == "" {
			return
		}
		rs.open()
		if rs.msg != nil && rs.msg.step != ev.Step {
			rs.closeMessage()
		}
		if rs.msg == nil {
			rs.msg = &streamMessage{index: rs.items, id: messageID(rs.runID, ev.Step), step: ev.Step}
			rs.items++
			rs.send("response.output_item.added", map[string]any{"output_index": rs.msg.index,
				"item": messageItem{Type: "message", ID: rs.msg.id, Status: "in_progress", Role: "assistant", Content: []textPart{}}})
			rs.send("response.content_part.added", map[string]any{"item_id": rs.msg.id, "output_index": rs.msg.index, "content_index": 0, "part": newTextPart("")})
		}
		rs.msg.text.WriteString(ev.Text)
		rs.send("response.output_text.delta", map[string]any{"item_id": rs.msg.id, "output_index": rs.msg.index, "content_index": 0, "delta": ev.Text, "logprobs": []struct{}{}})
	case agents.EventToolCalls:
		rs.open()
		rs.closeMessage()
		for i := range ev.Calls {
			c := &ev.Calls[i]
			if !c.Client {
				continue
			}
			idx := rs.items
			rs.items++
			it := functionCallItem{Type: "function_call", ID: "fc_" + c.ID, CallID: c.ID, Name: c.Name, Status: "in_progress"}
			rs.send("response.output_item.added", map[string]any{"output_index": idx, "item": it})
			rs.send("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": idx, "delta": c.Arguments})
			rs.send("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": idx, "name": c.Name, "arguments": c.Arguments})
			it.Arguments, it.Status = c.Arguments, "completed"
			rs.send("response.output_item.done", map[string]any{"output_index": idx, "item": it})
		}
	case agents.EventToolStart:
		rs.open()
		rs.closeMessage()
		rs.startCall(ev.Agent, &ev.Calls[0])
	case agents.EventToolResult:
		rs.open()
		rs.closeMessage()
		c := &ev.Calls[0]
		idx, ok := rs.calls[c.ID]
		if !ok {
			idx = rs.startCall(ev.Agent, c) // a call denied before it started
		}
		it := mcpItem(ev.Agent, c, "completed")
		if it.Status == "failed" {
			rs.send("response.mcp_call.failed", map[string]any{"item_id": it.ID, "output_index": idx})
		} else {
			rs.send("response.mcp_call.completed", map[string]any{"item_id": it.ID, "output_index": idx})
		}
		rs.send("response.output_item.done", map[string]any{"output_index": idx, "item": it})
	case agents.EventPause:
		rs.open()
		rs.closeMessage()
		if len(ev.Calls) == 0 {
			return
		}
		c := &ev.Calls[0]
		idx := rs.items
		rs.items++
		it := approvalRequestItem{Type: "mcp_approval_request", ID: approvalPrefix + c.ID, ServerLabel: ev.Agent, Name: c.Name, Arguments: c.Arguments}
		rs.send("response.output_item.added", map[string]any{"output_index": idx, "item": it})
		rs.send("response.output_item.done", map[string]any{"output_index": idx, "item": it})
	}
}

// startCall announces a call of the agent's own tools and returns its
// output index.
func (rs *responseStream) startCall(agent string, c *agents.ToolCallRecord) int {
	idx := rs.items
	rs.items++
	if rs.calls == nil {
		rs.calls = map[string]int{}
	}
	rs.calls[c.ID] = idx
	it := mcpCallItem{Type: "mcp_call", ID: mcpItemPrefix + c.ID, ServerLabel: agent, Name: c.Name, Status: "in_progress"}
	rs.send("response.output_item.added", map[string]any{"output_index": idx, "item": it})
	rs.send("response.mcp_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": idx, "delta": c.Arguments})
	rs.send("response.mcp_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": idx, "arguments": c.Arguments})
	rs.send("response.mcp_call.in_progress", map[string]any{"item_id": it.ID, "output_index": idx})
	return idx
}

// finish ends the stream with the run's outcome: the whole response in
// response.completed, response.incomplete or response.failed. A run
// refused before the stream opened gets an HTTP error.
func (rs *responseStream) finish(res agents.RunResult, err error) *apiError {
	decider := mayDecide(rs.r)
	if err != nil && rs.sse == nil {
		if res.RunID != "" {
			rs.w.Header().Set("X-Aid-Run-Id", res.RunID)
		}
		return writeError(rs.w, err, extOf(res, decider))
	}
	rs.open()
	rs.closeMessage()
	rs.stop()
	defer rs.sse.close()
	out := rs.s.responseOfResult(res, rs.client, rs.req, decider)
	out.CreatedAt = rs.created
	var ae *apiError
	if err != nil {
		ae = classify(err, info(rs.r).id, res.RunID)
		out.Status, out.IncompleteDetails, out.Error = statusOf(res.Status, res.Steps)
		if out.Status == "completed" {
			out.Status = "failed" // a run that completed and could not be saved
		}
		if out.Error != nil {
			out.Error = &responseError{Code: specErrorCode(ae), Message: ae.Message}
		}
	}
	switch out.Status {
	case "completed":
		rs.send("response.completed", map[string]any{"response": out})
	case "incomplete", "cancelled":
		rs.send("response.incomplete", map[string]any{"response": out})
	default:
		rs.send("response.failed", map[string]any{"response": out})
	}
	return ae
}

// specErrorCode is the specification's code for a failed response's error
// (ResponseErrorCode): rate_limit_exceeded for a refusal of a rate limit,
// server_error for anything else; aid's own code is in the error answer
// and the log.
func specErrorCode(ae *apiError) string {
	if ae.Status == http.StatusTooManyRequests {
		return "rate_limit_exceeded"
	}
	return "server_error"
}
