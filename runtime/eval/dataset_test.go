package eval_test

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/eval"
)

var update = flag.Bool("update", false, "rewrite the .golden files under testdata")

// golden compares got with testdata file name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}

// TestLoadDatasetGolden loads every file under testdata/datasets and compares the
// decoded dataset, or the list of positioned errors, with its .golden file.
func TestLoadDatasetGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/datasets/*.json*")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if ext := filepath.Ext(path); ext != ".json" && ext != ".jsonl" {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			ds, err := eval.LoadDataset(path)
			var b strings.Builder
			if err != nil {
				var list eval.DatasetErrorList
				if !errors.As(err, &list) {
					t.Fatalf("error is %T, want DatasetErrorList: %v", err, err)
				}
				var one *eval.DatasetError
				if !errors.As(err, &one) {
					t.Fatal("errors.As does not find a *DatasetError")
				}
				b.WriteString(err.Error() + "\n")
			} else {
				b.WriteString("name: " + ds.Name + "\nversion: " + ds.Version + "\n")
				for _, c := range ds.Cases {
					line, err := json.Marshal(c)
					if err != nil {
						t.Fatal(err)
					}
					b.Write(line)
					b.WriteString("\n")
				}
			}
			golden(t, "datasets/"+filepath.Base(path)+".golden", []byte(b.String()))
		})
	}
}

func TestDatasetErrorPositions(t *testing.T) {
	tests := []struct {
		name, data string
		jsonl      bool
		want       []string
	}{
		{name: "syntax error offset", data: "[\n  {\"id\": \"a\",, \"input\": \"q\"}\n]", want: []string{"d.json:2:14: invalid JSON"}},
		{name: "truncated", data: "[{\"id\": \"a\"", want: []string{"d.json:1:11: invalid JSON"}},
		{name: "empty file", data: "", want: []string{"d.json:1:1: invalid JSON: empty input"}},
		{name: "not an object or array", data: "42", want: []string{"d.json:1:1: dataset must be"}},
		{name: "missing fields on the case", data: "[\n {\"id\": \"x\"}]", want: []string{
			`d.json:2:2: case "x": missing field "input"`, `d.json:2:2: case "x": missing field "expected"`}},
		{name: "duplicate id points at both", data: "[{\"id\":\"x\",\"input\":\"q\",\"expected\":\"a\"},\n{\"id\":\"x\",\"input\":\"q\",\"expected\":\"a\"}]",
			want: []string{`d.json:2:7: duplicate id "x" (first defined at 1:8)`}},
		{name: "jsonl line and column", jsonl: true, data: "{\"id\":\"a\",\"input\":\"q\",\"expected\":\"a\"}\n  {\"id\": 1, \"input\":\"q\",\"expected\":\"a\"}",
			want: []string{"d.jsonl:2:10: id must be a string, got a number"}},
		{name: "duplicate field in a case", data: "[{\"id\":\"x\",\"input\":\"q\",\"expected\":\"a\",\n \"input\":\"r\"}]",
			want: []string{`d.json:2:2: duplicate field "input"`}},
		{name: "duplicate field in the dataset", data: "{\"name\":\"d\",\"cases\":[{\"id\":\"x\",\"input\":\"q\",\"expected\":\"a\"}],\n\"name\":\"e\"}",
			want: []string{`d.json:2:1: duplicate field "name"`}},
		{name: "jsonl syntax", jsonl: true, data: "{\"id\":\"a\",\"input\":\"q\",\"expected\":\"a\"}\n{\"id\": }", want: []string{"d.jsonl:2:8: invalid JSON"}},
		{name: "jsonl empty", jsonl: true, data: "\n\n", want: []string{"d.jsonl:1:1: dataset has no cases"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.jsonl {
				_, err = eval.ParseDatasetJSONL("d.jsonl", []byte(tt.data))
			} else {
				_, err = eval.ParseDatasetJSON("d.json", []byte(tt.data))
			}
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("error %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

func capitals(t testing.TB) *eval.Dataset {
	t.Helper()
	ds, err := eval.LoadDataset("../../fixtures/capitals.json")
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func TestCapitalsFixture(t *testing.T) {
	ds := capitals(t)
	if ds.Name != "capitals" || ds.Version == "" {
		t.Errorf("name %q version %q, want capitals and a version", ds.Name, ds.Version)
	}
	if n := len(ds.Cases); n < 25 || n > 40 {
		t.Errorf("%d cases, want about 30", n)
	}
	c, ok := ds.Case("fr")
	if !ok || c.Input != "What is the capital of France?" || c.Expected != "Paris" || !c.HasTag("europe") {
		t.Errorf("Case(fr) = %+v, %v", c, ok)
	}
	if _, ok := ds.Case("atlantis"); ok {
		t.Error("Case(atlantis) found")
	}
	regions := []string{"africa", "americas", "asia", "europe", "oceania"}
	for _, c := range ds.Cases {
		if !slices.ContainsFunc(regions, c.HasTag) {
			t.Errorf("case %s has no region tag", c.ID)
		}
	}
	for _, r := range regions {
		if len(ds.Tagged(r)) == 0 {
			t.Errorf("no case tagged %s", r)
		}
	}
	if want := append(slices.Clone(regions), "hard"); !slices.Equal(ds.Tags(), slices.Sorted(slices.Values(want))) {
		t.Errorf("Tags() = %v, want %v", ds.Tags(), want)
	}
	hard := ds.Tagged("hard")
	if len(hard) < 3 || len(hard) > len(ds.Cases)/2 {
		t.Errorf("%d hard cases, want a few", len(hard))
	}
	sub := ds.Subset("oceania")
	if len(sub.Cases) != len(ds.Tagged("oceania")) || sub.Version != ds.Version || sub.Name != ds.Name {
		t.Errorf("Subset(oceania) = %d cases", len(sub.Cases))
	}
}

func TestNewDatasetValidates(t *testing.T) {
	_, err := eval.NewDataset("d", "1", []eval.Case{
		{ID: "a", Input: "q"}, {ID: "a", Input: "q"}, {ID: "", Input: "q"}, {ID: "b"},
	})
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`duplicate id "a"`, "missing id", "case 3: missing input"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := eval.NewDataset("d", "1", []eval.Case{{ID: "a", Input: "q"}}); err != nil {
		t.Error(err)
	}
}

// TestDatasetApprovals: a case may carry its own approval policy, which
// must be approve or reject; anything else is an error at its position.
func TestDatasetApprovals(t *testing.T) {
	ds, err := eval.ParseDatasetJSON("d.json", []byte(`[{"id": "a", "input": "q", "expected": "x", "approvals": "reject"}, {"id": "b", "input": "q2", "expected": "y"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if ds.Cases[0].Approvals != eval.ApprovalsReject || ds.Cases[1].Approvals != eval.ApprovalsNone {
		t.Errorf("approvals %q %q", ds.Cases[0].Approvals, ds.Cases[1].Approvals)
	}
	_, err = eval.ParseDatasetJSON("d.json", []byte("[{\"id\": \"a\", \"input\": \"q\", \"expected\": \"x\",\n \"approvals\": \"ask\"},\n {\"id\": \"b\", \"input\": \"q\", \"expected\": \"x\", \"approvals\": true}]"))
	for _, want := range []string{`d.json:2:15: approvals must be "approve" or "reject", not "ask"`, `d.json:3:58: approvals must be "approve" or "reject", got a boolean`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if err := eval.Approvals("ask").Check(); err == nil {
		t.Error("Check accepts ask")
	}
}
