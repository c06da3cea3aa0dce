package retrieval_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/retrieval"
)

func mustChunker(t *testing.T, size, overlap int) *retrieval.TextChunker {
	t.Helper()
	c, err := retrieval.NewTextChunker(size, overlap)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type wantChunk struct {
	text, heading string
}

func TestChunkBoundaries(t *testing.T) {
	tests := []struct {
		name          string
		path, text    string
		size, overlap int
		want          []wantChunk
	}{
		{
			name: "small document is one chunk",
			path: "a.md", text: "# Title\n\nShort body.\n", size: 100,
			want: []wantChunk{{"# Title\n\nShort body.", "Title"}},
		},
		{
			name: "a heading starts a chunk and sets the trail",
			path: "a.md",
			text: "# Refunds\n\nAsk within 30 days.\n\n## Damaged items\n\nReport damage within 7 days.\n",
			size: 60,
			want: []wantChunk{
				{"# Refunds\n\nAsk within 30 days.", "Refunds"},
				{"## Damaged items\n\nReport damage within 7 days.", "Refunds > Damaged items"},
			},
		},
		{
			name: "a deeper heading is replaced by its sibling",
			path: "a.md",
			text: "# A\n\n## B\n\nbbbb bbbb bbbb bbbb\n\n## C\n\ncccc cccc cccc cccc\n",
			size: 30,
			want: []wantChunk{
				{"# A\n\n## B\n\nbbbb bbbb bbbb bbbb", "A"},
				{"## C\n\ncccc cccc cccc cccc", "A > C"},
			},
		},
		{
			name: "a paragraph boundary beats a line and a word boundary",
			path: "a.txt",
			text: "one two three four five\n\nsix seven eight\nnine ten eleven twelve",
			size: 45, overlap: 0,
			want: []wantChunk{
				{"one two three four five", ""},
				{"six seven eight\nnine ten eleven twelve", ""},
			},
		},
		{
			name: "a line boundary beats a word boundary",
			path: "a.txt",
			text: "alpha beta gamma\ndelta epsilon zeta eta theta",
			size: 30, overlap: 0,
			want: []wantChunk{
				{"alpha beta gamma", ""},
				{"delta epsilon zeta eta theta", ""},
			},
		},
		{
			name: "words are not cut and overlap starts at a word",
			path: "a.txt",
			text: "aaaa bbbb cccc dddd eeee ffff gggg",
			size: 15, overlap: 5,
			want: []wantChunk{
				{"aaaa bbbb cccc", ""}, {"cccc dddd eeee", ""}, {"eeee ffff gggg", ""},
			},
		},
		{
			name: "text without white space is cut at size",
			path: "a.txt", text: "abcdefghijkl", size: 5, overlap: 2,
			want: []wantChunk{{"abcde", ""}, {"defgh", ""}, {"ghijk", ""}, {"jkl", ""}},
		},
		{
			name: "size counts characters, not bytes",
			path: "a.txt", text: "ééééé ààààà", size: 5,
			want: []wantChunk{{"ééééé", ""}, {"ààààà", ""}},
		},
		{
			name: "a hash inside a code fence is not a heading",
			path: "a.md",
			text: "# Setup\n\n```sh\n# install it\nmake\n```\n",
			size: 200,
			want: []wantChunk{{"# Setup\n\n```sh\n# install it\nmake\n```", "Setup"}},
		},
		{
			name: "plain text has no headings",
			path: "notes.txt", text: "# not a heading\n\nbody", size: 200,
			want: []wantChunk{{"# not a heading\n\nbody", ""}},
		},
		{
			name: "closing hashes and indentation of a heading",
			path: "a.MD", text: "   ## Title ##\ntext", size: 200,
			want: []wantChunk{{"## Title ##\ntext", "Title"}},
		},
		{
			name: "blank document has no chunks",
			path: "a.md", text: " \n\n\t\n", size: 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mustChunker(t, tc.size, tc.overlap).Chunk(retrieval.Document{Path: tc.path, Text: tc.text})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d chunks %q, want %d", len(got), texts(got), len(tc.want))
			}
			for i, c := range got {
				if c.Text != tc.want[i].text || c.Heading != tc.want[i].heading {
					t.Errorf("chunk %d: got %q under %q, want %q under %q", i, c.Text, c.Heading, tc.want[i].text, tc.want[i].heading)
				}
				if tc.text[c.Start:c.End] != c.Text || c.Source != tc.path {
					t.Errorf("chunk %d: offsets %d:%d or source %q do not locate it", i, c.Start, c.End, c.Source)
				}
			}
		})
	}
}

func texts(cs []retrieval.Chunk) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Text
	}
	return out
}

// TestChunkInvariants checks, on random Markdown, what every chunking must
// keep: offsets locate the text, no chunk exceeds the size, chunks advance,
// consecutive chunks share at most the overlap, every non-space character
// is in some chunk, and the same input gives the same chunks.
func TestChunkInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	words := []string{"refund", "ship", "ü", "日本語", "a", "policy", "x\ty", "longlonglonglongword"}
	for trial := range 200 {
		var b strings.Builder
		for range rng.IntN(80) {
			switch rng.IntN(10) {
			case 0:
				b.WriteString("\n\n" + strings.Repeat("#", 1+rng.IntN(3)) + " Head\n")
			case 1:
				b.WriteString("\n\n")
			case 2:
				b.WriteString("\n")
			default:
				b.WriteString(words[rng.IntN(len(words))] + " ")
			}
		}
		text := b.String()
		size := 5 + rng.IntN(60)
		overlap := rng.IntN(size)
		c := mustChunker(t, size, overlap)
		doc := retrieval.Document{Path: "r.md", Text: text}
		got, err := c.Chunk(doc)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := c.Chunk(doc)
		if len(again) != len(got) {
			t.Fatalf("trial %d: not deterministic", trial)
		}
		covered := make([]bool, len(text))
		for i, ch := range got {
			if again[i] != ch {
				t.Fatalf("trial %d: not deterministic", trial)
			}
			if text[ch.Start:ch.End] != ch.Text {
				t.Fatalf("trial %d chunk %d: offsets do not locate the text", trial, i)
			}
			if n := utf8.RuneCountInString(ch.Text); n > size {
				t.Fatalf("trial %d chunk %d: %d characters, size %d", trial, i, n, size)
			}
			if i > 0 {
				prev := got[i-1]
				if ch.Start <= prev.Start {
					t.Fatalf("trial %d chunk %d: does not advance", trial, i)
				}
				if shared := prev.End - ch.Start; shared > 0 && utf8.RuneCountInString(text[ch.Start:prev.End]) > overlap {
					t.Fatalf("trial %d chunk %d: shares %q, overlap %d", trial, i, text[ch.Start:prev.End], overlap)
				}
			}
			for j := ch.Start; j < ch.End; j++ {
				covered[j] = true
			}
		}
		for i, r := range text {
			if !unicode.IsSpace(r) && !covered[i] {
				t.Fatalf("trial %d: character %d (%q) is in no chunk of %q", trial, i, r, text)
			}
		}
	}
}

func TestChunkRefusals(t *testing.T) {
	for _, tc := range []struct{ size, overlap int }{{0, 0}, {-1, 0}, {10, 10}, {10, -1}} {
		if _, err := retrieval.NewTextChunker(tc.size, tc.overlap); err == nil {
			t.Errorf("NewTextChunker(%d, %d) accepted", tc.size, tc.overlap)
		}
	}
	c := mustChunker(t, 10, 0)
	if _, err := c.Chunk(retrieval.Document{Path: "bin.md", Text: "ok \xff\xfe"}); err == nil || !strings.Contains(err.Error(), "bin.md") {
		t.Errorf("invalid UTF-8: %v", err)
	}
	bad := &retrieval.TextChunker{Size: 10, Overlap: 10}
	if _, err := bad.Chunk(retrieval.Document{Path: "a.md", Text: "x"}); err == nil {
		t.Error("a hand-built chunker with overlap = size chunked")
	}
}
