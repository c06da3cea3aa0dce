package mcp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// installed is the npm ci of this folder, once per test binary.
var installed struct {
	once sync.Once
	dir  string
	err  error
}

// modules installs this folder's pinned npm packages with npm ci when
// node_modules is missing or was installed from another package-lock.json,
// and returns the folder's absolute path. Without node the test skips,
// saying so; with CI set it fails instead, since CI must run these tests.
func modules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed, and CI must run the MCP end-to-end tests: install Node.js 18 or later (scripts/test.sh does, as root)")
		}
		t.Skip("node is not installed: these tests drive the official MCP servers and client from npm; install Node.js 18 or later to run them")
	}
	installed.once.Do(func() {
		dir, err := filepath.Abs(".")
		if err != nil {
			installed.err = err
			return
		}
		installed.dir = dir
		lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
		if err != nil {
			installed.err = err
			return
		}
		sum := sha256.Sum256(lock)
		want := hex.EncodeToString(sum[:])
		stamp := filepath.Join(dir, "node_modules", ".aid-lock-sha256")
		if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			installed.err = &npmError{err: err, out: out.String()}
			return
		}
		installed.err = os.WriteFile(stamp, []byte(want), 0o644)
	})
	if installed.err != nil {
		t.Fatalf("npm ci in internal/e2e/mcp: %v", installed.err)
	}
	return installed.dir
}

type npmError struct {
	err error
	out string
}

func (e *npmError) Error() string { return e.err.Error() + "\n" + e.out }

// module is the path of a file of an installed package.
func module(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(modules(t), "node_modules", filepath.FromSlash(rel))
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("npm ci did not install %s: %v", rel, err)
	}
	return p
}
