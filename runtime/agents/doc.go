// Package agents runs agents: model-driven loops that call tools, hand
// conversations to each other, delegate tasks, pause for human approval and
// survive a crash, all through the gateway, so that pinning, budgets,
// fallbacks and tracing apply to every model call.
//
// A Runtime is built once from a Config, the IR-free description of the
// agents and tools (aidgen and generated services fill it from an app file;
// teams without the IR fill it by hand, like gateway.Config). New checks
// everything it can before any run: every tool an agent offers has an
// Implementation (*MissingToolImplementationError otherwise), every alias
// resolves and can serve tools or JSON output, every schema compiles, every
// retriever an agent names is configured, and the rules between an
// agent's values hold (a ladder descending in price, degrade only with a
// budget and a cheaper rung, no self-reference, no repeats, fallbacks
// other than the model, a thread that fits every window, no two tools of
// one name). Those rules are runtime/rules', which `aidgen vet` applies
// too, so that the two never disagree. A feature that is not built
// (approval inside a delegated run) is a *kind.DeferredError at New,
// never an approximation.
//
// # The loop
//
// Run(ctx, agent, input, opts) calls the agent's current alias with its
// instructions, its memory and the thread; the model answers with text (the
// final answer) or tool calls. Each call's arguments are validated against
// the tool's JSON Schema; invalid arguments, unknown tools, timeouts, tool
// errors and panics become error observations the model reads and can act
// on, never a crash. Several calls in one answer run concurrently when all
// are read-only tools (at most Config.MaxParallelTools at a time); otherwise
// one at a time; either way observations return in call order. The loop
// ends with a final answer (completed), the agent's MaxSteps (max_steps,
// *MaxStepsError), a timeout (timed_out, *TimeoutError), a cancellation
// (cancelled, *CancelledError), a budget breach (budget_exceeded,
// *BudgetExceededError wrapping the gateway's), a pause (paused, with a
// Checkpoint) or a failure (failed). A RunResult always carries the steps
// taken: the alias that answered, the rung it degraded from, the model call
// and every tool call with its observation.
//
// # Timeouts and continuing
//
// An agent's Timeouts (with defaults in Config.Timeouts) bound a run: Run
// one drive of it, from Run, Resume, Continue or Drive until it ends or
// pauses; Step one model call with the tool calls it asks for. A caller's
// own deadline ends a run the same way when the context's cause is a
// *TimeoutError. A run that exceeds one stops timed_out and keeps its
// partial result: its completed steps, RunResult.LastText, its cost so
// far, and a tool call in flight recorded without a result, marked
// Interrupted, never done. Continue takes up a run that stopped early
// (max_steps, timed_out, cancelled) as the same run, with a fresh allowance
// of steps and time; its checkpoint lists each Continuation. A pending step
// is completed first, as Drive does: an interrupted read runs again, an
// interrupted write pauses for a decision.
//
// Cancel stops a run by id wherever it is driven: through the Store
// (RequestCancel, WatchCancel), the process driving the run hears of it
// (in process for the in-memory store, by LISTEN/NOTIFY for pgstore) and
// cancels the run's context, so that the call in flight ends; the run is
// saved cancelled with its partial result and who asked
// (Checkpoint.Cancel). A paused run is cancelled by Cancel itself.
//
// A caller that runs agents for others, such as a job worker, needs only
// run ids: it makes the id when the job is queued (NewRunID) and starts
// the run with it (RunOptions.RunID), so that Cancel reaches the run by id
// from any process; a start tried again after the worker died is refused
// with *RunExistsError before any model call, and the worker takes the
// run over by its status: Drive a run left running, Resume a paused
// one with a decision, Continue one that stopped early. A queue that must
// write the run's record with its job (one transaction) writes it with
// Submit on a view of the store bound to that transaction instead, and
// its worker drives it with Drive, the same call for the first attempt
// and for the one after a crash. Nothing but the store is shared.
//
// Every observation is bounded in one place, whatever made it (a tool of
// any kind, a search, a delegation, an error): at most the tool's
// Tool.MaxObservationBytes (DefaultMaxObservationBytes for tools the
// runtime makes), cut at a UTF-8 boundary with a marker saying how many
// bytes were cut, before the model, the events, the call record or the
// checkpoint see it.
//
// Tools are Go code registered by name (ToolFunc, Typed), or a tool kind an
// application names so that no code is needed. This package is the tools'
// extension point: it defines the contract (Tool, Implementation) and the
// interface a kind's configuration implements (ToolKind, whose NewTools
// builds the tools of one declaration); the kinds themselves are packages
// of their own under runtime/agents/tools (http POSTs the arguments to a
// URL, fixture answers from argument → result rows), so that a program
// links only the kinds it uses.
//
// # Transfer and delegate
//
// An agent's handoffs and delegates are offered to the model as tools named
// transfer_to_<agent> and delegate_to_<agent> (declared tools may not use
// these prefixes, nor search_). A transfer hands the conversation to the
// target for good: the result's Agent is the target and Path grows. A
// delegation runs the target in an isolated [system, user] context and
// returns its answer as one observation: Agent and Path stay the caller's.
// Both refuse to re-enter an agent already on the path (an error
// observation); delegations are bounded in depth and number.
//
// # Search
//
// An agent's retrievers are offered as tools named search_<retriever>, with
// the arguments {query, k?} (k from 1 to MaxSearchK; omitted, the
// retriever's default). Each calls the Searcher configured under the
// retriever's name (a *retrieval.Retriever, or a team's own search) and
// observes JSON listing the best passages, each with its source path,
// heading, offsets, score, text and a "cite" value (source#heading), so
// that an answer can cite what it read. A search is a read tool: several in
// one answer run concurrently, and a search interrupted by a crash is run
// again. Its embedding call is charged to the agent's budget, like its
// model calls; a breach stops the run, unless the agent may still degrade,
// in which case the search fails as an observation and the next model call
// degrades (see Searcher).
//
// # Budgets and degrade
//
// An agent's calls are charged to its budget under the key its scope names:
// the run id (run), the thread id (thread; a run without a thread is its own
// thread) or none (global). On a breach an agent with OnBudgetExhausted
// degrade steps exactly one rung down its ladder, once, and tries the same
// call again; the step records DegradedFrom and a resumed run stays on that
// rung. A second breach stops the run.
//
// # Approval, checkpoints and crashes
//
// Every call of a declared tool is judged by the approval policy
// (Config.Approvals, package policy): allow, deny or ask, by rules matched
// on the tool's name or glob and a CEL condition on its arguments, then
// the tool's Approval shorthand, then the policy's default. A denied call
// gets an observation naming the rule and its reason. An asked call
// pauses the run, unless a grant answers it: the result holds a
// Checkpoint (completed steps, the pending call, the current alias; JSON
// with a version) and the store holds the run. Resume (by run id) or
// ResumeFrom (a checkpoint, in a process whose store may not know the run)
// continues with a Decision: approve, possibly with edited arguments, or
// reject with feedback the model reads. An approval may reach further
// (Decision.Scope): the tool for the rest of the run, or for the thread,
// kept with the run (Checkpoint.Grants) and, for a thread, in the store
// (Store.AddGrant), and honoured by resumed, continued and later runs. A
// run may pause again. Every decision is recorded on its call
// (ToolCallRecord.Policy, ToolCallRecord.Approval: the rule or the person,
// who, when, the scope) and as an aid.approval.decision span event; a
// tool the policy has nothing to decide about (no rule matches it, no
// approval of its own, a default that allows) is allowed without either.
//
// Every tool call is recorded in the Store before it runs and gets exactly
// one result after. The step is checkpointed before its calls, so Drive
// can continue a run whose process died: a call with a result is not run
// again, an interrupted read is re-run, and an interrupted write is never
// re-run silently: the run pauses (reason interrupted) for a decision. A
// process shutting down cancels its runs with the cause ErrInterrupted
// (context.WithCancelCause): such a run is not failed but saved running,
// checkpointed at its last completed point, for Drive elsewhere; any
// other cancellation fails the run. Run records are versioned, so two resumes of one pause cannot both proceed.
// InMemoryStore is the default; package agentstoretest is the contract every
// Store and MemoryStore passes.
//
// # Memory
//
// The thread is the conversation: it lives in the checkpoint, never in a
// store, and is trimmed per request to Memory.ThreadTokenBudget by dropping
// the oldest whole turns (a tool call never loses its result), estimated
// with the gateway's heuristic. The current turn, from the run's input on
// (Checkpoint.Turn), is never dropped: an output repair prompt starts no
// turn, so the question and the answer under repair stay in its request. User and global memory are read from a
// MemoryStore at every call and rendered as one extra system message after
// the instructions, so the injection is visible in the request.
//
// An agent with a Compaction policy compacts its thread instead of
// trimming it: when a request would exceed the trigger, the bodies of old
// tool results are dropped, then the oldest turns are summarised by a
// declared model into one message at the head of the thread, the newest
// turns kept verbatim. The system prompt, memory and the current turn are
// never compacted, a request that still does not fit fails with a
// *ContextOverflowError, and each compaction is a CompactionRecord of the
// run: priced and charged like a step, traced ("compact_thread {agent}"),
// reported (EventCompaction) and replayed from the record. The summary
// stays in RunResult.Messages, the thread's next History.
//
// # Structured output and tracing
//
// An agent with an Output schema asks for JSON, validates the answer, gives
// the model one repair attempt, then fails with *OutputValidationError.
// With Config.Tracer set, each agent's part of a run is an
// "invoke_agent {name}" span and each call an "execute_tool {tool}" span
// (OpenTelemetry GenAI conventions; a search is a "datastore" tool whose
// span names the retriever and the documents found); the gateway's chat
// and embedding spans are their children; a pause is an aid.run.paused
// event.
//
// # Events and streaming
//
// RunOptions.OnEvent opts a run into events (Event): each model call, the
// model's text piece by piece, the tool calls asked for and their results,
// handoffs, delegations, a pause and the end. With a hook the loop calls
// the gateway's Stream instead of Generate and rebuilds the same Result
// from it, so budgets, degrading, fallbacks, checkpoints, tools, output
// validation and tracing are the code of a run without one. Text of an
// agent with an output schema is reported once it validated. A delegated
// run's events carry its Depth: its text becomes an observation, not the
// answer. The hook is called one event at a time (parallel read calls
// included) on the run's goroutines; a panic in it fails the run with
// *HookPanicError after the gateway settled the call. Resume and Drive
// take no hook.
//
// # Record and replay
//
// Every step keeps the model request it answered (StepRecord.Request, as
// the messages it adds to the step before), so a stored run is its own
// event log: Record writes it as JSON Lines (the run, then each step and
// each tool call, with the pinned model ids, the decisions and a delegated
// run's steps in place), ReadRecording reads it back, and Replay re-runs
// it offline on a Config: the recorded answers stand in for the gateway,
// the recorded observations for the tools and searches, the recorded
// memory for the stores, and the recorded decisions, stops and
// continuations are applied where they happened. A replay calls nothing
// outside the process, spends nothing and is deterministic; it reports
// the first Divergence (a different request, a tool call with other
// arguments or outcome, another decision, guardrail verdict, path or end)
// with a diff.
//
// # Hooks and guardrails
//
// A Hook is called at its points of a run and returns a Verdict: pass,
// block (the run ends with status blocked and a *BlockedError carrying the
// message), redact (the value is replaced before the model, the record or
// the caller reads it), ask (the call pauses for a person, as an approval
// rule's ask) or log. The points are the run's input, every model call
// (the hook may change the request), a call's arguments (before it is
// checkpointed or run), its observation (before the model reads it or the
// store records it), the final answer, and a handoff (a block refuses it
// and the model reads why). Declared guardrails (Config.Guardrails,
// package guard) are hooks; Config.Hooks and Config.AgentHooks are a Go
// team's own. An agent without hooks runs the same code as before they existed.
//
// Input hooks marked Beside run beside the first model call: its streamed
// text is held, and its answer (tool calls included) waits, until every
// one passed; one that blocks cancels the call, drops the held text, and
// ends the run with no tool run. An output hook holds the answer's text
// until it passed, unless PostHoc: then the text streams as it comes and
// the verdict follows as an event; a post-hoc block or redaction applies
// to the result and the record only. Every verdict that did something is
// a VerdictRecord: in the result, the checkpoint, the event log (replay
// compares them: DivergeGuardrail), an EventVerdict, and a span event.
//
// What it is not: it does not read the IR (the runtime never imports ir or
// CUE), it is not a model client (see runtime/gateway), and it does not
// serve HTTP.
package agents
