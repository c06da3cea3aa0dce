package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/pgtest"
)

// slowCapitals writes a copy of the capitals example whose fake answers
// after latency, with paths to the checkout's fixtures.
func slowCapitals(t *testing.T, latency string) string {
	return capitalsCopy(t, "\nproviders: fake: latency: \""+latency+"\"\n", nil)
}

// capitalsCopy writes a copy of the capitals example with overlay
// appended and the replacements made, with paths to the checkout's
// fixtures.
func capitalsCopy(t *testing.T, overlay string, replace map[string]string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "capitals", "app.cue"))
	if err != nil {
		t.Fatal(err)
	}
	fixtures, err := filepath.Abs(filepath.Join("..", "..", "fixtures"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, fixtures)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.ReplaceAll(string(b), "../../fixtures/", filepath.ToSlash(rel)+"/") + overlay
	for from, to := range replace {
		src = strings.ReplaceAll(src, from, to)
	}
	path := filepath.Join(dir, "app.cue")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEvalQueueSurvivesAKilledWorker kills a worker process (SIGKILL) in
// the middle of a distributed eval: River's rescuer gives its samples to
// the other worker, and the report (verdict, statistics and cost) is the
// one a single process gives: no sample is lost or counted twice.
func TestEvalQueueSurvivesAKilledWorker(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	appFile := slowCapitals(t, "40ms")
	dir := t.TempDir()
	common := []string{"eval", appFile, "--runs", "6", "--seed", "3", "--progress", "none"}
	one := filepath.Join(dir, "one.json")
	var out1, err1 bytes.Buffer
	code1 := cli.MainContext(t.Context(), append(common, "--json", one), strings.NewReader(""), &out1, &err1)

	// The first worker, a process of its own, leads River's maintenance.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var log1 syncBuffer
	w1 := exec.Command(self, "worker", appFile, "--queue", dsn, "--concurrency", "2", "--rescue-after", "2s")
	w1.Env = append(os.Environ(), "AIDGEN_TEST_MAIN=1")
	w1.Stderr = &log1
	if err := w1.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = w1.Wait(); close(exited) }()
	t.Cleanup(func() { _ = w1.Process.Kill(); <-exited })
	waitLog(t, &log1, "worker:")
	time.Sleep(time.Second) // its first election

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	var log2 syncBuffer
	wg.Go(func() {
		var out bytes.Buffer
		cli.MainContext(ctx, []string{"worker", appFile, "--queue", dsn, "--concurrency", "2", "--rescue-after", "2s"}, strings.NewReader(""), &out, &log2)
	})
	queued := filepath.Join(dir, "queued.json")
	var out2, err2 bytes.Buffer
	code2 := make(chan int, 1)
	go func() {
		code2 <- cli.MainContext(t.Context(), append(common, "--json", queued, "--queue", dsn), strings.NewReader(""), &out2, &err2)
	}()
	// Kill the first worker once samples are being stored.
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		_ = pool.QueryRow(t.Context(), `SELECT count(*) FROM aid_eval_samples`).Scan(&n)
		if n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no samples stored:\n%s\n%s", &log1, &log2)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := w1.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-exited
	var got int
	select {
	case got = <-code2:
	case <-time.After(90 * time.Second):
		t.Fatalf("the eval did not finish after the kill:\n%s\n%s", &log2, &err2)
	}
	t.Logf("eval finished %v after the kill", time.Since(killed).Round(10*time.Millisecond))
	stop()
	wg.Wait()
	if got != code1 {
		t.Fatalf("exit %d in one process, %d through the queue\n%s%s", code1, got, &out2, &err2)
	}
	if diff := cmp.Diff(readReport(t, one), readReport(t, queued)); diff != "" {
		t.Fatalf("reports differ (-one process +queue with a killed worker):\n%s", diff)
	}
	var rescued int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job WHERE kind = 'aid_eval_sample' AND errors::text LIKE '%rescued%'`).Scan(&rescued); err != nil {
		t.Fatal(err)
	}
	if rescued == 0 {
		t.Errorf("no sample was rescued from the killed worker")
	}
	t.Logf("%d samples rescued from the killed worker", rescued)
}

// waitLog waits for a line of a process's log.
func waitLog(t *testing.T, b *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in:\n%s", want, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a log two goroutines share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEvalQueueMatchesOneProcess runs the capitals eval in one process and
// through the queue with two workers, with the same seed: the reports,
// per-case statistics, gate, cost and all, are the same, and so is the
// exit code.
func TestEvalQueueMatchesOneProcess(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	appFile := filepath.Join("..", "..", "examples", "capitals", "app.cue")
	dir := t.TempDir()
	common := []string{"eval", appFile, "--runs", "4", "--seed", "7", "--progress", "none"}

	var out1, err1 bytes.Buffer
	one := filepath.Join(dir, "one.json")
	code1 := cli.MainContext(t.Context(), append(common, "--json", one), strings.NewReader(""), &out1, &err1)

	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	logs := make([]bytes.Buffer, 2)
	for i := range logs {
		wg.Go(func() {
			var out bytes.Buffer
			if code := cli.MainContext(ctx, []string{"worker", appFile, "--queue", dsn, "--concurrency", "4"}, strings.NewReader(""), &out, &logs[i]); code != 0 {
				t.Errorf("worker %d exited %d:\n%s", i, code, &logs[i])
			}
		})
	}
	var out2, err2 bytes.Buffer
	queued := filepath.Join(dir, "queued.json")
	code2 := cli.MainContext(t.Context(), append(common, "--json", queued, "--queue", dsn), strings.NewReader(""), &out2, &err2)
	stop()
	wg.Wait()
	if code1 != code2 {
		t.Fatalf("exit %d in one process, %d through the queue\n%s%s\n%s%s", code1, code2, &out1, &err1, &out2, &err2)
	}
	r1, r2 := readReport(t, one), readReport(t, queued)
	if diff := cmp.Diff(r1, r2); diff != "" {
		t.Fatalf("reports differ (-one process +queue):\n%s", diff)
	}
	evals, _ := r1["evals"].([]any)
	if len(evals) != 1 || evals[0].(map[string]any)["stats"] == nil {
		t.Fatalf("report without an eval's stats: %v", r1)
	}
	// The 30 cases × 4 runs ran once each, on the two workers.
	total := 0
	for i := range logs {
		var n int
		if _, err := fmtSscanf(logs[i].String(), "worker: stopped after %d samples", &n); err != nil {
			t.Errorf("worker %d log:\n%s", i, &logs[i])
		}
		total += n
	}
	if total != 120 {
		t.Errorf("the workers ran %d samples, want 120", total)
	}
	t.Logf("%s", &out2)
}

// fmtSscanf scans the line of s that starts as format does.
func fmtSscanf(s, format string, args ...any) (int, error) {
	prefix, _, _ := strings.Cut(format, "%")
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return fmt.Sscanf(l, format, args...)
		}
	}
	return 0, fmt.Errorf("no line %q", prefix)
}

// readReport reads a JSON report without what differs between any two
// runs (the file it was written from, when).
func readReport(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	delete(v, "generatedAt")
	return v
}

// TestEvalQueueSharesTheBudget runs an eval whose global budget covers a
// fraction of its samples on two workers: they spend from one account in
// the database's ledger, so together they stop at the budget, the rest of
// the samples failing with the budget's error.
func TestEvalQueueSharesTheBudget(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	const maxUSD = 0.0002 // about 35 of the 120 calls
	appFile := capitalsCopy(t, "", map[string]string{"maxUSD: 1.0": fmt.Sprintf("maxUSD: %v", maxUSD)})
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			var out, errs bytes.Buffer
			cli.MainContext(ctx, []string{"worker", appFile, "--queue", dsn, "--concurrency", "4"}, strings.NewReader(""), &out, &errs)
		})
	}
	report := filepath.Join(t.TempDir(), "report.json")
	var out, errs bytes.Buffer
	cli.MainContext(t.Context(), []string{"eval", appFile, "--runs", "4", "--progress", "none", "--queue", dsn, "--json", report}, strings.NewReader(""), &out, &errs)
	stop()
	wg.Wait()
	r := readReport(t, report)
	evals, _ := r["evals"].([]any)
	if len(evals) != 1 {
		t.Fatalf("report: %v\n%s%s", r, &out, &errs)
	}
	e := evals[0].(map[string]any)
	cost, failed := e["costUSD"].(float64), e["failedSamples"].(float64)
	t.Logf("spent %v of %v USD; %v of 120 samples failed", cost, maxUSD, failed)
	if cost > maxUSD || cost < maxUSD/2 || failed == 0 || failed == 120 {
		t.Fatalf("spent %v USD of a %v budget with %v failed samples", cost, maxUSD, failed)
	}
	if !strings.Contains(fmt.Sprint(e["sampleErrors"]), "budget") {
		t.Fatalf("failed samples do not name the budget: %v", e["sampleErrors"])
	}
}
