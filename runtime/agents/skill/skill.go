// Package skill reads skills: folders holding a SKILL.md (front matter with
// a name, a description and optionally the tools the skill uses, then the
// instructions) and the reference files and scripts the instructions name.
// An agent sees only a skill's name and description in its prompt and loads
// the instructions when a task needs them (progressive disclosure), so that
// fifty skills cost fifty descriptions, not fifty sets of instructions.
//
// It parses and bounds a SKILL.md and nothing else: aidgen vet (package ir)
// reports its problems at SKILL.md:line:col with it, and the agents runtime
// reads the instructions with it when an application starts. It imports
// only the standard library, so that ir may use it without linking the
// runtime.
package skill

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FileName is the file that makes a folder a skill.
const FileName = "SKILL.md"

// Bounds of a skill. A skill is read into every process that serves it
// and its listing into every prompt of the agents that list it, so each
// part is bounded.
const (
	// MaxNameLen bounds a skill's name.
	MaxNameLen = 64
	// MaxDescriptionLen bounds a description, which every prompt of an
	// agent listing the skill carries.
	MaxDescriptionLen = 1024
	// MaxSkillBytes bounds a SKILL.md.
	MaxSkillBytes = 64 << 10
	// MaxFiles bounds the files of a skill's folder besides its SKILL.md.
	MaxFiles = 64
	// MaxFileBytes bounds one of them.
	MaxFileBytes = 1 << 20
	// MaxTotalBytes bounds a skill's folder as a whole.
	MaxTotalBytes = 8 << 20
)

// namePattern is what a skill's name may be: lower-case letters, digits
// and single hyphens, as Agent Skills spell them.
var namePattern = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// toolPattern is a tool's name as the model API takes it.
var toolPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Skill is a parsed SKILL.md.
type Skill struct {
	// Name is how agents list the skill and the model loads it.
	Name string
	// Description tells the model when the skill applies; it is all the
	// prompt carries of the skill until the model loads it.
	Description string
	// AllowedTools are the tools the skill's instructions use; an agent
	// that lists the skill must offer them.
	AllowedTools []string
	// Instructions are what follows the front matter.
	Instructions string
	// NameLine is the line of the name in the front matter, for messages
	// about it (a clash).
	NameLine int
}

// Error is a problem of a SKILL.md at a line and column (1-based).
type Error struct {
	Line, Col int
	Msg       string
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// Parse reads a SKILL.md: front matter between two lines "---" with the
// keys name, description, allowed-tools (a list: "a, b", "[a, b]" or "- a"
// lines), and license, compatibility and metadata (kept apart, ignored),
// then the instructions. It returns every problem found.
func Parse(data []byte) (Skill, []*Error) {
	var s Skill
	var errs []*Error
	add := func(line, col int, format string, args ...any) {
		errs = append(errs, &Error{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
	}
	if len(data) > MaxSkillBytes {
		add(1, 1, "SKILL.md has %d bytes, more than the %d a skill may have; move reference material to files of the skill's folder, which the model reads when it needs them", len(data), MaxSkillBytes)
		return s, errs
	}
	if !utf8.Valid(data) {
		add(1, 1, "SKILL.md is not UTF-8 text")
		return s, errs
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	lines := strings.Split(text, "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		add(1, 1, "SKILL.md must start with front matter: a line ---, then name: and description:, then a line ---")
		return s, errs
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t") == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		add(1, 1, "the front matter is not closed: add a line --- after it")
		return s, errs
	}
	seen := map[string]int{}
	for i := 1; i < end; i++ {
		ln := i + 1
		line := lines[i]
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] == ' ' || line[0] == '\t' || strings.HasPrefix(line, "-") {
			add(ln, 1, "unexpected indented line in the front matter; each key starts a line of its own")
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			add(ln, 1, "expected key: value in the front matter")
			continue
		}
		key = strings.TrimSpace(key)
		col := len(key) + 2 + (len(val) - len(strings.TrimLeft(val, " \t")))
		val = strings.TrimSpace(val)
		if prev, dup := seen[key]; dup {
			add(ln, 1, "%s is set twice (first on line %d)", key, prev)
			continue
		}
		seen[key] = ln
		// The lines that continue the value: indented, or list items.
		var cont []string
		for i+1 < end && (strings.HasPrefix(lines[i+1], " ") || strings.HasPrefix(lines[i+1], "\t") || strings.HasPrefix(lines[i+1], "- ") || strings.TrimSpace(lines[i+1]) == "") {
			if strings.TrimSpace(lines[i+1]) != "" {
				cont = append(cont, strings.TrimSpace(lines[i+1]))
			}
			i++
		}
		switch key {
		case "name", "description":
			v, err := scalar(val, cont)
			if err != "" {
				add(ln, col, "%s: %s", key, err)
				continue
			}
			if key == "name" {
				s.Name, s.NameLine = v, ln
				switch {
				case v == "":
					add(ln, col, "name is empty")
				case len(v) > MaxNameLen:
					add(ln, col, "name %q has %d characters; a skill's name has at most %d", v, len(v), MaxNameLen)
				case !namePattern.MatchString(v):
					add(ln, col, "name %q: use lower-case letters, digits and single hyphens (such as csv-analysis)", v)
				}
			} else {
				s.Description = v
				switch {
				case v == "":
					add(ln, col, "description is empty; say what the skill does and when to use it")
				case len(v) > MaxDescriptionLen:
					add(ln, col, "description has %d characters; a skill's description has at most %d, since every prompt of an agent listing the skill carries it", len(v), MaxDescriptionLen)
				}
			}
		case "allowed-tools":
			tools, err := list(val, cont)
			if err != "" {
				add(ln, col, "allowed-tools: %s", err)
				continue
			}
			for _, t := range tools {
				if !toolPattern.MatchString(t) {
					add(ln, col, "allowed-tools: %q is not a tool name", t)
				}
			}
			s.AllowedTools = tools
		case "license", "compatibility", "metadata":
			// Kept by Agent Skills for people and registries; nothing
			// here reads them.
		default:
			add(ln, 1, "unknown front matter key %q; a skill has name, description and allowed-tools (and license, compatibility, metadata)", key)
		}
	}
	if _, ok := seen["name"]; !ok {
		add(1, 1, "the front matter has no name")
	}
	if _, ok := seen["description"]; !ok {
		add(1, 1, "the front matter has no description")
	}
	s.Instructions = strings.TrimSpace(strings.Join(lines[end+1:], "\n"))
	if s.Instructions == "" {
		add(end+1, 1, "SKILL.md has no instructions after its front matter")
	}
	return s, errs
}

// scalar reads a string value: plain, quoted, or a block (| or >) on the
// lines cont.
func scalar(val string, cont []string) (string, string) {
	switch {
	case val == "|" || val == ">" || val == "|-" || val == ">-":
		sep := " "
		if val[0] == '|' {
			sep = "\n"
		}
		return strings.Join(cont, sep), ""
	case len(cont) > 0:
		// A plain scalar folded over several lines.
		return strings.Join(append([]string{val}, cont...), " "), ""
	case strings.HasPrefix(val, `"`):
		v, err := strconv.Unquote(val)
		if err != nil {
			return "", "the quoted value is not closed or has a bad escape"
		}
		return v, ""
	case strings.HasPrefix(val, "'"):
		if len(val) < 2 || !strings.HasSuffix(val, "'") {
			return "", "the quoted value is not closed"
		}
		return strings.ReplaceAll(val[1:len(val)-1], "''", "'"), ""
	}
	return val, ""
}

// list reads a list of names: "a, b", "a b", "[a, b]", or "- a" lines.
func list(val string, cont []string) ([]string, string) {
	var items []string
	switch {
	case val == "" && len(cont) > 0:
		for _, c := range cont {
			item, ok := strings.CutPrefix(c, "- ")
			if !ok {
				return nil, "expected a list item (- name)"
			}
			items = append(items, unquote(strings.TrimSpace(item)))
		}
		return items, ""
	case strings.HasPrefix(val, "["):
		if !strings.HasSuffix(val, "]") {
			return nil, "the list is not closed with ]"
		}
		val = val[1 : len(val)-1]
	}
	for _, f := range strings.FieldsFunc(val, func(r rune) bool { return r == ',' || r == ' ' }) {
		items = append(items, unquote(f))
	}
	return items, ""
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}

// Listing is what the prompt of an agent that lists skills carries of
// them: a line saying how to load one, then one line per skill with its
// name and description. It grows by one line per skill, so that the prompt
// of an agent with fifty skills grows by their descriptions only.
func Listing(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b bytes.Buffer
	b.WriteString(ListingHeader)
	for _, s := range skills {
		b.WriteString(Line(s.Name, s.Description))
	}
	return b.String()
}

// ListingHeader opens Listing.
const ListingHeader = "\n\n## Skills\nLoad a skill with the tool load_skill when a task matches its description; read its files with read_skill_file.\n"

// Line is a skill's line in Listing.
func Line(name, description string) string {
	return "- " + name + ": " + strings.ReplaceAll(description, "\n", " ") + "\n"
}

// ValidName reports whether name can be a skill's name.
func ValidName(name string) bool { return len(name) <= MaxNameLen && namePattern.MatchString(name) }

// Files lists the files of a skill's folder fsys besides its SKILL.md,
// slash-separated and sorted, and checks the folder's bounds: at most
// MaxFiles files of at most MaxFileBytes each and MaxTotalBytes in all.
// Hidden files and folders (a leading dot) are left out; a symbolic link
// or anything else that is not a regular file or a folder is a problem.
func Files(fsys fs.FS) ([]string, error) {
	var names []string
	var total int64
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(path.Base(p), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file; a skill's folder holds files and folders only", p)
		case p == FileName:
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > MaxFileBytes {
			return fmt.Errorf("%s has %d bytes, more than the %d a skill's file may have", p, info.Size(), MaxFileBytes)
		}
		total += info.Size()
		names = append(names, p)
		if len(names) > MaxFiles {
			return fmt.Errorf("the folder has more than %d files besides %s; a skill has at most %d", MaxFiles, FileName, MaxFiles)
		}
		if total > MaxTotalBytes {
			return fmt.Errorf("the folder's files have more than %d bytes in all, the most a skill may have", MaxTotalBytes)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}
