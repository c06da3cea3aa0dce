package retrieval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/aidgen/aid/internal/fileglob"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
)

// SourceFiles is the one source kind built: files matched by glob patterns.
const SourceFiles = "files"

// Source says which documents a retriever ingests.
type Source struct {
	// Kind is the kind of source; empty means SourceFiles. The kinds of
	// DeferredSourceKinds (web pages, buckets, databases) are not built and
	// fail with a *gateway.DeferredError naming the kind, at New and at
	// Load.
	Kind string
	// Dir is the directory the patterns are relative to, itself relative
	// to the application's directory (empty for that directory, where an
	// app file's patterns are), or absolute.
	Dir string
	// Files are the include patterns, in the syntax of internal/fileglob:
	// slash-separated, "**" for any number of directories.
	Files []string
	// Exclude are patterns of files to leave out.
	Exclude []string
}

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
// of a retriever whose directory was mistyped.
func (s Source) Load(ctx context.Context) ([]Document, error) {
	return s.LoadFiles(ctx, kind.Files{})
}

// LoadFiles is Load through an application's files (on disk, or embedded
// in a generated service), Dir being relative to the application's
// directory.
func (s Source) LoadFiles(ctx context.Context, files kind.Files) ([]Document, error) {
	names, err := s.Names(files)
	if err != nil {
		return nil, err
	}
	docs := make([]Document, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !textFile(name) {
			return nil, &gateway.DeferredError{Feature: fmt.Sprintf("ingesting %s files such as %s (only Markdown and plain text are built)", extOf(name), name)}
		}
		b, err := files.ReadFile(path.Join(filepath.ToSlash(s.Dir), name))
		if err != nil {
			return nil, fmt.Errorf("loading source: %w", err)
		}
		docs = append(docs, Document{Path: name, Text: string(b)})
	}
	return docs, nil
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
// *gateway.DeferredError for a kind that is not built, and a plain error
// for one that is unknown.
func (s Source) checkKind() error {
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
