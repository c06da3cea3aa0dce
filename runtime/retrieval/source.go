package retrieval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/fileglob"
	"github.com/aidgen/aid/runtime/kind"
)

// SourceFiles is the one source kind built: files matched by glob patterns.
const SourceFiles = "files"

// Source says which documents a retriever ingests.
type Source struct {
	// Kind is the kind of source; empty means SourceFiles. The kinds of
	// DeferredSourceKinds (web pages, buckets, databases) are not built and
	// fail with a *kind.DeferredError naming the kind, at New and at
	// Load.
	Kind string
	// Dir is the directory the patterns are relative to, itself relative
	// to the application's directory (empty for that directory, where an
	// app file's patterns are), or absolute.
	Dir string
	// Files are the include patterns, in the syntax of runtime/fileglob:
	// slash-separated, "**" for any number of directories.
	Files []string
	// Exclude are patterns of files to leave out.
	Exclude []string
	// OnInvalid is what Ingest does with a file it cannot read as text:
	// OnInvalidFail (or empty) reports every such file at once in an
	// *InvalidFilesError and changes nothing; OnInvalidSkip ingests the
	// rest, lists the skipped files in IngestStats.Skipped and leaves what
	// the store held of them as it was.
	OnInvalid string
}

// What Ingest does with files it cannot read as text, as the IR spells it.
const (
	OnInvalidFail = "fail"
	OnInvalidSkip = "skip"
)

// textExtensions are the file types ingestion reads. Everything else
// (PDF, HTML, office documents) needs an extractor that is not built.
func textFile(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".md", ".markdown", ".txt", ".text":
		return true
	}
	return false
}

// Load reads every document the source names, in path order, from disk,
// Dir being relative to the working directory. It refuses a source that
// matches no file, because ingesting nothing would delete the whole index
// of a retriever whose directory was mistyped, and fails with an
// *InvalidFilesError naming every file it cannot read as text.
func (s Source) Load(ctx context.Context) ([]Document, error) {
	return s.LoadFiles(ctx, kind.Files{})
}

// LoadFiles is Load through an application's files (on disk, or embedded
// in a generated service), Dir being relative to the application's
// directory.
func (s Source) LoadFiles(ctx context.Context, files kind.Files) ([]Document, error) {
	docs, invalid, err := s.LoadValid(ctx, files)
	if err != nil {
		return nil, err
	}
	if len(invalid) > 0 {
		return nil, &InvalidFilesError{Files: invalid}
	}
	return docs, nil
}

// LoadValid reads every document the source names through files, in path
// order, and returns apart, in path order too, the files it cannot read as
// text: not valid UTF-8, holding a NUL byte, or of a type no extractor is
// built for. An error is for the source as a whole (no pattern, a bad
// pattern, no file matched, a directory that cannot be listed) or a
// canceled context.
func (s Source) LoadValid(ctx context.Context, files kind.Files) ([]Document, []InvalidFile, error) {
	names, err := s.Names(files)
	if err != nil {
		return nil, nil, err
	}
	dir := filepath.ToSlash(s.Dir)
	docs := make([]Document, 0, len(names))
	var invalid []InvalidFile
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if !textFile(name) {
			invalid = append(invalid, InvalidFile{Path: name, Err: &kind.DeferredError{Feature: fmt.Sprintf("ingesting %s files such as %s (only Markdown and plain text are built)", extOf(name), name)}})
			continue
		}
		text, err := readText(files, path.Join(dir, name))
		if err != nil {
			invalid = append(invalid, InvalidFile{Path: name, Err: err})
			continue
		}
		docs = append(docs, Document{Path: name, Text: text})
	}
	return docs, invalid, nil
}

// readText reads a file as UTF-8 text, holding it once in memory, and
// says why it is not text when it is not.
func readText(files kind.Files, name string) (string, error) {
	f, err := files.Open(name)
	if err != nil {
		return "", fmt.Errorf("cannot be read: %w", err)
	}
	defer f.Close()
	var b strings.Builder
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		b.Grow(int(st.Size()))
	}
	if _, err := io.Copy(&b, f); err != nil {
		return "", fmt.Errorf("cannot be read: %w", err)
	}
	text := b.String()
	if err := checkText(text); err != nil {
		return "", err
	}
	return text, nil
}

// checkText says why text is not UTF-8 text, naming the first offending
// byte and its line, or returns nil.
func checkText(text string) error {
	if strings.HasPrefix(text, "\xff\xfe") || strings.HasPrefix(text, "\xfe\xff") {
		return errors.New("is UTF-16 text (it starts with a UTF-16 byte-order mark); convert it to UTF-8")
	}
	line := 1
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			switch c {
			case 0:
				return fmt.Errorf("holds a NUL byte at offset %d (line %d): a binary file, not text", i, line)
			case '\n':
				line++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("is not valid UTF-8: byte 0x%02x at offset %d (line %d); convert it to UTF-8", c, i, line)
		}
		i += size
	}
	return nil
}

// InvalidFile is a file an ingest could not read as text.
type InvalidFile struct {
	// Path is the file's path relative to the source's directory.
	Path string
	// Err says why: a *kind.DeferredError for a type no extractor is
	// built for (PDF, say), else what is wrong with its bytes.
	Err error
}

// String says which file and why.
func (f InvalidFile) String() string { return f.Path + ": " + f.Err.Error() }

// InvalidFilesError reports every file of a source that cannot be read as
// text, so that one bad file does not hide the next. errors.As finds a
// *kind.DeferredError in it when a file's type is not built.
type InvalidFilesError struct {
	// Files are the files, in path order.
	Files []InvalidFile
}

// Error implements error.
func (e *InvalidFilesError) Error() string {
	var b strings.Builder
	if len(e.Files) == 1 {
		b.WriteString("1 file cannot be ingested as text: ")
	} else {
		fmt.Fprintf(&b, "%d files cannot be ingested as text: ", len(e.Files))
	}
	for i, f := range e.Files {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	fmt.Fprintf(&b, ` (onInvalid: %q ingests the other files and lists these)`, OnInvalidSkip)
	return b.String()
}

// Unwrap returns each file's error.
func (e *InvalidFilesError) Unwrap() []error {
	out := make([]error, len(e.Files))
	for i, f := range e.Files {
		out[i] = f.Err
	}
	return out
}

// Names returns the names of the files the source matches, relative to
// Dir, sorted: what LoadFiles reads. It refuses a source that matches no
// file.
func (s Source) Names(files kind.Files) ([]string, error) {
	if err := s.checkKind(); err != nil {
		return nil, err
	}
	if len(s.Files) == 0 {
		return nil, errors.New("loading source: no file patterns")
	}
	for _, p := range append(append([]string(nil), s.Files...), s.Exclude...) {
		if err := fileglob.Validate(p); err != nil {
			return nil, fmt.Errorf("loading source: %w", err)
		}
	}
	names, err := fileglob.ExpandFunc(func(up string) (fs.FS, error) {
		return files.Dir(path.Join(filepath.ToSlash(s.Dir), up))
	}, s.Files, s.Exclude)
	if err != nil {
		return nil, fmt.Errorf("loading source: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("loading source: the patterns %q match no file under %s", s.Files, files.Name(cmp.Or(s.Dir, ".")))
	}
	return names, nil
}

// checkKind refuses a source kind that is not SourceFiles: with a
// *kind.DeferredError for a kind that is not built, and a plain error
// for one that is unknown.
func (s Source) checkKind() error {
	switch s.OnInvalid {
	case "", OnInvalidFail, OnInvalidSkip:
	default:
		return fmt.Errorf("unknown onInvalid %q; use %q or %q", s.OnInvalid, OnInvalidFail, OnInvalidSkip)
	}
	if s.Kind == "" || s.Kind == SourceFiles {
		return nil
	}
	if err := deferredKind(DeferredSourceKinds(), "retriever source kind", s.Kind); err != nil {
		return err
	}
	return fmt.Errorf("unknown source kind %q; use %q", s.Kind, SourceFiles)
}

func extOf(name string) string {
	if e := path.Ext(name); e != "" {
		return e
	}
	return "extensionless"
}
