package retrieval

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// randomDoc builds a document from pieces that exercise every boundary
// kind: headings (some indented, some in fences), blank lines, Unicode
// white space, words of every length, text without spaces.
func randomDoc(rng *rand.Rand) string {
	pieces := []string{"# Title\n", "## Sub heading ##\n", "   ### Indented\n", "    # code, not a heading\n", "#NoSpace\n",
		"```\n# fenced\n```\n", "~~~\nx\n~~~\n", "\n", "\n\n", "\r\n", "word ", "other words here ", "naïve café ", "配送中 ",
		"\u00a0", "\u3000", "\t", "supercalifragilisticexpialidocious", strings.Repeat("x", 40), "end.\n", " ", "a\nb\nc\n"}
	var b strings.Builder
	for range rng.IntN(300) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// TestChunkStreamsAsBefore checks that the streaming chunker cuts exactly
// as the chunker that held per-rune arrays of the whole document did, so
// that no chunk id changes and re-ingesting is still a no-op.
func TestChunkStreamsAsBefore(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	check := func(doc Document, size, overlap int) {
		t.Helper()
		c := &TextChunker{Size: size, Overlap: overlap}
		got, err := c.Chunk(doc)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := referenceChunk(c, doc)
		if !reflect.DeepEqual(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("%s size %d overlap %d: chunk %d is\n%+v\nwant\n%+v", doc.Path, size, overlap, i, got[i], want[i])
				}
			}
			t.Fatalf("%s size %d overlap %d: %d chunks, want %d", doc.Path, size, overlap, len(got), len(want))
		}
	}
	for i := range 3000 {
		size := 1 + rng.IntN(120)
		overlap := rng.IntN(size)
		path := "doc.md"
		if i%4 == 0 {
			path = "doc.txt"
		}
		check(Document{Path: path, Text: randomDoc(rng)}, size, overlap)
	}
	docs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "support-desk", "docs", "*", "*.md"))
	more, _ := filepath.Glob(filepath.Join("..", "..", "examples", "support-desk", "docs", "*.md"))
	for _, p := range append(docs, more...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, so := range [][2]int{{600, 80}, {800, 100}, {120, 10}, {50, 0}} {
			check(Document{Path: p, Text: string(b)}, so[0], so[1])
		}
	}
}
