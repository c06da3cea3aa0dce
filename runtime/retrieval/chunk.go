package retrieval

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TextChunker cuts Markdown and plain text into chunks of at most Size
// characters (runes), consecutive chunks sharing up to Overlap characters.
//
// A cut prefers, in order: the start of a Markdown heading (anywhere in the
// window, so a section starts its own chunk), the start of a paragraph,
// the start of a line, the start of a word; among cuts of the best kind it
// takes the latest, and below the heading kind only those that fill at
// least a quarter of the chunk, so chunks are neither tiny nor cut
// mid-word. Only text without any white space is cut mid-word. A chunk that
// starts a new section does not overlap the previous one, so that its
// heading describes all of its text; other chunks start Overlap characters
// before the previous cut, moved forward to a word start. Chunks are
// trimmed of surrounding white space and blank ones are dropped.
//
// Markdown is recognised by the extension .md or .markdown; in it, ATX
// headings ("# Title" up to "###### Title") outside fenced code blocks set
// each chunk's Heading trail. Other text has no headings.
type TextChunker struct {
	// Size is the most characters of one chunk.
	Size int
	// Overlap is how many characters consecutive chunks share, less than
	// Size.
	Overlap int
}

// ChunkFixed is the one chunking strategy built: TextChunker's cuts at
// the best boundary within a fixed size, with a fixed overlap.
const ChunkFixed = "fixed"

// NewChunker returns the chunker of a strategy: a TextChunker for
// ChunkFixed or "". A strategy in DeferredChunkingStrategies fails with a
// *gateway.DeferredError naming it.
func NewChunker(strategy string, size, overlap int) (Chunker, error) {
	switch strategy {
	case "", ChunkFixed:
		return NewTextChunker(size, overlap)
	}
	if err := deferredKind(DeferredChunkingStrategies(), "chunking strategy", strategy); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("chunking: unknown strategy %q; use %q", strategy, ChunkFixed)
}

// NewTextChunker returns a chunker, refusing a size that is not positive
// or an overlap outside [0, size).
func NewTextChunker(size, overlap int) (*TextChunker, error) {
	if size <= 0 {
		return nil, fmt.Errorf("chunking: size must be positive, got %d", size)
	}
	if overlap < 0 || overlap >= size {
		return nil, fmt.Errorf("chunking: overlap must be at least 0 and less than size %d, got %d", size, overlap)
	}
	return &TextChunker{Size: size, Overlap: overlap}, nil
}

// Boundary kinds, by preference.
const (
	cutWord = iota
	cutLine
	cutParagraph
	cutHeading
)

type heading struct {
	at    int // rune index of the heading line's start
	level int
	title string
}

// Chunk implements Chunker.
func (c *TextChunker) Chunk(doc Document) ([]Chunk, error) {
	if c.Size <= 0 || c.Overlap < 0 || c.Overlap >= c.Size {
		return nil, fmt.Errorf("chunking %s: size %d and overlap %d are not valid; see NewTextChunker", doc.Path, c.Size, c.Overlap)
	}
	if !utf8.ValidString(doc.Text) {
		return nil, fmt.Errorf("chunking %s: the file is not valid UTF-8 text", doc.Path)
	}
	text := doc.Text
	// offs[i] is the byte offset of rune i; offs[n] is len(text).
	offs := make([]int, 0, len(text)+1)
	for i := range text {
		offs = append(offs, i)
	}
	n := len(offs)
	offs = append(offs, len(text))
	runes := []rune(text)

	kind := make([]int8, n+1) // best cut kind at each rune index, -1 none
	for i := range kind {
		kind[i] = -1
	}
	var heads []heading
	onHeading := make([]bool, n)
	markdown := isMarkdown(doc.Path)
	inFence, prevBlank := false, false
	for start := 0; start < n; {
		end := start
		for end < n && runes[end] != '\n' {
			end++
		}
		line := string(runes[start:end])
		blank := strings.TrimSpace(line) == ""
		k := int8(cutLine)
		if prevBlank && !blank {
			k = cutParagraph
		}
		if markdown {
			trimmed := strings.TrimLeft(line, " ")
			if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
				inFence = !inFence
			} else if !inFence && len(line)-len(trimmed) <= 3 {
				if level, title, ok := atxHeading(trimmed); ok {
					k = cutHeading
					heads = append(heads, heading{at: start, level: level, title: title})
					for i := start; i < end; i++ {
						onHeading[i] = true
					}
				}
			}
		}
		if start > 0 {
			kind[start] = k
		}
		prevBlank = blank
		start = end + 1
	}
	// content[i] counts the non-space characters before rune i that are
	// not on a heading line, so that a cut never leaves a chunk of
	// headings alone.
	content := make([]int, n+1)
	for i := range n {
		content[i+1] = content[i]
		if !unicode.IsSpace(runes[i]) && !onHeading[i] {
			content[i+1]++
		}
	}
	for i := 1; i < n; i++ {
		if kind[i] < cutWord && unicode.IsSpace(runes[i-1]) && !unicode.IsSpace(runes[i]) {
			kind[i] = cutWord
		}
	}

	var chunks []Chunk
	minFill := max(1, c.Size/4)
	for start := 0; start < n; {
		end, cut := n, int8(-1)
		if n-start > c.Size {
			limit := start + c.Size
			end = limit // no boundary at all: cut mid-word
			// White space after the limit is trimmed off the chunk, so a
			// boundary just past it still gives a chunk within the size.
			ext := limit
			for ext < n && unicode.IsSpace(runes[ext]) {
				ext++
			}
			for i := ext; i > start; i-- {
				k := kind[i]
				if k < 0 || k < cut || (k < cutHeading && i-start < minFill) {
					continue
				}
				if content[i] == content[start] {
					continue // the chunk would hold headings only
				}
				if k > cut {
					end, cut = i, k
				}
			}
		}
		first := start // the chunk's first non-space rune
		if ch, at, ok := makeChunk(doc.Path, text, offs, runes, start, end, heads); ok {
			chunks = append(chunks, ch)
			first = at
		}
		if end >= n {
			break
		}
		next := end
		if cut != cutHeading && c.Overlap > 0 {
			next = max(end-c.Overlap, first+1)
			if cut >= cutWord {
				// Start the overlap at a word; text cut mid-word (no
				// boundary at all) overlaps mid-word too.
				for next < end && kind[next] < cutWord {
					next++
				}
			}
		}
		start = next
	}
	return chunks, nil
}

// makeChunk trims runes [start, end) of white space and returns the chunk
// and the rune index it starts at, or false when nothing is left.
func makeChunk(source, text string, offs []int, runes []rune, start, end int, heads []heading) (Chunk, int, bool) {
	for start < end && unicode.IsSpace(runes[start]) {
		start++
	}
	for end > start && unicode.IsSpace(runes[end-1]) {
		end--
	}
	if start == end {
		return Chunk{}, 0, false
	}
	// The heading trail in effect at start: each heading replaces those of
	// its level and deeper.
	var trail []heading
	for _, h := range heads {
		if h.at > start {
			break
		}
		for len(trail) > 0 && trail[len(trail)-1].level >= h.level {
			trail = trail[:len(trail)-1]
		}
		trail = append(trail, h)
	}
	titles := make([]string, len(trail))
	for i, h := range trail {
		titles[i] = h.title
	}
	b, e := offs[start], offs[end]
	return Chunk{Source: source, Start: b, End: e, Heading: strings.Join(titles, " > "), Text: text[b:e]}, start, true
}

// atxHeading parses an ATX heading line without its indentation.
func atxHeading(line string) (level int, title string, ok bool) {
	for level < len(line) && line[level] == '#' {
		level++
	}
	if level == 0 || level > 6 {
		return 0, "", false
	}
	rest := line[level:]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return 0, "", false
	}
	title = strings.TrimSpace(rest)
	// An optional closing sequence of '#' preceded by a space is dropped.
	if t := strings.TrimRight(title, "#"); t != title && (t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t")) {
		title = strings.TrimSpace(t)
	}
	return level, title, true
}

func isMarkdown(p string) bool {
	switch strings.ToLower(path.Ext(p)) {
	case ".md", ".markdown":
		return true
	}
	return false
}
