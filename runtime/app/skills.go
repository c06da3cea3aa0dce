package app

import (
	"errors"
	"fmt"
	"path"
	"slices"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/skill"
	"github.com/aidgen/aid/runtime/kind"
)

// skills reads the skills of desc through files: each SKILL.md, parsed
// again (the service may read its files from a directory given at
// start-up, -app-dir, whose SKILL.md may have changed since the build),
// and a file system over its folder for read_skill_file.
func skills(desc *Description, files kind.Files) ([]agents.Skill, error) {
	var errs []error
	out := make([]agents.Skill, 0, len(desc.Skills))
	for _, s := range desc.Skills {
		name := path.Join(s.Dir, skill.FileName)
		data, err := files.ReadFile(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("skill %q: reading %s: %w", s.Name, files.Name(name), err))
			continue
		}
		parsed, perrs := skill.Parse(data)
		if len(perrs) > 0 {
			errs = append(errs, fmt.Errorf("skill %q: %s:%w", s.Name, files.Name(name), perrs[0]))
			continue
		}
		if parsed.Name != s.Name || parsed.Description != s.Description || !slices.Equal(parsed.AllowedTools, s.AllowedTools) {
			errs = append(errs, fmt.Errorf("skill %q: %s has changed since the application was built (it names skill %q); build it again", s.Name, files.Name(name), parsed.Name))
			continue
		}
		fsys, err := files.Dir(s.Dir)
		if err != nil {
			errs = append(errs, fmt.Errorf("skill %q: %w", s.Name, err))
			continue
		}
		out = append(out, agents.Skill{
			Name: s.Name, Description: s.Description, AllowedTools: slices.Clone(s.AllowedTools),
			Instructions: parsed.Instructions, Files: slices.Clone(s.Files), FS: fsys,
		})
	}
	return out, errors.Join(errs...)
}

// skillFiles returns the files of desc's skills, relative to its Dir: what
// a generated service embeds of them.
func (d Description) skillFiles() []string {
	var out []string
	for _, s := range d.Skills {
		out = append(out, path.Join(s.Dir, skill.FileName))
		for _, f := range s.Files {
			out = append(out, path.Join(s.Dir, f))
		}
	}
	return out
}

// replaySkills are desc's skills as a replay needs them: what the prompts
// carry, without their instructions or files, which the recording's
// observations stand for.
func replaySkills(desc Description) []agents.Skill {
	out := make([]agents.Skill, len(desc.Skills))
	for i, s := range desc.Skills {
		out[i] = agents.Skill{Name: s.Name, Description: s.Description, AllowedTools: slices.Clone(s.AllowedTools), Files: slices.Clone(s.Files)}
	}
	return out
}
