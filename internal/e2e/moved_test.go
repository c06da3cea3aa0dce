package e2e_test

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aidgen/aid/internal/cli"
	"github.com/aidgen/aid/internal/servicetest"
)

// TestMovedService builds support-desk into one directory, moves that
// directory elsewhere and deeper, deletes the application's sources,
// compiles the service where it now is and runs it from a third directory:
// go.mod's replace names the runtime by its absolute path, and the service
// reads its agent script, fixtures, answer key and documents from the
// copies it embeds. A refund request then plays the whole script: tool
// calls answered by fixtures, a delegate answering from the documents, a
// pause for approval.
func TestMovedService(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a generated service with the go command")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	src := filepath.Join(work, "src", "desk")
	if err := os.CopyFS(src, os.DirFS(filepath.Join(root, "examples", "support-desk"))); err != nil {
		t.Fatal(err)
	}
	built := filepath.Join(work, "out", "svc")
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"build", filepath.Join(src, "app.cue"), "-o", built, "--runtime", root}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("aidgen build exited %d:\n%s%s", code, out.String(), errOut.String())
	}
	moved := filepath.Join(work, "elsewhere", "a", "b", "svc")
	if err := os.MkdirAll(filepath.Dir(moved), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(built, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(work, "src")); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(work, "bin", "desk")
	if b, err := servicetest.GoCommand(moved, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build in the moved directory: %v\n%s", err, b)
	}

	p := start(t, bin, t.TempDir())
	var cc struct {
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Aid struct {
			RunID   string `json:"run_id"`
			Pending *struct {
				Tool string `json:"tool"`
			} `json:"pending"`
		} `json:"aid"`
	}
	p.doJSON(t, "POST", "/v1/chat/completions", "", `{"messages": [{"role": "user", "content": "I want a refund for order AB-123456"}], "user": "customer-1"}`, http.StatusOK, &cc)
	if len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "stop" || cc.Aid.Pending == nil || cc.Aid.Pending.Tool != "issue_refund" || cc.Model != "billing" || cc.Aid.RunID == "" {
		t.Fatalf("the refund did not pause in billing: %+v", cc)
	}
	var rec runRecord
	p.doJSON(t, "GET", "/v1/runs/"+cc.Aid.RunID, "", "", http.StatusOK, &rec)
	if obs, _, _, ok := rec.toolCall("triage", "lookup_order"); !ok || !strings.Contains(obs, `"status":"delivered"`) {
		t.Errorf("lookup_order, answered by its embedded fixture: %v %q", ok, obs)
	}
	if obs, _, _, ok := rec.toolCall("billing", "delegate_to_researcher"); !ok || !strings.Contains(obs, "30 days") {
		t.Errorf("the researcher, searching the embedded documents: %v %q", ok, obs)
	}
	p.stop(t)
}
