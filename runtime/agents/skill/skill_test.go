package skill_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aidgen/aid/runtime/agents/skill"
)

func TestParse(t *testing.T) {
	s, errs := skill.Parse([]byte("---\nname: csv-analysis\ndescription: >\n  Analyse CSV files,\n  column by column.\nallowed-tools: [sandbox, \"lookup\"]\nlicense: MIT\nmetadata:\n  owner: data\n---\n\n# Steps\nDo it.\n"))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if s.Name != "csv-analysis" || s.Description != "Analyse CSV files, column by column." || strings.Join(s.AllowedTools, ",") != "sandbox,lookup" || s.Instructions != "# Steps\nDo it." || s.NameLine != 2 {
		t.Fatalf("%+v", s)
	}
	s, errs = skill.Parse([]byte("---\nname: x\ndescription: 'it''s quoted'\nallowed-tools:\n  - a\n  - b\n---\nBody\n"))
	if len(errs) > 0 || s.Description != "it's quoted" || strings.Join(s.AllowedTools, ",") != "a,b" {
		t.Fatalf("%+v %v", s, errs)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
	}{
		{"no front matter", "# Title\n", "1:1: SKILL.md must start with front matter"},
		{"not closed", "---\nname: a\n", "1:1: the front matter is not closed"},
		{"unknown key", "---\nname: a\ndescription: d\ncolor: red\n---\nx", `4:1: unknown front matter key "color"`},
		{"bad name", "---\nname: A_b\ndescription: d\n---\nx", `2:7: name "A_b"`},
		{"twice", "---\nname: a\nname: b\ndescription: d\n---\nx", "3:1: name is set twice (first on line 2)"},
		{"no description", "---\nname: a\n---\nx", "1:1: the front matter has no description"},
		{"long description", "---\nname: a\ndescription: " + strings.Repeat("d", 1025) + "\n---\nx", "3:14: description has 1025 characters"},
		{"no body", "---\nname: a\ndescription: d\n---\n\n", "has no instructions"},
		{"bad quote", "---\nname: a\ndescription: \"open\n---\nx", "3:14: description: the quoted value is not closed"},
		{"bad tool", "---\nname: a\ndescription: d\nallowed-tools: [a b!]\n---\nx", `"b!" is not a tool name`},
		{"too big", "---\nname: a\ndescription: d\n---\n" + strings.Repeat("x", skill.MaxSkillBytes), "more than the 65536 a skill may have"},
		{"not utf-8", "---\nname: a\xff\n---\n", "not UTF-8"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := skill.Parse([]byte(tt.in))
			var all []string
			for _, e := range errs {
				all = append(all, e.Error())
			}
			if !strings.Contains(strings.Join(all, "\n"), tt.want) {
				t.Fatalf("errors %q, want one with %q", all, tt.want)
			}
		})
	}
}

func TestFilesBounds(t *testing.T) {
	ok := fstest.MapFS{"SKILL.md": {}, "scripts/run.sh": {Data: []byte("echo")}, ".hidden/x": {}, "ref.md": {}}
	got, err := skill.Files(ok)
	if err != nil || strings.Join(got, ",") != "ref.md,scripts/run.sh" {
		t.Fatalf("%v %v", got, err)
	}
	many := fstest.MapFS{}
	for i := range skill.MaxFiles + 1 {
		many[strings.Repeat("f", i+1)] = &fstest.MapFile{}
	}
	if _, err := skill.Files(many); err == nil || !strings.Contains(err.Error(), "more than 64 files") {
		t.Fatalf("%d files: %v", len(many), err)
	}
	big := fstest.MapFS{"big": {Data: make([]byte, skill.MaxFileBytes+1)}}
	if _, err := skill.Files(big); err == nil || !strings.Contains(err.Error(), "a skill's file may have") {
		t.Fatalf("big file: %v", err)
	}
}
