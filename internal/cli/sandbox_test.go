package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
)

const dataAnalysis = "examples/data-analysis/app.cue"

// TestRunDataAnalysis runs the data-analysis example as the README does,
// on the keyless fake: the analyst loads the skill, writes the CSV in its
// sandbox workspace and runs the skill's script through bwrap; the
// recording then replays offline with no bwrap on PATH, so nothing is
// executed again.
func TestRunDataAnalysis(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bwrap is not installed and CI is set: %v", err)
		}
		t.Skip("bwrap is not installed (Debian: apt-get install bubblewrap); the example's sandbox needs it")
	}
	chdirRoot(t)
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	code, out, errOut := run(t, "run", dataAnalysis, "--record", rec, "Sales by region: north 10, south 20, east 30, west 40. What is the mean?")
	if code != cli.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		`load_skill {"name":"csv-stats"}`,
		"data.csv (created, 47 bytes",
		"sales: count 4, sum 100, mean 25",
		"mean 25.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the run does not show %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`awk -f /skills/csv-stats/scripts/stats.awk data.csv`, `exit status: 0`, `sales: count 4, sum 100, mean 25`, `data.csv (created`} {
		if !strings.Contains(string(b), strings.ReplaceAll(want, `"`, `\"`)) {
			t.Errorf("the recording does not hold %q", want)
		}
	}
	t.Setenv("PATH", t.TempDir())
	code, out, errOut = run(t, "replay", rec, dataAnalysis)
	if code != cli.ExitOK {
		t.Fatalf("replay without bwrap: exit %d\n%s\n%s", code, out, errOut)
	}
}
