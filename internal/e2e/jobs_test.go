package e2e_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/pgtest"
)

// slowServer answers the replicas variant's stamp tool at once, and holds
// the first request of each other path (slow_read, slow_write) until its
// client goes away, answering the later ones at once: a tool call in
// flight when its replica is killed, which another replica's retry
// completes.
type slowServer struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]int
}

func newSlowServer() *slowServer {
	s := &slowServer{calls: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.calls[r.URL.Path]++
		n := s.calls[r.URL.Path]
		s.mu.Unlock()
		if r.URL.Path != "/stamp" && n == 1 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(2 * time.Minute):
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true,"path":"`+r.URL.Path+`"}`)
	}))
	return s
}

func (s *slowServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

// The queue's settings of the test: a drive lasts at most 10s, and a job
// running for 11s without finishing is presumed to have lost its worker.
// The second replica starts while the first drives the runs, so the
// drives must outlast its start; River's leader failover (10 to 15 s
// after the leader's death) is longer than the rescue, so the new leader's
// first look finds the jobs stuck.
const (
	jobRunTimeout  = "10s"
	jobRescueAfter = "11s"
)

// TestKilledReplicaRunsFinishElsewhere submits two background runs to a
// replica, starts a second replica on the same database, and kills the
// first with SIGKILL while one run is in a read and the other in a write:
// River's rescuer (on the second replica, once it leads) gives their jobs
// to its workers without any call from the test. The read run completes, its finished
// write not repeated and its read run again; the write run pauses for a
// decision (an interrupted write is never re-run silently), and the
// decision, posted with background, is driven by the queue too.
func TestKilledReplicaRunsFinishElsewhere(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	bin, dir := build(t, replicas())
	env := []string{"AID_E2E_DSN=" + dsn, "AID_JOB_RUN_TIMEOUT=" + jobRunTimeout, "AID_JOB_RESCUE_AFTER=" + jobRescueAfter}
	a := start(t, bin, dir, env...)
	if !strings.Contains(a.stderr.String(), `"jobs":"river on the state database"`) {
		t.Fatalf("replica A does not say its background runs are River jobs:\n%s", a.stderr)
	}

	var x, y runRecord
	a.doJSON(t, "POST", "/v1/runs", "", `{"agent":"mover","input":"move AB-123456","background":true}`, http.StatusAccepted, &x)
	a.doJSON(t, "POST", "/v1/runs", "", `{"agent":"writer","input":"write AB-123456","background":true}`, http.StatusAccepted, &y)
	if x.Status != "queued" || y.Status != "queued" {
		t.Fatalf("submitted runs are %q and %q, want queued", x.Status, y.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for slow.count("/read") == 0 || slow.count("/write") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the runs never reached their slow calls (read %d, write %d):\n%s", slow.count("/read"), slow.count("/write"), a.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The second replica: its workers find no job available, both runs'
	// jobs being A's.
	b := start(t, bin, dir, env...)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-a.done
	done := pollStatus(t, b, x.RunID, "completed", 90*time.Second)
	took := time.Since(killed)
	t.Logf("SIGKILL to the read run completed on the other replica: %v (rescue after %s, run timeout %s)", took.Round(10*time.Millisecond), jobRescueAfter, jobRunTimeout)
	if obs, _, _, ok := done.toolCall("mover", "slow_read"); !ok || !strings.Contains(obs, "/read") || done.Answer != "" && done.Answer != "Moved." {
		t.Fatalf("completed run %+v", done)
	}
	if n := slow.count("/stamp"); n != 1 {
		t.Errorf("the finished write ran %d times, want once", n)
	}
	if n := slow.count("/read"); n != 2 {
		t.Errorf("the interrupted read ran %d times, want twice", n)
	}

	paused := pollStatus(t, b, y.RunID, "paused", 30*time.Second)
	var pending struct {
		Pending struct {
			Tool   string `json:"tool"`
			Reason string `json:"reason"`
		} `json:"pending"`
	}
	b.doJSON(t, "GET", "/v1/runs/"+y.RunID, "", "", http.StatusOK, &pending)
	if paused.Pending == nil || pending.Pending.Tool != "slow_write" || pending.Pending.Reason != "interrupted" || slow.count("/write") != 1 {
		t.Fatalf("the interrupted write: pending %+v, %d writes", pending.Pending, slow.count("/write"))
	}
	var queued runRecord
	b.doJSON(t, "POST", "/v1/runs/"+y.RunID+"/resume", "", `{"action":"approve","by":"ops","background":true}`, http.StatusAccepted, &queued)
	pollStatus(t, b, y.RunID, "completed", 30*time.Second)
	if n := slow.count("/write"); n != 2 {
		t.Errorf("the approved write ran %d times in all, want twice (the interrupted attempt and the approved one)", n)
	}
	if n, ok := metric(t, b, "", "aid_jobs_rescued_total"); !ok || n != 2 {
		t.Errorf("aid_jobs_rescued_total on the replica that took over = %v (present %v), want 2", n, ok)
	}
	b.stop(t)
}

// pollStatus reads a run on p until it has the status.
func pollStatus(t *testing.T, p *proc, runID, want string, within time.Duration) runRecord {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var rec runRecord
		status, _, body := p.do(t, "GET", "/v1/runs/"+runID, "", nil)
		if status == http.StatusOK {
			if err := json.Unmarshal(body, &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Status == want {
				return rec
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %q after %v, want %s:\n%s", runID, rec.Status, within, want, p.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
