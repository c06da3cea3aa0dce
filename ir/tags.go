package ir

import (
	"bytes"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/parser"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/token"
)

// Option changes how Load and LoadBytes read an app file.
type Option func(*options)

type options struct {
	tags          []string
	casesFromRuns bool
}

// CasesFromRuns says that every eval's cases will be sampled from recorded
// runs (aidgen eval --from-runs), so that a dataset file an eval names need
// not exist; every other check is kept.
func CasesFromRuns() Option {
	return func(o *options) { o.casesFromRuns = true }
}

// Tags sets CUE injection tags, as `cue -t` does, so that one app file
// serves several environments. A field marked @tag(NAME) takes the value of
// "NAME=VALUE", unified with what the file says, so the file keeps the
// allowed values and the default:
//
//	_env: *"dev" | "prod" @tag(env)
//
// loads as "dev" with no tag and as "prod" with Tags("env=prod"). The
// attribute may give the value's type, @tag(NAME,type=int|number|bool|string)
// (string by default), and shorthands, @tag(env,short=dev|prod), so that the
// bare tag "prod" means "env=prod". A tag no field declares, and a value
// that does not parse as the field's type, fail the load with a *TagError.
func Tags(tags ...string) Option {
	return func(o *options) { o.tags = append(o.tags, tags...) }
}

// TagError is an injection tag the app file cannot take: a name no @tag
// attribute declares, a value that is not of the declared type, or an
// attribute that is malformed or placed where CUE does not allow one. It is
// the caller's mistake rather than the file's when Tag is set, so the CLI
// reports it as a usage error.
type TagError struct {
	// Tag is the -t argument at fault; empty for a malformed attribute.
	Tag string
	// Pos is the attribute at fault, when there is one.
	Pos Position
	// Msg says what is wrong.
	Msg string
}

func (e *TagError) Error() string {
	if e.Pos.Line > 0 {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Msg
}

// tagAttr is one @tag attribute on a field.
type tagAttr struct {
	key    string
	kind   token.Token // token.STRING, token.INT, token.FLOAT or token.TRUE (bool)
	shorts []string
	field  *ast.Field
	pos    token.Pos
}

// injectTags applies tags to the parsed file f: every field whose @tag
// names a given tag has its value unified with the tag's value.
//
// When check is set, it is asked whether the field allows the value before
// it is injected (see loader.tagAllowed), so that a value the file does not
// allow is reported as the tag's mistake, in the tag's words.
func injectTags(f *ast.File, src []byte, tags []string, check func(field, value ast.Expr) error) error {
	if len(tags) == 0 && !bytes.Contains(src, []byte("@tag(")) {
		return nil // nothing to inject, and no attribute to check
	}
	attrs, err := findTagAttrs(f)
	if err != nil {
		return err
	}
	replaced := map[ast.Node]ast.Node{}
	for _, arg := range tags {
		name, value, hasValue := strings.Cut(arg, "=")
		found := false
		for _, a := range attrs {
			switch {
			case hasValue && a.key == name:
			case !hasValue && slices.Contains(a.shorts, name):
				value = name
			default:
				continue
			}
			found = true
			x, err := tagValue(a, value)
			if err != nil {
				return &TagError{Tag: arg, Pos: convertPos(a.pos), Msg: fmt.Sprintf("-t %s: %v", arg, err)}
			}
			if check != nil {
				if err := check(a.field.Value, x); err != nil {
					return &TagError{Tag: arg, Pos: convertPos(a.field.Value.Pos()), Msg: fmt.Sprintf("-t %s: %v", arg, err)}
				}
			}
			injected := ast.NewBinExpr(token.AND, a.field.Value, x)
			replaced[a.field.Value] = injected
			a.field.Value = injected
		}
		if !found {
			return &TagError{Tag: arg, Msg: fmt.Sprintf("-t %s: %s", arg, missingTag(name, hasValue, attrs))}
		}
	}
	if len(replaced) > 0 {
		// The parser resolved every reference to a field to the field's
		// value: point them at the injected one, as cue/load does.
		ast.Walk(f, nil, func(n ast.Node) {
			if id, ok := n.(*ast.Ident); ok {
				for v, ok := replaced[id.Node]; ok; v, ok = replaced[v] {
					id.Node = v // the last of a field's injections
				}
			}
		})
	}
	return nil
}

// missingTag says that no attribute declares name, and which do exist.
func missingTag(name string, hasValue bool, attrs []tagAttr) string {
	var known []string
	for _, a := range attrs {
		if hasValue {
			known = append(known, a.key)
		} else {
			known = append(known, a.shorts...)
		}
	}
	slices.Sort(known)
	known = slices.Compact(known)
	what := "no field of the app file is marked @tag(" + name + ")"
	if !hasValue {
		what = "no @tag attribute of the app file declares the shorthand " + strconv.Quote(name)
	}
	if len(known) == 0 {
		return what
	}
	if hasValue {
		return what + "; the file's tags are: " + strings.Join(known, ", ")
	}
	return what + "; its shorthands are: " + strings.Join(known, ", ")
}

// tagValue parses value as the attribute's type.
func tagValue(a tagAttr, value string) (ast.Expr, error) {
	switch a.kind {
	case token.INT:
		if _, err := strconv.ParseInt(value, 0, 64); err != nil {
			return nil, fmt.Errorf("@tag(%s) takes an int, and %q is not one", a.key, value)
		}
		return ast.NewLit(token.INT, value), nil
	case token.FLOAT:
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || f != f || f > 1e308 || f < -1e308 {
			return nil, fmt.Errorf("@tag(%s) takes a number, and %q is not one", a.key, value)
		}
		return ast.NewLit(token.FLOAT, strconv.FormatFloat(f, 'g', -1, 64)), nil
	case token.TRUE:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return nil, fmt.Errorf("@tag(%s) takes a bool (true or false), and %q is not one", a.key, value)
		}
		return ast.NewBool(b), nil
	}
	return ast.NewString(value), nil
}

// findTagAttrs returns the file's @tag attributes, refusing those CUE's own
// loader refuses: in a list, a comprehension or a pattern constraint.
func findTagAttrs(f *ast.File) ([]tagAttr, error) {
	var attrs []tagAttr
	var errs []error
	refuse := func(n ast.Node, where string) {
		ast.Walk(n, func(n ast.Node) bool {
			if fl, ok := n.(*ast.Field); ok {
				for _, a := range fl.Attrs {
					if k, _ := a.Split(); k == "tag" {
						errs = append(errs, &TagError{Pos: convertPos(a.Pos()), Msg: "@tag is not allowed " + where})
					}
				}
			}
			return true
		}, nil)
	}
	ast.Walk(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.ListLit:
			refuse(x, "within a list")
			return false
		case *ast.Comprehension:
			refuse(x, "within a comprehension")
			return false
		case *ast.Field:
			if _, _, err := ast.LabelName(x.Label); err != nil || x.Constraint != token.ILLEGAL {
				refuse(x, "on a pattern, optional or required field")
				return false
			}
			for _, a := range x.Attrs {
				k, body := a.Split()
				if k != "tag" {
					continue
				}
				t, err := parseTagAttr(body)
				if err != nil {
					errs = append(errs, &TagError{Pos: convertPos(a.Pos()), Msg: err.Error()})
					continue
				}
				t.field, t.pos = x, a.Pos()
				attrs = append(attrs, t)
			}
		}
		return true
	}, nil)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return attrs, nil
}

// parseTagAttr parses the body of @tag(NAME[,type=T][,short=a|b]).
func parseTagAttr(body string) (tagAttr, error) {
	parts := strings.Split(body, ",")
	t := tagAttr{key: strings.TrimSpace(parts[0]), kind: token.STRING}
	if !ast.IsValidIdent(t.key) || strings.Contains(t.key, "=") {
		return t, fmt.Errorf("@tag(%s): the tag's name must be an identifier", body)
	}
	for _, p := range parts[1:] {
		k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		switch k {
		case "type":
			switch v {
			case "string":
			case "int":
				t.kind = token.INT
			case "number":
				t.kind = token.FLOAT
			case "bool":
				t.kind = token.TRUE
			default:
				return t, fmt.Errorf("@tag(%s): type must be string, int, number or bool, not %q", body, v)
			}
		case "short":
			for s := range strings.SplitSeq(v, "|") {
				if !ast.IsValidIdent(s) {
					return t, fmt.Errorf("@tag(%s): shorthand %q is not an identifier", body, s)
				}
				t.shorts = append(t.shorts, s)
			}
		default:
			return t, fmt.Errorf("@tag(%s): unknown option %q; the options are type= and short=", body, k)
		}
	}
	return t, nil
}

// tagAllowed reports an error when the field's own expression, evaluated
// alone, does not allow value. An expression that refers to other fields
// cannot be evaluated alone; the load then reports any conflict itself.
func (l *loader) tagAllowed(field, value ast.Expr) error {
	b, err := format.Node(field)
	if err != nil {
		return nil
	}
	x, err := parser.ParseExpr("tag", b)
	if err != nil {
		return nil
	}
	alone := l.ctx.BuildExpr(x)
	if alone.Err() != nil || alone.Validate() != nil {
		return nil // not self-contained: a reference, an import
	}
	v, err := format.Node(value)
	if err != nil {
		return nil
	}
	if alone.Unify(l.ctx.BuildExpr(value)).Validate() != nil {
		return fmt.Errorf("the field allows %s, and %s is not one of them", b, v)
	}
	return nil
}
