package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ErrInterrupted is the cancel cause (context.WithCancelCause) a process
// gives the contexts of its runs when it shuts down before they end. A
// shutdown is not the run's failure: a run whose context ends with this
// cause is left running in the store, checkpointed at its last completed
// point, so that Drive continues it in another process or after a
// restart; Run, Resume and Drive then return StatusRunning and an error
// wrapping ErrInterrupted. Any other cancellation fails the run.
var ErrInterrupted = errors.New("agents: run interrupted by shutdown")

// TimeoutScope says which timeout a *TimeoutError is.
type TimeoutScope string

// The timeout scopes.
const (
	// TimeoutRun is the run's timeout (Timeouts.Run).
	TimeoutRun TimeoutScope = "run"
	// TimeoutStep is a step's timeout (Timeouts.Step).
	TimeoutStep TimeoutScope = "step"
	// TimeoutDeadline is a deadline of whoever drives the run (a service's
	// request timeout), given as the cancel cause of its context.
	TimeoutDeadline TimeoutScope = "deadline"
)

// TimeoutError reports a run stopped by a timeout: status timed_out, with
// the partial result kept and the run continuable (Runtime.Continue). A
// caller that bounds a run with its own deadline gives a *TimeoutError
// (Scope TimeoutDeadline) as the cause of its context
// (context.WithTimeoutCause), so that the run ends timed out rather than
// failed. It matches context.DeadlineExceeded with errors.Is.
type TimeoutError struct {
	// RunID is the run stopped.
	RunID string
	// Agent is the agent the run was on.
	Agent string
	// Scope says which timeout expired.
	Scope TimeoutScope
	// Step is the step that ran out of time, for TimeoutStep.
	Step int
	// Timeout is the bound that expired.
	Timeout time.Duration
}

// Error implements error.
func (e *TimeoutError) Error() string {
	switch e.Scope {
	case TimeoutStep:
		return fmt.Sprintf("run %s: agent %q: step %d timed out after %v", e.RunID, e.Agent, e.Step, e.Timeout)
	case TimeoutRun:
		return fmt.Sprintf("run %s: agent %q: the run timed out after %v", e.RunID, e.Agent, e.Timeout)
	}
	return fmt.Sprintf("run %s: agent %q: the run's deadline (%v) passed", e.RunID, e.Agent, e.Timeout)
}

// Unwrap returns context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// CancelledError reports a run stopped by Runtime.Cancel: status
// cancelled, with the partial result kept and the run continuable
// (Runtime.Continue). The run's context ends with it as the cause, also in
// a process other than the one that called Cancel.
type CancelledError struct {
	// RunID is the run stopped.
	RunID string
	// By names who asked, as given to Cancel; empty when unknown.
	By string
	// At is when it was asked.
	At time.Time
}

// Error implements error.
func (e *CancelledError) Error() string {
	if e.By != "" {
		return fmt.Sprintf("run %s was cancelled by %s", e.RunID, e.By)
	}
	return fmt.Sprintf("run %s was cancelled", e.RunID)
}

// Unwrap returns context.Canceled.
func (e *CancelledError) Unwrap() error { return context.Canceled }

// UnknownAgentError reports a run, resume or reference naming an agent the
// runtime was not built with.
type UnknownAgentError struct {
	// Agent is the name asked for.
	Agent string
	// Known lists the configured agents, sorted.
	Known []string
}

// Error implements error.
func (e *UnknownAgentError) Error() string {
	return fmt.Sprintf("unknown agent %q (known: %s)", e.Agent, strings.Join(e.Known, ", "))
}

// UnknownToolError reports a checkpoint whose call waiting for a decision
// names a tool its agent does not have in this runtime (the run was paused
// by a runtime with other tools). Nothing is written: the run stays paused
// for a runtime that has the tool.
type UnknownToolError struct {
	// RunID is the run.
	RunID string
	// Agent is the agent the run is on.
	Agent string
	// Tool is the tool the pending call names.
	Tool string
	// Known lists the agent's tools, in the order it offers them.
	Known []string
}

// Error implements error.
func (e *UnknownToolError) Error() string {
	return fmt.Sprintf("run %s: agent %q has no tool %q in this runtime (its tools: %s)", e.RunID, e.Agent, e.Tool, strings.Join(e.Known, ", "))
}

// InvalidArgumentsError reports a Decision whose edited arguments are not
// JSON or do not match the tool's input schema. It is returned before the
// run is claimed: the run stays paused and can be decided again. A service
// answers it as a bad request on the arguments.
type InvalidArgumentsError struct {
	// RunID is the run.
	RunID string
	// Tool is the tool of the pending call.
	Tool string
	// Problem says what is wrong, in the schema's words.
	Problem string
}

// Error implements error.
func (e *InvalidArgumentsError) Error() string {
	const still = "; the run is still paused and can be decided again"
	if e.Tool == "" {
		return fmt.Sprintf("run %s: the edited arguments are invalid: %s", e.RunID, e.Problem) + still
	}
	return fmt.Sprintf("run %s: the edited arguments do not match the input schema of tool %s: %s", e.RunID, e.Tool, e.Problem) + still
}

// UserIDRequiredError is returned by Run for an agent with user memory when
// RunOptions.UserID is empty: the memory is keyed by user, and guessing one
// would mix users' memories. A service answers it as a bad request.
type UserIDRequiredError struct {
	// Agent is the agent that was asked to run.
	Agent string
}

// Error implements error.
func (e *UserIDRequiredError) Error() string {
	return fmt.Sprintf("agent %q has user memory: RunOptions.UserID is required", e.Agent)
}

// MissingToolImplementationError reports, at construction, a tool an agent
// may call that has no implementation. It is raised by New so that a run
// never discovers a missing tool half-way through.
type MissingToolImplementationError struct {
	// Tool is the tool without an implementation.
	Tool string
	// Agents lists the agents that offer it, sorted.
	Agents []string
}

// Error implements error.
func (e *MissingToolImplementationError) Error() string {
	return fmt.Sprintf("tool %q (used by agent %s) has no implementation; register one in Config.Implementations", e.Tool, strings.Join(e.Agents, ", "))
}

// BudgetExceededError reports a run stopped by a budget breach. It wraps the
// gateway's error, so errors.As also finds the *gateway.BudgetExceededError
// with the budget, dimension and figures.
type BudgetExceededError struct {
	// RunID is the run stopped.
	RunID string
	// Agent is the agent whose call was refused.
	Agent string
	// Alias is the alias of the refused model call (the lower rung when
	// the agent degraded first), or the alias the agent was on when a
	// search was refused.
	Alias string
	// Tool is the search_<retriever> tool whose embedding call was
	// refused; empty when a model call was.
	Tool string
	// DegradedFrom is the rung the agent stepped down from before the
	// refusal, empty when it did not degrade.
	DegradedFrom string
	// Err is the gateway's error.
	Err error
}

// Error implements error.
func (e *BudgetExceededError) Error() string {
	if e.Tool != "" {
		return fmt.Sprintf("run %s: agent %q: budget exceeded in tool %s: %v", e.RunID, e.Agent, e.Tool, e.Err)
	}
	if e.DegradedFrom != "" {
		return fmt.Sprintf("run %s: agent %q: budget exceeded on %q after degrading from %q: %v", e.RunID, e.Agent, e.Alias, e.DegradedFrom, e.Err)
	}
	return fmt.Sprintf("run %s: agent %q: budget exceeded on %q: %v", e.RunID, e.Agent, e.Alias, e.Err)
}

// Unwrap returns the gateway's error.
func (e *BudgetExceededError) Unwrap() error { return e.Err }

// MaxStepsError reports a run whose agent used all its model calls without
// reaching a final answer.
type MaxStepsError struct {
	// RunID is the run stopped.
	RunID string
	// Agent is the agent that ran out of steps.
	Agent string
	// MaxSteps is its bound.
	MaxSteps int
}

// Error implements error.
func (e *MaxStepsError) Error() string {
	return fmt.Sprintf("run %s: agent %q reached its %d steps without a final answer", e.RunID, e.Agent, e.MaxSteps)
}

// OutputValidationError reports a final answer that does not match the
// agent's output schema, even after the one repair attempt.
type OutputValidationError struct {
	// Agent is the agent whose answer failed.
	Agent string
	// Answer is the last answer received.
	Answer string
	// Err says why it does not match.
	Err error
}

// Error implements error.
func (e *OutputValidationError) Error() string {
	return fmt.Sprintf("agent %q: answer does not match the output schema after one repair attempt: %s", e.Agent, schemaProblem(e.Err))
}

// Unwrap returns the validation error.
func (e *OutputValidationError) Unwrap() error { return e.Err }

// RunNotFoundError reports a run id the store does not hold.
type RunNotFoundError struct {
	// RunID is the id asked for.
	RunID string
}

// Error implements error.
func (e *RunNotFoundError) Error() string { return fmt.Sprintf("run %q not found", e.RunID) }

// WrongStatusError reports an operation on a run whose status is not the
// one the operation needs: a Resume of a run that is not waiting for a
// decision (it completed, failed, is running, or was already resumed), or
// a Drive of a run that is neither queued nor left running (it was driven
// to its end already, was cancelled, or waits for a decision).
type WrongStatusError struct {
	// RunID is the run.
	RunID string
	// Status is its status in the store.
	Status Status
	// Want is the status the operation needs.
	Want Status
}

// Error implements error.
func (e *WrongStatusError) Error() string {
	return fmt.Sprintf("run %s is %s, not %s", e.RunID, e.Status, e.Want)
}

// NotContinuableError reports a Continue of a run that did not stop early:
// only a run with status max_steps, timed_out or cancelled can be
// continued (a paused run is resumed, a running one recovered).
type NotContinuableError struct {
	// RunID is the run.
	RunID string
	// Status is its status in the store.
	Status Status
}

// Error implements error.
func (e *NotContinuableError) Error() string {
	return fmt.Sprintf("run %s is %s; only a run that stopped early (max_steps, timed_out, cancelled) can be continued", e.RunID, e.Status)
}

// InvalidOptionError reports an option of Run, Continue or Cancel that
// cannot be used: a run id NewRunID cannot have made, a negative
// allowance, a name too long to record.
type InvalidOptionError struct {
	// Option names the option, as its JSON field is spelt (run_id, steps,
	// timeout, by).
	Option string
	// Problem says what is wrong with it.
	Problem string
}

// Error implements error.
func (e *InvalidOptionError) Error() string {
	return fmt.Sprintf("invalid option %s: %s", e.Option, e.Problem)
}

// MaxByBytes bounds the name of who decides, continues or cancels a run
// (Decision.By, ContinueOptions.By, CancelOptions.By), which the run's
// record keeps and a store may send to other processes.
const MaxByBytes = 256

// CheckBy refuses a name the run's record cannot keep as given: too long,
// not UTF-8 (a JSON checkpoint would replace the bad bytes), or with a NUL
// byte (PostgreSQL text and jsonb hold none): an *InvalidOptionError. A
// service that records the key rather than a claimed name checks the claim
// with it all the same.
func CheckBy(by string) error {
	switch {
	case len(by) > MaxByBytes:
		return &InvalidOptionError{Option: "by", Problem: fmt.Sprintf("%d bytes, more than %d", len(by), MaxByBytes)}
	case !utf8.ValidString(by):
		return &InvalidOptionError{Option: "by", Problem: "not valid UTF-8"}
	case strings.ContainsRune(by, 0):
		return &InvalidOptionError{Option: "by", Problem: "it has a NUL character"}
	}
	return nil
}

// NotCancellableError reports a Cancel of a run that is neither running
// nor paused: it ended already (completed, failed, budget_exceeded) or
// stopped early (max_steps, timed_out), so there is nothing to stop.
type NotCancellableError struct {
	// RunID is the run.
	RunID string
	// Status is its status in the store.
	Status Status
}

// Error implements error.
func (e *NotCancellableError) Error() string {
	return fmt.Sprintf("run %s is %s: only a running or paused run can be cancelled", e.RunID, e.Status)
}

// CancelPendingError reports a Cancel whose context ended before the run
// stopped: the request is recorded and the process driving the run stops
// it when it sees it (or Drive does, if that process is gone).
type CancelPendingError struct {
	// RunID is the run.
	RunID string
	// Err is why the wait ended.
	Err error
}

// Error implements error.
func (e *CancelPendingError) Error() string {
	return fmt.Sprintf("run %s: cancellation requested; the run has not stopped yet: %v", e.RunID, e.Err)
}

// Unwrap returns why the wait ended.
func (e *CancelPendingError) Unwrap() error { return e.Err }

// ConflictError reports a write to a run record that another writer changed
// first: two processes resumed the same run, or a run presumed dead is still
// alive. The loser stops; the record is never overwritten blindly.
type ConflictError struct {
	// RunID is the run.
	RunID string
	// Version is the version the writer expected.
	Version int64
	// Stored is the version the store holds; 0 when the loss was seen
	// elsewhere (another process finished a call of the run first).
	Stored int64
}

// Error implements error.
func (e *ConflictError) Error() string {
	if e.Stored == 0 {
		return fmt.Sprintf("run %s: record changed concurrently (expected version %d)", e.RunID, e.Version)
	}
	return fmt.Sprintf("run %s: record changed concurrently (expected version %d, stored %d)", e.RunID, e.Version, e.Stored)
}

// RunExistsError reports CreateRun of a run id the store already holds.
type RunExistsError struct {
	// RunID is the run.
	RunID string
}

// Error implements error.
func (e *RunExistsError) Error() string { return fmt.Sprintf("run %q already exists", e.RunID) }

// CallExistsError reports RecordCall of a call key already recorded for the
// run: a call is recorded once.
type CallExistsError struct {
	// RunID is the run.
	RunID string
	// Key is the call key.
	Key string
}

// Error implements error.
func (e *CallExistsError) Error() string {
	return fmt.Sprintf("run %s: tool call %s is already recorded", e.RunID, e.Key)
}

// CallNotFoundError reports a call key the store has not recorded.
type CallNotFoundError struct {
	// RunID is the run.
	RunID string
	// Key is the call key.
	Key string
}

// Error implements error.
func (e *CallNotFoundError) Error() string {
	return fmt.Sprintf("run %s: tool call %s is not recorded", e.RunID, e.Key)
}

// CallFinishedError reports a second result for a tool call: each recorded
// call gets exactly one.
type CallFinishedError struct {
	// RunID is the run.
	RunID string
	// Key is the call key.
	Key string
}

// Error implements error.
func (e *CallFinishedError) Error() string {
	return fmt.Sprintf("run %s: tool call %s already has a result", e.RunID, e.Key)
}

// ReentryError is the error a transfer or delegation gets when its target is
// already on the run's path. The model receives it as an observation; the
// run goes on.
type ReentryError struct {
	// Target is the agent asked for.
	Target string
	// Path is the path at the time.
	Path []string
}

// Error implements error.
func (e *ReentryError) Error() string {
	return fmt.Sprintf("agent %q is already on the path %s and cannot be re-entered", e.Target, strings.Join(e.Path, " > "))
}

// CheckpointVersionError reports a checkpoint written by an incompatible
// version of the runtime.
type CheckpointVersionError struct {
	// Got is the checkpoint's version.
	Got int
	// Want is the version this runtime reads.
	Want int
}

// Error implements error.
func (e *CheckpointVersionError) Error() string {
	return fmt.Sprintf("checkpoint version %d is not supported (this runtime reads version %d)", e.Got, e.Want)
}

// StaleCheckpointError reports ResumeFrom with a checkpoint older than the
// one the store holds for the same run: resuming it would replay decided
// work.
type StaleCheckpointError struct {
	// RunID is the run.
	RunID string
}

// Error implements error.
func (e *StaleCheckpointError) Error() string {
	return fmt.Sprintf("run %s: the checkpoint given is not the one the store holds; resume by run id", e.RunID)
}
