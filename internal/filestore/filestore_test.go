package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/internal/filestore"
	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/agentstoretest"
)

func open(t *testing.T, dir string) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	agentstoretest.Run(t, func(t *testing.T) agents.Store { return open(t, t.TempDir()) })
}

func TestReplicasContract(t *testing.T) {
	agentstoretest.RunReplicas(t, func(t *testing.T) (agents.Store, agents.Store) {
		dir := t.TempDir()
		return open(t, dir), open(t, dir)
	})
}

// TestSecondHandle checks what the command line relies on: a store opened
// again on the same directory (as a second process does) sees the runs
// and calls the first wrote, and its writes obey the same versions.
func TestSecondHandle(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	cp := agents.Checkpoint{Version: agents.CheckpointVersion, RunID: "run_1", Agent: "triage", Path: []string{"triage"}, Alias: "large"}
	rec, err := a.CreateRun(ctx, agents.RunRecord{RunID: "run_1", Agent: "triage", Status: agents.StatusPaused, Checkpoint: cp})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordCall(ctx, agents.CallRecord{RunID: "run_1", Key: "1.0", Tool: "issue_refund", Effects: agents.EffectsWrite, Arguments: `{"x":1}`}); err != nil {
		t.Fatal(err)
	}
	got, err := b.LoadRun(ctx, "run_1")
	if err != nil || got.Status != agents.StatusPaused || got.Version != 1 || got.Checkpoint.Alias != "large" {
		t.Fatalf("second handle loaded %+v, %v", got, err)
	}
	if _, err := b.UpdateRun(ctx, rec); err != nil {
		t.Fatal(err)
	}
	var ce *agents.ConflictError
	if _, err := a.UpdateRun(ctx, rec); !errors.As(err, &ce) || ce.Stored != 2 {
		t.Fatalf("stale write through the first handle: %v, want *ConflictError with stored 2", err)
	}
	if err := b.FinishCall(ctx, "run_1", "1.0", agents.CallResult{Observation: "ok"}); err != nil {
		t.Fatal(err)
	}
	var fin *agents.CallFinishedError
	if err := a.FinishCall(ctx, "run_1", "1.0", agents.CallResult{Observation: "again"}); !errors.As(err, &fin) {
		t.Fatalf("second result through the first handle: %v, want *CallFinishedError", err)
	}
}

// TestCancelAcrossHandles asks, through one handle (another process's),
// a run watched through a second to stop: the request reaches the watch
// within a few polls of the file.
func TestCancelAcrossHandles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	cp := agents.Checkpoint{Version: agents.CheckpointVersion, RunID: "run_1", Agent: "triage", Path: []string{"triage"}, Alias: "large"}
	if _, err := a.CreateRun(ctx, agents.RunRecord{RunID: "run_1", Agent: "triage", Status: agents.StatusRunning, Checkpoint: cp}); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch := make(chan agents.CancelRequest, 1)
	err := a.WatchCancel(wctx, "run_1", func(req agents.CancelRequest) { ch <- req })
	if err != nil {
		t.Fatal(err)
	}
	// Another write first: the watch must not take any change of the file
	// for a request.
	if err := b.RecordCall(ctx, agents.CallRecord{RunID: "run_1", Key: "1.0", Tool: "lookup"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * filestore.CancelPoll)
	select {
	case req := <-ch:
		t.Fatalf("a write that is no request reached the watch: %+v", req)
	default:
	}
	start := time.Now()
	if st, err := b.RequestCancel(ctx, "run_1", agents.CancelRequest{By: "other process", At: start}); err != nil || st != agents.StatusRunning {
		t.Fatalf("request: %s %v", st, err)
	}
	select {
	case req := <-ch:
		if req.By != "other process" {
			t.Fatalf("got %+v", req)
		}
		if d := time.Since(start); d > 10*filestore.CancelPoll {
			t.Logf("the request took %v to arrive (poll %v)", d, filestore.CancelPoll)
		}
	case <-time.After(agentstoretest.CancelDelivery):
		t.Fatal("the request never reached the other handle's watch")
	}
}

// TestRunIDsStayInTheDirectory gives the store run ids that would name
// other paths, the lock file, or names too long for a file system: each
// is kept in its own file inside the directory and found again.
func TestRunIDsStayInTheDirectory(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "runs")
	s := open(t, dir)
	ids := []string{"../escape", "/etc/passwd", ".lock", "a/b", "", "-rf", strings.Repeat("r", 300), "run\x00nul", "run_\xff", ".tmp-x", "~abc"}
	for i, id := range ids {
		cp := agents.Checkpoint{Version: agents.CheckpointVersion, RunID: id, Agent: "triage", Path: []string{"triage"}, Alias: fmt.Sprint(i)}
		if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: id, Agent: "triage", Status: agents.StatusRunning, Checkpoint: cp}); err != nil {
			t.Fatalf("create %q: %v", id, err)
		}
	}
	for i, id := range ids {
		got, err := s.LoadRun(ctx, id)
		if err != nil || got.Checkpoint.Alias != fmt.Sprint(i) || got.RunID != id {
			t.Fatalf("load %q: %+v, %v", id, got, err)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 1 || entries[0].Name() != "runs" {
		t.Fatalf("the store wrote outside its directory: %v %v", entries, err)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != len(ids)+1 { // and the lock file
		t.Fatalf("%d files for %d runs", len(files), len(ids))
	}
	if filepath.Base(s.Path("run_plain")) != "run_plain.json" {
		t.Fatalf("a plain run id is not its own file name: %s", s.Path("run_plain"))
	}
}

func TestCorruptFile(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	for name, content := range map[string]string{
		"not json":     "{",
		"other format": `{"format": 99, "run_id": "run_c"}`,
		"other run":    `{"format": 1, "run_id": "run_other"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := os.WriteFile(s.Path("run_c"), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			var ce *filestore.CorruptFileError
			if _, err := s.LoadRun(ctx, "run_c"); !errors.As(err, &ce) || ce.Path != s.Path("run_c") {
				t.Fatalf("load: %v, want *CorruptFileError naming the file", err)
			}
			// A write never replaces a file it cannot read: that would lose
			// the run.
			if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_c", Key: "1.0"}); !errors.As(err, &ce) {
				t.Fatalf("record: %v, want *CorruptFileError", err)
			}
			if data, _ := os.ReadFile(s.Path("run_c")); string(data) != content {
				t.Fatalf("the unreadable file was replaced: %s", data)
			}
		})
	}
}

func TestOpenRefusesAFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.Open(path); err == nil {
		t.Fatal("Open on a regular file succeeded")
	}
	if _, err := filestore.Open(""); err == nil {
		t.Fatal("Open without a directory succeeded")
	}
}

// TestLockWaitEndsWithContext holds the directory's lock from another
// process and checks that a write waiting for it gives up when its
// context ends.
func TestLockWaitEndsWithContext(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	cmd := helper(t, "hold", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 4)
	if _, err := out.Read(buf); err != nil || string(buf) != "held" {
		t.Fatalf("helper: %q %v", buf, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = s.RecordCall(ctx, agents.CallRecord{RunID: "run_l", Key: "1.0"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write under another process's lock: %v, want context.DeadlineExceeded", err)
	}
	// Once the holder dies, the kernel drops its lock.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := s.RecordCall(context.Background(), agents.CallRecord{RunID: "run_l", Key: "1.0"}); err != nil {
		t.Fatalf("write after the holder died: %v", err)
	}
}

// TestProcessesFinishOnce has several processes give the same call a
// result and claim the same run version at once: exactly one of each
// wins, as between goroutines.
func TestProcessesFinishOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	cp := agents.Checkpoint{Version: agents.CheckpointVersion, RunID: "run_p", Agent: "triage", Path: []string{"triage"}, Alias: "large"}
	if _, err := s.CreateRun(ctx, agents.RunRecord{RunID: "run_p", Agent: "triage", Status: agents.StatusPaused, Checkpoint: cp}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCall(ctx, agents.CallRecord{RunID: "run_p", Key: "1.0", Tool: "issue_refund", Effects: agents.EffectsWrite}); err != nil {
		t.Fatal(err)
	}
	const n = 6
	outs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := helper(t, "race", dir, fmt.Sprint(i)).Output()
			if err != nil {
				t.Errorf("helper %d: %v", i, err)
			}
			outs[i] = string(out)
		}()
	}
	wg.Wait()
	finished, claimed := 0, 0
	for _, o := range outs {
		finished += strings.Count(o, "finish:won")
		claimed += strings.Count(o, "claim:won")
	}
	if finished != 1 || claimed != 1 {
		t.Fatalf("%d processes finished the call and %d claimed the run, want 1 each:\n%s", finished, claimed, strings.Join(outs, "\n"))
	}
	got, err := s.LoadRun(ctx, "run_p")
	if err != nil || got.Version != 2 {
		t.Fatalf("after the race: %+v %v", got, err)
	}
}

func helper(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "FILESTORE_HELPER="+strings.Join(args, "\x1f"))
	cmd.Stderr = os.Stderr
	return cmd
}

// TestHelperProcess is the other process of the tests above; it does
// nothing in a normal test run.
func TestHelperProcess(t *testing.T) {
	spec := os.Getenv("FILESTORE_HELPER")
	if spec == "" {
		return
	}
	args := strings.Split(spec, "\x1f")
	ctx := context.Background()
	switch args[0] {
	case "hold":
		f, err := os.OpenFile(filepath.Join(args[1], ".lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := lockFile(f); err != nil {
			t.Fatal(err)
		}
		fmt.Print("held")
		time.Sleep(time.Minute)
	case "race":
		s, err := filestore.Open(args[1])
		if err != nil {
			t.Fatal(err)
		}
		rec, err := s.LoadRun(ctx, "run_p")
		if err != nil {
			t.Fatal(err)
		}
		err = s.FinishCall(ctx, "run_p", "1.0", agents.CallResult{Observation: args[2]})
		var fin *agents.CallFinishedError
		switch {
		case err == nil:
			fmt.Println("finish:won")
		case errors.As(err, &fin):
			fmt.Println("finish:lost")
		default:
			t.Fatal(err)
		}
		// Every process claims the version the parent created, as
		// processes that loaded the paused run at the same time would.
		rec.Status, rec.Version = agents.StatusRunning, 1
		_, err = s.UpdateRun(ctx, rec)
		var ce *agents.ConflictError
		switch {
		case err == nil:
			fmt.Println("claim:won")
		case errors.As(err, &ce):
			fmt.Println("claim:lost")
		default:
			t.Fatal(err)
		}
	}
}
