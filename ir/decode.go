package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueliteral "cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// decodeValue decodes a validated, concrete CUE value into the Go value
// pointed to by dst, following the json tags of the IR types.
//
// It does what cue.Value.Decode does for the shapes the IR uses, but looks
// struct fields up by name instead of iterating them: iterating a struct
// orders its fields topologically, which dominates decoding time on large
// files. Only maps (the IR's sections) are iterated.
func decodeValue(v cue.Value, dst any, literals map[[2]string]ast.Expr) error {
	d := &decoder{literals: literals}
	return d.decodeInto(v, reflect.ValueOf(dst).Elem())
}

// decodeLenient decodes what it can of a value that failed validation: a
// field or list element that does not decode is left at its zero value.
// The loader uses it so the semantic passes still see the rest of an entry;
// problems on the skipped paths are CUE's to report, and the loader drops
// semantic errors on them. It returns the numbers that the schema accepts
// but Go cannot hold, each to be reported at its place.
func decodeLenient(v cue.Value, dst any) []*numberError {
	d := &decoder{lenient: true}
	_ = d.decodeInto(v, reflect.ValueOf(dst).Elem())
	return d.numbers
}

// decoder holds the state of one decoding: the path to the value being
// decoded, the JSON Schema literals (dataLiterals) that need no CUE, and the
// numbers Go cannot hold (collected in lenient mode).
type decoder struct {
	lenient  bool
	literals map[[2]string]ast.Expr
	path     []string
	numbers  []*numberError
}

// numberError is a number the schema accepts, because CUE compares exact
// decimals, but a 64-bit Go value cannot hold: 1e-400 as a float64 is 0,
// and 1e30 is no int64. It is the user's to fix, at the number.
type numberError struct {
	path cue.Path
	msg  string
}

func (e *numberError) Error() string { return e.msg }

// number reports a number conversion that failed because the value is out
// of the Go type's range; any other error is returned as is.
func (d *decoder) number(v cue.Value, err error, float bool) error {
	if !errors.Is(err, cue.ErrBelow) && !errors.Is(err, cue.ErrAbove) {
		return err
	}
	msg := fmt.Sprintf("invalid value %v: too large for the 64-bit integer the runtime holds it in", v)
	if float {
		if f, _ := v.Float64(); f == 0 {
			msg = fmt.Sprintf("invalid value %v: too close to 0 for a 64-bit float, which would hold it as 0; write a larger number, or 0 where 0 is allowed", v)
		} else {
			msg = fmt.Sprintf("invalid value %v: too large for the 64-bit float the runtime holds it in", v)
		}
	}
	ne := &numberError{path: v.Path(), msg: msg}
	d.numbers = append(d.numbers, ne)
	return ne
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	configType     = reflect.TypeFor[Config]()
	durationType   = reflect.TypeFor[Duration]()
)

func (d *decoder) decodeInto(v cue.Value, rv reflect.Value) error {
	lenient := d.lenient
	switch rv.Type() {
	case rawMessageType:
		if p := d.path; len(p) == 3 && jsonFields[p[0]] == p[2] {
			if lit, ok := d.literals[[2]string{p[0], p[1]}]; ok {
				rv.SetBytes(jsonOfLiteral(nil, lit))
				return nil
			}
		}
	}
	switch rv.Kind() {
	case reflect.String, reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		// The scalar accessors resolve a default themselves.
	default:
		if def, ok := v.Default(); ok {
			v = def
		}
	}
	switch rv.Type() {
	case rawMessageType, configType:
		b, err := v.MarshalJSON()
		if err != nil && lenient && rv.Type() == configType {
			// A block that failed the schema: keep the fields that are
			// valid, so that the checks of the kind's files still run.
			b, err = lenientJSON(v), nil
		}
		if err != nil {
			return err
		}
		rv.SetBytes(b)
		return nil
	case durationType:
		s, err := v.String()
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		rv.SetInt(int64(d))
		return nil
	}
	switch rv.Kind() {
	case reflect.String:
		s, err := v.String()
		if err != nil {
			return err
		}
		rv.SetString(s)
	case reflect.Int, reflect.Int64:
		n, err := v.Int64()
		if err != nil {
			return d.number(v, err, false)
		}
		rv.SetInt(n)
	case reflect.Float64:
		f, err := v.Float64()
		if err != nil {
			return d.number(v, err, true)
		}
		rv.SetFloat(f)
	case reflect.Bool:
		b, err := v.Bool()
		if err != nil {
			return err
		}
		rv.SetBool(b)
	case reflect.Pointer:
		p := reflect.New(rv.Type().Elem())
		if err := d.decodeInto(v, p.Elem()); err != nil {
			return err
		}
		rv.Set(p)
	case reflect.Slice:
		it, err := v.List()
		if err != nil {
			return err
		}
		s := reflect.MakeSlice(rv.Type(), 0, 4)
		for it.Next() {
			e := reflect.New(rv.Type().Elem()).Elem()
			if err := d.decodeInto(it.Value(), e); err != nil && !lenient {
				return err
			}
			s = reflect.Append(s, e)
		}
		rv.Set(s)
	case reflect.Map:
		it, err := v.Fields()
		if err != nil {
			return err
		}
		m := reflect.MakeMap(rv.Type())
		for it.Next() {
			e := reflect.New(rv.Type().Elem()).Elem()
			key := it.Selector().Unquoted()
			d.path = append(d.path, key)
			err := d.decodeInto(it.Value(), e)
			d.path = d.path[:len(d.path)-1]
			if err != nil && !lenient {
				return fmt.Errorf("%s: %w", key, err)
			}
			m.SetMapIndex(reflect.ValueOf(key), e)
		}
		rv.Set(m)
	case reflect.Struct:
		for _, f := range structFields(rv.Type()) {
			fv := v
			if !f.whole {
				fv = v.LookupPath(f.path)
			}
			if !fv.Exists() {
				continue
			}
			d.path = append(d.path, f.name)
			err := d.decodeInto(fv, rv.Field(f.index))
			d.path = d.path[:len(d.path)-1]
			if err != nil {
				if lenient {
					rv.Field(f.index).SetZero()
					continue
				}
				return fmt.Errorf("%s: %w", f.name, err)
			}
		}
	default:
		return fmt.Errorf("cannot decode into %s", rv.Type())
	}
	return nil
}

// lenientJSON returns the JSON of what is valid in v: v itself when it
// marshals, else, for a struct, the fields that do (recursively), and null
// for anything else.
func lenientJSON(v cue.Value) json.RawMessage {
	if b, err := v.MarshalJSON(); err == nil {
		return b
	}
	it, err := v.Fields()
	if err != nil {
		return json.RawMessage("null")
	}
	fields := map[string]json.RawMessage{}
	for it.Next() {
		if b := lenientJSON(it.Value()); string(b) != "null" {
			fields[it.Selector().Unquoted()] = b
		}
	}
	b, _ := json.Marshal(fields) // raw messages that marshal
	return b
}

// numberErr reports a number Go cannot hold at the number, unless CUE
// already reported a problem there, and keeps the semantic checks off it:
// the decoded zero in its place is not what the user wrote.
func (l *loader) numberErr(ne *numberError) {
	sels := ne.path.Selectors()
	if len(sels) > 0 && sels[0].IsDefinition() {
		sels = sels[1:] // #App
	}
	p := cue.MakePath(sels...)
	l.errAt(p, "%s", ne.msg)
	l.cuePaths[p.String()] = true
}

// structField is a field of a Go struct that decodeInto fills: its index,
// its JSON name, and the CUE path of that name; or, for a Config field
// (whole), the index of a field that holds the struct's whole value.
type structField struct {
	index int
	name  string
	path  cue.Path
	whole bool
}

// fieldCache holds the structFields of each struct type decoded so far:
// making a path interns its label, which is worth doing once per type
// rather than once per entry of a large file.
var fieldCache sync.Map // reflect.Type → []structField

// keyFields are, by type, the fields that build sets from an entry's key
// in its section, overwriting whatever was decoded: looking them up would
// be wasted, and a lookup of an absent field costs an evaluation context
// and an error value.
var keyFields = map[reflect.Type]string{
	reflect.TypeFor[Provider]():  "name",
	reflect.TypeFor[Model]():     "id",
	reflect.TypeFor[Budget]():    "name",
	reflect.TypeFor[RateLimit](): "name",
	reflect.TypeFor[Tool]():      "name",
	reflect.TypeFor[Agent]():     "name",
	reflect.TypeFor[Store]():     "name",
	reflect.TypeFor[Retriever](): "name",
	reflect.TypeFor[Eval]():      "name",
}

func structFields(t reflect.Type) []structField {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.([]structField)
	}
	var fs []structField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == configType {
			fs = append(fs, structField{index: i, name: f.Name, whole: true})
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() || keyFields[t] == name {
			continue
		}
		fs = append(fs, structField{index: i, name: name, path: cue.MakePath(cue.Str(name))})
	}
	fieldCache.Store(t, fs)
	return fs
}

// jsonFields are the IR fields that hold JSON Schema documents, by section:
// decoding them is a MarshalJSON of their value, which orders the fields of
// every nested struct topologically and dominates the decoding of a file
// with many tools.
var jsonFields = map[string]string{"tools": "input", "agents": "output", "evals": "schema"}

// dataLiterals finds, for each entry of the sections in jsonFields, the
// JSON Schema written as one plain data literal in f: the only declaration
// of the field, with nothing that could add to it (a comprehension, an
// embedding, a pattern or a dynamic label on the way to it). It returns
// them by section and entry name. The JSON of such a literal is its text
// in JSON syntax, in source order, which is the order CUE gives its fields;
// jsonOfLiteral writes it without asking CUE. Anything else is left to
// MarshalJSON.
func dataLiterals(f *ast.File) map[[2]string]ast.Expr {
	type entry struct {
		lit   ast.Expr
		count int
		open  bool // something other than plain fields may add to it
	}
	entries := map[[2]string]*entry{}
	get := func(k [2]string) *entry {
		e := entries[k]
		if e == nil {
			e = &entry{}
			entries[k] = e
		}
		return e
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.Package, *ast.ImportDecl, *ast.Attribute, *ast.CommentGroup, *ast.LetClause:
			continue
		case *ast.Field:
			section, ok := staticLabel(d)
			if !ok {
				if id, isIdent := d.Label.(*ast.Ident); isIdent && d.Alias == nil && !strings.HasPrefix(id.Name, "#") && !strings.HasPrefix(id.Name, "_") {
					return nil // a constraint marker or attribute on a regular field
				}
				if _, isIdent := d.Label.(*ast.Ident); isIdent {
					continue // a definition or hidden field adds to no section
				}
				return nil // a dynamic or pattern label may add to any section
			}
			field, wanted := jsonFields[section]
			if !wanted {
				continue
			}
			st, isStruct := d.Value.(*ast.StructLit)
			if !isStruct {
				return nil
			}
			for _, el := range st.Elts {
				ef, isField := el.(*ast.Field)
				if !isField {
					if _, isComment := el.(*ast.CommentGroup); isComment {
						continue
					}
					return nil // an embedding or comprehension may add entries
				}
				name, ok := staticLabel(ef)
				if !ok {
					return nil
				}
				e := get([2]string{section, name})
				body, isStruct := ef.Value.(*ast.StructLit)
				if !isStruct {
					e.open = true
					continue
				}
				for _, bel := range body.Elts {
					bf, isField := bel.(*ast.Field)
					if !isField {
						if _, isComment := bel.(*ast.CommentGroup); !isComment {
							e.open = true
						}
						continue
					}
					label, ok := staticLabel(bf)
					if !ok {
						e.open = true
						continue
					}
					if label == field {
						e.count++
						e.lit = bf.Value
					}
				}
			}
		default:
			return nil // an embedding or comprehension may add anything
		}
	}
	out := map[[2]string]ast.Expr{}
	for k, e := range entries {
		if !e.open && e.count == 1 && pureData(e.lit) {
			out[k] = e.lit
		}
	}
	return out
}

// staticLabel returns the name of a regular field with a label fixed in
// the source: not a definition, hidden field, pattern or dynamic label,
// without alias, attribute or constraint marker.
func staticLabel(f *ast.Field) (string, bool) {
	if f.Alias != nil || f.Constraint != token.ILLEGAL || len(f.Attrs) > 0 {
		return "", false
	}
	switch l := f.Label.(type) {
	case *ast.Ident:
		if strings.HasPrefix(l.Name, "#") || strings.HasPrefix(l.Name, "_") {
			return "", false
		}
		return l.Name, true
	case *ast.BasicLit:
		if l.Kind != token.STRING || !strings.HasPrefix(l.Value, `"`) {
			return "", false
		}
		s, err := cueliteral.Unquote(l.Value)
		return s, err == nil
	}
	return "", false
}

var (
	plainInt     = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	plainDecimal = regexp.MustCompile(`^(0|[1-9][0-9]*)\.[0-9]{1,6}$`)
)

// pureData reports whether x is JSON written in CUE: structs of regular
// fields with distinct labels, lists without ellipsis, double-quoted
// strings, and numbers that CUE prints as written.
func pureData(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.StructLit:
		seen := make(map[string]bool, len(x.Elts))
		for _, el := range x.Elts {
			f, ok := el.(*ast.Field)
			if !ok {
				if _, isComment := el.(*ast.CommentGroup); isComment {
					continue
				}
				return false
			}
			name, ok := staticLabel(f)
			if !ok || seen[name] || !pureData(f.Value) {
				return false
			}
			seen[name] = true
		}
		return true
	case *ast.ListLit:
		for _, el := range x.Elts {
			if !pureData(el) {
				return false
			}
		}
		return true
	case *ast.UnaryExpr:
		lit, ok := x.X.(*ast.BasicLit)
		return ok && x.Op == token.SUB && number(lit) && strings.Trim(lit.Value, "0.") != ""
	case *ast.BasicLit:
		switch x.Kind {
		case token.TRUE, token.FALSE, token.NULL:
			return true
		case token.STRING:
			if !strings.HasPrefix(x.Value, `"`) {
				return false // bytes, or a raw string: leave it to CUE
			}
			_, err := cueliteral.Unquote(x.Value)
			return err == nil
		}
		return number(x)
	}
	return false
}

func number(l *ast.BasicLit) bool {
	return l.Kind == token.INT && plainInt.MatchString(l.Value) || l.Kind == token.FLOAT && plainDecimal.MatchString(l.Value)
}

// jsonOfLiteral writes x, which pureData accepted, as compact JSON, as
// cue.Value.MarshalJSON would write its value.
func jsonOfLiteral(b []byte, x ast.Expr) []byte {
	switch x := x.(type) {
	case *ast.StructLit:
		b = append(b, '{')
		first := true
		for _, el := range x.Elts {
			f, ok := el.(*ast.Field)
			if !ok {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			name, _ := staticLabel(f)
			b = appendJSONString(b, name)
			b = append(b, ':')
			b = jsonOfLiteral(b, f.Value)
		}
		return append(b, '}')
	case *ast.ListLit:
		b = append(b, '[')
		for i, el := range x.Elts {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonOfLiteral(b, el)
		}
		return append(b, ']')
	case *ast.UnaryExpr:
		return append(append(b, '-'), x.X.(*ast.BasicLit).Value...)
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			s, _ := cueliteral.Unquote(x.Value)
			return appendJSONString(b, s)
		}
		return append(b, x.Value...)
	}
	panic(fmt.Sprintf("jsonOfLiteral: %T is not pure data", x))
}

// appendJSONString appends s as a JSON string the way CUE does: with
// encoding/json's escaping, except that HTML characters are kept.
func appendJSONString(b []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		return append(append(append(b, '"'), s...), '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}
