package fileglob

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchTree writes a docs tree of 2,000 files (20 sections × 10
// subsections × 10 files, half markdown) beside a .git directory of 2,000
// more that no pattern here should read, and returns the app directory.
func benchTree(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	write := func(name string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for s := range 20 {
		for sub := range 10 {
			for f := range 10 {
				ext := ".md"
				if f%2 == 1 {
					ext = ".txt"
				}
				write(fmt.Sprintf("docs/s%d/sub%d/f%d%s", s, sub, f, ext))
				write(fmt.Sprintf(".git/objects/s%d/sub%d/o%d", s, sub, f))
			}
		}
	}
	return dir
}

// BenchmarkExpand measures expanding retriever patterns over benchTree:
// a recursive pattern, one with an exclude, and one whose wildcard in the
// middle lets the walk skip most directories.
func BenchmarkExpand(b *testing.B) {
	dir := benchTree(b)
	cases := []struct {
		name             string
		include, exclude []string
		want             int
	}{
		{"recursive", []string{"**/*.md"}, nil, 1000},
		{"exclude", []string{"docs/**/*.md"}, []string{"docs/s1*/**"}, 450},
		{"mid-wildcard", []string{"docs/*/sub3/*.md"}, nil, 100},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := Expand(dir, c.include, c.exclude)
				if err != nil {
					b.Fatal(err)
				}
				if len(got) != c.want {
					b.Fatalf("%d files, want %d", len(got), c.want)
				}
			}
		})
	}
}

// BenchmarkMatch measures matching one name against a recursive pattern,
// as Expand does for every exclude pattern and every file it finds.
func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if !Match("docs/**/sub*/*.md", "docs/s1/sub2/f3.md") {
			b.Fatal("no match")
		}
	}
}
