package retrieval

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// referenceChunk is the chunker as it was before it streamed: it holds
// per-rune arrays of the whole document. The streaming chunker must cut
// exactly as it did, so that chunk ids do not change.
func referenceChunk(c *TextChunker, doc Document) ([]Chunk, error) {
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
		if ch, at, ok := refMakeChunk(doc.Path, text, offs, runes, start, end, heads); ok {
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
func refMakeChunk(source, text string, offs []int, runes []rune, start, end int, heads []heading) (Chunk, int, bool) {
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

type heading struct {
	at    int // rune index of the heading line's start
	level int
	title string
}
