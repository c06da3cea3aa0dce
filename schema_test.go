package aid_test

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/kind"
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

// kindPoint is an extension point as the schema and lowering see it.
type kindPoint struct {
	point    kind.Point
	def      string                  // the schema definition whose kind field lists the kinds
	deferred string                  // the #Deferred definition of its deferred kinds, if any
	common   []string                // the fields an element has whatever its kind, besides kind
	table    map[string]reflect.Type // lowering's table: each kind's configuration type
}

// typesOf returns the type of each value of a lowering table, nil for a
// kind without configuration.
func typesOf[T any](m map[string]T) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for k, v := range m {
		out[k] = reflect.TypeOf(v)
	}
	return out
}

func kindPoints() []kindPoint {
	return []kindPoint{
		{kind.Providers, "#Provider", "#DeferredProviderKind", nil, typesOf(lower.ProviderKinds)},
		{kind.Tools, "#ToolImplementation", "", nil, typesOf(lower.ToolKinds)},
		{kind.Stores, "#Store", "#DeferredStoreKind", []string{"distance"}, typesOf(lower.StoreKinds)},
	}
}

// disjuncts returns the string literals of a disjunction, following
// references, sorted.
func disjuncts(v cue.Value) []string {
	if op, args := v.Expr(); op == cue.OrOp {
		var out []string
		for _, a := range args {
			out = append(out, disjuncts(a)...)
		}
		slices.Sort(out)
		return out
	}
	if s, err := v.String(); err == nil {
		return []string{s}
	}
	return nil
}

// TestKindsAgree holds the schema to runtime/kind's lists, which the
// runtime and ir read, and to internal/lower's table, which decodes the
// IR's blocks: each extension point's built kinds and deferred kinds are
// the same three times, and each built kind's fields in the schema are
// the JSON fields of its configuration, nested structs included, so that
// lowering neither drops a field the schema allows nor expects one it
// refuses.
func TestKindsAgree(t *testing.T) {
	ctx := cuecontext.New()
	schema := ctx.CompileString(aid.Schema(), cue.Filename(aid.SchemaFilename))
	for _, p := range kindPoints() {
		t.Run(string(p.point), func(t *testing.T) {
			all := disjuncts(schema.LookupPath(cue.ParsePath(p.def + ".kind")))
			var deferred []string
			if p.deferred != "" {
				deferred = disjuncts(schema.LookupPath(cue.MakePath(cue.Def(p.deferred))))
			}
			built := slices.DeleteFunc(slices.Clone(all), func(k string) bool { return slices.Contains(deferred, k) })
			if !slices.Equal(built, kind.Names(p.point)) {
				t.Errorf("%s.kind allows %q; runtime/kind builds %q", p.def, built, kind.Names(p.point))
			}
			if !slices.Equal(deferred, kind.Deferred(p.point)) {
				t.Errorf("%s lists %q; runtime/kind defers %q", p.deferred, deferred, kind.Deferred(p.point))
			}
			if got := slices.Sorted(maps.Keys(p.table)); !slices.Equal(got, kind.Names(p.point)) {
				t.Errorf("internal/lower decodes %q; runtime/kind builds %q", got, kind.Names(p.point))
			}
			for _, name := range built {
				rt := p.table[name]
				block := schema.LookupPath(cue.MakePath(cue.Def(strings.TrimPrefix(p.def, "#")))).Unify(ctx.CompileString(fmt.Sprintf("kind: %q", name)))
				skip := append([]string{"kind"}, p.common...)
				sameFields(t, fmt.Sprintf("%s %q", p.point, name), block, rt, skip)
			}
		})
	}
	// A resource kind is a top-level section of its own, whose entries
	// are the kind's configuration.
	t.Run(string(kind.Resources), func(t *testing.T) {
		table := typesOf(lower.ResourceKinds)
		if got := slices.Sorted(maps.Keys(table)); !slices.Equal(got, kind.Names(kind.Resources)) {
			t.Errorf("internal/lower decodes %q; runtime/kind builds %q", got, kind.Names(kind.Resources))
		}
		for _, section := range kind.Names(kind.Resources) {
			v := schema.LookupPath(cue.MakePath(cue.Def("App"), cue.Str(section)))
			if !v.Exists() {
				t.Errorf("#App has no section %s for the resource kind", section)
				continue
			}
			entry := v.Unify(ctx.CompileString("x: {}")).LookupPath(cue.MakePath(cue.Str("x")))
			sameFields(t, fmt.Sprintf("%s %q", kind.Resources, section), entry, table[section], nil)
		}
	})
}

// sameFields compares the fields of the schema value v, but skip, with the
// JSON fields of the struct type rt, recursing into struct fields.
func sameFields(t *testing.T, what string, v cue.Value, rt reflect.Type, skip []string) {
	t.Helper()
	for rt != nil && rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	var inSchema []string
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for it.Next() {
		if name := it.Selector().Unquoted(); !slices.Contains(skip, name) {
			inSchema = append(inSchema, name)
		}
	}
	slices.Sort(inSchema)
	inGo := map[string]reflect.Type{}
	if rt != nil {
		for i := range rt.NumField() {
			f := rt.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				inGo[name] = f.Type
			}
		}
	}
	if got := slices.Sorted(maps.Keys(inGo)); !slices.Equal(inSchema, got) {
		t.Errorf("%s: the schema has fields %q; the configuration %v has %q", what, inSchema, rt, got)
		return
	}
	for _, name := range inSchema {
		ft := inGo[name]
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft.PkgPath() != "time" {
			sameFields(t, what+"."+name, v.LookupPath(cue.MakePath(cue.Str(name).Optional())), ft, nil)
		}
	}
}

// TestDeferredKindsAgree holds the three places that know which kinds are
// accepted but not built to one list and one wording. The schema's
// #Deferred definitions are the list ir reads for what is not a kind of an
// extension point; the runtime keeps its own (runtime/kind for the kinds
// of extension points, retrieval for the rest: the runtime never imports
// the schema), and this test requires them to be equal, and requires
// `aidgen vet` (ir) and the runtime (lowering, or the constructor taking
// it) to describe each kind in the same words: ir's message begins with the
// runtime's *kind.DeferredError.
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
	lowered := func(p kind.Point) func(string) error {
		return func(k string) error {
			_, err := lower.Decode(p, k, ir.Config(`{"kind":"`+k+`"}`))
			return err
		}
	}
	features := []deferredFeature{
		{"#DeferredProviderKind", kind.Deferred(kind.Providers),
			func(k string) string { return app + fmt.Sprintf("providers: q: kind: %q\n", k) },
			lowered(kind.Providers)},
		{"#DeferredStoreKind", kind.Deferred(kind.Stores),
			func(k string) string { return app + fmt.Sprintf("stores: s: kind: %q\n", k) },
			lowered(kind.Stores)},
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
		inSchema := disjuncts(schema.LookupPath(cue.MakePath(cue.Def(f.def))))
		if !slices.Equal(inSchema, f.runtime) {
			t.Errorf("%s lists %q; the runtime defers %q", f.def, inSchema, f.runtime)
		}
		for _, k := range inSchema {
			t.Run(k, func(t *testing.T) {
				var de *kind.DeferredError
				if err := f.build(k); !errors.As(err, &de) {
					t.Fatalf("the runtime returned %v, want a *kind.DeferredError", err)
				}
				if gateway.IsFallbackEligible(de) {
					t.Errorf("a deferred kind %q would fall through to the next alias", k)
				}
				_, err := ir.LoadBytes(filepath.Join(dir, "app.cue"), []byte(f.ir(k)))
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
