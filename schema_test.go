package aid_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// TestSchemaCompiles compiles the embedded schema and checks that it
// defines #App and the definitions the loader names in its messages.
func TestSchemaCompiles(t *testing.T) {
	v := cuecontext.New().CompileString(aid.Schema(), cue.Filename(aid.SchemaFilename))
	if err := v.Err(); err != nil {
		t.Fatalf("embedded schema does not compile: %v", err)
	}
	for _, def := range []string{"#App", "#Provider", "#Model", "#Agent", "#Eval", "#Name", "#ModelID", "#SemVer", "#EnvVar", "#Duration", "#URL", "#Address", "#TableName"} {
		d := v.LookupPath(cue.ParsePath(def))
		if !d.Exists() {
			t.Errorf("schema lacks %s", def)
			continue
		}
	}
}

// TestSchemaDocumentsEveryField checks the rule that every IR field has a
// doc comment: the loader quotes them in "missing field" messages.
func TestSchemaDocumentsEveryField(t *testing.T) {
	v := cuecontext.New().CompileString(aid.Schema(), cue.Filename(aid.SchemaFilename))
	var walk func(v cue.Value, path string)
	walk = func(v cue.Value, path string) {
		it, err := v.Fields(cue.Optional(true), cue.Definitions(true))
		if err != nil {
			return
		}
		for it.Next() {
			sel := it.Selector()
			if !sel.IsString() && !sel.IsDefinition() {
				continue
			}
			p := path + "." + sel.String()
			if len(it.Value().Doc()) == 0 {
				t.Errorf("schema field %s has no doc comment", p)
			}
			switch sel.String() {
			case "input", "output", "schema":
				// JSON Schema documents: their fields are data.
				continue
			}
			walk(it.Value(), p)
		}
	}
	walk(v, "")
}

// deferredFeature is one #Deferred definition of the schema with the
// runtime's side of it.
type deferredFeature struct {
	def     string
	runtime []string                 // the runtime's list of the kinds
	ir      func(kind string) string // an IR using the kind
	build   func(kind string) error  // the runtime constructor taking it
}

// TestDeferredKindsAgree holds the three places that know which kinds are
// accepted but not built to one list and one wording. The schema's
// #Deferred definitions are the list the IR side reads; the runtime's
// constructors keep their own (the runtime never imports the schema), and
// this test requires them to be equal, and requires `aidgen vet` (ir) and
// the runtime constructor to describe each kind in the same words:
// ir's message begins with the runtime's *gateway.DeferredError.
func TestDeferredKindsAgree(t *testing.T) {
	schema := cuecontext.New().CompileString(aid.Schema(), cue.Filename(aid.SchemaFilename))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "doc.md"), []byte("# Doc\n\nText.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const app = `name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: "e-1": {provider: "p", kind: "embedding", dimensions: 8, cost: inputPer1kUSD: 0}
aliases: e: "e-1"
stores: kb: {}
`
	retriever := func(fields string) string {
		return app + `retrievers: r: {embedModel: "e", store: "kb", ` + fields + "}\n"
	}
	features := []deferredFeature{
		{"#DeferredProviderKind", gateway.DeferredProviderKinds(),
			func(k string) string { return app + fmt.Sprintf("providers: q: kind: %q\n", k) },
			gateway.ProviderKindDeferred},
		{"#DeferredStoreKind", retrieval.DeferredStoreKinds(),
			func(k string) string { return app + fmt.Sprintf("stores: s: kind: %q\n", k) },
			func(k string) error {
				_, err := retrieval.OpenStore(retrieval.StoreConfig{Name: "s", Kind: k}, 8, nil)
				return err
			}},
		{"#DeferredSourceKind", retrieval.DeferredSourceKinds(),
			func(k string) string { return retriever(fmt.Sprintf("source: kind: %q", k)) },
			func(k string) error { _, err := retrieval.Source{Kind: k}.Load(t.Context()); return err }},
		{"#DeferredChunkingStrategy", retrieval.DeferredChunkingStrategies(),
			func(k string) string {
				return retriever(fmt.Sprintf(`source: files: ["*.md"], chunking: strategy: %q`, k))
			},
			func(k string) error { _, err := retrieval.NewChunker(k, 100, 10); return err }},
		{"#DeferredRerankKind", retrieval.DeferredRerankKinds(),
			func(k string) string { return retriever(fmt.Sprintf(`source: files: ["*.md"], rerank: %q`, k)) },
			func(k string) error { _, err := retrieval.NewReranker(k); return err }},
	}

	// Every #Deferred definition of the schema is covered here.
	it, err := schema.Fields(cue.Definitions(true))
	if err != nil {
		t.Fatal(err)
	}
	for it.Next() {
		name := it.Selector().String()
		if strings.HasPrefix(name, "#Deferred") && !slices.ContainsFunc(features, func(f deferredFeature) bool { return f.def == name }) {
			t.Errorf("schema definition %s has no runtime list checked here", name)
		}
	}

	for _, f := range features {
		var inSchema []string
		v := schema.LookupPath(cue.MakePath(cue.Def(f.def)))
		if op, args := v.Expr(); op == cue.OrOp {
			for _, a := range args {
				s, _ := a.String()
				inSchema = append(inSchema, s)
			}
		} else if s, err := v.String(); err == nil {
			inSchema = []string{s}
		}
		slices.Sort(inSchema)
		if !slices.Equal(inSchema, f.runtime) {
			t.Errorf("%s lists %q; the runtime defers %q", f.def, inSchema, f.runtime)
		}
		for _, kind := range inSchema {
			t.Run(kind, func(t *testing.T) {
				var de *gateway.DeferredError
				if err := f.build(kind); !errors.As(err, &de) {
					t.Fatalf("the runtime constructor returned %v, want a *gateway.DeferredError", err)
				}
				_, err := ir.LoadBytes(filepath.Join(dir, "app.cue"), []byte(f.ir(kind)))
				es, ok := ir.IsInvalid(err)
				if !ok || len(es) != 1 {
					t.Fatalf("ir.LoadBytes = %v, want one error", err)
				}
				if !strings.HasPrefix(es[0].Msg, de.Error()+";") {
					t.Errorf("vet says %q; the runtime says %q", es[0].Msg, de.Error())
				}
			})
		}
	}
}
