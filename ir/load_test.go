package ir_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/ir"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ir")

// The golden tests run from the repository root, so that file names in
// messages read exactly as `aidgen vet testdata/ir/...` prints them and the
// CLI's tests can share the goldens.
func chdirRoot(t *testing.T) {
	t.Helper()
	t.Chdir("..")
}

func TestValid(t *testing.T) {
	chdirRoot(t)
	files, _ := filepath.Glob("testdata/ir/valid/*.cue")
	files = append(files, "examples/capitals/app.cue", "examples/support-desk/app.cue")
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			doc, err := ir.Load(file)
			if err != nil {
				t.Fatalf("Load(%s) failed:\n%v", file, err)
			}
			if !strings.HasPrefix(file, "testdata/") {
				return // the examples have no golden; they only need to load
			}
			got, err := json.MarshalIndent(doc, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(file, ".cue")+".json", append(got, '\n'))
		})
	}
}

func TestInvalid(t *testing.T) {
	chdirRoot(t)
	files, _ := filepath.Glob("testdata/ir/invalid/*.cue")
	if len(files) < 30 {
		t.Fatalf("found %d invalid cases, want at least 30", len(files))
	}
	pos := regexp.MustCompile(`^testdata/ir/invalid/[a-z0-9-]+\.cue:\d+:\d+: `)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			_, err := ir.Load(file)
			if err == nil {
				t.Fatalf("Load(%s) succeeded, want errors", file)
			}
			es, ok := ir.IsInvalid(err)
			if !ok {
				t.Fatalf("Load(%s) = %v, want ir.Errors", file, err)
			}
			for _, e := range es {
				if !pos.MatchString(e.Error()) {
					t.Errorf("error without file:line:col: %q", e.Error())
				}
			}
			golden(t, strings.TrimSuffix(file, ".cue")+".stderr", []byte(es.Error()+"\n"))
		})
	}
}

// TestStableOrder loads an invalid file twice and expects the same errors
// in the same order: the order is part of the output contract.
func TestStableOrder(t *testing.T) {
	chdirRoot(t)
	const file = "testdata/ir/invalid/many-errors.cue"
	_, err1 := ir.Load(file)
	_, err2 := ir.Load(file)
	if err1 == nil || err1.Error() != err2.Error() {
		t.Fatalf("two loads differ:\n%v\n---\n%v", err1, err2)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := ir.Load(filepath.Join(t.TempDir(), "nope.cue"))
	if err == nil {
		t.Fatal("Load of a missing file succeeded")
	}
	if _, ok := ir.IsInvalid(err); ok {
		t.Errorf("a missing file is reported as an invalid IR: %v", err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v does not wrap os.ErrNotExist", err)
	}
}

func TestLoadBytesResolvesAgainstName(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prompt.md"), []byte("Be brief."), 0o644); err != nil {
		t.Fatal(err)
	}
	src := []byte(`name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: "m-1": {provider: "p", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0}
aliases: m: "m-1"
agents: a: {model: "m", instructionsFile: "prompt.md"}
`)
	doc, err := ir.LoadBytes(filepath.Join(dir, "app.cue"), src)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := doc.Agent("a")
	if !ok || a.Instructions != "Be brief." {
		t.Fatalf("agent a instructions = %+v, want the file's text", a)
	}
	if m, ok := doc.Resolve("m"); !ok || m.ID != "m-1" {
		t.Errorf("Resolve(m) = %v, %v", m, ok)
	}
	if _, ok := doc.Resolve("nope"); ok {
		t.Error("Resolve(nope) found something")
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden (run go test ./ir -update to create it): %v", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s mismatch (-want +got):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}
