package service

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/jobs"
)

// runAgent runs an agent for a request and records the run in the request's
// log line and the metrics.
func (s *Service) runAgent(r *http.Request, agent, input string, opts agents.RunOptions) (agents.RunResult, error) {
	ri := info(r)
	ri.agent = agent
	res, err := s.cfg.Agents.Run(r.Context(), agent, input, opts)
	s.recordRun(ri, agent, res, err)
	return res, err
}

func (s *Service) recordRun(ri *reqInfo, agent string, res agents.RunResult, err error) {
	ri.runID = res.RunID
	if errors.Is(err, agents.ErrInterrupted) && res.RunID != "" {
		s.logger.Warn("run interrupted by shutdown: it stays running in the store and can be recovered", "run_id", res.RunID, "agent", res.Agent, "request_id", ri.id)
	}
	var unknown *agents.UnknownAgentError
	if asErr(err, &unknown) {
		ri.agent = "" // not a label value: any string could be asked for
		return
	}
	if len(res.Path) > 0 {
		// A resume or a continue names no agent: the run's entry agent is
		// the one asked for.
		agent = res.Path[0]
	}
	if agent != "" {
		ri.agent, ri.final = agent, cmp.Or(res.Agent, agent)
		s.metrics.run(agent, ri.final, res)
	}
}

// runRequest is the body of POST /v1/agents/{agent}/runs and POST
// /v1/runs.
type runRequest struct {
	// Agent names the agent, for POST /v1/runs only; empty means the
	// service's entry agent.
	Agent string `json:"agent"`
	// Background queues the run and answers 202 with its record at once;
	// a worker of any replica drives it (Config.Jobs).
	Background bool `json:"background"`
	// Input is the user's message; required.
	Input string `json:"input"`
	// ThreadID names the conversation (thread-scoped budgets).
	ThreadID string `json:"thread_id"`
	// UserID names the user (user memory).
	UserID string `json:"user_id"`
	// History is the thread so far, in chat-completions messages (a
	// previous run's messages).
	History []wireMessage `json:"history"`
}

// decisionRequest is the body of POST /v1/runs/{id}/resume.
type decisionRequest struct {
	// Action is approve or reject.
	Action string `json:"action"`
	// Feedback is a note for the model.
	Feedback string `json:"feedback"`
	// Arguments, on approval, replace the call's arguments.
	Arguments json.RawMessage `json:"arguments"`
	// Scope is how far an approval reaches: call (the default), run (the
	// tool for the rest of the run) or thread (the tool in the run's
	// thread).
	Scope string `json:"scope"`
	// By names who decided, for the run's record.
	By string `json:"by"`
	// Background queues the resumed run for a worker and answers 202.
	Background bool `json:"background"`
}

// continueRequest is the body of POST /v1/runs/{id}/continue; every field
// is optional.
type continueRequest struct {
	// Steps is the fresh allowance of model calls; zero means the agent's
	// maxSteps.
	Steps int `json:"steps"`
	// Timeout is the continued run's run timeout, a Go duration ("90s");
	// empty means the agent's.
	Timeout string `json:"timeout"`
	// By names who continues the run, for its record.
	By string `json:"by"`
	// Background queues the continued run for a worker and answers 202.
	Background bool `json:"background"`
}

// maxContinueSteps bounds the steps a continuation may ask for, as the
// schema bounds maxSteps.
const maxContinueSteps = 100

func (s *Service) continueRun(w http.ResponseWriter, r *http.Request) error {
	var req continueRequest
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req, true); err != nil {
			return err
		}
	}
	by, err := byKey(r, req.By)
	if err != nil {
		return err
	}
	opts := agents.ContinueOptions{Steps: req.Steps, By: by}
	if req.Steps < 0 || req.Steps > maxContinueSteps {
		return invalid(CodeInvalidRequest, "steps", fmt.Sprintf("steps must be from 1 to %d, or 0 for the agent's maxSteps", maxContinueSteps))
	}
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 {
			return invalid(CodeInvalidRequest, "timeout", fmt.Sprintf("timeout must be a positive Go duration such as \"90s\", not %q", req.Timeout))
		}
		opts.Timeout = d
	}
	id := r.PathValue("id")
	info(r).runID = id
	if _, err := s.loadRun(r, id, continueRun); err != nil {
		return err
	}
	if req.Background {
		return s.answerQueued(w, r, func(q jobs.Queue) (agents.RunRecord, error) { return q.Continue(r.Context(), id, opts) })
	}
	s.answerRun(w, r, "", id, func(ctx context.Context) (agents.RunResult, error) {
		return s.cfg.Agents.Continue(ctx, id, opts)
	})
	return nil
}

func (s *Service) startRun(w http.ResponseWriter, r *http.Request) error {
	var req runRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	if strings.TrimSpace(req.Input) == "" {
		return invalid(CodeInvalidRequest, "input", "input is required")
	}
	history, _, err := toHistory("history", req.History, false)
	if err != nil {
		return err
	}
	agent := r.PathValue("agent")
	switch {
	case agent != "" && req.Agent != "" && req.Agent != agent:
		return invalid(CodeInvalidRequest, "agent", fmt.Sprintf("agent %q differs from the path's %q; leave it out", req.Agent, agent))
	case agent == "":
		agent = cmp.Or(req.Agent, s.cfg.Entry)
		if agent == "" {
			return invalid(CodeInvalidRequest, "agent", "agent is required: this service has no entry agent")
		}
	}
	info(r).agent = agent
	// The id is made here, so that a stream names the run in its first
	// event, before the first model call.
	opts := agents.RunOptions{History: history, RunID: agents.NewRunID()}
	opts.ThreadID, opts.UserID = principalOf(r).scopeIDs(req.ThreadID, req.UserID)
	if req.Background {
		return s.answerQueued(w, r, func(q jobs.Queue) (agents.RunRecord, error) { return q.Submit(r.Context(), agent, req.Input, opts) })
	}
	s.answerRun(w, r, agent, opts.RunID, func(ctx context.Context) (agents.RunResult, error) {
		return s.cfg.Agents.Run(ctx, agent, req.Input, opts)
	})
	return nil
}

func (s *Service) resumeRun(w http.ResponseWriter, r *http.Request) error {
	var req decisionRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	// The runtime checks the scope and the names (*agents.InvalidOptionError).
	// Who decided is the key; a name in the body is only what the sender
	// claims.
	d := agents.Decision{Action: agents.DecisionAction(req.Action), Feedback: req.Feedback, Scope: agents.GrantScope(req.Scope), ClaimedBy: req.By}
	if p := principalOf(r); p != nil {
		d.By = p.name
	}
	switch d.Action {
	case agents.Approve:
		if present(req.Arguments) {
			d.Arguments = req.Arguments
		}
	case agents.Reject:
		if present(req.Arguments) {
			return invalid(CodeInvalidRequest, "arguments", "arguments are only given with approve")
		}
	default:
		return invalid(CodeInvalidRequest, "action", fmt.Sprintf("action must be approve or reject, not %q", req.Action))
	}
	id := r.PathValue("id")
	info(r).runID = id
	if _, err := s.loadRun(r, id, decideRun); err != nil {
		return err
	}
	if req.Background {
		return s.answerQueued(w, r, func(q jobs.Queue) (agents.RunRecord, error) {
			rec, err := q.Resume(r.Context(), id, d)
			if err == nil {
				s.metrics.decision(principalOf(r), d.By, d.Action)
			}
			return rec, err
		})
	}
	s.answerRun(w, r, "", id, func(ctx context.Context) (agents.RunResult, error) {
		res, err := s.cfg.Agents.Resume(ctx, id, d)
		if ran(res) {
			s.metrics.decision(principalOf(r), d.By, d.Action)
		}
		return res, err
	})
	return nil
}

// answerQueued hands a request to the job queue and answers 202 with the
// queued run's record and where to read it; a worker of any replica
// drives it, and GET /v1/runs/{id} follows it.
func (s *Service) answerQueued(w http.ResponseWriter, r *http.Request, submit func(jobs.Queue) (agents.RunRecord, error)) error {
	if s.cfg.Jobs == nil {
		return invalid(CodeInvalidRequest, "background", "this service runs no background queue: send the request without background")
	}
	rec, err := submit(s.cfg.Jobs)
	if err != nil {
		return err
	}
	ri := info(r)
	ri.runID = rec.RunID
	if ri.agent == "" {
		ri.agent = rec.Agent
	}
	w.Header().Set("X-Aid-Run-Id", rec.RunID)
	w.Header().Set("Location", "/v1/runs/"+rec.RunID)
	writeJSON(w, http.StatusAccepted, recordOf(rec, mayDecide(r)))
	return nil
}

// TokenEvent is the data of a token event on a runs stream: a piece of a
// model's text, as the model writes it, before the model_call event that
// reports the whole answer of that call.
type TokenEvent struct {
	// Agent is the agent whose model writes, Step the step in its run.
	Agent string `json:"agent"`
	Step  int    `json:"step"`
	// Depth is 0 for the run's own agents and n for a run delegated n
	// deep, whose text becomes an observation rather than the answer.
	Depth int `json:"depth,omitempty"`
	// Text is the piece.
	Text string `json:"text"`
}

// ToolCallEvent is the data of the tool_call_start and tool_call events
// on a runs stream: a call starts, and a call has its observation. Every
// call the model makes has them, whatever runs it: Go code, an http,
// fixture or mcp tool, a search_ retriever, a transfer_ or delegate_ call
// (a denied or rejected call, which never runs, has only tool_call).
type ToolCallEvent struct {
	// Tool is the tool called.
	Tool string `json:"tool"`
	// Agent is the agent that called, Step the step in its run, CallID
	// the model's id for the call.
	Agent  string `json:"agent"`
	Step   int    `json:"step"`
	CallID string `json:"call_id"`
	// Depth is 0 for the run's own agents and n for a run delegated n
	// deep.
	Depth int `json:"depth,omitempty"`
	// Arguments are the call's arguments (tool_call_start).
	Arguments string `json:"arguments,omitempty"`
	// Observation is what the model will read (tool_call).
	Observation string `json:"observation,omitempty"`
	// ErrorKind classifies a failed call (tool_call): agents.ErrorKind.
	ErrorKind string `json:"error_kind,omitempty"`
	// DurationMS is how long the call ran (tool_call), 0 for one that
	// never started.
	DurationMS float64 `json:"duration_ms"`
}

// ToolProgressEvent is a tool_progress server-sent event of a runs stream:
// how far a running tool call has got, as the tool reported it (an MCP
// server's progress notifications).
type ToolProgressEvent struct {
	// Agent is the agent whose call runs, Step the step in its run.
	Agent string `json:"agent"`
	Step  int    `json:"step"`
	// Depth is 0 for the run's own agents and n for a run delegated n deep.
	Depth int `json:"depth,omitempty"`
	// CallID and Tool name the call.
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	// Progress is the work done so far, Total the work in all when known.
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	// Message says what is being done, when the tool says it.
	Message string `json:"message,omitempty"`
}

// answerRun runs do and answers with the run as JSON, or as server-sent
// events when the client accepts text/event-stream: token events with the
// model's text as it is written, model_call events (seen by the Instrument
// wrappers), tool_call_start and tool_call events for every call as it
// starts and ends (from the run's own events, so that every kind of call
// has them), tool_progress events with what running tools report, for a
// new run and a resumed or continued one alike, then one result event with
// the run, or an error event.
//
// runID is the run's id, known before it starts: the stream names it in its
// header (X-Aid-Run-Id), and its first event, once the run is stored, is
// run (the id, the agent and the status running), so that the run can be
// read or cancelled while it goes.
func (s *Service) answerRun(w http.ResponseWriter, r *http.Request, agent, runID string, do func(ctx context.Context) (agents.RunResult, error)) {
	ri := info(r)
	if !acceptsEventStream(r) {
		res, err := do(r.Context())
		s.recordRun(ri, agent, res, err)
		if res.RunID != "" {
			w.Header().Set("X-Aid-Run-Id", res.RunID)
		}
		if err != nil && !ran(res) {
			ri.err = writeError(w, err, nil)
			return
		}
		out := runOf(res, err, ri.id, mayDecide(r))
		status := http.StatusOK
		if out.Error != nil {
			ri.err, status = out.Error, out.Error.Status
			retryHeaders(w, out.Error)
		}
		writeJSON(w, status, out)
		return
	}
	w.Header().Set("X-Aid-Run-Id", runID)
	sse := newSSE(w, s.limits.WriteTimeout)
	ri.clock.emit = sse.event
	// The runtime delivers events one at a time: no lock.
	started := map[[2]string]time.Time{}
	res, err := do(agents.ContextWithEvents(r.Context(), func(ev agents.Event) {
		switch ev.Kind {
		case agents.EventDriven:
			sse.event("run", runStartedJSON{RunID: ev.RunID, Agent: ev.Agent, Status: string(agents.StatusRunning)})
		case agents.EventText:
			sse.event("token", TokenEvent{Agent: ev.Agent, Step: ev.Step, Depth: ev.Depth, Text: ev.Text})
		case agents.EventToolStart, agents.EventToolResult:
			c := ev.Calls[0]
			key := [2]string{strconv.Itoa(ev.Depth), c.ID}
			te := ToolCallEvent{Tool: c.Name, Agent: ev.Agent, Step: ev.Step, CallID: c.ID, Depth: ev.Depth}
			if ev.Kind == agents.EventToolStart {
				started[key] = time.Now()
				te.Arguments = c.Arguments
				sse.event("tool_call_start", te)
				return
			}
			if t, ok := started[key]; ok {
				te.DurationMS = ms(time.Since(t))
				delete(started, key)
			}
			te.Observation, te.ErrorKind = c.Observation, string(c.ErrorKind)
			sse.event("tool_call", te)
		case agents.EventToolProgress:
			p := ToolProgressEvent{Agent: ev.Agent, Step: ev.Step, Depth: ev.Depth, Progress: ev.Progress.Progress, Total: ev.Progress.Total, Message: ev.Progress.Message}
			if len(ev.Calls) == 1 {
				p.CallID, p.Tool = ev.Calls[0].ID, ev.Calls[0].Name
			}
			sse.event("tool_progress", p)
		}
	}))
	s.recordRun(ri, agent, res, err)
	if err != nil && !ran(res) {
		ae := classify(err, ri.id, "")
		ri.err = ae
		sse.event("error", errorBody{Error: ae})
	} else {
		out := runOf(res, err, ri.id, mayDecide(r))
		ri.err = out.Error
		sse.event("result", out)
	}
	sse.close()
}

// runStartedJSON is the first event of a runs stream: the run's id, before
// anything else happens.
type runStartedJSON struct {
	RunID  string `json:"run_id"`
	Agent  string `json:"agent,omitempty"`
	Status string `json:"status"`
}

// ran reports whether a failed request ran the run, so that its answer is
// the run (its partial result) with the error. It did not when the runtime
// refused it before it started or restored the run: an option it cannot
// use, a run that does not exist, a resume of a run that is not paused, a
// continue of one that did not stop early, a resume that lost to another.
// Nor did a new run whose record could not be stored. The result then has
// no path, and the answer is the error alone, never a run with zero
// fields.
func ran(res agents.RunResult) bool {
	return res.RunID != "" && len(res.Path) > 0
}

func acceptsEventStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
			return true
		}
	}
	return false
}

// runRecordJSON is a stored run, as GET /v1/runs/{id} answers it.
type runRecordJSON struct {
	RunID     string              `json:"run_id"`
	Agent     string              `json:"agent"`
	Status    string              `json:"status"`
	Version   int64               `json:"version"`
	UpdatedAt time.Time           `json:"updated_at"`
	Path      []string            `json:"path"`
	Steps     []agents.StepRecord `json:"steps"`
	Usage     usageJSON           `json:"usage"`
	CostUSD   float64             `json:"cost_usd"`
	Pending   *pendingCall        `json:"pending,omitempty"`
	// Answer is a completed run's answer, as POST /v1/runs answers it: a
	// background run's client reads it here.
	Answer string `json:"answer,omitempty"`
	// LastText is what the model last wrote, the partial result of a run
	// that stopped early.
	LastText string `json:"last_text,omitempty"`
	// ContinueURL is set for a run that stopped early.
	ContinueURL string `json:"continue_url,omitempty"`
	// Continuations lists where the run was continued.
	Continuations []agents.Continuation `json:"continuations,omitempty"`
	// CancelRequested is a cancellation asked for and not yet served by
	// the replica driving the run.
	CancelRequested *agents.CancelRequest `json:"cancel_requested,omitempty"`
	// CancelledBy says who cancelled a cancelled run, and when.
	CancelledBy *agents.CancelRequest `json:"cancelled_by,omitempty"`
	// DrivenBy names the replica whose worker drives a running
	// background run (jobs.Config.Replica).
	DrivenBy string `json:"driven_by,omitempty"`
}

func (s *Service) getRun(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	info(r).runID = id
	rec, err := s.loadRun(r, id, readRun)
	if err != nil {
		return err
	}
	if acceptsEventStream(r) {
		s.followRun(w, r, rec)
		return nil
	}
	out := recordOf(rec, mayDecide(r))
	if s.cfg.Jobs != nil && rec.Status == agents.StatusRunning {
		if out.DrivenBy, err = s.cfg.Jobs.Driver(r.Context(), id); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// followPoll is how often a followed run is read again.
const followPoll = 200 * time.Millisecond

// followRun answers GET /v1/runs/{id} with Accept: text/event-stream: a
// run event with the run now and at each change (a step saved, a status),
// from whichever replica or worker drives it, then a result event once it
// is neither queued nor running, which ends the stream. The request's
// timeout ends a stream of a run still going; the client follows it again.
func (s *Service) followRun(w http.ResponseWriter, r *http.Request, rec agents.RunRecord) {
	sse := newSSE(w, s.limits.WriteTimeout)
	defer sse.close()
	ctx := r.Context()
	for {
		if rec.Status != agents.StatusQueued && rec.Status != agents.StatusRunning {
			sse.event("result", recordOf(rec, mayDecide(r)))
			return
		}
		sse.event("run", recordOf(rec, mayDecide(r)))
		for version := rec.Version; rec.Version == version; {
			select {
			case <-ctx.Done():
				return
			case <-time.After(followPoll):
			}
			next, err := s.cfg.Agents.Store().LoadRun(ctx, rec.RunID)
			if err != nil {
				if ctx.Err() == nil {
					sse.event("error", errorBody{Error: classify(err, info(r).id, rec.RunID)})
				}
				return
			}
			rec = next
		}
	}
}

// recordOf renders a stored run.
func recordOf(rec agents.RunRecord, decider bool) runRecordJSON {
	cp := rec.Checkpoint
	out := runRecordJSON{
		RunID: rec.RunID, Agent: rec.Agent, Status: string(rec.Status), Version: rec.Version, UpdatedAt: rec.UpdatedAt,
		Path: cp.Path, Steps: cp.Steps, CostUSD: cp.CostUSD,
		Usage:       usageJSONOf(cp.Usage.Usage()),
		ContinueURL: continueURL(rec.RunID, rec.Status), Continuations: cp.Continuations,
		CancelRequested: rec.Cancel,
	}
	if rec.Status == agents.StatusCancelled {
		out.CancelledBy = cp.Cancel
	}
	if cp.Pending != nil && agents.Continuable(rec.Status) {
		// The step that stopped during its calls, as it stood.
		out.Steps = append(slices.Clone(out.Steps), cp.Pending.Step)
	}
	out.LastText = agents.LastText(out.Steps)
	if rec.Status == agents.StatusCompleted {
		out.Answer = out.LastText // what agents.Record logs as the answer too
	}
	if out.Steps == nil {
		out.Steps = []agents.StepRecord{}
	}
	if rec.Status == agents.StatusPaused {
		out.Pending = pendingOf(&cp, decider)
	}
	return out
}

// runEvents answers GET /v1/runs/{id}/events: the run's event log as JSON
// Lines (agents.Record), for aidgen replay. format may be left out or
// jsonl.
func (s *Service) runEvents(w http.ResponseWriter, r *http.Request) error {
	if f := r.URL.Query().Get("format"); f != "" && f != "jsonl" {
		return invalid(CodeInvalidRequest, "format", fmt.Sprintf("format must be jsonl, not %q", f))
	}
	id := r.PathValue("id")
	info(r).runID = id
	rec, err := s.loadRun(r, id, readRun)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := agents.Record(&b, rec, "", "", ""); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Content-Disposition", `attachment; filename="`+id+`.jsonl"`)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Bytes()) // the client may be gone
	return nil
}

// cancelRunRequest is the body of POST /v1/runs/{id}/cancel; it is
// optional.
type cancelRunRequest struct {
	// By names who cancels the run, for its record.
	By string `json:"by"`
}

// cancelWait bounds how long POST /v1/runs/{id}/cancel waits for the run
// to stop before it answers 202 with the request recorded.
const cancelWait = 30 * time.Second

func (s *Service) cancelRun(w http.ResponseWriter, r *http.Request) error {
	var req cancelRunRequest
	if r.ContentLength != 0 {
		if err := decodeBody(r, &req, true); err != nil {
			return err
		}
	}
	id := r.PathValue("id")
	info(r).runID = id
	if _, err := s.loadRun(r, id, cancelRun); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), cancelWait)
	defer cancel()
	by, err := byKey(r, req.By)
	if err != nil {
		return err
	}
	rec, err := s.cfg.Agents.Cancel(ctx, id, agents.CancelOptions{By: by})
	if _, pending := errors.AsType[*agents.CancelPendingError](err); pending {
		// Recorded: the replica driving the run stops it when it sees the
		// request, or Drive does if that replica is gone.
		writeJSON(w, http.StatusAccepted, recordOf(rec, mayDecide(r)))
		return nil
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordOf(rec, mayDecide(r)))
	return nil
}

// searchRequest is the body of POST /v1/retrievers/{name}/search.
type searchRequest struct {
	// Query is what to look for; required.
	Query string `json:"query"`
	// K is how many passages to return, 1 to agents.MaxSearchK; zero
	// means the retriever's default.
	K int `json:"k"`
}

// passageJSON is one search result.
type passageJSON struct {
	ID       string            `json:"id"`
	Source   string            `json:"source"`
	Heading  string            `json:"heading,omitempty"`
	Start    int               `json:"start"`
	End      int               `json:"end"`
	Score    float64           `json:"score"`
	Text     string            `json:"text"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (s *Service) search(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	searcher, ok := s.cfg.Retrievers[name]
	if !ok {
		return newError(http.StatusNotFound, TypeNotFound, CodeRetrieverNotFound, fmt.Sprintf("no retriever %q", name))
	}
	var req searchRequest
	if err := decodeBody(r, &req, true); err != nil {
		return err
	}
	if strings.TrimSpace(req.Query) == "" {
		return invalid(CodeInvalidRequest, "query", "query is required")
	}
	if req.K < 0 || req.K > agents.MaxSearchK {
		return invalid(CodeInvalidRequest, "k", fmt.Sprintf("k must be from 1 to %d, or 0 for the retriever's default", agents.MaxSearchK))
	}
	ctx := r.Context()
	if s.cfg.SearchBudget != "" {
		// The request is the scope of a run- or thread-scoped budget: its
		// account closes with it.
		key := info(r).id
		ctx = gateway.ContextWithBudget(ctx, s.cfg.SearchBudget, key)
		defer s.endScopes(ctx, key)
	}
	hits, err := searcher.Search(ctx, req.Query, req.K)
	if err != nil {
		return fmt.Errorf("search %s: %w", name, err)
	}
	data := make([]passageJSON, len(hits))
	for i, h := range hits {
		data[i] = passageJSON{ID: h.ID, Source: h.Source, Heading: h.Heading, Start: h.Start, End: h.End, Score: h.Score, Text: h.Text, Metadata: h.Metadata}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "retriever": name, "query": req.Query, "data": data})
	return nil
}

// sse writes server-sent events, one at a time from any goroutine, pushing
// the write deadline forward before each so that a long run's stream is not
// cut by the server's WriteTimeout while a stalled client still is.
type sse struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	closed  bool
	failed  bool
	last    time.Time // when a frame was last written
}

func newSSE(w http.ResponseWriter, timeout time.Duration) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// event writes one named event; data: [DONE] style raw payloads use data.
func (s *sse) event(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorBody{Error: newError(http.StatusInternalServerError, TypeServer, CodeServer, "internal error: an event could not be encoded")})
	}
	s.write("event: " + name + "\ndata: " + string(b) + "\n\n")
}

// data writes one unnamed event, as the chat-completions stream does.
func (s *sse) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(errorBody{Error: newError(http.StatusInternalServerError, TypeServer, CodeServer, "internal error: a chunk could not be encoded")})
	}
	s.write("data: " + string(b) + "\n\n")
}

func (s *sse) done() {
	s.write("data: [DONE]\n\n")
	s.close()
}

func (s *sse) write(frame string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.failed {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write([]byte(frame)); err != nil {
		s.failed = true // the client is gone; the run's context ends with it
		return
	}
	_ = s.rc.Flush()
	s.last = time.Now()
}

// keepAlive writes a comment line, which clients ignore, when nothing was
// written for quiet or longer, so that a stream waiting on a long tool
// call is not taken for dead.
func (s *sse) keepAlive(quiet time.Duration) {
	s.mu.Lock()
	silent := time.Since(s.last) >= quiet
	s.mu.Unlock()
	if silent {
		s.write(": keep-alive\n\n")
	}
}

// close stops the stream: events after it (a late tool goroutine) are
// dropped rather than written to a finished response.
func (s *sse) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// endScopes closes the budget accounts keyed by a request that was its own
// run and thread, once it is answered.
func (s *Service) endScopes(ctx context.Context, key string) {
	err := errors.Join(s.cfg.Gateway.EndScope(ctx, gateway.ScopeRun, key), s.cfg.Gateway.EndScope(ctx, gateway.ScopeThread, key))
	if err != nil {
		s.logger.WarnContext(ctx, "closing the request's budget accounts failed", "request_id", key, "err", err)
	}
}
