package agents

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Status is the state of a run.
type Status string

// The run statuses. A RunResult ends in one of completed, paused, max_steps,
// timed_out, cancelled, budget_exceeded or failed; running is only seen in
// a store, for a run in flight or one whose process died (see
// Runtime.Recover), and queued for a run waiting for a worker (see
// Runtime.Drive). A run that stopped early (max_steps, timed_out,
// cancelled) keeps its partial result and can be continued
// (Runtime.Continue).
const (
	// StatusRunning is a run in flight, or one whose process died.
	StatusRunning Status = "running"
	// StatusCompleted is a run with a final answer.
	StatusCompleted Status = "completed"
	// StatusQueued is a run recorded to be driven by a worker, not yet
	// taken by one: a background run, or a resume or continuation a job
	// queue took (Runtime.Submit, SubmitResume, SubmitContinue; a worker
	// drives it with Runtime.Drive).
	StatusQueued Status = "queued"
	// StatusPaused is a run waiting for a Decision.
	StatusPaused Status = "paused"
	// StatusMaxSteps is a run whose agent used its MaxSteps.
	StatusMaxSteps Status = "max_steps"
	// StatusBudgetExceeded is a run stopped by a budget breach.
	StatusBudgetExceeded Status = "budget_exceeded"
	// StatusFailed is a run stopped by an error.
	StatusFailed Status = "failed"
	// StatusTimedOut is a run stopped by its run or step timeout
	// (*TimeoutError).
	StatusTimedOut Status = "timed_out"
	// StatusCancelled is a run stopped by Runtime.Cancel, from this
	// process or another sharing the store (*CancelledError).
	StatusCancelled Status = "cancelled"
)

// RunRecord is a run as a Store keeps it: its status and its latest
// checkpoint.
type RunRecord struct {
	// RunID identifies the run.
	RunID string
	// Agent is the agent the run is on.
	Agent string
	// Status is the run's state.
	Status Status
	// Version counts the record's writes; the store sets it. UpdateRun
	// succeeds only when it matches the stored version, so two writers can
	// never both win.
	Version int64
	// Checkpoint is the run's state at the last write.
	Checkpoint Checkpoint
	// UpdatedAt is when the record was last written; the store sets it.
	UpdatedAt time.Time
	// Cancel is a cancellation requested (RequestCancel) and not yet
	// served: set while the run is running and whoever drives it has not
	// stopped it. The store keeps it apart from what UpdateRun writes, and
	// drops it when UpdateRun writes a status other than running.
	Cancel *CancelRequest
}

// CancelRequest is a request to stop a running run (Runtime.Cancel), as a
// Store keeps it and hands it to the process that drives the run.
type CancelRequest struct {
	// By names who asked, as given to Cancel; empty when unknown.
	By string `json:"by,omitempty"`
	// At is when it was asked.
	At time.Time `json:"at"`
}

// CallRecord is a tool call as a Store keeps it: recorded before it runs,
// given exactly one result after.
type CallRecord struct {
	// RunID is the run.
	RunID string
	// Key identifies the call within the run: the step number and the
	// call's position in the model's answer ("3.0"), unique whatever ids the
	// model wrote.
	Key string
	// CallID is the model's id for the call.
	CallID string
	// Tool is the tool called.
	Tool string
	// Effects is the tool's effects, so that recovery knows whether the
	// call may be re-run.
	Effects Effects
	// Arguments is the JSON arguments, as run.
	Arguments string
	// Result is the call's result; nil while it runs, or after a crash
	// between the two.
	Result *CallResult
}

// CallResult is the one result of a tool call.
type CallResult struct {
	// Observation is what the model was told.
	Observation string
	// ErrorKind classifies a failed call; empty on success.
	ErrorKind ErrorKind
}

// Store keeps runs, their checkpoints and their tool calls, so that a run
// paused or interrupted in one process can be resumed in another. The
// in-memory store is the default; a PostgreSQL store shares the same
// contract (package agentstoretest).
//
// Records handed to and returned by a store must be treated as immutable:
// the runtime never changes a slice it has saved.
type Store interface {
	// CreateRun stores a new run at version 1, or returns *RunExistsError.
	CreateRun(ctx context.Context, rec RunRecord) (RunRecord, error)
	// UpdateRun replaces a run when rec.Version is the stored version and
	// returns it with the next version; otherwise *ConflictError, or
	// *RunNotFoundError.
	UpdateRun(ctx context.Context, rec RunRecord) (RunRecord, error)
	// LoadRun returns a run, or *RunNotFoundError.
	LoadRun(ctx context.Context, runID string) (RunRecord, error)
	// RecordCall stores a call before it runs, without a result, or
	// returns *CallExistsError.
	RecordCall(ctx context.Context, rec CallRecord) error
	// FinishCall stores the result of a recorded call: *CallNotFoundError
	// when it is not recorded, *CallFinishedError when it has a result.
	FinishCall(ctx context.Context, runID, key string, res CallResult) error
	// Call returns one recorded call, or *CallNotFoundError.
	Call(ctx context.Context, runID, key string) (CallRecord, error)
	// Calls returns a run's calls in the order they were recorded.
	Calls(ctx context.Context, runID string) ([]CallRecord, error)
	// RequestCancel asks whoever drives a running run to stop it, in this
	// process or any other sharing the store: it records req on the run
	// (RunRecord.Cancel, the first request kept) and wakes the run's
	// watchers (WatchCancel). It does so only for a run whose status is
	// running, and returns the status it found either way, so that a
	// caller can stop a run that is not driven (a paused one) itself; an
	// unknown run is a *RunNotFoundError.
	RequestCancel(ctx context.Context, runID string, req CancelRequest) (Status, error)
	// WatchCancel returns a channel that receives the run's cancel request
	// once, as soon as one is made by any process sharing the store, or at
	// once when one is pending already. The watch ends when ctx does; the
	// channel is then never sent to. A store shared by processes states the
	// delay within which a request reaches a watcher in another one.
	WatchCancel(ctx context.Context, runID string) (<-chan CancelRequest, error)
	// AddGrant keeps a grant a person gave for a thread (GrantThread), so
	// that the thread's later runs, in any process sharing the store,
	// honour it; g.ThreadID names the thread and must not be empty.
	AddGrant(ctx context.Context, g Grant) error
	// Grants returns the grants kept for a thread, oldest first; none for
	// a thread without any.
	Grants(ctx context.Context, threadID string) ([]Grant, error)
}

// InMemoryStore is the default Store: runs held in this process's memory,
// lost when it exits. It is safe for concurrent use.
type InMemoryStore struct {
	mu      sync.Mutex
	runs    map[string]*RunRecord
	calls   map[string][]CallRecord
	grants  map[string][]Grant
	now     func() time.Time
	cancels Cancels
}

// NewInMemoryStore returns an empty in-memory store.
func NewInMemoryStore() *InMemoryStore {
	return &InMemoryStore{runs: make(map[string]*RunRecord), calls: make(map[string][]CallRecord), grants: make(map[string][]Grant), now: time.Now}
}

// CreateRun implements Store.
func (s *InMemoryStore) CreateRun(ctx context.Context, rec RunRecord) (RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return RunRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.runs[rec.RunID]; ok {
		return RunRecord{}, &RunExistsError{RunID: rec.RunID}
	}
	rec.Version = 1
	rec.UpdatedAt = s.now()
	rec.Cancel = nil
	s.runs[rec.RunID] = &rec
	return rec, nil
}

// UpdateRun implements Store.
func (s *InMemoryStore) UpdateRun(ctx context.Context, rec RunRecord) (RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return RunRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.runs[rec.RunID]
	if !ok {
		return RunRecord{}, &RunNotFoundError{RunID: rec.RunID}
	}
	if cur.Version != rec.Version {
		return RunRecord{}, &ConflictError{RunID: rec.RunID, Version: rec.Version, Stored: cur.Version}
	}
	rec.Version++
	rec.UpdatedAt = s.now()
	rec.Cancel = nil
	if rec.Status == StatusRunning {
		rec.Cancel = cur.Cancel
	}
	*cur = rec
	return rec, nil
}

// LoadRun implements Store.
func (s *InMemoryStore) LoadRun(ctx context.Context, runID string) (RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return RunRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.runs[runID]
	if !ok {
		return RunRecord{}, &RunNotFoundError{RunID: runID}
	}
	return *cur, nil
}

// RecordCall implements Store.
func (s *InMemoryStore) RecordCall(ctx context.Context, rec CallRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls[rec.RunID] {
		if c.Key == rec.Key {
			return &CallExistsError{RunID: rec.RunID, Key: rec.Key}
		}
	}
	rec.Result = nil
	s.calls[rec.RunID] = append(s.calls[rec.RunID], rec)
	return nil
}

// FinishCall implements Store.
func (s *InMemoryStore) FinishCall(ctx context.Context, runID, key string, res CallResult) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	calls := s.calls[runID]
	for i := range calls {
		if calls[i].Key != key {
			continue
		}
		if calls[i].Result != nil {
			return &CallFinishedError{RunID: runID, Key: key}
		}
		calls[i].Result = &res
		return nil
	}
	return &CallNotFoundError{RunID: runID, Key: key}
}

// Call implements Store.
func (s *InMemoryStore) Call(ctx context.Context, runID, key string) (CallRecord, error) {
	if err := ctx.Err(); err != nil {
		return CallRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls[runID] {
		if c.Key == key {
			return copyCall(c), nil
		}
	}
	return CallRecord{}, &CallNotFoundError{RunID: runID, Key: key}
}

// Calls implements Store.
func (s *InMemoryStore) Calls(ctx context.Context, runID string) ([]CallRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.calls[runID])
	for i := range out {
		out[i] = copyCall(out[i])
	}
	return out, nil
}

// RequestCancel implements Store.
func (s *InMemoryStore) RequestCancel(ctx context.Context, runID string, req CancelRequest) (Status, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.runs[runID]
	if !ok {
		return "", &RunNotFoundError{RunID: runID}
	}
	if cur.Status != StatusRunning {
		return cur.Status, nil
	}
	if cur.Cancel == nil {
		cur.Cancel = &req
	}
	s.cancels.Notify(runID, *cur.Cancel)
	return cur.Status, nil
}

// WatchCancel implements Store. A request reaches the watcher as
// RequestCancel makes it: the store lives in one process.
func (s *InMemoryStore) WatchCancel(ctx context.Context, runID string) (<-chan CancelRequest, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var pending *CancelRequest
	if cur, ok := s.runs[runID]; ok && cur.Status == StatusRunning {
		pending = cur.Cancel
	}
	return s.cancels.Watch(ctx, runID, pending), nil
}

// AddGrant implements Store.
func (s *InMemoryStore) AddGrant(ctx context.Context, g Grant) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := g.checkThread(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grants[g.ThreadID] = append(s.grants[g.ThreadID], g)
	return nil
}

// Grants implements Store.
func (s *InMemoryStore) Grants(ctx context.Context, threadID string) ([]Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.grants[threadID]), nil
}

// copyCall detaches a record's result from the store's.
func copyCall(c CallRecord) CallRecord {
	if c.Result != nil {
		r := *c.Result
		c.Result = &r
	}
	return c
}
