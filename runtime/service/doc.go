// Package service is the HTTP service that generated apps and teams run: an
// OpenAI-compatible chat-completions endpoint in front of the agents, a runs
// API with human approval, an MCP server whose tools are the agents,
// retriever search, health, readiness and Prometheus metrics.
//
// It is configured with runtime objects (a *gateway.Gateway, an
// *agents.Runtime, searchers, readiness checks) through a plain Config, so
// that it never reads the IR: runtime/serve (which a generated main.go
// calls with its application description, as serve.Main) assembles the
// runtime from the description with app.Assemble and hands the result to
// New.
//
// # Endpoints
//
//   - POST /v1/chat/completions: OpenAI chat completions, where model names
//     an agent (Config.Entry when empty). See the mapping below.
//   - POST /v1/responses, GET and DELETE /v1/responses/{id}, POST
//     /v1/responses/{id}/cancel: OpenAI's Responses API over the same runs.
//     A response of an agent is its run (resp_ and the run id's hex
//     digits); its output items are the run's steps: text as message
//     items, the agent's own calls as mcp_call items, calls of the
//     client's function tools (agents.ClientRequest) as function_call
//     items that end the run, and a call waiting for approval as an
//     mcp_approval_request, the response then incomplete with aid.status
//     paused. previous_response_id continues the thread in a new run, or
//     resumes a paused one in place with an approver's
//     mcp_approval_response. Streams send the specification's events with
//     sequence numbers and keep-alive comments (Limits.StreamKeepAlive).
//   - GET /v1/models: the agents, as OpenAI model objects.
//   - POST /v1/agents/{agent}/runs: start a run; the run as JSON, or, with
//     Accept: text/event-stream, server-sent events as the run goes.
//   - POST /v1/runs/{id}/resume: a decision on a paused run's pending call.
//   - POST /v1/runs/{id}/continue: continue a run that stopped early
//     (max_steps, timed_out, cancelled) as the same run, with {"steps",
//     "timeout", "by"}, all optional.
//   - POST /v1/runs/{id}/cancel: stop a run wherever it is driven (any
//     replica sharing the store), with {"by"}, optional; it waits up to 30s
//     for the run to stop and answers with it, or 202 with the request
//     recorded.
//   - GET /v1/runs/{id}: a run as the store holds it.
//   - GET /v1/runs/{id}/events?format=jsonl: the run's event log as JSON
//     Lines (agents.Record), for aidgen replay.
//   - POST /v1/retrievers/{name}/search: the best passages for a query.
//   - GET /healthz: the process answers. GET /readyz: the run store and
//     every Config.ReadyChecks answer, and the service is not draining; the
//     answer names a failing check, the log says why.
//   - GET /metrics: Prometheus text format, from a registry private to the
//     Service. Requests and runs are labelled with agent, the agent asked
//     for (a resume's or a continue's is the run's entry agent), and
//     final_agent, the agent the run ended on after handoffs; both are the
//     app's agent names, so the series stay bounded.
//   - /mcp (MCPPath): the Model Context Protocol over streamable HTTP, on
//     the official Go SDK. Each agent is a tool of its name, whose input is
//     {message, thread_id?, user_id?} and whose result is the answer as
//     text, and as structured content when the agent has an output schema
//     (that schema is in the tool's _meta under MetaOutputSchema rather
//     than its outputSchema, since a paused run has no answer to fit it).
//     A run that pauses for approval asks the client with a form
//     elicitation (approve or reject, with feedback) when the client
//     supports it and resumes the run in the same call; otherwise, or when
//     the person cancels, the result tells the pending call and the run id
//     (in _meta: MetaRunID, MetaStatus, MetaPending), to decide through
//     POST /v1/runs/{id}/resume. A failed run, a budget refusal or bad
//     input is a tool error (isError) whose text starts with the HTTP API's
//     code and whose _meta holds the error (MetaError). Calls that ask for
//     progress get a notification per model call, tool call and handoff.
//     With a background queue (Config.Jobs), a call may run as an MCP task
//     (2025-11-25 sessions that ask for one; 2026-07-28 requests that
//     declare the tasks extension): the task is the run, queued and kept
//     in the run store, its id the run's, its key's own, so the tasks
//     methods answer on any replica.
//     Sessions live in the process and close after ten idle minutes.
//
// Every route but /healthz and /readyz requires a bearer token when
// Auth.Kind is bearer: an API key (Key, or one a KeyStore holds) whose
// roles the route takes (apiRoutes; 401 without a valid key, 403
// insufficient_role with a wrong one). The key's name and tenant go on the
// request's context (kind.WithCaller) for the layers below, and a run
// records them: a run of another tenant is not found (404), a caller
// reads only the runs it started, and a decision on a paused call is
// recorded under the key that made it. GET /v1/runs lists the runs a key
// may read. A service without authentication refuses to listen on
// anything but a loopback address (*InsecureListenError). A request that
// came in on loopback must name a loopback host or one of
// Config.AllowedHosts, and a browser's request to /mcp an Origin the
// service allows (Config.AllowedOrigins).
//
// # Chat completions mapping
//
// The last message must be a user message: it is the run's input. Earlier
// user, assistant (with tool calls) and tool messages are the thread history
// (agents.RunOptions.History), in order, checked as OpenAI checks them: a
// tool message answers a call of the assistant message before it, once,
// and every call is answered before the next user or assistant message
// (400 with param messages[i] otherwise). System and developer messages are
// not sent to the model: the agent's instructions are its system prompt, and
// a client may not replace them; the response says how many were left out
// in the header X-Aid-Ignored-System-Messages. Client-side tools (tools,
// functions, tool_choice other than auto/none) are refused, since the agent's
// tools are the server's; n other than 1 and response_format are refused too.
// Sampling parameters (temperature, top_p, max_tokens, ...) are accepted and
// not applied: the agent's configuration decides them. user is the run's
// user id (user memory); the header X-Aid-Thread-Id names the thread
// (thread-scoped budgets).
//
// A completed run answers with the agent's answer, finish_reason stop, the
// run's usage and model set to the agent that answered (the target of the
// last transfer). A paused run answers with an assistant message that says
// what is waiting and how to approve it (the tool, its arguments, the
// resume URL), finish_reason stop, and an "aid" extension object {run_id,
// status, agent, pending}: the tool is the server's, so a stock client loop
// shows the message and runs nothing. With the request header X-Aid-Pause:
// tool_calls (PauseHeader, PauseToolCalls) the pending call is also the
// message's one tool call and finish_reason is tool_calls, for a client
// that handles aid's pauses itself. Every answer that started a run carries
// its id in the header X-Aid-Run-Id.
//
// With stream true the answer is sent as chat.completion.chunk events and
// data: [DONE], with a usage chunk when stream_options.include_usage is set.
// The content is streamed as the models write it (agents.RunOptions.OnEvent):
// the text of every step of the run's own agents, a preamble before a tool
// call included, as OpenAI streams content, each later step's text set
// apart by a blank line; a delegated agent's text is not content. With no
// preamble the streamed content equals the non-streamed answer. The stream
// opens with the role chunk at the first text, so a run refused before any
// text gets an HTTP error; a failure after that ends the stream with an
// {"error": ...} chunk and no [DONE]. A pause ends it with the same
// message as content, the aid extension on the final chunk and its finish
// reason (with X-Aid-Pause: tool_calls, a tool-call delta before it).
//
// A runs stream (Accept: text/event-stream) — a new run, a resume or a
// continue — sends token events (TokenEvent: agent, step, depth, text) as
// the text is written, then the model_call event of that call, a
// tool_call_start and a tool_call event (ToolCallEvent) for every call,
// whatever runs it (Go code, an http, fixture or mcp tool, a search_
// retriever, a transfer_ or delegate_ call), tool_progress events
// (ToolProgressEvent) while a tool that reports progress runs, and the
// result.
//
// # Errors
//
// Errors have the OpenAI shape {"error": {"message", "type", "param", "code"}}
// with stable codes; see the Code constants. A run that stopped early
// (run_timed_out, run_cancelled, max_steps_exceeded) answers with its
// partial result: the runs API's body is the run, with its steps,
// last_text, cost_usd and continue_url; a chat completion's error carries
// them in its aid object. The request timeout (Limits.RequestTimeout) ends
// a run timed_out, not failed, so that it can be continued. A budget breach is 402 Payment
// Required with code budget_exceeded: not 429, because OpenAI clients retry
// 429 on their own and a spent budget does not refill in seconds.
//
// No Go internals reach a client. A body that does not fit its route names
// the field as param (messages[1].role) and the type it must have in words
// ("model must be a string, not a number"). A client reads the message of
// the typed error it can act on, not the chain of errors wrapped around
// it; a failure it cannot act on is 500 "internal error (request ID)",
// and the request's log line, under the same request_id, holds the error
// itself. A dependency that cannot be reached (the run store, the budget
// ledger, memory, a vector store: any *kind.UnavailableError) is 503
// dependency_unavailable naming the dependency and no connection detail,
// with Retry-After and X-Should-Retry: true; other errors say
// X-Should-Retry: false.
//
// # Added latency
//
// The service measures its own cost: each request's duration minus the wall
// time during which it waited on a provider, a tool or a searcher. Waiting is
// seen through the wrappers InstrumentProvider, InstrumentTool and
// InstrumentSearcher, which the application applies when it builds its
// gateway and runtime; overlapping waits count once. Without them the added
// latency is the whole duration.
//
// # Shutdown
//
// ListenAndServe stops accepting connections when its context ends and waits
// up to Limits.DrainTimeout for requests in flight. A run still going when
// the drain timeout expires is interrupted: its context ends with the cause
// agents.ErrInterrupted, and the agents runtime leaves it running in the
// store, checkpointed at its last completed point (a tool call in flight is
// recorded without a result). The request is answered 503 shutting_down,
// naming the run, and one log line per run says it was interrupted.
// Another replica on the same store, or the restarted process, continues it
// with agents.Runtime.Drive (aid run --recover RUN_ID): finished calls are
// not run again, an interrupted read is, an interrupted write waits for a
// decision. A client that disconnects cancels its run without that cause:
// the run is saved as failed, with the steps completed so far, and is not
// resumable. A Service serves once: after shutdown, build a new one.
//
// What it is not: it does not build the runtime (see runtime/app), does not
// read environment variables or the IR, and does not terminate TLS.
package service
