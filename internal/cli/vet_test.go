package cli_test

import (
	"bytes"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/internal/cli"
)

// run executes aidgen with args from the repository root, as a user
// would, and returns the exit code and both streams.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func chdirRoot(t *testing.T) {
	t.Helper()
	t.Chdir("../..")
}

func TestVetExamples(t *testing.T) {
	chdirRoot(t)
	examples, _ := filepath.Glob("examples/*/app.cue")
	if len(examples) < 2 {
		t.Fatalf("found %d examples, want at least 2", len(examples))
	}
	var want strings.Builder
	for _, e := range examples {
		want.WriteString(e + ": ok\n")
	}
	code, out, errOut := run(t, append([]string{"vet"}, examples...)...)
	if code != cli.ExitOK || errOut != "" {
		t.Fatalf("vet examples: exit %d, stderr %q", code, errOut)
	}
	if diff := cmp.Diff(want.String(), out); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

// TestVetStdout checks what vet says on stdout: one "FILE: ok" line per
// valid file, in argument order, nothing for an invalid one, and nothing
// at all with -q or --quiet, whose problems still reach stderr.
func TestVetStdout(t *testing.T) {
	chdirRoot(t)
	const (
		valid   = "testdata/cases/minimal/app.cue"
		invalid = "testdata/cases/unknown-alias/app.cue"
	)
	tests := []struct {
		name     string
		args     []string
		code     int
		out      string
		inStderr string
	}{
		{"one valid", []string{valid}, cli.ExitOK, valid + ": ok\n", ""},
		{"valid, invalid, valid", []string{valid, invalid, capitals}, cli.ExitInvalid, valid + ": ok\n" + capitals + ": ok\n", "unknown alias"},
		{"quiet", []string{"-q", valid, capitals}, cli.ExitOK, "", ""},
		{"quiet long form", []string{"--quiet", valid}, cli.ExitOK, "", ""},
		{"quiet still reports problems", []string{"-q", valid, invalid}, cli.ExitInvalid, "", "unknown alias"},
		{"missing file is not ok", []string{valid, "nope.cue"}, cli.ExitUsage, valid + ": ok\n", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"vet"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if diff := cmp.Diff(tt.out, out); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tt.inStderr == "" && errOut != "" {
				t.Errorf("stderr %q, want nothing", errOut)
			}
			if !strings.Contains(errOut, tt.inStderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.inStderr)
			}
		})
	}
}

func TestVetExitCodes(t *testing.T) {
	chdirRoot(t)
	tests := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"no files", []string{"vet"}, cli.ExitUsage, "vet needs at least one file"},
		{"missing file", []string{"vet", "testdata/cases/nope.cue"}, cli.ExitUsage, "no such file"},
		{"valid and invalid", []string{"vet", "testdata/cases/minimal/app.cue", "testdata/cases/unknown-alias/app.cue"}, cli.ExitInvalid, "unknown alias \"smal\""},
		{"invalid and missing", []string{"vet", "testdata/cases/unknown-alias/app.cue", "nope.cue"}, cli.ExitUsage, "unknown alias"},
		{"unknown flag", []string{"vet", "--bogus", "x.cue"}, cli.ExitUsage, "unknown flag"},
		{"unknown command", []string{"frobnicate"}, cli.ExitUsage, "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if !strings.Contains(errOut, tt.inStderr) {
				t.Errorf("stderr %q does not contain %q", errOut, tt.inStderr)
			}
		})
	}
}

func TestHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"vet", "--help"}, {"version", "--help"}} {
		code, out, _ := run(t, args...)
		if code != cli.ExitOK {
			t.Errorf("%v: exit %d", args, code)
		}
		if !strings.Contains(out, "Examples:") {
			t.Errorf("%v: help has no examples:\n%s", args, out)
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != cli.ExitOK || !strings.HasPrefix(out, "aidgen ") {
		t.Errorf("version: exit %d, output %q", code, out)
	}
}

// TestVetRestoresGCPercent checks that vet's cheaper garbage collection
// ends with the command: the CLI runs inside other programs' processes
// (these tests, for one), whose settings it must leave as it found them.
func TestVetRestoresGCPercent(t *testing.T) {
	chdirRoot(t)
	old := debug.SetGCPercent(73)
	defer debug.SetGCPercent(old)
	if code, _, errOut := run(t, "vet", "examples/capitals/app.cue"); code != cli.ExitOK {
		t.Fatalf("vet: exit %d, stderr %q", code, errOut)
	}
	if got := debug.SetGCPercent(73); got != 73 {
		t.Errorf("after vet the GC percent is %d, want 73 as before", got)
	}
}
