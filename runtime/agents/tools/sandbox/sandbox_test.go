package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
	"github.com/aidgen/aid/runtime/agents/tools/sandbox"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/gateway/fake"
	"github.com/aidgen/aid/runtime/kind"
)

// newSandbox builds a sandbox through bwrap. Without bwrap the test skips,
// saying so, unless CI is set: CI installs bubblewrap, so there a missing
// bwrap fails.
func newSandbox(t *testing.T, k sandbox.Kind) *sandbox.Sandbox {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("bwrap is not installed and CI is set: scripts/test.sh installs bubblewrap; %v", err)
		}
		t.Skip("bwrap is not installed (Debian: apt-get install bubblewrap); the sandbox's attack tests need it")
	}
	k.Backend = sandbox.BackendBubblewrap
	sb, err := sandbox.New(context.Background(), k, kind.Env{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sb.Close() })
	return sb
}

func runIn(t *testing.T, sb *sandbox.Sandbox, runID, command string) string {
	t.Helper()
	ctx := agents.ContextWithRunInfo(context.Background(), agents.RunInfo{RunID: runID})
	args, _ := json.Marshal(map[string]string{"command": command})
	out, err := sb.Call(ctx, args)
	if err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	return out
}

func TestSandboxRunsAndKeepsTheRunsWorkspace(t *testing.T) {
	sb := newSandbox(t, sandbox.Kind{Env: map[string]string{"GREETING": "hello"}})
	out := runIn(t, sb, "run-1", `echo "$GREETING" > note.txt; cat note.txt; pwd`)
	if !strings.Contains(out, "exit status: 0") || !strings.Contains(out, "hello\n/workspace") || !strings.Contains(out, "note.txt (created, 6 bytes") {
		t.Fatalf("first call:\n%s", out)
	}
	out = runIn(t, sb, "run-1", `cat note.txt; exit 3`)
	if !strings.Contains(out, "exit status: 3") || !strings.Contains(out, "hello") || strings.Contains(out, "changed files") {
		t.Fatalf("the run's second call does not see its workspace:\n%s", out)
	}
	dir, ok := sb.Workspace("run-1")
	if !ok {
		t.Fatal("no workspace for run-1")
	}
	sb.EndRun("run-1")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace outlived its run: %v", err)
	}
}

// TestSandboxAttacks runs what a hostile command would try; each case
// names the limit that stops it.
func TestSandboxAttacks(t *testing.T) {
	t.Setenv("AID_SERVICE_SECRET", "s3cr3t-value")
	sb := newSandbox(t, sandbox.Kind{Limits: sandbox.Limits{WallTime: 5 * time.Second, OutputBytes: 4096, Processes: 32, CPUSeconds: 2}})
	other := runIn(t, sb, "victim", `echo private > mine.txt`)
	if !strings.Contains(other, "mine.txt") {
		t.Fatal(other)
	}
	victim, _ := sb.Workspace("victim")
	for _, tt := range []struct {
		name, limit, command string
		check                func(out string) bool
	}{
		{"network", "network namespace (no network declared)",
			`(exec 3<>/dev/tcp/1.1.1.1/80) 2>&1; getent hosts example.com; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '`,
			func(out string) bool { return !strings.Contains(out, "eth") && strings.Contains(out, "lo") }},
		{"write outside the workspace", "read-only root (only /workspace and /tmp are writable)",
			`touch /usr/evil 2>&1; touch /evil 2>&1; echo x > /etc/evil 2>&1; ls /usr/evil /evil /etc/evil 2>&1`,
			func(out string) bool { return strings.Count(out, "No such file") == 3 }},
		{"read /etc/shadow", "bind mounts (the host's /etc is not there)",
			`cat /etc/shadow 2>&1; cat /etc/passwd 2>&1; ls /root /home 2>&1`,
			func(out string) bool {
				return !strings.Contains(out, "root:") && strings.Count(out, "No such file") >= 3
			}},
		{"the service's environment", "cleared environment",
			`env; cat /proc/1/environ 2>&1 | tr '\0' '\n'`,
			func(out string) bool { return !strings.Contains(out, "s3cr3t") && strings.Contains(out, "PATH=") }},
		{"other runs' workspaces", "bind mounts (one workspace per run)",
			`cat ` + victim + `/mine.txt 2>&1; ls / ; find /workspace /tmp -name mine.txt 2>/dev/null`,
			func(out string) bool {
				return !strings.Contains(out, "private") && !strings.Contains(out, "mine.txt\n")
			}},
		{"fork bomb", "process limit (RLIMIT_NPROC)",
			`bomb() { bomb | bomb & }; bomb 2>/dev/null; sleep 1; echo survived`,
			func(out string) bool {
				return strings.Contains(out, "survived") && !strings.Contains(out, "stopped by")
			}},
		{"10 GB of output", sandbox.LimitOutput,
			`head -c 10000000000 /dev/zero | tr '\0' 'a'`,
			func(out string) bool {
				return strings.Contains(out, "stopped by: "+sandbox.LimitOutput) && len(out) < 8192
			}},
		{"a command that never ends", sandbox.LimitWallTime,
			`sleep 1000 & while :; do :; done`,
			func(out string) bool {
				return strings.Contains(out, "stopped by: "+sandbox.LimitWallTime) || strings.Contains(out, "stopped by: "+sandbox.LimitCPU)
			}},
		{"setuid binaries", "no_new_privs and the user namespace (setuid bits do not raise privileges)",
			`grep NoNewPrivs /proc/self/status; /usr/bin/mount -t tmpfs none /workspace 2>&1; id -u`,
			func(out string) bool {
				return strings.Contains(out, "NoNewPrivs:\t1") && strings.Contains(out, "65534")
			}},
		{"/proc escapes", "pid namespace with its own /proc",
			`ls /proc | grep -c '^[0-9]'; cat /proc/1/cmdline | tr '\0' ' '; ls -la /proc/1/root/ 2>&1 | grep -c workspace`,
			func(out string) bool { return !strings.Contains(out, "systemd") && !strings.Contains(out, "init") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := runIn(t, sb, "attacker", tt.command)
			if !tt.check(out) {
				t.Fatalf("not stopped by the %s:\n%s", tt.limit, out)
			}
			t.Logf("stopped by the %s:\n%s", tt.limit, out)
		})
	}
	if b, err := os.ReadFile(filepath.Join(victim, "mine.txt")); err != nil || string(b) != "private\n" {
		t.Fatalf("the victim's workspace changed: %q %v", b, err)
	}
}

func TestSandboxUnavailableBackend(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := sandbox.New(context.Background(), sandbox.Kind{Backend: sandbox.BackendBubblewrap}, kind.Env{})
	var ue *sandbox.UnavailableError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "never run outside a sandbox") {
		t.Fatalf("no bwrap: %v", err)
	}
	if _, err := sandbox.New(context.Background(), sandbox.Kind{Backend: "docker"}, kind.Env{}); err == nil || !strings.Contains(err.Error(), `unknown backend "docker"`) {
		t.Fatalf("unknown backend: %v", err)
	}
}

func TestSandboxCancelKillsTheCommand(t *testing.T) {
	sb := newSandbox(t, sandbox.Kind{})
	ctx, cancel := context.WithCancel(agents.ContextWithRunInfo(context.Background(), agents.RunInfo{RunID: "r"}))
	done := make(chan error, 1)
	go func() {
		_, err := sb.Call(ctx, json.RawMessage(`{"command":"sleep 600"}`))
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
}

// TestSandboxApprovalAndRunEnd: a sandbox call goes through the approval
// policy like any write tool (a CEL rule over the command denies rm, and
// the command never runs), and the run's workspace is deleted when the
// run ends (agents.Config.RunEnded).
func TestSandboxApprovalAndRunEnd(t *testing.T) {
	sb := newSandbox(t, sandbox.Kind{})
	p, err := fake.New(fake.Config{Script: []fake.Step{
		{ToolCalls: []gateway.ToolCall{{ID: "c1", Name: "shell", Arguments: json.RawMessage(`{"command":"echo keep > kept.txt"}`)}}},
		{ToolCalls: []gateway.ToolCall{{ID: "c2", Name: "shell", Arguments: json.RawMessage(`{"command":"rm kept.txt"}`)}}},
		{ToolCalls: []gateway.ToolCall{{ID: "c3", Name: "shell", Arguments: json.RawMessage(`{"command":"cat kept.txt"}`)}}},
		{Text: "done"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	caps := []gateway.Capability{gateway.CapabilityTools}
	gw, err := gateway.New(gateway.Config{Models: []gateway.PinnedModel{{Alias: "m", Spec: gateway.ModelSpec{ID: "m-1", Provider: "fake", ContextWindow: 16000, MaxOutputTokens: 100, Capabilities: caps}}}, Providers: map[string]gateway.Provider{"fake": p}})
	if err != nil {
		t.Fatal(err)
	}
	var ended []string
	r, err := agents.New(agents.Config{
		Gateway:         gw,
		Tools:           []agents.Tool{{Name: "shell", Description: "Run a command.", Effects: agents.EffectsWrite, Input: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}},
		Implementations: map[string]agents.Implementation{"shell": sb},
		Agents:          []agents.Agent{{Name: "a", Model: "m", Instructions: "x", Tools: []string{"shell"}}},
		Conditions:      cel.Language{},
		Approvals:       policy.Policy{Rules: []policy.Rule{{Tool: "shell", When: `args.command.matches('(^|[;&| ])rm ')`, Action: policy.Deny, Reason: "no deleting"}}},
		RunEnded:        []func(string){func(id string) { ended = append(ended, id); sb.EndRun(id) }},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(context.Background(), "a", "go", agents.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	obs := []string{}
	for _, s := range res.Steps {
		for _, c := range s.ToolCalls {
			obs = append(obs, c.Observation)
		}
	}
	if len(obs) != 3 || !strings.Contains(obs[1], "no deleting") || !strings.Contains(obs[2], "keep") {
		t.Fatalf("observations %q: the rm was not denied, or ran", obs)
	}
	if len(ended) != 1 || ended[0] != res.RunID {
		t.Fatalf("RunEnded calls %v, want [%s]", ended, res.RunID)
	}
	if _, ok := sb.Workspace(res.RunID); ok {
		t.Fatal("the run's workspace outlived the run")
	}
}
