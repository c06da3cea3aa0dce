// Package fileglob expands the file patterns of an IR (retriever sources)
// relative to a directory. It exists so that the IR loader, which checks
// that a pattern matches something, and the retrieval runtime, which
// ingests what it matches, agree on one meaning of a pattern.
//
// A pattern is slash-separated and relative to the directory, in the syntax
// of github.com/bmatcuk/doublestar/v4: path.Match syntax within a segment,
// "**" as a whole segment for zero or more directories, and {a,b} for
// alternatives. Leading "../" segments reach a sibling directory; ".."
// anywhere else is refused, as are absolute patterns.
//
// Expand keeps the shell's rule for hidden names (those starting with "."):
// a wildcard never matches one, so "**" does not enter ".git" and "docs/*"
// skips "docs/.draft.md", while a pattern that spells the dot out
// (".github/*.md", "docs/.*") reaches them. Symbolic links met while
// matching wildcards are neither followed nor returned, so a link cannot
// pull files from outside the tree into an index; a link named in the
// literal part of a pattern is followed like any other path the author
// wrote.
package fileglob

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/bmatcuk/doublestar/v4"
)

// Validate reports whether pattern is well formed: relative, with ".." only
// as leading segments, and in valid doublestar syntax.
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
	}
	if doublestar.ValidatePattern(pattern) {
		return nil
	}
	// Name the first segment that is malformed on its own; an alternative
	// that spans segments ({a,b/c}) may leave none to name.
	for _, seg := range segs {
		if !doublestar.ValidatePattern(seg) {
			return fmt.Errorf("pattern %q: bad segment %q: %w", pattern, seg, doublestar.ErrBadPattern)
		}
	}
	return fmt.Errorf("pattern %q: %w", pattern, doublestar.ErrBadPattern)
}

// Match reports whether the slash-separated relative name matches pattern.
// Both are cleaned first, so "./a.md" and "a.md" are the same name. A
// malformed pattern matches nothing. Match is syntax only: unlike Expand it
// lets a wildcard match a hidden name.
func Match(pattern, name string) bool {
	ok, err := doublestar.Match(path.Clean(pattern), path.Clean(name))
	return err == nil && ok
}

// Expand returns the regular files under dir that match any include
// pattern and no exclude pattern, as sorted slash-separated names relative
// to dir. Only directories the pattern can match are read; hidden names
// and symbolic links are treated as the package documentation says. A
// directory named by a pattern that does not exist matches nothing; any
// other error reading the tree is returned.
func Expand(dir string, include, exclude []string) ([]string, error) {
	return ExpandFunc(func(up string) (fs.FS, error) {
		return os.DirFS(filepath.Join(dir, filepath.FromSlash(up))), nil
	}, include, exclude)
}

// ExpandFunc is Expand over the tree open returns: open("") is the
// directory the patterns are relative to, and open("..") the one above it,
// as far up as a pattern's leading "../" segments reach. It is how a tree
// that is not on disk (a generated service's embedded files) is expanded
// with the same meaning.
func ExpandFunc(open func(up string) (fs.FS, error), include, exclude []string) ([]string, error) {
	for _, p := range slices.Concat(include, exclude) {
		if err := Validate(p); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, pattern := range include {
		up, rest := splitUp(path.Clean(pattern))
		if rest == "" {
			continue // only ".." segments: names a directory, not a file
		}
		root, err := open(up)
		if err != nil {
			return nil, err
		}
		err = doublestar.GlobWalk(root, rest, func(name string, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil
			}
			name = path.Join(up, name)
			if !seen[name] && !anyMatch(exclude, name) {
				seen[name] = true
				out = append(out, name)
			}
			return nil
		}, doublestar.WithFilesOnly(), doublestar.WithNoFollow(), doublestar.WithNoHidden(), doublestar.WithFailOnIOErrors())
		if errors.Is(err, syscall.ENOTDIR) || notDir(root, err) {
			// A file where the pattern's literal part wants a directory
			// ("top.md/*.md"): that directory does not exist, and a
			// directory that does not exist matches nothing.
			continue
		}
		if err != nil {
			// Paths in errors are relative to root; make them relative
			// to dir, as the names Expand returns are.
			if pe, ok := errors.AsType[*fs.PathError](err); ok {
				pe.Path = path.Join(up, pe.Path)
			}
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// notDir reports whether err failed to read, as a directory, a path of
// root that is a file: file systems other than the operating system's say
// so in words of their own.
func notDir(root fs.FS, err error) bool {
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok {
		return false
	}
	info, serr := fs.Stat(root, pe.Path)
	return serr == nil && !info.IsDir()
}

// splitUp splits a cleaned pattern into its leading ".." segments (joined,
// or "" when there are none) and the rest, which io/fs can walk.
func splitUp(pattern string) (up, rest string) {
	rest = pattern
	for rest == ".." || strings.HasPrefix(rest, "../") {
		up = path.Join(up, "..")
		rest = strings.TrimPrefix(strings.TrimPrefix(rest, ".."), "/")
	}
	return up, rest
}

func anyMatch(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}
