package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/pgtest"
)

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
