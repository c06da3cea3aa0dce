package servicetest

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

// npmInstalls holds the npm ci of each folder, once per test binary.
var npmInstalls sync.Map // absolute folder → *npmInstall

type npmInstall struct {
	once sync.Once
	err  error
}

// NPM installs the pinned npm packages of dir (its package-lock.json) with
// npm ci when node_modules is missing or was installed from another lock,
// once per test binary, and returns dir's absolute path. what says what the
// packages are for, in the skip and failure messages. Without node the
// test skips, saying so; with CI set it fails instead, since CI must run
// these tests (scripts/test.sh installs Node.js, as root).
func NPM(t testing.TB, dir, what string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is not installed, and CI must run the tests that drive %s: install Node.js 18 or later (scripts/test.sh does, as root)", what)
		}
		t.Skipf("node is not installed: these tests drive %s from npm; install Node.js 18 or later to run them", what)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := npmInstalls.LoadOrStore(abs, &npmInstall{})
	in := v.(*npmInstall)
	in.once.Do(func() { in.err = npmCI(abs) })
	if in.err != nil {
		t.Fatalf("npm ci in %s: %v", dir, in.err)
	}
	return abs
}

// npmCI runs npm ci in dir unless node_modules was installed from the same
// package-lock.json, and stamps it.
func npmCI(dir string) error {
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".aid-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return &npmError{err: err, out: out.String()}
	}
	return os.WriteFile(stamp, []byte(want), 0o644)
}

type npmError struct {
	err error
	out string
}

func (e *npmError) Error() string { return e.err.Error() + "\n" + e.out }
