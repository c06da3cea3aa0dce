package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const helpdesk = "testdata/eval/helpdesk/app.cue"

// TestEvalAgentWithApprovalTools is the helpdesk scenario end to end: an
// agent whose password reset needs approval is gated in aidgen eval on the
// fake. The eval approves every paused call and the case reset-bob rejects
// its own; one fake script plays each case's conversation, so the approved
// and the rejected reset answer differently, and every report says which
// decisions were taken. Without a policy the same eval fails its paused
// samples and says how to decide them.
func TestEvalAgentWithApprovalTools(t *testing.T) {
	t.Chdir("../..")
	dir := t.TempDir()
	jsonFile, htmlFile := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	var out, errOut bytes.Buffer
	if code := Main([]string{"eval", "--progress", "none", "--json", jsonFile, "--html", htmlFile, helpdesk}, strings.NewReader(""), &out, &errOut); code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		"3 cases × 2 runs",
		"approvals: 4 calls decided in 4 samples: 2 approved, 2 rejected",
		"case reset-ana run 1: approved 1 (reset_user_password), rejected 0",
		"case reset-bob run 2: approved 0, rejected 1 (reset_user_password)",
		"verdict: pass",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "case vpn") {
		t.Errorf("a sample that paused for nothing is listed:\n%s", out.String())
	}

	data, err := os.ReadFile(jsonFile)
	if err != nil {
		t.Fatal(err)
	}
	validateReport(t, compileReportSchema(t), "helpdesk", data)
	var report struct {
		Evals []struct {
			Approvals []sampleApprovals `json:"approvals"`
		} `json:"evals"`
	}
	if err := json.Unmarshal(data, &report); err != nil {
		t.Fatal(err)
	}
	if a := report.Evals[0].Approvals; len(a) != 4 || a[0].Case != "reset-ana" || a[0].Approved != 1 || a[2].Case != "reset-bob" || a[2].Rejected != 1 ||
		len(a[2].Decisions) != 1 || a[2].Decisions[0].Tool != "reset_user_password" || a[2].Decisions[0].Approved {
		t.Errorf("JSON approvals %+v", a)
	}
	html, err := os.ReadFile(htmlFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<h3>Approvals</h3>") || !strings.Contains(string(html), "case reset-bob run 1: approved 0, rejected 1 (reset_user_password)") {
		t.Errorf("the HTML report does not show the decisions")
	}

	// The same app without the eval's policy: reset-ana's runs pause with
	// no one to decide, fail, and the gate fails on its floor.
	app := filepath.Join(dir, "app.cue")
	src, err := os.ReadFile(helpdesk)
	if err != nil {
		t.Fatal(err)
	}
	noPolicy := strings.Replace(string(src), `approvals: "approve"`, "", 1)
	if noPolicy == string(src) {
		t.Fatal("the app has no eval approvals to remove")
	}
	for _, f := range []string{"cases.json", "script.json", "resets.json", "baseline.json"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(helpdesk), f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(app, []byte(noPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errOut.Reset()
	if code := Main([]string{"eval", "--progress", "none", app}, strings.NewReader(""), &out, &errOut); code != ExitRegression {
		t.Fatalf("without a policy: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{
		`paused for a decision on reset_user_password; an eval has no one to approve it (give the eval, or the case, approvals: "approve" or "reject")`,
		"approvals: 2 calls decided in 2 samples: 0 approved, 2 rejected",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("without a policy, stdout lacks %q:\n%s", want, out.String())
		}
	}
}
