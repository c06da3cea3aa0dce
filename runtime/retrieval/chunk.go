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
// *kind.DeferredError naming it.
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

// Chunk implements Chunker. It streams: it reads the document once,
// forward, holding only the lines and the runes of the window it is
// cutting (about Size runes), the heading trail, and the chunks, whose
// texts share the document's memory; so chunking a document takes little
// more memory than the document and its chunk list.
func (c *TextChunker) Chunk(doc Document) ([]Chunk, error) {
	if c.Size <= 0 || c.Overlap < 0 || c.Overlap >= c.Size {
		return nil, fmt.Errorf("chunking %s: size %d and overlap %d are not valid; see NewTextChunker", doc.Path, c.Size, c.Overlap)
	}
	if !utf8.ValidString(doc.Text) {
		return nil, fmt.Errorf("chunking %s: the file is not valid UTF-8 text", doc.Path)
	}
	w := chunkWalker{text: doc.Text, lines: lineScanner{text: doc.Text, markdown: isMarkdown(doc.Path)}}
	var chunks []Chunk
	minFill := max(1, c.Size/4)
	start := 0 // byte offset of the window's first rune
	for start < len(doc.Text) {
		win := w.window(start, c.Size)
		end, cut := len(win.pos)-1, int8(-1) // index in win; the last is the text's end or the limit
		if win.more {
			end = c.Size // no boundary at all: cut mid-word
			// White space after the limit is trimmed off the chunk, so a
			// boundary just past it still gives a chunk within the size.
			for i := len(win.pos) - 1; i > 0; i-- {
				k := win.pos[i].kind
				if k < 0 || k < cut || (k < cutHeading && i < minFill) {
					continue
				}
				if win.pos[i].content == 0 {
					continue // the chunk would hold headings only
				}
				if k > cut {
					end, cut = i, k
				}
			}
		}
		first := 0 // index in win of the chunk's first non-space rune
		if ch, at, ok := w.makeChunk(doc.Path, win, end); ok {
			chunks = append(chunks, ch)
			first = at
		}
		if win.pos[end].at >= len(doc.Text) {
			break
		}
		next := end
		if cut != cutHeading && c.Overlap > 0 {
			next = max(end-c.Overlap, first+1)
			if cut >= cutWord {
				// Start the overlap at a word; text cut mid-word (no
				// boundary at all) overlaps mid-word too.
				for next < end && win.pos[next].kind < cutWord {
					next++
				}
			}
		}
		start = win.pos[next].at
	}
	return chunks, nil
}

// Boundary kinds, by preference.
const (
	cutWord = iota
	cutLine
	cutParagraph
	cutHeading
)

// line is one line of a document: [start, end) in bytes, without its
// newline.
type line struct {
	start, end int
	kind       int8 // the cut kind at its start
	heading    bool
	level      int
	title      string
}

// lineScanner yields a document's lines in order, keeping the state that
// decides their kinds: whether the previous line was blank, and whether a
// fenced code block is open.
type lineScanner struct {
	text      string
	markdown  bool
	at        int // byte offset of the next line
	inFence   bool
	prevBlank bool
}

// next returns the next line, or false at the end of the text.
func (s *lineScanner) next() (line, bool) {
	if s.at >= len(s.text) {
		return line{}, false
	}
	start := s.at
	end := strings.IndexByte(s.text[start:], '\n')
	if end < 0 {
		end = len(s.text)
	} else {
		end += start
	}
	s.at = end + 1
	text := s.text[start:end]
	blank := strings.TrimSpace(text) == ""
	l := line{start: start, end: end, kind: cutLine}
	if s.prevBlank && !blank {
		l.kind = cutParagraph
	}
	if s.markdown {
		trimmed := strings.TrimLeft(text, " ")
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			s.inFence = !s.inFence
		} else if !s.inFence && len(text)-len(trimmed) <= 3 {
			if level, title, ok := atxHeading(trimmed); ok {
				l.kind, l.heading, l.level, l.title = cutHeading, true, level, title
			}
		}
	}
	s.prevBlank = blank
	return l, true
}

// chunkWalker walks a document forward, window by window, keeping the
// lines the current window spans and the heading trail.
type chunkWalker struct {
	text  string
	lines lineScanner
	held  []line // lines from the one holding the window's start on
	trail []line // the headings in effect, outermost first
	// trailAt is how far the trail has been brought: every heading line
	// starting before it has been applied.
	trailAt int
	pos     []winPos // reused between windows
}

// winPos is one position of a window: a rune, or the end of the text.
type winPos struct {
	at      int  // byte offset
	kind    int8 // the best cut kind here, -1 for none
	space   bool // the rune here is white space (true at the end)
	content int  // non-space runes off heading lines from the window's start to here
}

// window is the runes from a start: pos[i] is the i-th rune after start,
// up to Size runes and then any white space; more says whether text
// continues past Size runes (so the chunk must be cut).
type window struct {
	pos  []winPos
	more bool
}

// lineAt returns the held line containing byte offset at, reading lines
// as needed; at is never before the first held line.
func (w *chunkWalker) lineAt(at int) line {
	for {
		for _, l := range w.held {
			if at >= l.start && at <= l.end {
				return l
			}
		}
		l, ok := w.lines.next()
		if !ok {
			return line{start: len(w.text), end: len(w.text), kind: -1}
		}
		w.held = append(w.held, l)
	}
}

// window returns the window of size runes from start.
func (w *chunkWalker) window(start, size int) window {
	// Lines before start are done with, once the trail has taken their
	// headings: every chunk from here on starts at or after start.
	w.advanceTrail(start)
	drop := 0
	for drop < len(w.held) && w.held[drop].end < start {
		drop++
	}
	w.held = append(w.held[:0], w.held[drop:]...)
	pos := w.pos[:0]
	content := 0
	cur := w.lineAt(start)
	at := start
	more := false
	for {
		if at >= len(w.text) {
			pos = append(pos, winPos{at: at, kind: -1, space: true, content: content})
			break
		}
		if at > cur.end {
			cur = w.lineAt(at)
		}
		r, n := utf8.DecodeRuneInString(w.text[at:])
		space := unicode.IsSpace(r)
		kind := int8(-1)
		if at == cur.start && at > 0 {
			kind = cur.kind
		} else if at > 0 && !space {
			if p, _ := utf8.DecodeLastRuneInString(w.text[:at]); unicode.IsSpace(p) {
				kind = cutWord
			}
		}
		pos = append(pos, winPos{at: at, kind: kind, space: space, content: content})
		if len(pos)-1 >= size {
			// At or past the limit: the text holds more than size runes
			// from start. White space after the limit is part of the
			// window, up to and including the next other rune.
			more = true
			if !space {
				break
			}
		}
		if !space && !cur.heading {
			content++
		}
		at += n
	}
	w.pos = pos
	return window{pos: pos, more: more}
}

// advanceTrail applies the headings of the lines starting at or before
// byte offset to: each replaces those of its level and deeper.
func (w *chunkWalker) advanceTrail(to int) {
	for {
		l := w.lineAt(w.trailAt)
		if l.start > to || l.start >= len(w.text) {
			return
		}
		if l.heading {
			for len(w.trail) > 0 && w.trail[len(w.trail)-1].level >= l.level {
				w.trail = w.trail[:len(w.trail)-1]
			}
			w.trail = append(w.trail, l)
		}
		w.trailAt = l.end + 1
	}
}

// makeChunk trims window positions [0, end) of white space and returns the
// chunk and the index it starts at, or false when nothing is left.
func (w *chunkWalker) makeChunk(source string, win window, end int) (Chunk, int, bool) {
	start := 0
	for start < end && win.pos[start].space {
		start++
	}
	for end > start && win.pos[end-1].space {
		end--
	}
	if start == end {
		return Chunk{}, 0, false
	}
	b, e := win.pos[start].at, win.pos[end].at
	w.advanceTrail(b)
	titles := make([]string, len(w.trail))
	for i, h := range w.trail {
		titles[i] = h.title
	}
	return Chunk{Source: source, Start: b, End: e, Heading: strings.Join(titles, " > "), Text: w.text[b:e]}, start, true
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
