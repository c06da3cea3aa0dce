package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Status is the state of a run.
type Status string

// The run statuses. A RunResult ends in one of completed, paused, max_steps,
// timed_out, cancelled, budget_exceeded or failed; running is only seen in
// a store, for a run in flight or one whose process died (see
// Runtime.Drive), and queued for a run waiting for a worker (see
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
	// StatusBlocked is a run a guardrail or hook blocked (*BlockedError):
	// the caller reads the guardrail's message, not an answer.
	StatusBlocked Status = "blocked"
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
	// CreatedAt is when the run was created, to the microsecond; the store
	// sets it (a RunLister's order), and keeps it through UpdateRun.
	CreatedAt time.Time
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
	// WatchCancel calls stop with the run's cancel request once, as soon
	// as one is made by any process sharing the store, or before it
	// returns when one is pending already. The watch ends when ctx does;
	// stop is then not called. stop must return at once and not call the
	// store: it is called on whichever goroutine hears of the request (the
	// one asking, which may hold the store's locks, or the store's own), so
	// that watching a run holds no goroutine. A store shared by processes
	// states the delay within which a request reaches a watcher in another
	// one.
	WatchCancel(ctx context.Context, runID string, stop func(CancelRequest)) error
	// AddGrant keeps a grant a person gave for a thread (GrantThread), so
	// that the thread's later runs, in any process sharing the store,
	// honour it; g.ThreadID names the thread and must not be empty. A
	// thread keeps one grant per tool: a grant of a tool the thread has one
	// of replaces it.
	AddGrant(ctx context.Context, g Grant) error
	// Grants returns the grants kept for a thread, the least recently
	// given first; none for a thread without any.
	Grants(ctx context.Context, threadID string) ([]Grant, error)
}

// InMemoryStore is the default Store: runs held in this process's memory,
// lost when it exits. It is safe for concurrent use.
//
// It keeps what a long-lived process can afford (see Retention): a run that
// ended is kept for Retention.Finished after its last write, and only the
// Retention.MaxFinished most recent of them; a run waiting for a decision,
// or still running, is kept for Retention.Paused after its last write. A
// run past its retention is gone, with its tool calls: loading it is a
// *RunNotFoundError, as for a run never stored. Expired runs are dropped by
// the writes that follow, a few at a time, so no goroutine runs behind the
// store.
type InMemoryStore struct {
	mu    sync.Mutex
	keep  Retention
	runs  map[string]*memRun
	calls map[string][]CallRecord
	// done lists the ended runs, open the others, each from the least
	// recently written; a write moves a run to the back of its list.
	done, open runList
	now        func() time.Time
	grants     map[string][]Grant
	cancels    Cancels
}

// memRun is a stored run and its place in its list. An ended run keeps its
// checkpoint encoded (packed, rec.Checkpoint then zero): thousands of ended
// runs held as pointer-free bytes cost the garbage collector nothing to
// scan, where their checkpoints' messages and steps, held as Go values,
// were most of what a busy service's collector did.
type memRun struct {
	rec        RunRecord
	created    time.Time // rec.CreatedAt, also while rec is packed
	key        string    // the checkpoint's Key and Tenant, for ListRuns
	tenant     string
	packed     []byte
	list       *runList
	prev, next *memRun
}

// record returns the stored run, its checkpoint decoded if packed.
func (r *memRun) record() (RunRecord, error) {
	rec := r.rec
	if r.packed != nil {
		if err := json.Unmarshal(r.packed, &rec.Checkpoint); err != nil {
			return RunRecord{}, fmt.Errorf("run %s: decode stored checkpoint: %w", rec.RunID, err)
		}
	}
	return rec, nil
}

// runList is an intrusive doubly linked list of runs, oldest first.
type runList struct {
	head, tail *memRun
	n          int
}

func (l *runList) push(r *memRun) {
	r.list, r.prev, r.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = r
	} else {
		l.head = r
	}
	l.tail = r
	l.n++
}

func (l *runList) remove(r *memRun) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		l.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		l.tail = r.prev
	}
	r.list, r.prev, r.next = nil, nil, nil
	l.n--
}

// Retention bounds what an InMemoryStore keeps. A zero field takes its
// default.
type Retention struct {
	// Finished is how long a run that ended (completed, failed, max_steps,
	// budget_exceeded) is kept after its last write; default
	// DefaultRetainFinished.
	Finished time.Duration
	// MaxFinished is the most ended runs kept: past it, the least recently
	// written goes first; default DefaultMaxFinished.
	MaxFinished int
	// Paused is how long a run waiting for a decision, or still running, is
	// kept after its last write; default DefaultRetainPaused. A decision
	// that comes later finds no run.
	Paused time.Duration
}

// The defaults of Retention.
const (
	DefaultRetainFinished = time.Hour
	DefaultMaxFinished    = 10_000
	DefaultRetainPaused   = 7 * 24 * time.Hour
)

// Validate reports a Retention that cannot bound a store: a negative field.
func (r Retention) Validate() error {
	var errs []error
	if r.Finished < 0 {
		errs = append(errs, fmt.Errorf("retention of finished runs %v is negative", r.Finished))
	}
	if r.MaxFinished < 0 {
		errs = append(errs, fmt.Errorf("maximum of finished runs %d is negative", r.MaxFinished))
	}
	if r.Paused < 0 {
		errs = append(errs, fmt.Errorf("retention of paused runs %v is negative", r.Paused))
	}
	return errors.Join(errs...)
}

// WithDefaults returns r with every zero field set to its default.
func (r Retention) WithDefaults() Retention {
	return Retention{
		Finished:    cmp.Or(r.Finished, DefaultRetainFinished),
		MaxFinished: cmp.Or(r.MaxFinished, DefaultMaxFinished),
		Paused:      cmp.Or(r.Paused, DefaultRetainPaused),
	}
}

// NewInMemoryStore returns an empty in-memory store with the default
// Retention.
func NewInMemoryStore() *InMemoryStore {
	s, _ := NewInMemoryStoreWith(Retention{}) // the defaults are valid
	return s
}

// NewInMemoryStoreWith returns an empty in-memory store that keeps runs as
// long as keep says, or an error when keep is not valid.
func NewInMemoryStoreWith(keep Retention) (*InMemoryStore, error) {
	if err := keep.Validate(); err != nil {
		return nil, fmt.Errorf("in-memory run store: %w", err)
	}
	return &InMemoryStore{
		keep: keep.WithDefaults(), runs: make(map[string]*memRun), calls: make(map[string][]CallRecord), grants: make(map[string][]Grant), now: time.Now,
	}, nil
}

// Len returns how many runs the store holds, ended and not: what its
// Retention bounds.
func (s *InMemoryStore) Len() (finished, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done.n, s.open.n
}

// ended reports whether a status is a run's end.
func ended(st Status) bool { return st != StatusRunning && st != StatusPaused }

// expired reports whether a run is past its retention at now.
func (s *InMemoryStore) expired(r *memRun, now time.Time) bool {
	ttl := s.keep.Paused
	if r.list == &s.done {
		ttl = s.keep.Finished
	}
	return now.Sub(r.rec.UpdatedAt) >= ttl
}

// sweepBatch bounds the expired runs one write drops, so that a write after
// a quiet hour does not pay for the whole hour at once; a run past its
// retention is invisible whether or not it was dropped yet.
const sweepBatch = 64

// sweep drops expired runs from the front of both lists, and the oldest
// ended runs beyond MaxFinished.
func (s *InMemoryStore) sweep(now time.Time) {
	for n := 0; s.done.head != nil && (s.done.n > s.keep.MaxFinished || (n < sweepBatch && s.expired(s.done.head, now))); n++ {
		s.drop(s.done.head)
	}
	for n := 0; n < sweepBatch && s.open.head != nil && s.expired(s.open.head, now); n++ {
		s.drop(s.open.head)
	}
}

// drop forgets a run and its calls.
func (s *InMemoryStore) drop(r *memRun) {
	r.list.remove(r)
	delete(s.runs, r.rec.RunID)
	delete(s.calls, r.rec.RunID)
}

// pack encodes an ended run's checkpoint for put, before the store is
// locked: the encoding is the costliest part of a write, and every run of
// the process waits on the lock. It returns nil for a run that has not
// ended, and for a checkpoint that does not encode (a raw JSON field that
// is not JSON), which is kept as it is.
func pack(status Status, cp Checkpoint) []byte {
	if !ended(status) {
		return nil
	}
	data, err := encodeCheckpoint(&cp)
	if err != nil {
		return nil
	}
	return data
}

// put files a run written at now at the back of its status's list and
// returns the record as written; an ended run's checkpoint is replaced by
// packed, its encoding, when there is one.
func (s *InMemoryStore) put(r *memRun, now time.Time, packed []byte) RunRecord {
	if r.list != nil {
		r.list.remove(r)
	}
	r.rec.UpdatedAt = now
	out := r.rec
	r.packed = nil
	if ended(r.rec.Status) {
		if packed != nil {
			r.packed, r.rec.Checkpoint = packed, Checkpoint{}
		}
		s.done.push(r)
	} else {
		s.open.push(r)
	}
	s.sweep(now)
	return out
}

// live returns a stored run that is not past its retention, dropping it
// when it is.
func (s *InMemoryStore) live(runID string, now time.Time) (*memRun, bool) {
	r, ok := s.runs[runID]
	if !ok {
		return nil, false
	}
	if s.expired(r, now) {
		s.drop(r)
		return nil, false
	}
	return r, true
}

// CreateRun implements Store.
func (s *InMemoryStore) CreateRun(ctx context.Context, rec RunRecord) (RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return RunRecord{}, err
	}
	packed := pack(rec.Status, rec.Checkpoint)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if _, ok := s.live(rec.RunID, now); ok {
		return RunRecord{}, &RunExistsError{RunID: rec.RunID}
	}
	rec.Version = 1
	rec.Cancel = nil
	rec.CreatedAt = now.Round(0).Truncate(time.Microsecond).UTC()
	r := &memRun{rec: rec, created: rec.CreatedAt, key: rec.Checkpoint.Key, tenant: rec.Checkpoint.Tenant}
	s.runs[rec.RunID] = r
	return s.put(r, now, packed), nil
}

// UpdateRun implements Store.
func (s *InMemoryStore) UpdateRun(ctx context.Context, rec RunRecord) (RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return RunRecord{}, err
	}
	packed := pack(rec.Status, rec.Checkpoint)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur, ok := s.live(rec.RunID, now)
	if !ok {
		return RunRecord{}, &RunNotFoundError{RunID: rec.RunID}
	}
	if cur.rec.Version != rec.Version {
		return RunRecord{}, &ConflictError{RunID: rec.RunID, Version: rec.Version, Stored: cur.rec.Version}
	}
	rec.Version++
	rec.Cancel = nil
	rec.CreatedAt = cur.created
	if rec.Status == StatusRunning {
		rec.Cancel = cur.rec.Cancel
	}
	cur.rec = rec
	return s.put(cur, now, packed), nil
}

// LoadRun implements Store.
func (s *InMemoryStore) LoadRun(ctx context.Context, runID string) (RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return RunRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.live(runID, s.now())
	if !ok {
		return RunRecord{}, &RunNotFoundError{RunID: runID}
	}
	return cur.record()
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
	s.live(runID, s.now()) // a run past its retention takes its calls with it
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
	s.live(runID, s.now())
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
	r, ok := s.live(runID, s.now())
	if !ok {
		return "", &RunNotFoundError{RunID: runID}
	}
	cur := &r.rec
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
func (s *InMemoryStore) WatchCancel(ctx context.Context, runID string, stop func(CancelRequest)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var pending *CancelRequest
	if r, ok := s.live(runID, s.now()); ok && r.rec.Status == StatusRunning {
		pending = r.rec.Cancel
	}
	s.cancels.Watch(ctx, runID, pending, stop)
	return nil
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
	// One grant per tool, so that approving the same tool again and again
	// does not grow the store.
	gs := slices.DeleteFunc(s.grants[g.ThreadID], func(old Grant) bool { return old.Tool == g.Tool })
	s.grants[g.ThreadID] = append(gs, g)
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

// RunDeleter is a Store that can delete a run that has ended, with its
// calls: what the Responses API's DELETE and store false ask for. A store
// that cannot is asked nothing; the service then answers that deleting
// is not built for it.
type RunDeleter interface {
	// DeleteRun deletes the run and its calls; a run that is not stored
	// is a *RunNotFoundError. The caller checks that the run has ended.
	DeleteRun(ctx context.Context, runID string) error
}

// DeleteRun implements RunDeleter.
func (s *InMemoryStore) DeleteRun(ctx context.Context, runID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(runID, s.now())
	if !ok {
		return &RunNotFoundError{RunID: runID}
	}
	s.drop(r)
	return nil
}
