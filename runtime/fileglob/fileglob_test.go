package fileglob

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*.md", "a.md", true},
		{"*.md", "docs/a.md", false},
		{"docs/*.md", "docs/a.md", true},
		{"./docs/*.md", "docs/a.md", true},
		{"docs/**/*.md", "docs/a.md", true},
		{"docs/**/*.md", "docs/x/y/a.md", true},
		{"docs/**/*.md", "other/a.md", false},
		{"**", "a/b/c", true},
		{"**/*.txt", "a.txt", true},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/b/c", false},
		{"../shared/*.md", "../shared/a.md", true},
		{"[", "[", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.name); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, bad := range []string{"", "/etc/*", "docs/../../x/*.md", "**/../x", "a/[/b", "docs/{a,b.md", `docs/a\`} {
		if err := Validate(bad); err == nil {
			t.Errorf("Validate(%q) = nil, want an error", bad)
		}
	}
	for _, good := range []string{"*.md", "docs/**/*.md", "**", "../../shared/*.md", "{docs,faq}/*.md", "{a,b/c}.md"} {
		if err := Validate(good); err != nil {
			t.Errorf("Validate(%q) = %v", good, err)
		}
	}
}

func TestExpand(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{
		"app/docs/a.md", "app/docs/sub/b.md", "app/docs/sub/c.txt", "app/docs/draft/d.md",
		"app/.hidden/e.md", "app/.github/f.md", "app/top.md", "shared/g.md", "app/docs/.draft.md",
	} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A link to a file and a link to a directory outside the app: neither
	// is returned by a wildcard, the directory only when named literally.
	for link, target := range map[string]string{"app/docs/link.md": "../top.md", "app/linked": "../shared"} {
		if err := os.Symlink(target, filepath.Join(root, filepath.FromSlash(link))); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "app")
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"recursive with exclude", []string{"**/*.md"}, []string{"docs/draft/**"}, []string{"docs/a.md", "docs/sub/b.md", "top.md"}},
		{"hidden named explicitly", []string{".github/*.md"}, nil, []string{".github/f.md"}},
		{"sibling directory", []string{"../shared/*.md"}, nil, []string{"../shared/g.md"}},
		{"overlapping patterns dedupe", []string{"docs/*.md", "docs/**/*.md"}, nil, []string{"docs/a.md", "docs/draft/d.md", "docs/sub/b.md"}},
		{"missing directory", []string{"nope/*.md"}, nil, nil},
		{"hidden file skipped by a wildcard", []string{"docs/*"}, nil, []string{"docs/a.md"}},
		{"hidden file named with its dot", []string{"docs/.*"}, nil, []string{"docs/.draft.md"}},
		{"hidden directories named with a dot", []string{".*/*.md"}, nil, []string{".github/f.md", ".hidden/e.md"}},
		{"everything skips hidden names and links", []string{"**"}, nil, []string{"docs/a.md", "docs/draft/d.md", "docs/sub/b.md", "docs/sub/c.txt", "top.md"}},
		{"a linked directory named literally is followed", []string{"linked/*.md"}, nil, []string{"linked/g.md"}},
		{"alternatives", []string{"{top,docs/a}.md"}, nil, []string{"docs/a.md", "top.md"}},
		{"exclude with alternatives", []string{"**/*.md"}, []string{"docs/{draft,sub}/**"}, []string{"docs/a.md", "top.md"}},
		{"only parent segments match no file", []string{"../.."}, nil, nil},
		{"a file where a directory is expected", []string{"top.md/*.md"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Expand(dir, tt.include, tt.exclude)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Expand (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Expand(dir, []string{"/etc/*"}, nil); err == nil {
		t.Error("Expand with an absolute pattern succeeded")
	}

	// The same tree in a file system (as a generated service embeds it),
	// without the links, which an embedded tree cannot hold: the same
	// patterns match the same names.
	mem := fstest.MapFS{}
	for _, f := range []string{
		"app/docs/a.md", "app/docs/sub/b.md", "app/docs/sub/c.txt", "app/docs/draft/d.md",
		"app/.hidden/e.md", "app/.github/f.md", "app/top.md", "shared/g.md", "app/docs/.draft.md",
	} {
		mem[f] = &fstest.MapFile{Data: []byte(f)}
	}
	open := func(up string) (fs.FS, error) { return fs.Sub(mem, path.Join("app", up)) }
	for _, tt := range tests {
		if strings.Contains(tt.name, "link") {
			continue
		}
		t.Run("fs/"+tt.name, func(t *testing.T) {
			got, err := ExpandFunc(open, tt.include, tt.exclude)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExpandFunc (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExpandError checks that an error reading the tree (here a directory
// name longer than the system allows) is returned, not read as "no match",
// and that its path is relative to dir like the names Expand returns.
func TestExpandError(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 300)
	_, err := Expand(dir, []string{"../" + long + "/*.md"}, nil)
	if err == nil {
		t.Fatal("Expand of an over-long directory name succeeded")
	}
	if want := "../" + long + ":"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the path relative to dir (%q...)", err, want[:10])
	}
}
