package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aidgen/aid/runtime/agents"
)

// cancelNotice is the payload of a cancel notification.
type cancelNotice struct {
	RunID string    `json:"run_id"`
	By    string    `json:"by,omitempty"`
	At    time.Time `json:"at"`
}

func cancelRequest(by *string, at *time.Time) *agents.CancelRequest {
	if at == nil {
		return nil
	}
	req := &agents.CancelRequest{At: *at}
	if by != nil {
		req.By = *by
	}
	return req
}

// RequestCancel implements agents.Store. One statement records the
// request on a running run (the first request kept) and sends it with
// pg_notify on the store's channel (<prefix>_cancel), which PostgreSQL
// delivers to the listening replicas when it commits.
func (s *Store) RequestCancel(ctx context.Context, runID string, req agents.CancelRequest) (agents.Status, error) {
	if !storable(runID) {
		return "", &agents.RunNotFoundError{RunID: runID}
	}
	if err := checkText("cancel requester", req.By); err != nil {
		return "", err
	}
	var status *string
	var by *string
	var at *time.Time
	var sent int64
	err := s.do(ctx, func(ctx context.Context) error {
		status, by, at = nil, nil, nil
		// n's count is selected so that it is evaluated: a CTE or join
		// whose result nobody reads may be left out by the planner.
		return s.db.QueryRow(ctx, `WITH u AS (
				UPDATE `+s.runs+`
				SET cancel_by = CASE WHEN cancel_at IS NULL THEN $2 ELSE cancel_by END, cancel_at = COALESCE(cancel_at, $3)
				WHERE run_id = $1 AND status = 'running'
				RETURNING run_id, cancel_by, cancel_at
			), n AS (
				SELECT count(pg_notify($4, json_build_object('run_id', run_id, 'by', cancel_by, 'at', cancel_at)::text)) AS sent FROM u
			)
			SELECT (SELECT status FROM `+s.runs+` WHERE run_id = $1), (SELECT cancel_by FROM u), (SELECT cancel_at FROM u), (SELECT sent FROM n)`,
			runID, req.By, req.At, s.channel).Scan(&status, &by, &at, &sent)
	})
	if err != nil {
		return "", fmt.Errorf("pgstore: request cancellation of run %s: %w", runID, err)
	}
	if status == nil {
		return "", &agents.RunNotFoundError{RunID: runID}
	}
	if r := cancelRequest(by, at); r != nil {
		// This process's watchers need not wait for the notification.
		s.cancels.Notify(runID, *r)
	}
	return agents.Status(*status), nil
}

// WatchCancel implements agents.Store. The store's listener, one
// connection of its own per Store that LISTENs on the store's channel while
// any run is watched, hands a request made by any replica to the watchers
// as soon as PostgreSQL delivers the notification; after a lost connection
// it reconnects and looks for requests it may have missed.
func (s *Store) WatchCancel(ctx context.Context, runID string, stop func(agents.CancelRequest)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.cancels.Watch(ctx, runID, nil, stop)
	s.listen.add(s)
	context.AfterFunc(ctx, s.listen.remove)
	// A request made before the watch began was notified to nobody.
	if storable(runID) {
		var by *string
		var at *time.Time
		err := s.do(ctx, func(ctx context.Context) error {
			err := s.db.QueryRow(ctx, `SELECT cancel_by, cancel_at FROM `+s.runs+` WHERE run_id = $1 AND status = 'running'`, runID).Scan(&by, &at)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("pgstore: watch cancellation of run %s: %w", runID, err)
		}
		if r := cancelRequest(by, at); r != nil {
			s.cancels.Notify(runID, *r)
		}
	}
	return nil
}

// listener keeps one connection LISTENing on the store's channel while
// runs are watched. It starts with the first watch and stays up, so that a
// service does not connect once per run, until it has had no watcher for
// listenIdle or the store is closed.
type listener struct {
	mu        sync.Mutex
	watchers  int
	idleSince time.Time
	running   bool
	stop      context.CancelFunc
	done      chan struct{}
	closed    bool
}

// ListenerApplicationName is the application_name of the listener's
// connection, so that an operator can tell it in pg_stat_activity.
const ListenerApplicationName = "aid-pgstore-cancel-listener"

const (
	// listenRetry bounds the wait before the listener connects again
	// after losing its connection.
	listenRetry = 5 * time.Second
	// listenIdle is how long the listener stays connected without a
	// watcher.
	listenIdle = 30 * time.Second
)

func (l *listener) add(s *Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watchers++
	if l.running || l.closed {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	l.running, l.stop, l.done = true, stop, make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		s.listenLoop(ctx)
	}(l.done)
}

func (l *listener) remove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.watchers--
	if l.watchers == 0 {
		l.idleSince = time.Now()
	}
}

// retire reports whether the listener should stop, having had no watcher
// for listenIdle, and if so marks it stopped, so that the next watch
// starts another.
func (l *listener) retire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watchers > 0 || time.Since(l.idleSince) < listenIdle {
		return false
	}
	l.running = false
	l.stop()
	return true
}

// close stops the listener for good and waits for it.
func (l *listener) close() {
	l.mu.Lock()
	l.closed = true
	stop, done := l.stop, l.done
	l.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// errIdle ends a connection that nobody has needed for listenIdle.
var errIdle = errors.New("no run watched")

// listenLoop listens until ctx ends or nobody needs it, connecting again
// after a failure.
func (s *Store) listenLoop(ctx context.Context) {
	wait := 100 * time.Millisecond
	for {
		err := s.listenOnce(ctx)
		if ctx.Err() != nil || errors.Is(err, errIdle) || s.listen.retire() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, listenRetry)
	}
}

// listenOnce connects, LISTENs, hands over the requests pending for the
// watched runs (made while nobody listened), then every notification until
// the connection fails or ctx ends.
func (s *Store) listenOnce(ctx context.Context) error {
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+s.quotedChannel); err != nil {
		return err
	}
	if ids := s.cancels.Watched(); len(ids) > 0 {
		rows, err := conn.Query(ctx, `SELECT run_id, cancel_by, cancel_at FROM `+s.runs+` WHERE run_id = ANY($1) AND status = 'running' AND cancel_at IS NOT NULL`, ids)
		if err != nil {
			return err
		}
		var id string
		var by *string
		var at *time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &by, &at}, func() error {
			s.cancels.Notify(id, *cancelRequest(by, at))
			return nil
		})
		if err != nil {
			return err
		}
	}
	for {
		// The wait ends now and then to see whether anybody still
		// watches; a timeout leaves the connection open.
		wctx, cancel := context.WithTimeout(ctx, listenIdle)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && ctx.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded) {
			if s.listen.retire() {
				return errIdle
			}
			continue
		}
		if err != nil {
			return err
		}
		var note cancelNotice
		if json.Unmarshal([]byte(n.Payload), &note) != nil || note.RunID == "" {
			continue // not ours to read
		}
		s.cancels.Notify(note.RunID, agents.CancelRequest{By: note.By, At: note.At})
	}
}
