package agents

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	"github.com/aidgen/aid/runtime/agents/skill"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/internal/jsonschemas"
	"github.com/aidgen/aid/runtime/rules"
)

// Skill is a skill agents may load (package skill): its name and
// description, which the prompt of every agent listing it carries, and its
// instructions and files, which the model reads only when it loads the
// skill (progressive disclosure).
type Skill struct {
	// Name is how agents list the skill and the model loads it.
	Name string
	// Description tells the model when the skill applies.
	Description string
	// AllowedTools are the tools the skill's instructions use; an agent
	// listing the skill must offer each.
	AllowedTools []string
	// Instructions are what load_skill returns. Empty in a replay, which
	// answers from its recording.
	Instructions string
	// Files are the names of the skill's files besides its SKILL.md,
	// slash-separated and relative to its folder.
	Files []string
	// FS reads Files; nil in a replay.
	FS fs.FS
}

// The tools an agent that lists skills is offered.
const (
	// LoadSkillTool loads a skill's instructions.
	LoadSkillTool = rules.LoadSkillTool
	// ReadSkillFileTool reads a file of a skill's folder.
	ReadSkillFileTool = rules.ReadSkillFileTool
)

var (
	loadSkillSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"name":{"type":"string","minLength":1,"description":"The skill's name, as the system prompt lists it."}},` +
		`"required":["name"],"additionalProperties":false}`)
	readSkillFileSchema = json.RawMessage(`{"type":"object","properties":{` +
		`"skill":{"type":"string","minLength":1,"description":"The skill's name."},` +
		`"path":{"type":"string","minLength":1,"description":"The file, as load_skill lists it."},` +
		`"offset":{"type":"integer","minimum":0,"description":"The byte to start at, to read on where a cut read ended; 0 by default."}},` +
		`"required":["skill","path"],"additionalProperties":false}`)
)

// loadedHeader starts load_skill's observation; a run whose messages
// already hold it for a skill gets no second copy of its instructions.
func loadedHeader(name string) string { return "Skill " + name + " instructions:\n" }

// declareSkills checks the skills and returns them by name.
func declareSkills(list []Skill) (map[string]*Skill, []error) {
	var errs []error
	out := make(map[string]*Skill, len(list))
	for i := range list {
		s := &list[i]
		switch {
		case !skill.ValidName(s.Name):
			errs = append(errs, fmt.Errorf("skill %q: the name must be lower-case letters, digits and single hyphens, at most %d characters", s.Name, skill.MaxNameLen))
		case out[s.Name] != nil:
			errs = append(errs, fmt.Errorf("skill %q is declared twice", s.Name))
		case strings.TrimSpace(s.Description) == "":
			errs = append(errs, fmt.Errorf("skill %q has no description", s.Name))
		default:
			out[s.Name] = s
		}
	}
	return out, errs
}

// bindSkills offers an agent that lists skills their listing in its
// prompt and the tools load_skill and read_skill_file.
func (d *agentDef) bindSkills(skills map[string]*Skill) []error {
	a := d.spec
	if len(a.Skills) == 0 {
		return nil
	}
	var errs []error
	var listed []skill.Skill
	mine := map[string]*Skill{}
	for _, n := range a.Skills {
		s, ok := skills[n]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("agent %q: skill %q is not in Config.Skills", a.Name, n))
			continue
		case mine[n] != nil:
			errs = append(errs, fmt.Errorf("agent %q lists skill %q twice", a.Name, n))
			continue
		}
		for _, t := range s.AllowedTools {
			if d.tools[t] == nil {
				errs = append(errs, fmt.Errorf("agent %q: skill %q uses tool %q (allowed-tools), which the agent does not offer; add it to the agent's tools", a.Name, n, t))
			}
		}
		mine[n] = s
		listed = append(listed, skill.Skill{Name: s.Name, Description: s.Description})
	}
	for _, tn := range []string{LoadSkillTool, ReadSkillFileTool} {
		if d.tools[tn] != nil {
			errs = append(errs, fmt.Errorf("agent %q: tool %q has the name of the tool the runtime offers for skills; rename the declared tool", a.Name, tn))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	d.spec.Instructions += skill.Listing(listed)
	load := &tool{name: LoadSkillTool, kind: kindSkill, effects: EffectsRead, timeout: DefaultToolTimeout, maxObs: MaxObservationBytesLimit, skills: mine}
	read := &tool{name: ReadSkillFileTool, kind: kindSkill, effects: EffectsRead, timeout: DefaultToolTimeout, maxObs: DefaultMaxObservationBytes, skills: mine}
	for _, t := range []*struct {
		t      *tool
		desc   string
		schema json.RawMessage
	}{
		{load, "Load a skill's instructions, listed under Skills in your instructions, before doing a task it covers. Returns the instructions and the skill's files.", loadSkillSchema},
		{read, "Read a file of a skill that load_skill listed, such as a reference or a script. A long file is cut; read on from the offset the cut names.", readSkillFileSchema},
	} {
		s, err := jsonschemas.Compile("urn:aid:tool:"+t.t.name, t.schema)
		if err != nil {
			panic(err) // the built-in schemas are constants
		}
		t.t.schema = s
		d.tools[t.t.name] = t.t
		d.defs = append(d.defs, gateway.ToolDef{Name: t.t.name, Description: t.desc, Parameters: t.schema})
	}
	return nil
}

// skillCall answers a load_skill or read_skill_file call.
func (r *Runtime) skillCall(st *runState, t *tool, args json.RawMessage, c *ToolCallRecord) {
	if t.name == LoadSkillTool {
		var in struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(args, &in) // validated against loadSkillSchema
		s, ok := t.skills[in.Name]
		if !ok {
			c.observe(fmt.Sprintf("error: no skill %q; the skills are %s", in.Name, strings.Join(skillNames(t.skills), ", ")), KindInvalidArguments)
			return
		}
		head := loadedHeader(s.Name)
		for _, m := range st.msgs {
			if m.Role == gateway.RoleTool && strings.HasPrefix(m.Content, head) {
				c.observe("Skill "+s.Name+" is loaded already: its instructions are above.", "")
				return
			}
		}
		var b strings.Builder
		b.WriteString(head)
		b.WriteString(s.Instructions)
		if len(s.Files) > 0 {
			b.WriteString("\n\nFiles of skill " + s.Name + " (read them with read_skill_file):\n")
			for _, f := range s.Files {
				b.WriteString("- " + f + "\n")
			}
		}
		c.observe(b.String(), "")
		return
	}
	var in struct {
		Skill  string `json:"skill"`
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
	}
	_ = json.Unmarshal(args, &in) // validated against readSkillFileSchema
	s, ok := t.skills[in.Skill]
	switch {
	case !ok:
		c.observe(fmt.Sprintf("error: no skill %q; the skills are %s", in.Skill, strings.Join(skillNames(t.skills), ", ")), KindInvalidArguments)
		return
	case !slices.Contains(s.Files, in.Path):
		c.observe(fmt.Sprintf("error: skill %s has no file %q; its files are %s", s.Name, in.Path, strings.Join(s.Files, ", ")), KindInvalidArguments)
		return
	case s.FS == nil:
		c.observe(fmt.Sprintf("error: skill %s's files are not available", s.Name), KindToolFailed)
		return
	}
	text, err := readBounded(s.FS, in.Path, in.Offset, t.maxObs)
	if err != nil {
		c.observe(fmt.Sprintf("error: reading %s of skill %s: %v", in.Path, s.Name, err), KindToolFailed)
		return
	}
	c.observe(text, "")
}

// readBounded reads at most limit bytes of the file name from offset,
// never holding more, and says where to read on when it cut.
func readBounded(fsys fs.FS, name string, offset int64, limit int) (string, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	size := info.Size()
	if offset > size {
		return "", fmt.Errorf("offset %d is past the file's end (%d bytes)", offset, size)
	}
	if offset > 0 {
		s, ok := f.(io.Seeker)
		if !ok {
			if _, err := io.CopyN(io.Discard, f, offset); err != nil {
				return "", err
			}
		} else if _, err := s.Seek(offset, io.SeekStart); err != nil {
			return "", err
		}
	}
	room := int64(limit - 128) // room for the marker
	buf, err := io.ReadAll(io.LimitReader(f, room))
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	text := string(buf)
	if end := offset + int64(len(buf)); end < size {
		text += fmt.Sprintf("\n[cut: %d of %d bytes shown; read on with offset %d]", end-offset, size, end)
	}
	return text, nil
}

func skillNames(m map[string]*Skill) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
