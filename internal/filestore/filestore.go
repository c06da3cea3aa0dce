package filestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/agents"
)

// Format is the version of the run file this package writes and reads. It
// changes when a field changes meaning, so that an old file is refused
// rather than misread.
const Format = 1

// lockName is the directory's lock file. It starts with a dot, which no
// run's file name does.
const lockName = ".lock"

// Store is an agents.Store kept in a directory, one file per run. It is
// safe for concurrent use, by goroutines and by processes sharing the
// directory.
type Store struct {
	dir     string
	now     func() time.Time
	cancels agents.Cancels
	poll    time.Duration
}

// CancelPoll is how often a watch (WatchCancel) looks at its run's file
// for a request made by another process: the delay within which one
// reaches it. A request made in this process reaches it at once.
const CancelPoll = 100 * time.Millisecond

var _ agents.Store = (*Store)(nil)

// Open returns the store kept in dir, creating the directory (readable by
// its owner only: runs hold conversations) when it is missing.
func Open(dir string) (*Store, error) {
	if err := lockSupported(); err != nil {
		return nil, err
	}
	if dir == "" {
		return nil, errors.New("open run store: no directory given")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	// Creating the lock file now finds a directory that cannot be written
	// before a run starts, not at its first step.
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open run store: %w", err)
	}
	return &Store{dir: dir, now: time.Now, poll: CancelPoll}, nil
}

// Dir returns the directory the store keeps its runs in.
func (s *Store) Dir() string { return s.dir }

// Path returns the file that holds a run, whether or not it exists.
func (s *Store) Path(runID string) string { return filepath.Join(s.dir, fileName(runID)) }

// CorruptFileError reports a run file that cannot be read back: not JSON,
// another format, or the file of another run.
type CorruptFileError struct {
	// Path is the file.
	Path string
	// Err says what is wrong.
	Err error
}

// Error implements error.
func (e *CorruptFileError) Error() string {
	return fmt.Sprintf("run file %s is unreadable: %v", e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptFileError) Unwrap() error { return e.Err }

// runFile is what one run's file holds: the run's record, when it was
// created, and its tool calls in the order they were recorded (a call may
// be recorded for a run the store holds no record of; the contract allows
// it).
type runFile struct {
	Format int          `json:"format"`
	RunID  text         `json:"run_id"`
	Run    *storedRun   `json:"run,omitempty"`
	Calls  []storedCall `json:"calls,omitempty"`
}

type storedRun struct {
	Agent      text              `json:"agent"`
	Status     agents.Status     `json:"status"`
	Version    int64             `json:"version"`
	UpdatedAt  time.Time         `json:"updated_at"`
	Cancel     *storedCancel     `json:"cancel,omitempty"`
	Checkpoint agents.Checkpoint `json:"checkpoint"`
}

// storedCancel is a pending cancel request (agents.RunRecord.Cancel).
type storedCancel struct {
	By text      `json:"by,omitempty"`
	At time.Time `json:"at"`
}

func (c *storedCancel) request() *agents.CancelRequest {
	if c == nil {
		return nil
	}
	return &agents.CancelRequest{By: string(c.By), At: c.At}
}

type storedCall struct {
	Key       text           `json:"key"`
	CallID    text           `json:"call_id"`
	Tool      text           `json:"tool"`
	Effects   agents.Effects `json:"effects"`
	Arguments text           `json:"arguments"`
	Result    *storedResult  `json:"result,omitempty"`
}

type storedResult struct {
	Observation text             `json:"observation"`
	ErrorKind   agents.ErrorKind `json:"error_kind,omitempty"`
}

// text is a string that round-trips exactly: a JSON string when it is
// valid UTF-8 (JSON keeps NUL bytes and every other code point), and
// {"base64": ...} when it is not, which a JSON string would mangle.
type text string

type base64Text struct {
	Base64 []byte `json:"base64"`
}

// MarshalJSON implements json.Marshaler.
func (t text) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(base64Text{Base64: []byte(t)})
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var v base64Text
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*t = text(v.Base64)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = text(s)
	return nil
}

func (r *storedRun) record(runID string) agents.RunRecord {
	return agents.RunRecord{RunID: runID, Agent: string(r.Agent), Status: r.Status, Version: r.Version, Checkpoint: r.Checkpoint, UpdatedAt: r.UpdatedAt, Cancel: r.Cancel.request()}
}

func (c *storedCall) record(runID string) agents.CallRecord {
	rec := agents.CallRecord{RunID: runID, Key: string(c.Key), CallID: string(c.CallID), Tool: string(c.Tool), Effects: c.Effects, Arguments: string(c.Arguments)}
	if c.Result != nil {
		rec.Result = &agents.CallResult{Observation: string(c.Result.Observation), ErrorKind: c.Result.ErrorKind}
	}
	return rec
}

// fileName is a run's file name: the run id itself when it is a plain
// name (the runtime's ids are), so that a person can find the file, and
// otherwise a hash of it, so that no id can name a path outside the
// directory, the lock file, or one too long for the file system.
func fileName(runID string) string {
	if safeID(runID) {
		return runID + ".json"
	}
	sum := sha256.Sum256([]byte(runID))
	return "~" + hex.EncodeToString(sum[:]) + ".json"
}

func safeID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '-' {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// read returns a run's file, or nil when there is none. It takes no lock:
// files are replaced whole by rename, so a reader sees one version or the
// next, never a mix.
func (s *Store) read(runID string) (*runFile, error) {
	var f runFile
	if ok, err := readOwned(s.Path(runID), "run", runID, &f); !ok {
		return nil, err
	}
	return &f, nil
}

// owned is a file that belongs to one run or thread.
type owned interface {
	// owner returns the file's format and whose it is.
	owner() (format int, id text)
}

func (f *runFile) owner() (int, text)    { return f.Format, f.RunID }
func (f *threadFile) owner() (int, text) { return f.Format, f.ThreadID }

// readOwned reads the file at path into f and checks that it is of this
// aidgen's format and belongs to the kind's id. It reports false, with a
// nil error, when there is no file.
func readOwned(path, kind, id string, f owned) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s %q: %w", kind, id, err)
	}
	if err := json.Unmarshal(data, f); err != nil {
		return false, &CorruptFileError{Path: path, Err: err}
	}
	switch format, owner := f.owner(); {
	case format != Format:
		return false, &CorruptFileError{Path: path, Err: fmt.Errorf("format %d, this aidgen reads format %d", format, Format)}
	case string(owner) != id:
		return false, &CorruptFileError{Path: path, Err: fmt.Errorf("it holds %s %q, not %q", kind, owner, id)}
	}
	return true, nil
}

// write replaces a run's file: a temporary file in the same directory,
// synced, renamed over the old one, and the directory synced, so that the
// new version survives a crash whole or not at all.
func (s *Store) write(runID string, f *runFile) error {
	return s.writeFile(s.Path(runID), "run "+strconv.Quote(runID), f)
}

// writeFile replaces the file at path with v as JSON, atomically; what
// names the file's content in errors.
func (s *Store) writeFile(path, what string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", what, err)
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// update changes a run's file under the directory's lock: fn gets the file
// as stored (a new, empty one when there is none) and changes it; an error
// from fn writes nothing.
func (s *Store) update(ctx context.Context, runID string, fn func(f *runFile) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := lock(ctx, filepath.Join(s.dir, lockName))
	if err != nil {
		return fmt.Errorf("lock run store %s: %w", s.dir, err)
	}
	defer unlock()
	f, err := s.read(runID)
	if err != nil {
		return err
	}
	if f == nil {
		f = &runFile{Format: Format, RunID: text(runID)}
	}
	if err := fn(f); err != nil {
		return err
	}
	return s.write(runID, f)
}

// stamp is the time a write records: now, without the monotonic reading
// (which a file cannot keep), and never before the previous write's.
func (s *Store) stamp(prev time.Time) time.Time {
	now := s.now().Round(0)
	if now.Before(prev) {
		return prev
	}
	return now
}

// CreateRun implements agents.Store.
func (s *Store) CreateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	err := s.update(ctx, rec.RunID, func(f *runFile) error {
		if f.Run != nil {
			return &agents.RunExistsError{RunID: rec.RunID}
		}
		rec.Version, rec.Cancel = 1, nil
		rec.UpdatedAt = s.stamp(time.Time{})
		f.Run = &storedRun{Agent: text(rec.Agent), Status: rec.Status, Version: rec.Version, UpdatedAt: rec.UpdatedAt, Checkpoint: rec.Checkpoint}
		return nil
	})
	if err != nil {
		return agents.RunRecord{}, err
	}
	return rec, nil
}

// UpdateRun implements agents.Store.
func (s *Store) UpdateRun(ctx context.Context, rec agents.RunRecord) (agents.RunRecord, error) {
	err := s.update(ctx, rec.RunID, func(f *runFile) error {
		cur := f.Run
		if cur == nil {
			return &agents.RunNotFoundError{RunID: rec.RunID}
		}
		if cur.Version != rec.Version {
			return &agents.ConflictError{RunID: rec.RunID, Version: rec.Version, Stored: cur.Version}
		}
		rec.Version++
		rec.UpdatedAt = s.stamp(cur.UpdatedAt)
		next := &storedRun{Agent: text(rec.Agent), Status: rec.Status, Version: rec.Version, UpdatedAt: rec.UpdatedAt, Checkpoint: rec.Checkpoint}
		if rec.Status == agents.StatusRunning {
			next.Cancel = cur.Cancel // a request outlives the steps, not the run
		}
		f.Run = next
		rec.Cancel = next.Cancel.request()
		return nil
	})
	if err != nil {
		return agents.RunRecord{}, err
	}
	return rec, nil
}

// LoadRun implements agents.Store.
func (s *Store) LoadRun(ctx context.Context, runID string) (agents.RunRecord, error) {
	if err := ctx.Err(); err != nil {
		return agents.RunRecord{}, err
	}
	f, err := s.read(runID)
	if err != nil {
		return agents.RunRecord{}, err
	}
	if f == nil || f.Run == nil {
		return agents.RunRecord{}, &agents.RunNotFoundError{RunID: runID}
	}
	return f.Run.record(runID), nil
}

// RequestCancel implements agents.Store.
func (s *Store) RequestCancel(ctx context.Context, runID string, req agents.CancelRequest) (agents.Status, error) {
	var status agents.Status
	var pending *agents.CancelRequest
	err := s.update(ctx, runID, func(f *runFile) error {
		if f.Run == nil {
			return &agents.RunNotFoundError{RunID: runID}
		}
		status = f.Run.Status
		if status != agents.StatusRunning {
			return errNoWrite
		}
		if f.Run.Cancel == nil {
			f.Run.Cancel = &storedCancel{By: text(req.By), At: req.At.Round(0)}
		}
		pending = f.Run.Cancel.request()
		return nil
	})
	if err != nil && !errors.Is(err, errNoWrite) {
		return "", err
	}
	if pending != nil {
		s.cancels.Notify(runID, *pending)
	}
	return status, nil
}

// WatchCancel implements agents.Store. A request made by this process
// reaches the watch at once; one made by another process sharing the
// directory within CancelPoll, the time between two looks at the run's
// file.
func (s *Store) WatchCancel(ctx context.Context, runID string, stop func(agents.CancelRequest)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rec, err := s.pendingCancel(runID)
	if err != nil {
		return err
	}
	s.cancels.Watch(ctx, runID, rec, stop)
	if rec == nil {
		go s.pollCancel(ctx, runID)
	}
	return nil
}

// pendingCancel returns the run's pending request, if it runs and has one.
func (s *Store) pendingCancel(runID string) (*agents.CancelRequest, error) {
	f, err := s.read(runID)
	if err != nil || f == nil || f.Run == nil || f.Run.Status != agents.StatusRunning {
		return nil, err
	}
	return f.Run.Cancel.request(), nil
}

// pollCancel looks at the run's file every s.poll until ctx ends, and
// hands a request it finds to the run's watchers. It reads the file only
// when its size or time changed.
func (s *Store) pollCancel(ctx context.Context, runID string) {
	t := time.NewTicker(s.poll)
	defer t.Stop()
	var last os.FileInfo
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(s.Path(runID))
		if err != nil || (last != nil && fi.ModTime().Equal(last.ModTime()) && fi.Size() == last.Size()) {
			continue
		}
		last = fi
		if req, err := s.pendingCancel(runID); err == nil && req != nil {
			s.cancels.Notify(runID, *req)
			return
		}
	}
}

// threadFile is what a thread's file holds: the grants people gave for
// the thread (agents.Store.AddGrant).
type threadFile struct {
	Format   int           `json:"format"`
	ThreadID text          `json:"thread_id"`
	Grants   []storedGrant `json:"grants"`
}

type storedGrant struct {
	Tool     text              `json:"tool"`
	Scope    agents.GrantScope `json:"scope"`
	By       text              `json:"by,omitempty"`
	At       time.Time         `json:"at"`
	RunID    text              `json:"run_id"`
	ThreadID text              `json:"thread_id"`
}

// threadPath is the file of a thread's grants: a hash of its id, after a
// prefix no run's file name has (a run's is its id, of letters, digits,
// '_' and '-', or '~' and a hash).
func (s *Store) threadPath(threadID string) string {
	sum := sha256.Sum256([]byte(threadID))
	return filepath.Join(s.dir, "thread~"+hex.EncodeToString(sum[:])+".json")
}

func (s *Store) readThread(threadID string) (*threadFile, error) {
	var f threadFile
	ok, err := readOwned(s.threadPath(threadID), "thread", threadID, &f)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return &threadFile{Format: Format, ThreadID: text(threadID)}, nil
	}
	return &f, nil
}

// AddGrant implements agents.Store.
func (s *Store) AddGrant(ctx context.Context, g agents.Grant) error {
	if g.ThreadID == "" {
		return fmt.Errorf("grant of %s in run %s: a thread grant needs a thread id", g.Tool, g.RunID)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	unlock, err := lock(ctx, filepath.Join(s.dir, lockName))
	if err != nil {
		return fmt.Errorf("lock run store %s: %w", s.dir, err)
	}
	defer unlock()
	f, err := s.readThread(g.ThreadID)
	if err != nil {
		return err
	}
	// One grant per tool and thread, the latest (agents.Store).
	f.Grants = slices.DeleteFunc(f.Grants, func(old storedGrant) bool { return old.Tool == text(g.Tool) })
	f.Grants = append(f.Grants, storedGrant{Tool: text(g.Tool), Scope: g.Scope, By: text(g.By), At: g.At.Round(0), RunID: text(g.RunID), ThreadID: text(g.ThreadID)})
	return s.writeFile(s.threadPath(g.ThreadID), "thread "+strconv.Quote(g.ThreadID), f)
}

// Grants implements agents.Store.
func (s *Store) Grants(ctx context.Context, threadID string) ([]agents.Grant, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := s.readThread(threadID)
	if err != nil {
		return nil, err
	}
	out := make([]agents.Grant, len(f.Grants))
	for i, g := range f.Grants {
		out[i] = agents.Grant{Tool: string(g.Tool), Scope: g.Scope, By: string(g.By), At: g.At, RunID: string(g.RunID), ThreadID: string(g.ThreadID)}
	}
	return out, nil
}

// errNoWrite ends an update without writing anything.
var errNoWrite = errors.New("nothing to write")

// RecordCall implements agents.Store.
func (s *Store) RecordCall(ctx context.Context, rec agents.CallRecord) error {
	return s.update(ctx, rec.RunID, func(f *runFile) error {
		for _, c := range f.Calls {
			if string(c.Key) == rec.Key {
				return &agents.CallExistsError{RunID: rec.RunID, Key: rec.Key}
			}
		}
		f.Calls = append(f.Calls, storedCall{Key: text(rec.Key), CallID: text(rec.CallID), Tool: text(rec.Tool), Effects: rec.Effects, Arguments: text(rec.Arguments)})
		return nil
	})
}

// FinishCall implements agents.Store.
func (s *Store) FinishCall(ctx context.Context, runID, key string, res agents.CallResult) error {
	return s.update(ctx, runID, func(f *runFile) error {
		for i := range f.Calls {
			c := &f.Calls[i]
			if string(c.Key) != key {
				continue
			}
			if c.Result != nil {
				return &agents.CallFinishedError{RunID: runID, Key: key}
			}
			c.Result = &storedResult{Observation: text(res.Observation), ErrorKind: res.ErrorKind}
			return nil
		}
		return &agents.CallNotFoundError{RunID: runID, Key: key}
	})
}

// Call implements agents.Store.
func (s *Store) Call(ctx context.Context, runID, key string) (agents.CallRecord, error) {
	if err := ctx.Err(); err != nil {
		return agents.CallRecord{}, err
	}
	f, err := s.read(runID)
	if err != nil {
		return agents.CallRecord{}, err
	}
	if f != nil {
		for i := range f.Calls {
			if string(f.Calls[i].Key) == key {
				return f.Calls[i].record(runID), nil
			}
		}
	}
	return agents.CallRecord{}, &agents.CallNotFoundError{RunID: runID, Key: key}
}

// Calls implements agents.Store.
func (s *Store) Calls(ctx context.Context, runID string) ([]agents.CallRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := s.read(runID)
	if err != nil || f == nil {
		return nil, err
	}
	out := make([]agents.CallRecord, len(f.Calls))
	for i := range f.Calls {
		out[i] = f.Calls[i].record(runID)
	}
	return out, nil
}
