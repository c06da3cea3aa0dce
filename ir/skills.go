package ir

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aidgen/aid/runtime/agents/skill"
	"github.com/aidgen/aid/runtime/fileglob"
)

// skills finds the skills of the IR's skills entries, reads each SKILL.md
// (reporting its problems at SKILL.md:line:col), and checks that names do
// not clash, that each entry matches a folder, that the folders keep their
// bounds, and that agents list skills that exist and offer the tools they
// use.
func (c *checker) skills() {
	d := c.doc
	type found struct {
		dir  string // slash-separated, relative to d.Dir
		from int    // the entry that found it
	}
	var dirs []found
	seen := map[string]bool{}
	for i, entry := range d.SkillSources {
		p := pathOf("skills", i)
		if !c.relative(p, entry) {
			continue
		}
		entry = path.Clean(strings.TrimSuffix(filepath.ToSlash(entry), "/"+skill.FileName))
		var matched []string
		if strings.ContainsAny(entry, "*?[{") {
			if err := fileglob.Validate(entry + "/" + skill.FileName); err != nil {
				c.errAt(p, "%v", err)
				continue
			}
			files, err := fileglob.Expand(d.Dir, []string{entry + "/" + skill.FileName}, nil)
			if err != nil {
				c.errAt(p, "expanding %q: %v", entry, err)
				continue
			}
			for _, f := range files {
				matched = append(matched, path.Dir(f))
			}
			if len(matched) == 0 {
				c.errAt(p, "%q matches no folder holding a %s under %s", entry, skill.FileName, displayDir(d.Dir))
				continue
			}
		} else {
			st, err := os.Stat(filepath.Join(d.Dir, filepath.FromSlash(entry), skill.FileName))
			if err != nil || !st.Mode().IsRegular() {
				c.errAt(p, "folder %q has no %s (paths are relative to %s)", entry, skill.FileName, displayDir(d.Dir))
				continue
			}
			matched = []string{entry}
		}
		for _, m := range matched {
			if !seen[m] {
				seen[m] = true
				dirs = append(dirs, found{dir: m, from: i})
			}
		}
	}
	byName := map[string]*Skill{}
	where := map[string]Position{}
	for _, f := range dirs {
		full := filepath.Join(d.Dir, filepath.FromSlash(f.dir))
		md := filepath.Join(full, skill.FileName)
		data, err := os.ReadFile(md)
		if err != nil {
			c.errAt(pathOf("skills", f.from), "reading %s: %v", md, err)
			continue
		}
		s, perrs := skill.Parse(data)
		for _, e := range perrs {
			c.errs = append(c.errs, &Error{Pos: Position{Filename: md, Line: e.Line, Column: e.Col}, Msg: e.Msg})
		}
		files, err := skill.Files(os.DirFS(full))
		if err != nil {
			c.errs = append(c.errs, &Error{Pos: Position{Filename: md, Line: 1, Column: 1}, Msg: fmt.Sprintf("skill folder %s: %v", displayDir(full), err)})
		}
		if len(perrs) > 0 || err != nil {
			continue
		}
		pos := Position{Filename: md, Line: s.NameLine, Column: 1}
		if prev, dup := where[s.Name]; dup {
			c.errs = append(c.errs, &Error{Pos: pos, Msg: fmt.Sprintf("skill name %q is taken by %s; give each skill a name of its own", s.Name, prev)})
			continue
		}
		where[s.Name] = pos
		byName[s.Name] = &Skill{Name: s.Name, Description: s.Description, AllowedTools: s.AllowedTools, Dir: f.dir, Files: files}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		d.Skills = append(d.Skills, byName[n])
	}
	for _, a := range d.Agents {
		for i, n := range a.Skills {
			p := pathOf("agents", a.Name, "skills", i)
			s, ok := byName[n]
			switch {
			case slices.Index(a.Skills, n) != i:
				c.errAt(p, "skill %q is listed twice", n)
			case !ok:
				if _, broken := skillBroken(c.errs, n); !broken {
					c.errAt(p, "%s", unknownRef("skill", n, names))
				}
			default:
				for _, t := range s.AllowedTools {
					if !slices.Contains(a.Tools, t) {
						c.errAt(p, "skill %q uses tool %q (its allowed-tools), which agent %q does not list in its tools; add it", n, t, a.Name)
					}
				}
			}
		}
	}
}

// skillBroken reports whether a problem was found with a SKILL.md whose
// folder is named name, so that an agent listing it is not told the skill
// is unknown as well.
func skillBroken(errs Errors, name string) (string, bool) {
	for _, e := range errs {
		if filepath.Base(e.Pos.Filename) == skill.FileName && filepath.Base(filepath.Dir(e.Pos.Filename)) == name {
			return e.Pos.Filename, true
		}
	}
	return "", false
}
