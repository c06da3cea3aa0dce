package ir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	aid "github.com/aidgen/aid"
	"github.com/aidgen/aid/runtime/kind"
)

// Load reads, validates and decodes the IR file at path. Relative file
// names inside the IR are resolved against the file's directory.
//
// When the file is not a valid IR, the error is an Errors value listing
// every problem with its position; use errors.As to reach it. Any other
// error (the file cannot be read) is returned wrapped as is.
//
// Options such as Tags change how the file is read.
func Load(path string, opts ...Option) (*Document, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading IR: %w", err)
	}
	return LoadBytes(path, src, opts...)
}

// LoadBytes validates and decodes src as the IR file named name. The name
// appears in positions, and its directory is where relative file names
// inside the IR are resolved.
func LoadBytes(name string, src []byte, opts ...Option) (*Document, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	sc, err := takeSchema()
	if err != nil {
		return nil, err
	}
	defer sc.release(len(src))
	l := newLoader(name, sc)
	l.tags = o.tags
	return l.load(src)
}

// kindTable is what the loader knows of the kinds: runtime/kind's lists,
// which an internal test replaces to check a resource kind that is not
// built yet.
type kindTable struct {
	lookup    func(kind.Point, string) (kind.Info, bool)
	resources []string // the resource kinds: their sections
}

// kinds is runtime/kind's table.
func kinds() kindTable {
	return kindTable{lookup: kind.Lookup, resources: kind.Names(kind.Resources)}
}

func newLoader(name string, sc *compiledSchema) *loader {
	return &loader{
		name:     name,
		dir:      filepath.Dir(name),
		kinds:    kinds(),
		sc:       sc,
		ctx:      sc.ctx,
		schema:   sc.schema,
		labels:   sc.labels,
		cuePaths: map[string]bool{},
		known:    map[string][]string{},
		unknown:  map[string]bool{},
	}
}

// compiledSchema is the embedded schema compiled into a CUE context of its
// own. A load uses it exclusively: a cue.Context and the values built in it
// are not safe for concurrent evaluation.
type compiledSchema struct {
	ctx    *cue.Context
	schema cue.Value
	labels map[string]bool // the schema's top-level labels

	// plainJSONSchema says that the schema adds nothing to the JSON Schema
	// documents of the IR (tool inputs, agent outputs, eval schemas), so
	// that one written as plain data is decoded from its source.
	plainJSONSchema bool

	// deferred holds the kinds each #Deferred definition of the schema
	// lists, by definition name: kinds the schema accepts and that are not
	// built, which the check pass reports at their place.
	deferred map[string][]string

	// retained counts the source bytes loaded in ctx. CUE keeps every
	// file built in a context for the context's lifetime, so a context is
	// retired once it holds retainLimit bytes of source.
	retained int
}

// retainLimit bounds the source, in bytes, one cached context may have
// loaded before it is dropped, which bounds the memory a cached schema
// keeps alive: an evaluated file holds many times its size. A typical
// application file is a few KiB, so a context serves dozens of loads.
const retainLimit = 256 << 10

// freeSchemas holds compiled schemas that no load is using, so that the
// schema is compiled once per process rather than once per load. It is a
// channel rather than a sync.Pool because a load allocates enough to run
// several garbage collections, each of which would empty a pool.
var freeSchemas = make(chan *compiledSchema, 2)

func takeSchema() (*compiledSchema, error) {
	select {
	case sc := <-freeSchemas:
		return sc, nil
	default:
	}
	return compileSchema(aid.Schema())
}

// compileSchema compiles the schema src, as takeSchema does the embedded
// one.
func compileSchema(src string) (*compiledSchema, error) {
	ctx := cuecontext.New()
	schema := ctx.CompileString(src, cue.Filename(aid.SchemaFilename))
	if err := schema.Err(); err != nil {
		return nil, fmt.Errorf("compiling the embedded schema: %w", err)
	}
	it, err := schema.Fields(cue.All())
	if err != nil {
		return nil, fmt.Errorf("compiling the embedded schema: %w", err)
	}
	labels := map[string]bool{}
	for it.Next() {
		labels[it.Selector().String()] = true
	}
	deferred := map[string][]string{}
	for _, def := range deferredDefs {
		v := schema.LookupPath(cue.MakePath(cue.Def(def.name)))
		kinds := stringDisjuncts(v)
		if !v.Exists() || len(kinds) == 0 {
			return nil, fmt.Errorf("compiling the embedded schema: %s lists no kinds", def.name)
		}
		deferred[def.name] = kinds
	}
	return &compiledSchema{ctx: ctx, schema: schema, labels: labels, plainJSONSchema: plainJSONSchema(schema), deferred: deferred}, nil
}

// stringDisjuncts returns the string literals of a disjunction such as
// "a" | "b", or of one literal, in the schema's order.
func stringDisjuncts(v cue.Value) []string {
	if op, args := v.Expr(); op == cue.OrOp {
		var out []string
		for _, a := range args {
			out = append(out, stringDisjuncts(a)...)
		}
		return out
	}
	if s, err := v.String(); err == nil {
		return []string{s}
	}
	return nil
}

// plainJSONSchema reports whether every field of jsonFields is, in the
// schema, an open struct with no fields of its own.
func plainJSONSchema(schema cue.Value) bool {
	defs := map[string]string{"tools": "#Tool", "agents": "#Agent", "evals": "#Eval"}
	for section, field := range jsonFields {
		v := schema.LookupPath(cue.MakePath(cue.Def(defs[section]), cue.Str(field).Optional()))
		if !v.Exists() || v.IncompleteKind() != cue.StructKind || !v.Allows(cue.AnyString) {
			return false
		}
		it, err := v.Fields(cue.All())
		if err != nil || it.Next() {
			return false
		}
	}
	return true
}

// release returns sc for reuse after a load of n source bytes, unless its
// context holds enough already.
func (sc *compiledSchema) release(n int) {
	sc.retained += n
	if sc.retained >= retainLimit {
		return
	}
	select {
	case freeSchemas <- sc:
	default:
	}
}

// loader holds the state of one Load.
type loader struct {
	name  string
	dir   string
	kinds kindTable
	sc    *compiledSchema
	ctx   *cue.Context
	src   []byte
	tags  []string  // injection tags (Tags)
	app   cue.Value // the user's file unified with #App
	errs  Errors

	// literals are the JSON Schema documents written as plain data, by
	// section and entry (dataLiterals), when the file was built inside #App.
	literals map[[2]string]ast.Expr

	user     cue.Value // the user's file alone, once userValue compiled it
	userDone bool

	schema cue.Value       // the compiled schema, for its named constraints
	labels map[string]bool // the schema's top-level labels

	// cuePaths holds the paths CUE reported problems at.
	cuePaths map[string]bool

	// known caches knownFields by struct path.
	known map[string][]string

	// unknown holds the paths of fields CUE reported as not allowed, so
	// that the list of allowed fields leaves them out.
	unknown map[string]bool
}

func (l *loader) load(src []byte) (*Document, error) {
	valid, err := l.unify(src)
	if err != nil {
		return nil, err
	}
	return l.check(valid)
}

// unify builds the user's file unified with #App and validates the
// result. It reports whether the result is valid; the problems it found
// are in l.errs. A non-nil error means nothing further can be checked.
//
// The file is built as one expression, #App & {the file's declarations},
// so that CUE evaluates the user's values once, together with the schema.
// Compiling the file on its own and then unifying it with #App evaluates
// every value twice, which is most of the cost of a large file. The file
// alone is compiled only when there is a problem to report (userValue).
func (l *loader) unify(src []byte) (bool, error) {
	l.src = src
	f, err := l.parse()
	if tagErr := (*TagError)(nil); errors.As(err, &tagErr) {
		if tagErr.Tag != "" {
			return false, err // the caller's -t, not the file, is wrong
		}
		l.errs = append(l.errs, &Error{Pos: tagErr.Pos, Msg: tagErr.Msg})
		return false, l.errs
	}
	wrapped := err == nil && l.canWrap(f)
	if wrapped {
		if l.sc.plainJSONSchema {
			l.literals = dataLiterals(f)
		}
		l.app = l.ctx.BuildFile(wrapInApp(f), cue.Scope(l.schema))
		if l.app.Validate(cue.Concrete(true)) == nil {
			return true, nil
		}
	}
	// Something is wrong: compile the file alone, to report its own
	// errors in its own terms before those of the schema.
	user := l.userValue()
	if err := user.Err(); err != nil {
		l.addCUE(err)
		return false, sortErrors(l.errs)
	}
	if user.IncompleteKind() != cue.StructKind {
		l.errs = append(l.errs, &Error{Pos: Position{Filename: l.name, Line: 1, Column: 1}, Msg: "the IR must be a struct of fields such as name, version, models and agents"})
		return false, l.errs
	}
	if !wrapped {
		l.app = l.schema.LookupPath(cue.MakePath(cue.Def("#App"))).Unify(user)
	}
	if verr := l.app.Validate(cue.Concrete(true)); verr != nil {
		l.addCUE(verr)
		l.findIncomplete()
		return false, nil
	}
	return true, nil
}

// canWrap reports whether the parsed file can be built inside #App & {...}:
// it must not refer to any of the schema's own top-level names, which
// would otherwise resolve to the schema's instead of failing as they do in
// the file alone.
func (l *loader) canWrap(f *ast.File) bool {
	for _, id := range f.Unresolved {
		if l.labels[id.Name] {
			return false
		}
	}
	return true
}

// wrapInApp turns the file's declarations into #App & {declarations},
// keeping the package clause, imports and file attributes at the top. The
// identifiers are resolved again when the file is built.
func wrapInApp(f *ast.File) *ast.File {
	var head, body []ast.Decl
	for _, d := range f.Decls {
		switch d.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.Attribute:
			head = append(head, d)
		default:
			body = append(body, d)
		}
	}
	app := &ast.BinaryExpr{X: ast.NewIdent("#App"), Op: token.AND, Y: &ast.StructLit{Elts: body}}
	return &ast.File{Filename: f.Filename, Decls: append(head, &ast.EmbedDecl{Expr: app})}
}

// userValue returns the user's file compiled on its own: its positions are
// all in the file, and it says what the user wrote as opposed to what the
// schema added.
func (l *loader) userValue() cue.Value {
	if !l.userDone {
		if f, err := l.parse(); err == nil {
			l.user = l.ctx.BuildFile(f)
		} else {
			// CUE reports a syntax error in its own words and positions.
			l.user = l.ctx.CompileBytes(l.src, cue.Filename(l.name))
		}
		l.userDone = true
	}
	return l.user
}

// parse parses the file and injects its tags: a fresh AST on every call,
// since building a file resolves its identifiers in place.
func (l *loader) parse() (*ast.File, error) {
	f, err := parser.ParseFile(l.name, l.src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	if err := injectTags(f, l.src, l.tags, l.tagAllowed); err != nil {
		return nil, err
	}
	return f, nil
}

// check decodes the unified value and runs the semantic passes: ir's own
// work after CUE's. A value that failed validation is decoded leniently,
// so the passes still report on the entries that are valid on their own:
// one round shows every problem.
func (l *loader) check(valid bool) (*Document, error) {
	var doc *Document
	if valid {
		var err error
		if doc, err = l.decode(); err != nil {
			return nil, err
		}
	} else {
		doc = l.decodePartial()
	}
	c := &checker{loader: l, doc: doc}
	for _, pass := range passes {
		pass.run(c)
	}
	if len(l.errs) > 0 {
		return nil, sortErrors(l.errs)
	}
	return doc, nil
}

// rawDocument is the decoding target: the IR's own shape, with maps where
// the IR has maps. Document is built from it with sorted slices.
type rawDocument struct {
	Name        string                `json:"name"`
	Version     string                `json:"version"`
	Description string                `json:"description"`
	Providers   map[string]*Provider  `json:"providers"`
	Models      map[string]*Model     `json:"models"`
	Aliases     map[string]string     `json:"aliases"`
	Budgets     map[string]*Budget    `json:"budgets"`
	RateLimits  map[string]*RateLimit `json:"rateLimits"`
	Tools       map[string]*Tool      `json:"tools"`
	Agents      map[string]*Agent     `json:"agents"`
	Stores      map[string]*Store     `json:"stores"`
	Retrievers  map[string]*Retriever `json:"retrievers"`
	Evals       map[string]*Eval      `json:"evals"`
	Service     Service               `json:"service"`
	Approvals   *Approvals            `json:"approvals"`
	Keys        map[string]*Key       `json:"keys"`
	Guardrails  map[string]*Guardrail `json:"guardrails"`
}

func (l *loader) decode() (*Document, error) {
	var raw rawDocument
	if err := decodeValue(l.app, &raw, l.literals); err != nil {
		if _, ok := errors.AsType[*numberError](err); ok {
			return l.decodePartial(), nil // reports every such number
		}
		return nil, fmt.Errorf("decoding validated IR %s: %w", l.name, err)
	}
	doc := l.build(raw)
	doc.Resources = l.resources(false)
	return doc, nil
}

// resources decodes the entries of every resource kind's section, sorted
// by section and name, each as its block; leniently, for a value that
// failed the schema, keeping what is valid in each block.
func (l *loader) resources(lenient bool) []*Resource {
	var out []*Resource
	for _, section := range l.kinds.resources {
		it, err := l.app.LookupPath(cue.MakePath(cue.Str(section))).Fields()
		if err != nil {
			continue
		}
		var entries []*Resource
		for it.Next() {
			b, err := it.Value().MarshalJSON()
			if err != nil {
				if !lenient {
					continue // a valid document marshals; CUE reports it
				}
				b = lenientJSON(it.Value())
			}
			entries = append(entries, &Resource{Kind: section, Name: it.Selector().Unquoted(), Config: Config(b)})
		}
		slices.SortFunc(entries, func(a, b *Resource) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, entries...)
	}
	return out
}

// decodePartial decodes a document that failed schema validation,
// leniently: whatever decodes is kept, so the semantic passes still report
// on it, and errAt drops their errors on paths CUE already reported.
func (l *loader) decodePartial() *Document {
	var raw rawDocument
	for _, ne := range decodeLenient(l.app, &raw) {
		l.numberErr(ne)
	}
	doc := l.build(raw)
	doc.Resources = l.resources(true)
	return doc
}

// build turns the decoded sections into a Document of sorted slices.
func (l *loader) build(raw rawDocument) *Document {
	doc := &Document{
		Name:        raw.Name,
		Version:     raw.Version,
		Description: raw.Description,
		Service:     raw.Service,
		Approvals:   raw.Approvals,
		Path:        l.name,
		Dir:         l.dir,
	}
	doc.Providers = sorted(raw.Providers, func(v *Provider, k string) { v.Name = k })
	doc.Models = sorted(raw.Models, func(v *Model, k string) { v.ID = k; slices.Sort(v.Capabilities) })
	doc.Budgets = sorted(raw.Budgets, func(v *Budget, k string) { v.Name = k })
	doc.RateLimits = sorted(raw.RateLimits, func(v *RateLimit, k string) { v.Name = k })
	doc.Tools = sorted(raw.Tools, initTool)
	doc.Agents = sorted(raw.Agents, func(v *Agent, k string) { v.Name = k })
	doc.Stores = sorted(raw.Stores, func(v *Store, k string) { v.Name = k })
	doc.Retrievers = sorted(raw.Retrievers, func(v *Retriever, k string) { v.Name = k })
	doc.Evals = sorted(raw.Evals, func(v *Eval, k string) { v.Name = k })
	doc.Keys = sorted(raw.Keys, func(v *Key, k string) { v.Name = k })
	doc.Guardrails = sorted(raw.Guardrails, func(v *Guardrail, k string) { v.Name = k })
	aliases := make(map[string]*Alias, len(raw.Aliases))
	for k, m := range raw.Aliases {
		aliases[k] = &Alias{Name: k, Model: m}
	}
	doc.Aliases = sorted(aliases, func(*Alias, string) {})
	return doc
}

// noArguments is the input schema of a tool that declares none: an object
// without properties.
const noArguments = `{"type":"object","properties":{}}`

func initTool(t *Tool, name string) {
	t.Name = name
	if len(t.Input) == 0 {
		t.Input = []byte(noArguments)
	}
}

func sorted[T any](m map[string]*T, setKey func(*T, string)) []*T {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*T, len(keys))
	for i, k := range keys {
		setKey(m[k], k)
		out[i] = m[k]
	}
	return out
}

// pathOf builds a CUE path from field names (string) and list indices
// (int).
func pathOf(parts ...any) cue.Path {
	sels := make([]cue.Selector, len(parts))
	for i, p := range parts {
		switch p := p.(type) {
		case string:
			sels[i] = cue.Str(p)
		case int:
			sels[i] = cue.Index(p)
		default:
			panic(fmt.Sprintf("pathOf: unsupported part %T", p))
		}
	}
	return cue.MakePath(sels...)
}

// posOf returns the position where the user wrote the value at path, or,
// when the user did not write it (a default), where they wrote its nearest
// written ancestor.
func (l *loader) posOf(p cue.Path) Position {
	sels := p.Selectors()
	for n := len(sels); n > 0; n-- {
		v := l.userValue().LookupPath(cue.MakePath(sels[:n]...))
		if v.Exists() {
			p := v.Pos()
			if f, ok := v.Source().(*ast.Field); ok && n == len(sels) && f.Value != nil {
				// Point at the offending value, not at its label; a struct
				// is pointed at by its label, which names it.
				if _, isStruct := f.Value.(*ast.StructLit); isStruct {
					p = f.Label.Pos()
				} else {
					p = f.Value.Pos()
				}
			}
			if pos := convertPos(p); pos.Line > 0 && pos.Filename == l.name {
				return pos
			}
		}
	}
	return Position{Filename: l.name, Line: 1, Column: 1}
}

func convertPos(p token.Pos) Position {
	if !p.IsValid() {
		return Position{}
	}
	pp := p.Position()
	return Position{Filename: pp.Filename, Line: pp.Line, Column: pp.Column}
}

// IsInvalid reports whether err says the IR is invalid (as opposed to
// unreadable), and returns the problems.
func IsInvalid(err error) (Errors, bool) {
	var es Errors
	if errors.As(err, &es) {
		return es, true
	}
	return nil, false
}
