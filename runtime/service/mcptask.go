package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/kind"
)

// An agent's tool call may run as a task (MCP tasks): the task is the run,
// queued for the background workers (Config.Jobs) and kept in the run
// store, its id the run's id. Nothing of a task lives in a process, so
// every replica sharing the store answers for it. Two eras speak of tasks:
//
//   - 2025-11-25 sessions (tasks, experimental in that revision): the
//     client asks for a task (params.task on tools/call), polls tasks/get,
//     and waits in tasks/result, where a paused run asks the person's
//     decision as an elicitation related to the task; tasks/list and
//     tasks/cancel.
//   - 2026-07-28 requests (the io.modelcontextprotocol/tasks extension):
//     the client declares the extension and the service answers an agent's
//     call with a task; tasks/get carries the result, or the decision to
//     make as an input request, which tasks/update answers; tasks/cancel.
//
// A task is its key's own: another key's task does not exist for it.

// The methods and names of MCP tasks.
const (
	methodTasksGet    = "tasks/get"
	methodTasksResult = "tasks/result"
	methodTasksList   = "tasks/list"
	methodTasksCancel = "tasks/cancel"
	methodTasksUpdate = "tasks/update"

	// metaRelatedTask, in a message's _meta, names the task it is about.
	metaRelatedTask = "io.modelcontextprotocol/related-task"
	// tasksExtension is the 2026-07-28 revision's tasks extension.
	tasksExtension = "io.modelcontextprotocol/tasks"
	// tasksVersion is the first revision with tasks.
	tasksVersion = "2025-11-25"
	// metaTaskParams is where mcpGuard puts a tools/call's params.task,
	// which the SDK does not decode, for mcpTasks to find.
	metaTaskParams = "aid/task"
	// taskPollMillis is the poll interval a task suggests.
	taskPollMillis = 1000
	// taskDecisionPrefix starts the key of the input request in which a
	// 2026-07-28 task asks for a decision; the call id ends it, so that
	// no key is used for two requests over the task's life.
	taskDecisionPrefix = mcpDecisionInput + ":"
)

// mcpObject is a result of the tasks methods, or one of the SDK's with
// fields its types lack: fields, and the _meta the SDK may add.
type mcpObject struct {
	sdk.ResultBase
	fields map[string]any
}

func (o *mcpObject) MarshalJSON() ([]byte, error) {
	m := maps.Clone(o.fields)
	if m == nil {
		m = map[string]any{}
	}
	if len(o.Meta) > 0 {
		meta, _ := m["_meta"].(map[string]any)
		meta = maps.Clone(meta)
		if meta == nil {
			meta = map[string]any{}
		}
		maps.Copy(meta, o.Meta)
		m["_meta"] = meta
	}
	return json.Marshal(m)
}

// withFields is res as a JSON object, edited.
func withFields(res sdk.Result, edit func(map[string]any)) (sdk.Result, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	edit(m)
	return &mcpObject{fields: m}, nil
}

// taskEra is what a request's client speaks: its revision, and whether it
// takes tasks (a 2025-11-25 session, or a 2026-07-28 request that declares
// the extension).
func taskEra(ss *sdk.ServerSession) (version string, extension bool) {
	p := ss.InitializeParams()
	if p == nil {
		return "", false
	}
	if p.ProtocolVersion >= statelessVersion && p.Capabilities != nil {
		_, extension = p.Capabilities.Extensions[tasksExtension]
	}
	return p.ProtocolVersion, extension
}

// taskPrincipalKey carries the key of a tasks method's request from
// mcpTasks to the method's handler, which the SDK gives no RequestExtra.
type taskPrincipalKey struct{}

// extraPrincipal is the key a request came with; nil without
// authentication.
func extraPrincipal(extra *sdk.RequestExtra) *principal {
	if extra == nil || extra.TokenInfo == nil {
		return nil
	}
	p, _ := extra.TokenInfo.Extra[mcpPrincipalKey].(*principal)
	return p
}

func taskPrincipal(ctx context.Context) *principal {
	p, _ := ctx.Value(taskPrincipalKey{}).(*principal)
	return p
}

// mcpTasks is the receiving middleware that adds tasks to the SDK's
// server: the capability, the tools' taskSupport, and a task-augmented
// tools/call; the tasks methods themselves are the server's custom
// methods (addTaskMethods).
func (s *Service) mcpTasks(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			ir, ok := res.(*sdk.InitializeResult)
			if err != nil || !ok || ir.ProtocolVersion < tasksVersion || ir.ProtocolVersion >= statelessVersion {
				return res, err
			}
			tasks := map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
			if s.cfg.Auth.Kind == AuthBearer {
				// Without keys, tasks cannot be told apart by who made them:
				// none are listed (the protocol's advice).
				tasks["list"] = map[string]any{}
			}
			return withFields(res, func(m map[string]any) {
				caps, _ := m["capabilities"].(map[string]any)
				if caps == nil {
					caps = map[string]any{}
					m["capabilities"] = caps
				}
				caps["tasks"] = tasks
			})
		case "server/discover":
			res, err := next(ctx, method, req)
			if dr, ok := res.(*sdk.DiscoverResult); ok && err == nil {
				caps := &sdk.ServerCapabilities{}
				if dr.Capabilities != nil {
					c := *dr.Capabilities
					c.Extensions = maps.Clone(c.Extensions)
					caps = &c
				}
				caps.AddExtension(tasksExtension, nil)
				dr.Capabilities = caps
			}
			return res, err
		case "tools/list":
			res, err := next(ctx, method, req)
			v, _ := taskEra(req.GetSession().(*sdk.ServerSession))
			if err != nil || v < tasksVersion || v >= statelessVersion {
				return res, err
			}
			return withFields(res, func(m map[string]any) {
				tools, _ := m["tools"].([]any)
				for _, t := range tools {
					if tool, ok := t.(map[string]any); ok {
						tool["execution"] = map[string]any{"taskSupport": "optional"}
					}
				}
			})
		case "tools/call":
			if call, ok := req.(*sdk.CallToolRequest); ok && s.asTask(call) {
				return s.startTask(ctx, call)
			}
		case methodTasksGet, methodTasksResult, methodTasksList, methodTasksCancel, methodTasksUpdate:
			ctx = context.WithValue(ctx, taskPrincipalKey{}, extraPrincipal(req.GetExtra()))
		}
		return next(ctx, method, req)
	}
}

// asTask reports whether a tools/call is to run as a task: an agent's,
// asked as a task by a 2025-11-25 client, or by a 2026-07-28 client that
// takes tasks (the service then decides: an agent's call always is one,
// unless it brings a decision in the multi-round-trip way).
func (s *Service) asTask(call *sdk.CallToolRequest) bool {
	if _, ok := s.cfg.Agents.Agent(call.Params.Name); !ok {
		return false
	}
	v, ext := taskEra(call.Session)
	if v >= statelessVersion {
		return ext && call.Params.RequestState == ""
	}
	_, asked := call.Params.Meta[metaTaskParams]
	return asked && v >= tasksVersion
}

// startTask queues the call's run and answers with the task.
func (s *Service) startTask(ctx context.Context, call *sdk.CallToolRequest) (sdk.Result, error) {
	v, _ := taskEra(call.Session)
	in, bad := mcpArguments(call.Params.Arguments)
	if bad != nil {
		if v >= statelessVersion {
			return bad, nil // a tool error, which the client reads as a result
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: bad.Content[0].(*sdk.TextContent).Text}
	}
	p := extraPrincipal(call.Extra)
	if p != nil {
		ctx = kind.WithCaller(ctx, p.caller())
	}
	opts := agents.RunOptions{RunID: agents.NewRunID()}
	opts.ThreadID, opts.UserID = p.scopeIDs(in.ThreadID, in.UserID)
	rec, err := s.cfg.Jobs.Submit(ctx, call.Params.Name, in.Message, opts)
	if err != nil {
		if v >= statelessVersion {
			return s.mcpFailure(ctx, nil, err, opts.RunID), nil
		}
		return nil, s.taskRPCError(ctx, err, opts.RunID)
	}
	s.logger.InfoContext(ctx, "MCP task started", "run_id", rec.RunID, "agent", call.Params.Name, "key", p.keyName())
	task := s.taskOf(rec, p, v)
	if v >= statelessVersion {
		task["resultType"] = "task"
		return &mcpObject{fields: task}, nil
	}
	return &mcpObject{fields: map[string]any{"task": task}}, nil
}

// keyName is the key's name, for the log; "" without authentication.
func (p *principal) keyName() string {
	if p == nil {
		return ""
	}
	return p.name
}

// taskRPCError is a failure as a JSON-RPC error: an API error's code and
// message, -32602 for the client's mistakes, -32603 for the service's
// (logged under a request id, as mcpFailure logs them).
func (s *Service) taskRPCError(ctx context.Context, err error, runID string) *jsonrpc.Error {
	ae := s.mcpFailure(ctx, nil, err, runID).Meta[MetaError].(*apiError)
	code := int64(jsonrpc.CodeInternalError)
	if ae.Status < http.StatusInternalServerError {
		code = jsonrpc.CodeInvalidParams
	}
	return &jsonrpc.Error{Code: code, Message: ae.Code + ": " + ae.Message}
}

// taskNotFound is the answer about a task the key does not have: the same
// whether it never existed or is another key's.
func taskNotFound(id string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Failed to retrieve task: task %.80q not found", id)}
}

// loadTask loads the key's task id: a run it started (and, without
// authentication, any run).
func (s *Service) loadTask(ctx context.Context, p *principal, id string) (agents.RunRecord, error) {
	if strings.TrimSpace(id) == "" {
		return agents.RunRecord{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId is required"}
	}
	rec, err := s.cfg.Agents.Store().LoadRun(ctx, id)
	if _, missing := errors.AsType[*agents.RunNotFoundError](err); missing {
		return rec, taskNotFound(id)
	}
	if err != nil {
		return rec, s.taskRPCError(ctx, err, id)
	}
	if p != nil && (rec.Checkpoint.Key != p.name || rec.Checkpoint.Tenant != p.tenant) {
		return agents.RunRecord{}, taskNotFound(id)
	}
	return rec, nil
}

// taskStatus is a run's status as a task's, and a message on it. A paused
// run waits for input from a key that may decide it; for another, it is
// still working, on someone else's decision.
func taskStatus(rec agents.RunRecord, decider bool) (status, message string) {
	switch rec.Status {
	case agents.StatusQueued:
		return "working", "queued for a worker"
	case agents.StatusRunning:
		return "working", fmt.Sprintf("agent %s is working", rec.Checkpoint.Agent)
	case agents.StatusPaused:
		msg := fmt.Sprintf("agent %s waits for a person to approve a call", rec.Checkpoint.Agent)
		if p := pendingOf(&rec.Checkpoint, false); p != nil {
			msg = fmt.Sprintf("agent %s waits for a person to approve its call of %s", rec.Checkpoint.Agent, p.Tool)
		}
		if !decider {
			return "working", msg + ", which this key may not decide"
		}
		return "input_required", msg
	case agents.StatusCompleted:
		return "completed", ""
	case agents.StatusCancelled:
		msg := "the task was cancelled"
		if c := rec.Checkpoint.Cancel; c != nil && c.By != "" {
			msg += " by " + c.By
		}
		return "cancelled", msg
	}
	return "failed", fmt.Sprintf("the run ended %s", rec.Status)
}

// decides reports whether the key may decide its runs' calls.
func decides(p *principal) bool {
	return p == nil || p.roles&(RoleApprover.bit()|RoleAdmin.bit()) != 0
}

// taskOf is a run as a task, in the shape of the client's revision.
func (s *Service) taskOf(rec agents.RunRecord, p *principal, version string) map[string]any {
	status, msg := taskStatus(rec, decides(p))
	t := map[string]any{
		"taskId":        rec.RunID,
		"status":        status,
		"createdAt":     rec.CreatedAt.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt": rec.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if msg != "" {
		t["statusMessage"] = msg
	}
	// The run is kept as long as the store keeps runs: no ttl.
	if version >= statelessVersion {
		t["ttlMs"], t["pollIntervalMs"] = nil, taskPollMillis
		if status == "failed" {
			// A run that failed answers a tool error, which this
			// revision calls a completed task.
			t["status"] = "completed"
		}
	} else {
		t["ttl"], t["pollInterval"] = nil, taskPollMillis
	}
	return t
}

// taskResult is the tool result a task's run ended with: what the call
// would have answered, related to the task.
func (s *Service) taskResult(ctx context.Context, rec agents.RunRecord, p *principal) *sdk.CallToolResult {
	cp := rec.Checkpoint
	res := agents.RunResult{RunID: rec.RunID, Status: rec.Status, Agent: cp.Agent, Path: cp.Path, Checkpoint: &cp}
	if rec.Status == agents.StatusCompleted {
		res.Answer = agents.LastText(cp.Steps)
	}
	answering, _ := s.cfg.Agents.Agent(cp.Agent)
	out := s.mcpResult(ctx, res, nil, len(answering.Output) > 0, decides(p))
	out.Meta[metaRelatedTask] = map[string]any{"taskId": rec.RunID}
	return out
}

// taskID is the params of the methods about one task.
type taskID struct {
	sdk.ParamsBase
	TaskID string `json:"taskId"`
}

// id is the task the params name; "" when the request has no params.
func (p *taskID) id() string {
	if p == nil {
		return ""
	}
	return p.TaskID
}

// taskUpdate is tasks/update's params.
type taskUpdate struct {
	sdk.ParamsBase
	TaskID         string               `json:"taskId"`
	InputResponses sdk.InputResponseMap `json:"inputResponses"`
}

// taskCursor is tasks/list's params.
type taskCursor struct {
	sdk.ParamsBase
	Cursor string `json:"cursor"`
}

// addTaskMethods registers the tasks methods on srv.
func (s *Service) addTaskMethods(srv *sdk.Server) error {
	return errors.Join(
		sdk.AddReceivingCustomMethod(srv, methodTasksGet, s.tasksGet),
		sdk.AddReceivingCustomMethod(srv, methodTasksResult, s.tasksResult),
		sdk.AddReceivingCustomMethod(srv, methodTasksList, s.tasksList),
		sdk.AddReceivingCustomMethod(srv, methodTasksCancel, s.tasksCancel),
		sdk.AddReceivingCustomMethod(srv, methodTasksUpdate, s.tasksUpdate),
	)
}

// taskMethod refuses a tasks method to a client that does not speak it:
// before 2025-11-25, or a 2026-07-28 client without the extension, or a
// method the client's era does not have.
func taskMethod(ss *sdk.ServerSession, method string) (string, error) {
	v, ext := taskEra(ss)
	switch {
	case v >= statelessVersion && !ext:
		return v, &jsonrpc.Error{Code: -32021, Message: fmt.Sprintf("%s needs the %s extension in the request's client capabilities", method, tasksExtension)}
	case v >= statelessVersion && (method == methodTasksResult || method == methodTasksList):
		return v, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s is not a method of the %s extension: tasks/get carries the result", method, tasksExtension)}
	case v < statelessVersion && method == methodTasksUpdate, v < tasksVersion:
		return v, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method %q not found in protocol %s", method, v)}
	}
	return v, nil
}

// openTask starts a tasks method about one task: the client's revision,
// its key, and the key's task.
func (s *Service) openTask(ctx context.Context, ss *sdk.ServerSession, method, id string) (string, *principal, agents.RunRecord, error) {
	v, err := taskMethod(ss, method)
	if err != nil {
		return v, nil, agents.RunRecord{}, err
	}
	p := taskPrincipal(ctx)
	rec, err := s.loadTask(ctx, p, id)
	return v, p, rec, err
}

// tasksGet answers tasks/get: the task; at 2026-07-28, with its result
// once it ended, or the decision it waits on.
func (s *Service) tasksGet(ctx context.Context, ss *sdk.ServerSession, params *taskID) (*mcpObject, error) {
	v, p, rec, err := s.openTask(ctx, ss, methodTasksGet, params.id())
	if err != nil {
		return nil, err
	}
	t := s.taskOf(rec, p, v)
	if v >= statelessVersion {
		t["resultType"] = "complete"
		switch t["status"] {
		case "completed":
			t["result"] = s.taskResult(ctx, rec, p)
		case "input_required":
			if pc := pendingOf(&rec.Checkpoint, true); pc != nil {
				t["inputRequests"] = sdk.InputRequestMap{taskDecisionPrefix + pc.CallID: decisionForm(rec.Checkpoint.Agent, pc)}
			}
		}
	}
	return &mcpObject{fields: t}, nil
}

// tasksResult answers tasks/result (2025-11-25): it waits until the task
// ends, and returns what the call would have. While the run waits on a
// call the key may decide, the client's person is asked (an elicitation
// related to the task) once per call; their decision is checked and
// applied as the multi-round-trip retry's (mcpDecide), and the run goes
// on in the background. The request's context, the service's request
// timeout and its drain end the wait.
func (s *Service) tasksResult(ctx context.Context, ss *sdk.ServerSession, params *taskID) (*sdk.CallToolResult, error) {
	if _, err := taskMethod(ss, methodTasksResult); err != nil {
		return nil, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()

	p, id := taskPrincipal(ctx), params.id()
	s.logger.DebugContext(ctx, "MCP task result awaited", "run_id", id, "key", p.keyName())
	related := sdk.Meta{metaRelatedTask: map[string]any{"taskId": id}}
	asked := map[string]bool{}
	for {
		rec, err := s.loadTask(ctx, p, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, err
		}
		switch status, _ := taskStatus(rec, decides(p)); status {
		case "cancelled":
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("task %s was cancelled", rec.RunID)}
		case "completed", "failed":
			return s.taskResult(ctx, rec, p), nil
		case "input_required":
			pc := pendingOf(&rec.Checkpoint, true)
			if pc == nil || asked[pc.CallID] || !canElicit(ss) {
				break
			}
			asked[pc.CallID] = true
			run := agents.RunResult{RunID: rec.RunID, Status: rec.Status, Agent: rec.Checkpoint.Agent, Checkpoint: &rec.Checkpoint}
			answer, err := s.elicitAnswer(ctx, ss, run, related)
			if err != nil {
				break // left paused: asked again by the next tasks/result
			}
			if _, done, err := s.mcpDecide(ctx, p, decides(p), mcpState(rec.RunID, pc.CallID), answer, s.queueResume); err != nil {
				s.logger.WarnContext(ctx, "MCP task decision failed", "run_id", rec.RunID, "error", err)
			} else if done != nil && done.IsError {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: done.Content[0].(*sdk.TextContent).Text}
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(followPoll):
		}
	}
}

// queueResume resumes a paused run with a decision in the background: a
// worker of any replica drives it on.
func (s *Service) queueResume(ctx context.Context, runID string, d agents.Decision) (agents.RunResult, error) {
	rec, err := s.cfg.Jobs.Resume(ctx, runID, d)
	return agents.RunResult{RunID: rec.RunID, Status: rec.Status, Path: rec.Checkpoint.Path}, err
}

// tasksUpdate answers tasks/update (2026-07-28): the person's decision on
// the call the task waits on, checked and applied as the multi-round-trip
// retry's (mcpDecide); the run goes on in the background. An answer about
// a call the run no longer waits on is ignored, as the extension asks.
func (s *Service) tasksUpdate(ctx context.Context, ss *sdk.ServerSession, params *taskUpdate) (*mcpObject, error) {
	if params == nil {
		params = &taskUpdate{}
	}
	_, p, rec, err := s.openTask(ctx, ss, methodTasksUpdate, params.TaskID)
	if err != nil {
		return nil, err
	}
	ack := &mcpObject{fields: map[string]any{"resultType": "complete"}}
	// Only the answer to the call the run waits on now counts: any other
	// key is unknown or answered already.
	pc := pendingOf(&rec.Checkpoint, true)
	if rec.Status != agents.StatusPaused || pc == nil {
		return ack, nil
	}
	r, ok := params.InputResponses[taskDecisionPrefix+pc.CallID]
	if !ok {
		return ack, nil
	}
	answer, _ := r.(*sdk.ElicitResult)
	_, done, err := s.mcpDecide(ctx, p, decides(p), mcpState(rec.RunID, pc.CallID), answer, s.queueResume)
	if err != nil {
		return nil, s.taskRPCError(ctx, err, rec.RunID)
	}
	if done != nil && done.IsError {
		if ae, _ := done.Meta[MetaError].(*apiError); ae != nil && ae.Code == CodeRunNotPaused {
			return ack, nil // decided meanwhile
		}
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: done.Content[0].(*sdk.TextContent).Text}
	}
	return ack, nil
}

// tasksCancel answers tasks/cancel: the run is cancelled as POST
// /v1/runs/{id}/cancel cancels it (on whichever replica drives it).
// 2025-11-25 answers the cancelled task, and refuses a task that ended;
// 2026-07-28 acknowledges.
func (s *Service) tasksCancel(ctx context.Context, ss *sdk.ServerSession, params *taskID) (*mcpObject, error) {
	v, p, rec, err := s.openTask(ctx, ss, methodTasksCancel, params.id())
	if err != nil {
		return nil, err
	}
	if rec.Status == agents.StatusCancelled {
		// Cancel answers a cancelled run as it is; a task that ended is
		// refused all the same.
		err = &agents.NotCancellableError{RunID: rec.RunID, Status: rec.Status}
	} else {
		wait, cancel := context.WithTimeout(ctx, cancelWait)
		defer cancel()
		rec, err = s.cfg.Agents.Cancel(wait, params.TaskID, agents.CancelOptions{By: p.keyName()})
	}

	if nc, ended := errors.AsType[*agents.NotCancellableError](err); ended {
		if v >= statelessVersion {
			return &mcpObject{fields: map[string]any{"resultType": "complete"}}, nil
		}
		status, _ := taskStatus(agents.RunRecord{Status: nc.Status}, true)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", status)}
	}
	if _, pending := errors.AsType[*agents.CancelPendingError](err); err != nil && !pending {
		return nil, s.taskRPCError(ctx, err, params.TaskID)
	}
	s.logger.InfoContext(ctx, "MCP task cancelled", "run_id", params.TaskID, "key", p.keyName(), "status", string(rec.Status))
	if v >= statelessVersion {
		return &mcpObject{fields: map[string]any{"resultType": "complete"}}, nil
	}
	return &mcpObject{fields: s.taskOf(rec, p, v)}, nil
}

// tasksList answers tasks/list (2025-11-25): the key's tasks, newest
// first, a page at a time. A service without keys lists none (it cannot
// tell whose they are) and does not declare the method.
func (s *Service) tasksList(ctx context.Context, ss *sdk.ServerSession, params *taskCursor) (*mcpObject, error) {
	v, err := taskMethod(ss, methodTasksList)
	if err != nil {
		return nil, err
	}
	p := taskPrincipal(ctx)
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "tasks/list needs keys: this service does not authenticate its clients, so it cannot tell whose tasks are whose"}
	}
	if params == nil {
		params = &taskCursor{}
	}
	page, err := agents.ListRuns(ctx, s.cfg.Agents.Store(), agents.RunFilter{Tenant: p.tenant, Key: p.name, After: params.Cursor})
	if _, bad := errors.AsType[*agents.InvalidOptionError](err); bad {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the cursor is not one this service gave"}
	}
	if err != nil {
		return nil, s.taskRPCError(ctx, err, "")
	}
	tasks := make([]any, len(page.Runs))
	for i, rec := range page.Runs {
		tasks[i] = s.taskOf(rec, p, v)
	}
	out := map[string]any{"tasks": tasks}
	if page.Next != "" {
		out["nextCursor"] = page.Next
	}
	return &mcpObject{fields: out}, nil
}
