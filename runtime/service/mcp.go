package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/kind"
)

// MCPPath is where the service speaks the Model Context Protocol
// (streamable HTTP).
const MCPPath = "/mcp"

// mcpSessionTimeout closes an MCP session idle for this long, so that a
// long-lived service keeps a bounded number of them.
const mcpSessionTimeout = 10 * time.Minute

// The keys of aid's entries in an MCP tool result's _meta.
const (
	// MetaRunID is the run's id, resumable through the runs API.
	MetaRunID = "aid/run_id"
	// MetaStatus is the run's status: completed, paused, failed...
	MetaStatus = "aid/status"
	// MetaPending is the call a paused run waits on: tool, arguments,
	// reason, resume_url (as the runs API's pending).
	MetaPending = "aid/pending"
	// MetaError is a failed call's error, in the HTTP API's shape
	// (message, type, code).
	MetaError = "aid/error"
	// MetaOutputSchema, on a tool, is the JSON Schema of the agent's
	// answer, which a completed call's structuredContent fits.
	MetaOutputSchema = "aid/output_schema"
)

// mcpInput is the input of an agent's MCP tool.
type mcpInput struct {
	Message  string `json:"message"`
	ThreadID string `json:"thread_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
}

// mcpInputSchema is mcpInput's JSON Schema.
var mcpInputSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"message":{"type":"string","minLength":1,"description":"The user's message to the agent."},` +
	`"thread_id":{"type":"string","description":"The conversation the message belongs to (thread memory and thread budgets)."},` +
	`"user_id":{"type":"string","description":"The user (user memory)."}},` +
	`"required":["message"],"additionalProperties":false}`)

// newMCP builds the service's MCP endpoint: one tool per agent, on the
// official SDK's streamable HTTP handler, behind mcpGuard. Sessions live
// in the process, close after mcpSessionTimeout idle, and are at most
// Limits.MaxMCPSessions; the body limit is the service's.
func (s *Service) newMCP() http.Handler {
	srv := sdk.NewServer(&sdk.Implementation{Name: "aid", Version: "1"}, &sdk.ServerOptions{Logger: s.logger})
	var names []string
	if s.cfg.Agents != nil {
		names = s.cfg.Agents.Agents()
	}
	for _, name := range names {
		spec, _ := s.cfg.Agents.Agent(name)
		desc := strings.TrimSpace(spec.Description)
		if desc == "" {
			desc = fmt.Sprintf("Ask the agent %s.", name)
		}
		tool := &sdk.Tool{
			Name:        name,
			Description: desc + " The answer is the agent's; a run that pauses for a person's approval asks for it (elicitation) when the client can, and otherwise returns the pending call and the run's id (in _meta) to resume through the runs API.",
			InputSchema: mcpInputSchema,
		}
		if len(spec.Output) > 0 {
			// Not the tool's outputSchema: a paused run has no answer to
			// fit it, and clients refuse a result that lacks one.
			tool.Meta = sdk.Meta{MetaOutputSchema: json.RawMessage(spec.Output)}
		}
		srv.AddTool(tool, s.mcpTool(name))
	}
	if s.cfg.Agents != nil && s.cfg.Jobs != nil {
		// Tasks are runs the background workers drive.
		srv.AddReceivingMiddleware(s.mcpTasks)
		if err := s.addTaskMethods(srv); err != nil {
			panic(err) // the methods' names are not the SDK's: not reached
		}
	}
	// Outermost: the SDK runs each request in a goroutine of its own and
	// recovers nothing, so a panic below would end the process.
	srv.AddReceivingMiddleware(s.mcpRecover)
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Logger:              s.logger,
		SessionTimeout:      mcpSessionTimeout,
		MaxRequestBodyBytes: s.limits.MaxBodyBytes,
		// The service checks Host on every route, with its allowed hosts
		// (checkHost), and Origin on this one (checkOrigin).
		DisableLocalhostProtection: true,
	})
	// The 2026-07-28 revision has no sessions: each request stands alone,
	// so any replica answers it.
	stateless := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              s.logger,
		MaxRequestBodyBytes: s.limits.MaxBodyBytes,
	})
	return &mcpGuard{next: h, stateless: stateless, sessions: srv.Sessions, max: s.limits.MaxMCPSessions, maxBody: s.limits.MaxBodyBytes, logger: s.logger, open: map[string]*mcpSession{}}
}

// mcpTool runs agent for a tools/call: the run, then, while it pauses and
// the client can answer elicitations, the person's decision and the
// resumed run, bounded by the service's request timeout and ended by its
// drain like every request.
func (s *Service) mcpTool(agent string) sdk.ToolHandler {
	return func(call context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		ctx := call
		var in mcpInput
		if req.Params.RequestState == "" {
			// A retry with the person's decision names its run in the
			// request state; a first call has the arguments.
			var bad *sdk.CallToolResult
			if in, bad = mcpArguments(req.Params.Arguments); bad != nil {
				return bad, nil
			}
		}
		ctx, cancel := s.bounded(ctx)
		defer cancel()

		p := extraPrincipal(req.Extra)
		decider := decides(p)
		if p != nil {
			ctx = kind.WithCaller(ctx, p.caller())
		}
		// A client of the 2026-07-28 revision is asked for a decision in
		// the call's result (an input request) and retries the call with
		// its answer, on whichever replica: the run is in the store, and
		// the request state names it.
		multiRound := decider && multiRoundTrip(req)
		var res agents.RunResult
		var err error
		if req.Params.RequestState != "" {
			var answer *sdk.ElicitResult
			if r, ok := req.Params.InputResponses[mcpDecisionInput].(*sdk.ElicitResult); ok {
				answer = r
			}
			var done *sdk.CallToolResult
			res, done, err = s.mcpDecide(ctx, p, decider, req.Params.RequestState, answer, s.cfg.Agents.Resume)
			if done != nil {
				return done, nil
			}
		} else {
			opts := agents.RunOptions{OnEvent: mcpProgress(ctx, req)}
			opts.ThreadID, opts.UserID = p.scopeIDs(in.ThreadID, in.UserID)
			res, err = s.cfg.Agents.Run(ctx, agent, in.Message, opts)
		}
		if err == nil && res.Status == agents.StatusPaused && multiRound {
			if ask := s.mcpAsk(res); ask != nil {
				s.metrics.run(agent, cmp.Or(res.Agent, agent), res)
				return ask, nil
			}
		}
		// Only a key that may decide is asked to: the person behind a
		// caller's client is not the one to approve its calls.
		for err == nil && res.Status == agents.StatusPaused && decider && !multiRound && canElicit(req.Session) {
			d, ok, eerr := s.elicit(ctx, req.Session, res)
			if eerr != nil || !ok {
				break // left paused: the result says how to resume it
			}
			if p != nil {
				d.By = p.name
			}
			res, err = s.cfg.Agents.Resume(ctx, res.RunID, d)
			if err == nil {
				s.metrics.decision(p, d.By, d.Action)
			}
		}
		if res.RunID != "" {
			s.metrics.run(agent, cmp.Or(res.Agent, agent), res)
		}
		if call.Err() != nil && context.Cause(call) == context.Canceled {
			// The client cancelled the call (notifications/cancelled): not
			// a failure of the service. mcpGuard sees that the response
			// goes nowhere; this one is for a client whose call it could
			// not follow.
			s.logger.InfoContext(ctx, "MCP tool call cancelled by the client", "agent", agent, "run_id", res.RunID, "status", string(res.Status))
			return mcpError(sdk.Meta{MetaRunID: res.RunID, MetaStatus: string(res.Status)}, newError(http.StatusConflict, TypeConflict, CodeRunCancelled, "the client cancelled the call")), nil
		}
		// The agent that answers (after handoffs) decides the answer's shape.
		answering, _ := s.cfg.Agents.Agent(res.Agent)
		return s.mcpResult(ctx, res, err, len(answering.Output) > 0, decider), nil
	}
}

// bounded bounds an MCP request's work by the service's request timeout,
// and ends it with the service's drain, like every request.
func (s *Service) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.limits.RequestTimeout, context.DeadlineExceeded)
	ctx, cancelCause := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.base, func() { cancelCause(context.Cause(s.base)) })
	return ctx, func() {
		stop()
		cancelCause(nil)
		cancel()
	}
}

// mcpArguments decodes a tool call's arguments; a tool error says what is
// wrong with them.
func mcpArguments(args json.RawMessage) (mcpInput, *sdk.CallToolResult) {
	const want = "the arguments must be an object with a non-empty message, and optionally thread_id and user_id"
	var in mcpInput
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var ae *apiError
		if errors.As(decodeError(args, err), &ae) {
			ae.Message = want + ": " + strings.Replace(ae.Message, "request body", "the arguments", 1)
			return in, mcpError(nil, ae)
		}
	}
	if strings.TrimSpace(in.Message) == "" {
		return in, mcpError(nil, invalid(CodeInvalidRequest, "message", want))
	}
	return in, nil
}

// mcpIdentity hands the key that authenticated an MCP request to the SDK
// (auth.TokenInfo), which gives it to the tool calls (RequestExtra) and
// binds the session to it: another key cannot use the session's id.
func (s *Service) mcpIdentity(next http.Handler) http.Handler {
	if s.cfg.Auth.Kind != AuthBearer {
		return next
	}
	verify := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p := principalOf(r)
		if p == nil {
			return nil, auth.ErrInvalidToken // authenticate ran first: not reached
		}
		return &auth.TokenInfo{UserID: p.name, Extra: map[string]any{mcpPrincipalKey: p}}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}

const mcpPrincipalKey = "aid/principal"

// mcpProgress forwards a run's model and tool calls to the client as
// progress notifications, when the call asked for them.
func mcpProgress(ctx context.Context, req *sdk.CallToolRequest) func(agents.Event) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	var n float64
	return func(ev agents.Event) {
		var msg string
		switch ev.Kind {
		case agents.EventModelCall:
			msg = fmt.Sprintf("%s thinks (step %d)", ev.Agent, ev.Step)
		case agents.EventToolCalls:
			names := make([]string, len(ev.Calls))
			for i, c := range ev.Calls {
				names[i] = c.Name
			}
			msg = fmt.Sprintf("%s calls %s", ev.Agent, strings.Join(names, ", "))
		case agents.EventHandoff:
			msg = fmt.Sprintf("%s hands the conversation to %s", ev.Agent, ev.Target)
		case agents.EventToolProgress:
			msg = fmt.Sprintf("%s: %s", ev.Calls[0].Name, ev.Progress.Message)
		default:
			return
		}
		n++
		_ = req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: token, Progress: n, Message: msg})
	}
}

// canElicit reports whether the client said it answers form elicitations
// and can be asked: a request of the 2026-07-28 revision has no session
// to carry a request to the client.
func canElicit(ss *sdk.ServerSession) bool {
	if ss.ID() == "" {
		return false
	}
	p := ss.InitializeParams()
	if p == nil || p.Capabilities == nil || p.Capabilities.Elicitation == nil {
		return false
	}
	e := p.Capabilities.Elicitation
	return e.Form != nil || e.URL == nil
}

// decisionSchema is what an elicitation asks of the person.
var decisionSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"decision": map[string]any{"type": "string", "enum": []string{"approve", "reject"}, "description": "Run the call, or tell the agent no."},
		"feedback": map[string]any{"type": "string", "description": "Why, for the agent (with reject)."},
	},
	"required": []string{"decision"},
}

// elicit asks the client's person to decide the paused run's call. ok is
// false when they declined to answer or cancelled: the run stays paused.
func (s *Service) elicit(ctx context.Context, ss *sdk.ServerSession, res agents.RunResult) (agents.Decision, bool, error) {
	r, err := s.elicitAnswer(ctx, ss, res, nil)
	if err != nil {
		return agents.Decision{}, false, err
	}
	d, ok := decisionOf(r)
	return d, ok, nil
}

// elicitAnswer asks the client's person about the paused run's call, with
// meta on the request; nil when the run waits on no call.
func (s *Service) elicitAnswer(ctx context.Context, ss *sdk.ServerSession, res agents.RunResult, meta sdk.Meta) (*sdk.ElicitResult, error) {
	p := pendingOf(res.Checkpoint, true)
	if p == nil {
		return nil, nil
	}
	form := decisionForm(res.Agent, p)
	form.Meta = meta
	r, err := ss.Elicit(ctx, form)
	if err != nil {
		s.logger.Warn("MCP elicitation failed; the run stays paused", "run_id", res.RunID, "error", err)
		return nil, err
	}
	return r, nil
}

// decisionForm is the form that asks a person to decide the call p that
// agent waits on.
func decisionForm(agent string, p *pendingCall) *sdk.ElicitParams {
	msg := fmt.Sprintf("Agent %s wants to call %s with %s. Approve it?", agent, p.Tool, p.Arguments)
	return &sdk.ElicitParams{Mode: "form", Message: msg, RequestedSchema: decisionSchema}
}

// decisionOf reads a person's answer to decisionForm; ok is false when
// they declined, cancelled or answered neither approve nor reject.
func decisionOf(r *sdk.ElicitResult) (agents.Decision, bool) {
	if r == nil || r.Action != "accept" {
		return agents.Decision{}, false
	}
	decision, _ := r.Content["decision"].(string)
	feedback, _ := r.Content["feedback"].(string)
	switch decision {
	case "approve":
		return agents.Decision{Action: agents.Approve, Feedback: feedback}, true
	case "reject":
		return agents.Decision{Action: agents.Reject, Feedback: feedback}, true
	}
	return agents.Decision{}, false
}

// mcpDecisionInput is the id of the input request in which a paused run
// asks a 2026-07-28 client for its person's decision.
const mcpDecisionInput = "aid/decision"

// The request state of a call that waits on a decision: the run and the
// call it waits on. It is no secret and no credential: the retry that
// brings it back is authorised like any decision (the key's role and
// tenant), and it only ever decides the call it names.
const mcpStatePrefix = "aid.run.v1:"

func mcpState(runID, callID string) string { return mcpStatePrefix + runID + ":" + callID }

func parseMCPState(state string) (runID, callID string, ok bool) {
	rest, ok := strings.CutPrefix(state, mcpStatePrefix)
	if !ok {
		return "", "", false
	}
	runID, callID, ok = strings.Cut(rest, ":")
	return runID, callID, ok && runID != "" && callID != ""
}

// multiRoundTrip reports whether the call comes from a client of the
// 2026-07-28 revision, which takes input requests in a tool's result and
// retries the call with the answers, and says it answers form
// elicitations.
func multiRoundTrip(req *sdk.CallToolRequest) bool {
	if req.ProtocolVersion() < "2026-07-28" {
		return false
	}
	c := req.ClientCapabilities()
	return c != nil && c.Elicitation != nil && (c.Elicitation.Form != nil || c.Elicitation.URL == nil)
}

// mcpAsk is the result that asks the client for a decision on the paused
// run's call, to bring back with the call's retry; nil when the run waits
// on no call.
func (s *Service) mcpAsk(res agents.RunResult) *sdk.CallToolResult {
	p := pendingOf(res.Checkpoint, true)
	if p == nil {
		return nil
	}
	return &sdk.CallToolResult{
		Meta:          sdk.Meta{MetaRunID: res.RunID, MetaStatus: string(res.Status), MetaPending: p},
		InputRequests: sdk.InputRequestMap{mcpDecisionInput: decisionForm(res.Agent, p)},
		RequestState:  mcpState(res.RunID, p.CallID),
	}
}

// mcpDecide applies a person's answer to a call that asked for a decision
// (the multi-round-trip retry, a task's elicitation or tasks/update): it
// loads the run the state names (on any replica: the run is in the
// store), checks that the key may decide it and that it still waits on
// the call the state names, and resumes it with the answer. done is the
// call's result when there is nothing to resume: a refusal, a run that
// moved on, or a person who declined to answer (the run stays paused).
func (s *Service) mcpDecide(ctx context.Context, p *principal, decider bool, state string, answer *sdk.ElicitResult, resume func(context.Context, string, agents.Decision) (agents.RunResult, error)) (res agents.RunResult, done *sdk.CallToolResult, err error) {
	runID, callID, ok := parseMCPState(state)
	if !ok {
		return res, mcpError(nil, invalid(CodeInvalidRequest, "requestState", "the request state is not one this service gave: call the tool again without it")), nil
	}
	meta := sdk.Meta{MetaRunID: runID}
	if !decider {
		return res, mcpError(meta, newError(http.StatusForbidden, TypePermission, CodeInsufficientRole, "this key may not decide a paused run's calls: that takes the approver role")), nil
	}
	rec, err := s.cfg.Agents.Store().LoadRun(ctx, runID)
	if err == nil && !p.reaches(rec, decideRun.tenantWide, decideRun.own) {
		err = &agents.RunNotFoundError{RunID: runID}
	}
	if err != nil {
		return res, s.mcpFailure(ctx, meta, err, runID), nil
	}
	meta[MetaStatus] = string(rec.Status)
	paused := agents.RunResult{RunID: rec.RunID, Status: rec.Status, Agent: rec.Checkpoint.Agent, Checkpoint: &rec.Checkpoint}
	pending := pendingOf(&rec.Checkpoint, true)
	if rec.Status != agents.StatusPaused || pending == nil || pending.CallID != callID {
		if rec.Status == agents.StatusPaused && pending != nil {
			// Decided elsewhere, and paused again on a later call: ask
			// about that one.
			if ask := s.mcpAsk(paused); ask != nil {
				return res, ask, nil
			}
		}
		return res, mcpError(meta, newError(http.StatusConflict, TypeConflict, CodeRunNotPaused,
			fmt.Sprintf("run %s no longer waits on the call this retry decides: it is %s; read it at GET /v1/runs/%s", runID, rec.Status, runID))), nil
	}
	d, ok := decisionOf(answer)
	if !ok {
		// Declined or cancelled: the run stays paused, resumable later.
		return paused, nil, nil
	}
	if p != nil {
		d.By = p.name
	}
	res, err = resume(ctx, runID, d)
	if ran(res) {
		s.metrics.decision(p, d.By, d.Action)
	}
	return res, nil, err
}

// mcpResult is the tool result of a run: the answer (and, when the agent
// that answered has an output schema, the answer as structured content); a paused
// run's pending call and how to resume it; a failure as a tool error
// with the HTTP API's code. The run's id and status are in _meta.
func (s *Service) mcpResult(ctx context.Context, res agents.RunResult, err error, structured, decider bool) *sdk.CallToolResult {
	meta := sdk.Meta{}
	if res.RunID != "" {
		meta[MetaRunID] = res.RunID
		meta[MetaStatus] = string(res.Status)
	}
	if err != nil || (res.Status != agents.StatusCompleted && res.Status != agents.StatusPaused) {
		if err == nil {
			err = fmt.Errorf("run %s ended %s without an answer", res.RunID, res.Status)
		}
		return s.mcpFailure(ctx, meta, err, res.RunID)
	}
	if res.Status == agents.StatusPaused {
		p := pendingOf(res.Checkpoint, decider)
		if p == nil {
			return s.mcpFailure(ctx, meta, errors.New("the run paused without a pending call"), res.RunID)
		}
		meta[MetaPending] = p
		text := fmt.Sprintf("Run %s is paused: agent %s waits for a person to approve its call of %s with %s. ",
			res.RunID, res.Agent, p.Tool, p.Arguments)
		if decider {
			text += fmt.Sprintf("Decide it with POST %s and a body {\"action\": \"approve\"} or {\"action\": \"reject\", \"feedback\": \"why\"}.", p.ResumeURL)
		} else {
			text += "It goes on once someone allowed to decide it has."
		}
		return &sdk.CallToolResult{Meta: meta, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
	}
	out := &sdk.CallToolResult{Meta: meta, Content: []sdk.Content{&sdk.TextContent{Text: res.Answer}}}
	if structured {
		var v any
		if json.Unmarshal([]byte(res.Answer), &v) == nil {
			out.StructuredContent = v
		}
	}
	return out
}

// mcpFailure is the tool error of a failed call, as the HTTP API answers
// it: a server error names a request id, under which the log holds the
// error itself (as observe logs a request that failed).
func (s *Service) mcpFailure(ctx context.Context, meta sdk.Meta, err error, runID string) *sdk.CallToolResult {
	id := newRequestID()
	ae := classify(err, id, runID)
	if ae.Status >= http.StatusInternalServerError {
		s.logger.ErrorContext(ctx, "MCP tool call failed", "request_id", id, "run_id", runID, "code", ae.Code, "error", ae.cause)
	}
	return mcpError(meta, ae)
}

// mcpError is a tool error carrying an API error: its code leads the
// text, and _meta holds it whole.
func mcpError(meta sdk.Meta, ae *apiError) *sdk.CallToolResult {
	if meta == nil {
		meta = sdk.Meta{}
	}
	meta[MetaError] = ae
	return &sdk.CallToolResult{IsError: true, Meta: meta, Content: []sdk.Content{&sdk.TextContent{Text: ae.Code + ": " + ae.Message}}}
}

// mcpRecover answers a request whose handling panicked with a JSON-RPC
// internal error that says nothing of the service's internals, and logs
// the panic with its stack, instead of letting it end the process with
// every other client's requests and runs.
func (s *Service) mcpRecover(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (res sdk.Result, err error) {
		defer func() {
			if v := recover(); v != nil {
				s.logger.ErrorContext(ctx, "mcp: handler panicked", "method", method, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				res, err = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: the service could not handle this request"}
			}
		}()
		return next(ctx, method, req)
	}
}
