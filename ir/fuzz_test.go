package ir_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aidgen/aid/ir"
)

// FuzzLoad feeds arbitrary bytes to the loader, seeded with every IR in
// testdata and the examples. Whatever the input, Load must not panic, and
// when it fails it must fail with positioned errors in the named file.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/cases/*/app.cue")
	more, _ := filepath.Glob("../examples/*/app.cue")
	for _, s := range append(seeds, more...) {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	// The name places the input beside the invalid cases, so relative
	// paths in the seeds resolve as they do there.
	name := filepath.Join("..", "testdata", "cases", "fuzz", "app.cue")
	f.Fuzz(func(t *testing.T, src []byte) {
		doc, err := ir.LoadBytes(name, src)
		if err == nil {
			if doc == nil {
				t.Fatal("LoadBytes returned neither a document nor an error")
			}
			return
		}
		es, ok := ir.IsInvalid(err)
		if !ok {
			t.Fatalf("LoadBytes failed without positioned errors: %v", err)
		}
		if len(es) == 0 {
			t.Fatal("LoadBytes returned an empty error list")
		}
		for _, e := range es {
			if e.Pos.Filename != name || e.Pos.Line < 1 || e.Pos.Column < 1 {
				t.Errorf("error without a position in %s: %q", name, e.Error())
			}
		}
	})
}
