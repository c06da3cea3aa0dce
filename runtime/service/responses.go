package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/jobs"
	"github.com/aidgen/aid/runtime/kind"
)

// responsesRequest is the part of the Responses API's CreateResponse the
// service reads. Fields it does not list (sampling, reasoning, include,
// truncation, prompt_cache_key, ...) are accepted and not applied, as
// chat completions accepts them; the ones below that it refuses are read
// so that it can.
type responsesRequest struct {
	Model              string            `json:"model"`
	Input              json.RawMessage   `json:"input"`
	Instructions       *string           `json:"instructions"`
	Tools              json.RawMessage   `json:"tools"`
	ToolChoice         json.RawMessage   `json:"tool_choice"`
	Text               *responsesText    `json:"text"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Metadata           map[string]string `json:"metadata"`
	Store              *bool             `json:"store"`
	Stream             bool              `json:"stream"`
	Background         bool              `json:"background"`
	PreviousResponseID string            `json:"previous_response_id"`
	User               string            `json:"user"`
	SafetyIdentifier   string            `json:"safety_identifier"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Conversation       json.RawMessage   `json:"conversation"`
	Prompt             json.RawMessage   `json:"prompt"`
}

type responsesText struct {
	Format json.RawMessage `json:"format"`
}

// Limits of the Responses API, as the specification states them.
const (
	// maxMetadata is how many metadata pairs a response may carry, with
	// keys of at most 64 and values of at most 512 characters.
	maxMetadata = 16
	// minOutputTokens is max_output_tokens' least value.
	minOutputTokens = 16
)

// responsesInput is what a request's input items say: the thread they add,
// and the decisions on paused calls they carry (mcp_approval_response).
type responsesInput struct {
	msgs      []gateway.Message
	decisions []approvalItem
	ignored   int // system and developer messages left out
}

type approvalItem struct {
	requestID string
	approve   bool
	reason    string
}

// inputItem is one item of an input list, of any type the service reads.
type inputItem struct {
	Type              string          `json:"type"`
	Role              string          `json:"role"`
	Content           json.RawMessage `json:"content"`
	ID                string          `json:"id"`
	CallID            string          `json:"call_id"`
	Name              string          `json:"name"`
	Arguments         *string         `json:"arguments"`
	Output            json.RawMessage `json:"output"`
	ApprovalRequestID string          `json:"approval_request_id"`
	Approve           *bool           `json:"approve"`
	Reason            string          `json:"reason"`
}

// readInput reads input: a string (one user message) or a list of items.
// Messages, function calls and their outputs, and the agent's own calls
// (mcp_call) become the thread; approval requests and reasoning items
// are what the service sent and are left out; other items are refused by
// type.
func readInput(raw json.RawMessage) (responsesInput, error) {
	var in responsesInput
	if !present(raw) {
		return in, invalid(CodeInvalidRequest, "input", "input is required: a string or a list of input items")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		in.msgs = []gateway.Message{{Role: gateway.RoleUser, Content: text}}
		return in, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return in, invalid(CodeInvalidRequest, "input", "input must be a string or an array of input items")
	}
	if len(items) == 0 {
		return in, invalid(CodeInvalidRequest, "input", "input must not be an empty list")
	}
	for i, rawItem := range items {
		at := "input[" + strconv.Itoa(i) + "]"
		var it inputItem
		if err := json.Unmarshal(rawItem, &it); err != nil {
			return in, fieldError(at, rawItem, err, "an input item object")
		}
		if it.Type == "" && it.Role != "" {
			it.Type = "message"
		}
		switch it.Type {
		case "message":
			text, err := itemText(at+".content", it.Content)
			if err != nil {
				return in, err
			}
			switch it.Role {
			case "user":
				in.msgs = append(in.msgs, gateway.Message{Role: gateway.RoleUser, Content: text})
			case "assistant":
				in.msgs = append(in.msgs, gateway.Message{Role: gateway.RoleAssistant, Content: text})
			case "system", "developer":
				// An exposed alias takes them; an agent's instructions are
				// its own (the agent path leaves them out).
				in.ignored++
				in.msgs = append(in.msgs, gateway.Message{Role: gateway.RoleSystem, Content: text})
			default:
				return in, invalid(CodeInvalidRequest, at+".role", fmt.Sprintf("role %.40q is not supported: use user, assistant, system or developer", it.Role))
			}
		case "function_call", "mcp_call":
			if it.CallID == "" && it.Type == "function_call" {
				return in, invalid(CodeInvalidRequest, at+".call_id", "a function_call item needs a call_id")
			}
			id := it.CallID
			if it.Type == "mcp_call" {
				id = strings.TrimPrefix(it.ID, mcpItemPrefix)
			}
			if id == "" || it.Name == "" {
				return in, invalid(CodeInvalidRequest, at, "a call item needs an id and a name")
			}
			args := "{}"
			if it.Arguments != nil && *it.Arguments != "" {
				args = *it.Arguments
			}
			if !json.Valid([]byte(args)) {
				return in, invalid(CodeInvalidRequest, at+".arguments", "arguments must be a JSON document")
			}
			call := gateway.ToolCall{ID: id, Name: it.Name, Arguments: json.RawMessage(args)}
			// Calls of one answer follow its message, if any.
			if n := len(in.msgs); n > 0 && in.msgs[n-1].Role == gateway.RoleAssistant {
				in.msgs[n-1].ToolCalls = append(in.msgs[n-1].ToolCalls, call)
			} else {
				in.msgs = append(in.msgs, gateway.Message{Role: gateway.RoleAssistant, ToolCalls: []gateway.ToolCall{call}})
			}
			if it.Type == "mcp_call" {
				// The agent's own call, as the service showed it: its
				// result is part of the item.
				var out string
				if present(it.Output) {
					_ = json.Unmarshal(it.Output, &out)
				}
				in.msgs = append(in.msgs, gateway.Message{Role: gateway.RoleTool, Content: out, ToolCallID: id, Name: it.Name})
			}
		case "function_call_output":
			if it.CallID == "" {
				return in, invalid(CodeInvalidRequest, at+".call_id", "a function_call_output item needs the call_id of the call it answers")
			}
			out, err := itemText(at+".output", it.Output)
			if err != nil {
				return in, err
			}
			in.msgs = append(in.msgs, gateway.Message{Role: gateway.RoleTool, Content: out, ToolCallID: it.CallID})
		case "mcp_approval_response":
			if it.ApprovalRequestID == "" || it.Approve == nil {
				return in, invalid(CodeInvalidRequest, at, "an mcp_approval_response item needs approval_request_id and approve")
			}
			in.decisions = append(in.decisions, approvalItem{requestID: it.ApprovalRequestID, approve: *it.Approve, reason: it.Reason})
		case "mcp_approval_request", "reasoning":
			// What the service sent back to it: nothing for the model.
		case "":
			return in, invalid(CodeInvalidRequest, at+".type", "an input item needs a type")
		default:
			return in, unsupported(at+".type", fmt.Sprintf("input items of type %.40q are not supported: use message, function_call, function_call_output, mcp_call or mcp_approval_response", it.Type))
		}
	}
	return in, nil
}

// itemText reads a message's content or a call's output: a string, or a
// list of text parts (input_text, output_text, refusal).
func itemText(at string, raw json.RawMessage) (string, error) {
	if !present(raw) {
		return "", invalid(CodeInvalidRequest, at, at+" is required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return text, nil
	}
	var parts []struct {
		Type    string  `json:"type"`
		Text    *string `json:"text"`
		Refusal *string `json:"refusal"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(CodeInvalidRequest, at, at+" must be a string or an array of text parts")
	}
	var b strings.Builder
	for j, p := range parts {
		switch {
		case (p.Type == "input_text" || p.Type == "output_text") && p.Text != nil:
			b.WriteString(*p.Text)
		case p.Type == "refusal" && p.Refusal != nil:
			b.WriteString(*p.Refusal)
		default:
			return "", unsupported(fmt.Sprintf("%s[%d].type", at, j), fmt.Sprintf("content parts of type %.40q are not supported: only input_text, output_text and refusal", p.Type))
		}
	}
	return b.String(), nil
}

// checkThread refuses a thread an OpenAI model would refuse (the rule of
// toHistory): every call of an assistant message is answered by one tool
// message before the next user or assistant message or the end, and a
// tool message answers a call of the assistant message before it.
func checkThread(msgs []gateway.Message) error {
	var calls toolCalls
	for i, m := range msgs {
		switch m.Role {
		case gateway.RoleUser, gateway.RoleAssistant:
			if err := calls.done("input"); err != nil {
				return err
			}
			if m.Role == gateway.RoleAssistant {
				calls = toolCalls{at: i}
				for _, c := range m.ToolCalls {
					calls.ids = append(calls.ids, c.ID)
				}
			}
		case gateway.RoleTool:
			if err := calls.answer("input", m.ToolCallID, "input"); err != nil {
				return err
			}
		}
	}
	return calls.done("input")
}

// readTools reads the client's function tools.
func readTools(raw json.RawMessage) ([]gateway.ToolDef, error) {
	if !present(raw) {
		return nil, nil
	}
	var tools []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, fieldError("tools", raw, err, "an array of function tools")
	}
	out := make([]gateway.ToolDef, len(tools))
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, unsupported(at+".type", fmt.Sprintf("tool type %.40q is not supported: only function tools (the agent's own tools run on the server)", t.Type))
		case t.Name == "":
			return nil, invalid(CodeInvalidRequest, at+".name", "a function tool needs a name")
		case present(t.Parameters) && !bytes.HasPrefix(bytes.TrimSpace(t.Parameters), []byte("{")):
			return nil, invalid(CodeInvalidRequest, at+".parameters", "parameters must be a JSON Schema object")
		}
		out[i] = gateway.ToolDef{Name: t.Name, Description: t.Description}
		if present(t.Parameters) {
			out[i].Parameters = t.Parameters
		}
	}
	return out, nil
}

// readToolChoice reads tool_choice: auto, none, required, or a named
// function.
func readToolChoice(raw json.RawMessage) (gateway.ToolChoice, error) {
	if !present(raw) {
		return gateway.ToolChoice{}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch m := gateway.ToolChoiceMode(mode); m {
		case gateway.ToolChoiceAuto, gateway.ToolChoiceNone, gateway.ToolChoiceRequired:
			return gateway.ToolChoice{Mode: m}, nil
		}
		return gateway.ToolChoice{}, invalid(CodeInvalidRequest, "tool_choice", fmt.Sprintf("tool_choice %.40q is not auto, none or required", mode))
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
		return gateway.ToolChoice{}, unsupported("tool_choice", `tool_choice must be auto, none, required or {"type":"function","name":...}`)
	}
	return gateway.ToolChoice{Mode: gateway.ToolChoiceTool, Name: named.Name}, nil
}

// readFormat reads text.format: text (the default) or a JSON schema.
func readFormat(t *responsesText) (*gateway.JSONSchema, error) {
	if t == nil || !present(t.Format) {
		return nil, nil
	}
	var f struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	}
	if err := json.Unmarshal(t.Format, &f); err != nil {
		return nil, fieldError("text.format", t.Format, err, "an object")
	}
	switch {
	case f.Type == "text":
		return nil, nil
	case f.Type != "json_schema":
		return nil, unsupported("text.format.type", fmt.Sprintf("text.format %.40q is not supported: use text or json_schema", f.Type))
	case f.Name == "":
		return nil, invalid(CodeInvalidRequest, "text.format.name", "a json_schema format needs a name")
	case !present(f.Schema) || !bytes.HasPrefix(bytes.TrimSpace(f.Schema), []byte("{")):
		return nil, invalid(CodeInvalidRequest, "text.format.schema", "a json_schema format needs a schema, a JSON Schema object")
	}
	return &gateway.JSONSchema{Name: f.Name, Description: f.Description, Schema: f.Schema, Strict: f.Strict != nil && *f.Strict}, nil
}

// check refuses what no response may ask, before the model is looked at.
func (req *responsesRequest) check() error {
	switch {
	case present(req.Conversation):
		return unsupported("conversation", "conversation is not supported: continue a thread with previous_response_id")
	case present(req.Prompt):
		return unsupported("prompt", "prompt templates are not supported: send input and instructions")
	case req.MaxOutputTokens != nil && *req.MaxOutputTokens < minOutputTokens:
		return invalid(CodeInvalidRequest, "max_output_tokens", fmt.Sprintf("max_output_tokens must be at least %d", minOutputTokens))
	case len(req.Metadata) > maxMetadata:
		return invalid(CodeInvalidRequest, "metadata", fmt.Sprintf("metadata may hold at most %d pairs", maxMetadata))
	case req.Stream && req.Background:
		return unsupported("background", "a background response is not streamed: send it without stream and follow it with GET /v1/responses/{id}")
	}
	for k, v := range req.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return invalid(CodeInvalidRequest, "metadata", "metadata keys may have at most 64 characters and values at most 512")
		}
	}
	return nil
}

// clientRequest is what req asks of a run beyond the agent's
// configuration.
func (req *responsesRequest) clientRequest() (*agents.ClientRequest, error) {
	tools, err := readTools(req.Tools)
	if err != nil {
		return nil, err
	}
	choice, err := readToolChoice(req.ToolChoice)
	if err != nil {
		return nil, err
	}
	format, err := readFormat(req.Text)
	if err != nil {
		return nil, err
	}
	c := &agents.ClientRequest{Tools: tools, ToolChoice: choice, Format: format, Metadata: req.Metadata}
	if req.MaxOutputTokens != nil {
		c.MaxOutputTokens = *req.MaxOutputTokens
	}
	if req.Instructions != nil {
		c.Instructions = *req.Instructions
	}
	return c, nil
}

// Response ids. A response of an agent is its run: resp_ and the run id's
// hex digits, so that each maps to the other without a table, and every
// replica sharing the run store finds it.
const (
	responsePrefix = "resp_"
	runPrefix      = "run_"
	// mcpItemPrefix prefixes the id of an output item that shows a call
	// of the agent's own tools, approvalPrefix that of a call waiting for
	// approval, both followed by the call's id.
	mcpItemPrefix  = "mcp_"
	approvalPrefix = "mcpr_"
)

func responseID(runID string) string {
	return responsePrefix + strings.TrimPrefix(runID, runPrefix)
}

// runOfResponse returns the run id of a response id, and false for an id
// no run of this service can have.
func runOfResponse(id string) (string, bool) {
	hex, ok := strings.CutPrefix(id, responsePrefix)
	if !ok || len(hex) != 32 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", false
	}
	return runPrefix + hex, true
}

// responseNotFound is the error for a response id this service does not
// hold (or the key may not see).
func responseNotFound(id string) error {
	e := newError(http.StatusNotFound, TypeNotFound, CodeResponseNotFound, fmt.Sprintf("no response %.80q", id))
	p := "response_id"
	e.Param = &p
	return e
}

// loadResponse loads the run behind a response id, as loadRun does for a
// run id: a response of another tenant, or another caller's, is not found.
func (s *Service) loadResponse(r *http.Request, id string, a runAccess) (agents.RunRecord, error) {
	runID, ok := runOfResponse(id)
	if !ok {
		return agents.RunRecord{}, responseNotFound(id)
	}
	info(r).runID = runID
	rec, err := s.loadRun(r, runID, a)
	if _, missing := errors.AsType[*agents.RunNotFoundError](err); missing {
		return rec, responseNotFound(id)
	}
	return rec, err
}

// createResponse answers POST /v1/responses: model names an agent (a run)
// or an exposed alias (a call straight to the gateway).
func (s *Service) createResponse(w http.ResponseWriter, r *http.Request) error {
	var req responsesRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	if a, ok := s.direct[req.Model]; ok {
		return s.directResponse(w, r, &req, a)
	}
	in, err := readInput(req.Input)
	if err != nil {
		return err
	}
	if in.ignored > 0 {
		w.Header().Set("X-Aid-Ignored-System-Messages", strconv.Itoa(in.ignored))
		in.msgs = slices.DeleteFunc(in.msgs, func(m gateway.Message) bool { return m.Role == gateway.RoleSystem })
	}
	client, err := req.clientRequest()
	if err != nil {
		return err
	}
	agent := req.Model
	if agent == "" {
		if s.cfg.Entry == "" {
			return invalid(CodeInvalidRequest, "model", "model is required: this service has no entry agent")
		}
		agent = s.cfg.Entry
	}
	var prev *agents.RunRecord
	if req.PreviousResponseID != "" {
		rec, err := s.loadResponse(r, req.PreviousResponseID, readRun)
		if err != nil {
			if ae := (*apiError)(nil); errors.As(err, &ae) && ae.Code == CodeResponseNotFound {
				p := "previous_response_id"
				ae.Param = &p
			}
			return err
		}
		prev = &rec
		client.Previous = rec.RunID
	}
	if len(in.decisions) > 0 {
		return s.decideResponse(w, r, &req, prev, in)
	}
	opts := agents.RunOptions{Client: client, RunID: agents.NewRunID()}
	history := in.msgs
	user := cmp.Or(req.User, req.SafetyIdentifier)
	opts.ThreadID, opts.UserID = principalOf(r).scopeIDs("", user)
	if prev != nil {
		if err := continuable(prev); err != nil {
			return err
		}
		cp := &prev.Checkpoint
		history = append(cp.Thread(), in.msgs...)
		opts.ThreadID = cmp.Or(cp.ThreadID, prev.RunID)
		if user == "" {
			opts.UserID = cp.UserID
		}
	}
	if err := checkThread(history); err != nil {
		return err
	}
	var input string
	if n := len(history) - 1; n >= 0 && history[n].Role == gateway.RoleUser {
		input, history = history[n].Content, history[:n]
	} else if n < 0 || history[n].Role != gateway.RoleTool {
		return invalid(CodeInvalidRequest, "input", "input must end with a user message, or with the outputs of the function calls the last response asked for")
	}
	opts.History = history
	info(r).agent = agent
	if req.Background {
		return s.answerQueuedResponse(w, r, &req, func(q jobs.Queue) (agents.RunRecord, error) {
			return q.Submit(r.Context(), agent, input, opts)
		})
	}
	rs := s.newResponseStream(w, r, &req, client, opts.RunID)
	if req.Stream {
		opts.OnEvent = rs.event
		defer rs.stop()
	}
	res, err := s.runAgent(r, agent, input, opts)
	return s.answerResponse(w, r, rs, &req, res, err)
}

// continuable refuses a previous response whose run is not in a state to
// be continued: one still going, or waiting for a decision.
func continuable(rec *agents.RunRecord) error {
	switch rec.Status {
	case agents.StatusPaused:
		return newError(http.StatusConflict, TypeConflict, CodeResponsePaused, fmt.Sprintf(
			"response %s waits for approval of a call (its mcp_approval_request item): it goes on once an approver decides, and can be continued then", responseID(rec.RunID)))
	case agents.StatusRunning, agents.StatusQueued:
		return newError(http.StatusConflict, TypeConflict, CodeResponseInProgress, fmt.Sprintf(
			"response %s is still in progress: continue it once it has ended", responseID(rec.RunID)))
	}
	return nil
}

// decideResponse takes mcp_approval_response items: the decision on the
// call the previous response waits on. Only a key that may decide paused
// runs may send one; the run is resumed in place, so the answer is the
// same response, as it goes on.
func (s *Service) decideResponse(w http.ResponseWriter, r *http.Request, req *responsesRequest, prev *agents.RunRecord, in responsesInput) error {
	switch {
	case !mayDecide(r):
		return newError(http.StatusForbidden, TypePermission, CodeInsufficientRole, "this key may not decide calls that wait for approval")
	case prev == nil:
		return invalid(CodeInvalidRequest, "previous_response_id", "an mcp_approval_response item decides a call of the previous response: send previous_response_id")
	case len(in.decisions) != 1 || len(in.msgs) > 0:
		return invalid(CodeInvalidRequest, "input", "a response that decides a call carries one mcp_approval_response item and nothing else")
	case prev.Status != agents.StatusPaused:
		return newError(http.StatusConflict, TypeConflict, CodeRunNotPaused, fmt.Sprintf("response %s waits for no decision", req.PreviousResponseID))
	}
	d := in.decisions[0]
	p := pendingOf(&prev.Checkpoint, true)
	if p == nil || d.requestID != approvalPrefix+p.CallID {
		return invalid(CodeInvalidRequest, "input[0].approval_request_id", fmt.Sprintf("response %s waits on no approval request %.80q", req.PreviousResponseID, d.requestID))
	}
	dec := agents.Decision{Action: agents.Reject, Feedback: d.reason}
	if d.approve {
		dec.Action = agents.Approve
	}
	if pr := principalOf(r); pr != nil {
		dec.By = pr.name
	}
	rs := s.newResponseStream(w, r, req, prev.Checkpoint.Client, prev.RunID)
	opts := agents.RunOptions{}
	if req.Stream {
		opts.OnEvent = rs.event
		defer rs.stop()
	}
	ctx := r.Context()
	if req.Stream {
		ctx = agents.ContextWithEvents(ctx, rs.event)
	}
	res, err := s.cfg.Agents.Resume(ctx, prev.RunID, dec)
	s.recordRun(info(r), "", res, err)
	if ran(res) {
		s.metrics.decision(principalOf(r), dec.By, dec.Action)
	}
	return s.answerResponse(w, r, rs, req, res, err)
}

// answerResponse answers with a run's outcome, streamed or not.
func (s *Service) answerResponse(w http.ResponseWriter, r *http.Request, rs *responseStream, req *responsesRequest, res agents.RunResult, err error) error {
	if req.Stream {
		info(r).err = rs.finish(res, err)
		return nil
	}
	if res.RunID != "" {
		w.Header().Set("X-Aid-Run-Id", res.RunID)
	}
	if err != nil {
		info(r).err = writeError(w, err, extOf(res, mayDecide(r)))
		return nil
	}
	out := s.responseOfResult(res, rs.client, req, mayDecide(r))
	if req.Store != nil && !*req.Store {
		s.forget(r, res)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// forget deletes a run that was asked not to be stored (store false), once
// it ended: a paused run is kept, since its approver needs it.
func (s *Service) forget(r *http.Request, res agents.RunResult) {
	if res.Status == agents.StatusPaused || res.RunID == "" {
		return
	}
	if err := s.deleteRun(r, res.RunID); err != nil {
		s.logger.WarnContext(r.Context(), "a response sent with store false could not be deleted", "run_id", res.RunID, "err", err)
	}
}

// answerQueuedResponse queues a background response and answers with it,
// status queued, as OpenAI does; GET /v1/responses/{id} follows it.
func (s *Service) answerQueuedResponse(w http.ResponseWriter, r *http.Request, req *responsesRequest, submit func(jobs.Queue) (agents.RunRecord, error)) error {
	if s.cfg.Jobs == nil {
		return unsupported("background", "this service runs no background queue: send the request without background")
	}
	rec, err := submit(s.cfg.Jobs)
	if err != nil {
		return err
	}
	info(r).runID = rec.RunID
	w.Header().Set("X-Aid-Run-Id", rec.RunID)
	out := s.responseOfRecord(rec, mayDecide(r))
	out.Background = true
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getResponse answers GET /v1/responses/{id}: the run as it is now.
func (s *Service) getResponse(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.loadResponse(r, r.PathValue("id"), readRun)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.responseOfRecord(rec, mayDecide(r)))
	return nil
}

// cancelResponse answers POST /v1/responses/{id}/cancel: the run is
// cancelled wherever it is driven, as POST /v1/runs/{id}/cancel does, and
// the answer is the response as it stands.
func (s *Service) cancelResponse(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.loadResponse(r, r.PathValue("id"), cancelRun)
	if err != nil {
		return err
	}
	by, err := byKey(r, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), cancelWait)
	defer cancel()
	rec, err = s.cfg.Agents.Cancel(ctx, rec.RunID, agents.CancelOptions{By: by})
	if _, pending := errors.AsType[*agents.CancelPendingError](err); pending {
		writeJSON(w, http.StatusOK, s.responseOfRecord(rec, mayDecide(r)))
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.responseOfRecord(rec, mayDecide(r)))
	return nil
}

// deleteResponse answers DELETE /v1/responses/{id}: the run and its
// record are deleted from the store (agents.RunDeleter). A run still
// going or paused is refused: cancel it first.
func (s *Service) deleteResponse(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	rec, err := s.loadResponse(r, id, cancelRun)
	if err != nil {
		return err
	}
	switch rec.Status {
	case agents.StatusRunning, agents.StatusQueued, agents.StatusPaused:
		return newError(http.StatusConflict, TypeConflict, CodeResponseInProgress, fmt.Sprintf("response %s has not ended (%s): cancel it first", id, rec.Status))
	}
	if err := s.deleteRun(r, rec.RunID); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.deleted", "deleted": true})
	return nil
}

// deleteRun deletes a run from a store that can.
func (s *Service) deleteRun(r *http.Request, runID string) error {
	d, ok := s.cfg.Agents.Store().(agents.RunDeleter)
	if !ok {
		return &kind.DeferredError{Feature: "deleting responses from this run store"}
	}
	return d.DeleteRun(r.Context(), runID)
}

// Timestamps are Unix seconds.
func unix(t time.Time) int64 {
	if t.IsZero() {
		return time.Now().Unix()
	}
	return t.Unix()
}

// directResponse answers a response whose model is an exposed alias
// straight from the gateway, as a chat completion on it is: no run, no
// agent, so nothing is stored (store, background and previous_response_id
// are refused) and the output is the model's message and function calls.
func (s *Service) directResponse(w http.ResponseWriter, r *http.Request, req *responsesRequest, a *directAlias) error {
	ri := info(r)
	ri.alias = a.name
	switch {
	case req.PreviousResponseID != "":
		return unsupported("previous_response_id", "a response of an exposed alias is not stored, so it cannot be continued: send the whole conversation as input")
	case req.Background:
		return unsupported("background", "a response of an exposed alias is not a run: it cannot run in the background")
	case req.Stream:
		return unsupported("stream", "streaming a response of an exposed alias is not built: stream a chat completion on it, or send the request without stream")
	}
	in, err := readInput(req.Input)
	if err != nil {
		return err
	}
	if len(in.decisions) > 0 {
		return invalid(CodeInvalidRequest, "input", "an exposed alias has no calls waiting for approval")
	}
	c, err := req.clientRequest()
	if err != nil {
		return err
	}
	msgs := in.msgs
	if c.Instructions != "" {
		msgs = append([]gateway.Message{{Role: gateway.RoleSystem, Content: c.Instructions}}, msgs...)
	}
	if err := checkThread(msgs); err != nil {
		return err
	}
	greq := gateway.Request{Messages: msgs, Tools: c.Tools, ToolChoice: c.ToolChoice, ResponseFormat: c.Format,
		MaxOutputTokens: c.MaxOutputTokens, Temperature: req.Temperature, TopP: req.TopP, ParallelToolCalls: req.ParallelToolCalls}
	ctx := r.Context()
	opts := a.opts
	if s.cfg.AliasBudget != "" {
		opts = append(append(make([]gateway.CallOption, 0, len(opts)+1), opts...), gateway.WithBudget(s.cfg.AliasBudget, ri.id))
		defer s.endScopes(ctx, ri.id)
	}
	res, err := s.cfg.Gateway.Generate(ctx, a.name, greq, opts...)
	if err != nil {
		return err
	}
	id := strings.TrimPrefix(ri.id, "req_")
	out := baseResponse(runPrefix+id, a.name, time.Now().Unix(), c)
	out.Store = false
	out.Status = "completed"
	if res.FinishReason == gateway.FinishLength {
		out.Status, out.IncompleteDetails = "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	}
	now := time.Now().Unix()
	out.CompletedAt = &now
	if res.Text != "" || len(res.ToolCalls) == 0 {
		out.Output = append(out.Output, messageItem{Type: "message", ID: "msg_" + id, Status: "completed", Role: "assistant", Content: []textPart{newTextPart(res.Text)}})
	}
	for _, tc := range res.ToolCalls {
		out.Output = append(out.Output, functionCallItem{Type: "function_call", ID: "fc_" + tc.ID, CallID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments), Status: "completed"})
	}
	out.Usage = responseUsageOf(res.Usage)
	writeJSON(w, http.StatusOK, out)
	return nil
}
