// Package fileglob expands the file patterns of an IR (retriever sources)
// relative to a directory. It exists so that the IR loader, which checks
// that a pattern matches something, and the retrieval runtime, which
// ingests what it matches, agree on one meaning of a pattern.
//
// A pattern is slash-separated and relative to the directory. Each segment
// is a path.Match pattern, and the segment "**" matches zero or more
// directories. Leading "../" segments reach a sibling directory; ".."
// anywhere else is refused, as are absolute patterns.
package fileglob

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Validate reports whether pattern is well formed: relative, with ".." only
// as leading segments, and with valid path.Match syntax in every segment.
func Validate(pattern string) error {
	if pattern == "" {
		return errors.New("empty pattern")
	}
	if strings.HasPrefix(pattern, "/") || filepath.IsAbs(pattern) {
		return fmt.Errorf("pattern %q is absolute; write it relative to the IR file", pattern)
	}
	segs := strings.Split(pattern, "/")
	leading := true
	for _, seg := range segs {
		if seg == ".." {
			if !leading {
				return fmt.Errorf("pattern %q has \"..\" after its start; only leading \"../\" segments are allowed", pattern)
			}
			continue
		}
		leading = false
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("pattern %q: bad segment %q: %w", pattern, seg, err)
		}
	}
	return nil
}

// Match reports whether the slash-separated relative name matches pattern.
// Both are cleaned first, so "./a.md" and "a.md" are the same name. A
// malformed pattern matches nothing.
func Match(pattern, name string) bool {
	return match(strings.Split(path.Clean(pattern), "/"), strings.Split(path.Clean(name), "/"))
}

func match(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(name); i++ {
				if match(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		ok, err := path.Match(pat[0], name[0])
		if err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// Expand returns the regular files under dir that match any include
// pattern and no exclude pattern, as sorted slash-separated names relative
// to dir. Only the literal prefix of each pattern is walked. Hidden
// directories (names starting with ".") are not entered unless the
// pattern's literal prefix names them.
func Expand(dir string, include, exclude []string) ([]string, error) {
	for _, p := range slices.Concat(include, exclude) {
		if err := Validate(p); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, pattern := range include {
		pattern = path.Clean(pattern)
		base := literalPrefix(pattern)
		root := filepath.Join(dir, filepath.FromSlash(base))
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == root {
					return fs.SkipAll
				}
				return err
			}
			if d.IsDir() {
				if p != root && strings.HasPrefix(d.Name(), ".") {
					return fs.SkipDir
				}
				return nil
			}
			if !d.Type().IsRegular() {
				return nil
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			name := path.Join(base, filepath.ToSlash(rel))
			if !seen[name] && Match(pattern, name) && !anyMatch(exclude, name) {
				seen[name] = true
				out = append(out, name)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// literalPrefix returns the leading directory segments of a pattern that
// hold no pattern syntax: the directory a walk can start from.
func literalPrefix(pattern string) string {
	segs := strings.Split(pattern, "/")
	n := 0
	for n < len(segs)-1 && segs[n] != "**" && !strings.ContainsAny(segs[n], `*?[\`) {
		n++
	}
	if n == 0 {
		return "."
	}
	return strings.Join(segs[:n], "/")
}

func anyMatch(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}
