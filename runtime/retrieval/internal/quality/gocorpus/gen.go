//go:build ignore

// gen writes the documents of the retrieval quality collections from the Go
// tree this command runs with: corpus.jsonl, the documentation of exported
// functions, types and methods of a fixed list of Go standard library
// packages, one document each, read with go/doc; and spec.jsonl, the Go
// language specification (doc/go_spec.html) cut at its section headings,
// one section each, as plain text. The Go documentation is under the
// BSD-3-Clause licence of the Go project (LICENSE beside this file). The
// committed files are what the harness measures; running this again with
// another Go release changes them, and the queries' judgements must then
// be checked again.
//
//	go run ./runtime/retrieval/internal/quality/gocorpus/gen.go
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/format"
	"go/parser"
	"go/token"
	"html"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
)

var packages = []string{
	"bufio", "bytes", "compress/gzip", "container/heap", "context", "crypto/rand", "crypto/sha256",
	"encoding/base64", "encoding/csv", "encoding/hex", "encoding/json", "errors", "flag", "fmt",
	"hash/crc32", "io", "io/fs", "log/slog", "maps", "math", "math/rand/v2", "mime", "net", "net/http",
	"net/url", "os", "os/exec", "os/signal", "path/filepath", "regexp", "slices", "sort", "strconv",
	"strings", "sync", "sync/atomic", "text/template", "time", "unicode", "unicode/utf8",
}

type document struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

func main() {
	root := filepath.Join(runtime.GOROOT(), "src")
	var docs []document
	for _, path := range packages {
		docs = append(docs, pkgDocs(root, path)...)
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].ID < docs[j].ID })
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			log.Fatal(err)
		}
	}
	dir := filepath.Join("runtime", "retrieval", "internal", "quality", "gocorpus")
	if err := os.WriteFile(filepath.Join(dir, "corpus.jsonl"), out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d documents, %d bytes\n", len(docs), out.Len())
	spec := specDocs(filepath.Join(runtime.GOROOT(), "doc", "go_spec.html"))
	out.Reset()
	for _, d := range spec {
		if err := enc.Encode(d); err != nil {
			log.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "spec.jsonl"), out.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d spec sections, %d bytes\n", len(spec), out.Len())
}

var (
	headingRE = regexp.MustCompile(`(?s)<h[234] id="([^"]+)"[^>]*>(.*?)</h[234]>`)
	tagRE     = regexp.MustCompile(`(?s)<[^>]*>`)
	blankRE   = regexp.MustCompile(`\n{3,}`)
)

// specDocs cuts the specification at its h2, h3 and h4 headings: each
// section is a Markdown document titled by its heading, holding its text
// without tags, up to the next heading.
func specDocs(path string) []document {
	b, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	page := string(b)
	locs := headingRE.FindAllStringSubmatchIndex(page, -1)
	var docs []document
	for i, l := range locs {
		id := page[l[2]:l[3]]
		title := strings.TrimSpace(html.UnescapeString(tagRE.ReplaceAllString(page[l[4]:l[5]], "")))
		end := len(page)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := html.UnescapeString(tagRE.ReplaceAllString(page[l[1]:end], ""))
		body = strings.TrimSpace(blankRE.ReplaceAllString(body, "\n\n"))
		if body == "" {
			continue
		}
		docs = append(docs, document{ID: "spec/" + id, Text: "# " + title + "\n\n" + body + "\n"})
	}
	return docs
}

func pkgDocs(root, path string) []document {
	fset := token.NewFileSet()
	dir := filepath.Join(root, filepath.FromSlash(path))
	// The files of the package as linux/amd64 builds it by default.
	ctx := build.Default
	ctx.GOOS, ctx.GOARCH = "linux", "amd64"
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		log.Fatal(err)
	}
	var files []*ast.File
	for _, n := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			log.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, path)
	if err != nil {
		log.Fatal(err)
	}
	name := path
	var docs []document
	add := func(id, decl, text string) {
		text = strings.TrimSpace(text)
		if text == "" {
			return
		}
		if id != "" {
			id = name + "." + id
		} else {
			id = name
		}
		docs = append(docs, document{ID: id, Text: "# " + id + "\n\n    " + decl + "\n\n" + text + "\n"})
	}
	add("", "package "+p.Name, p.Doc)
	for _, f := range p.Funcs {
		add(f.Name, declOf(fset, f.Decl), f.Doc)
	}
	for _, t := range p.Types {
		add(t.Name, "type "+t.Name, t.Doc)
		for _, f := range t.Funcs {
			add(f.Name, declOf(fset, f.Decl), f.Doc)
		}
		for _, m := range t.Methods {
			add(t.Name+"."+m.Name, declOf(fset, m.Decl), m.Doc)
		}
	}
	return docs
}

func declOf(fset *token.FileSet, d *ast.FuncDecl) string {
	d = &ast.FuncDecl{Recv: d.Recv, Name: d.Name, Type: d.Type}
	var b bytes.Buffer
	if err := format.Node(&b, fset, d); err != nil {
		log.Fatal(err)
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
