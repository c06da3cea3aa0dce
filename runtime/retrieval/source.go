package retrieval

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/aidgen/aid/internal/fileglob"
	"github.com/aidgen/aid/runtime/gateway"
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
	// Dir is the directory the patterns are relative to: the directory of
	// the IR file.
	Dir string
	// Files are the include patterns, in the syntax of internal/fileglob:
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

// Load reads every document the source names, in path order. It refuses a
// source that matches no file, because ingesting nothing would delete the
// whole index of a retriever whose directory was mistyped.
func (s Source) Load(ctx context.Context) ([]Document, error) {
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
	names, err := fileglob.Expand(s.Dir, s.Files, s.Exclude)
	if err != nil {
		return nil, fmt.Errorf("loading source: %w", err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("loading source: the patterns %q match no file under %s", s.Files, s.Dir)
	}
	docs := make([]Document, 0, len(names))
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !textFile(name) {
			return nil, &gateway.DeferredError{Feature: fmt.Sprintf("ingesting %s files such as %s (only Markdown and plain text are built)", extOf(name), name)}
		}
		b, err := os.ReadFile(filepath.Join(s.Dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, fmt.Errorf("loading source: %w", err)
		}
		docs = append(docs, Document{Path: name, Text: string(b)})
	}
	return docs, nil
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
