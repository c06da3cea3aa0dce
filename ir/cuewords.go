package ir

// The wording of schema errors: CUE reports what did not unify in its own
// terms (conflicting values, incomplete values, a field not allowed); the
// loader turns the ones users meet most into messages that name the IR's
// field, what it accepts and what to change, at the value's position.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	cueerrors "cuelang.org/go/cue/errors"
)

// cueErr records a problem the schema found at path, and remembers the
// path so that errAt drops semantic errors on it or below it.
func (l *loader) cueErr(path []string, pos Position, msg string) {
	p := formatPath(path)
	l.cuePaths[p] = true
	l.errs = append(l.errs, &Error{Pos: pos, Path: p, Msg: msg})
}

// errAt records a problem with the value at path, unless CUE already
// reported a problem there or above it: a semantic check of a value that
// failed the schema would only repeat the error in other words.
func (l *loader) errAt(p cue.Path, format string, args ...any) {
	sels := p.Selectors()
	for n := len(sels); n > 0; n-- {
		if l.cuePaths[cue.MakePath(sels[:n]...).String()] {
			return
		}
	}
	l.errs = append(l.errs, &Error{Pos: l.posOf(p), Path: p.String(), Msg: fmt.Sprintf(format, args...)})
}

// cueErrWithin reports whether CUE reported a problem at p or inside it:
// a rule over several of its fields (kind.Info.OneOf) would misread a
// field the schema refused as missing.
func (l *loader) cueErrWithin(p cue.Path) bool {
	prefix := p.String()
	for q := range l.cuePaths {
		if q == prefix || strings.HasPrefix(q, prefix+".") || strings.HasPrefix(q, prefix+"[") {
			return true
		}
	}
	return false
}

// CUE message formats that addCUE rewrites. They are CUE's own format
// strings, matched exactly so that an unknown message passes through as is.
const (
	cueDisjunction = "%d errors in empty disjunction:"
	cueConflict    = "conflicting values %s and %s"
	cueIncomplete  = "incomplete value %v"
	cueNotAllowed  = "field not allowed"
	cueOutOfBound  = "invalid value %v (out of bound %s)"
	cueListLengths = "incompatible list lengths (%d and %d)"
	cueMismatch    = "conflicting values %s and %s (mismatched types %s and %s)"
	cueIntBounds   = "incompatible integer bounds %v and %v"
)

type cueProblem struct {
	path   []string
	format string
	args   []any
	pos    Position
}

// addCUE converts CUE's errors into positioned Errors. CUE reports a value
// that fails a disjunction (an enum, or a field with a default) once per
// branch; those are folded into one message that lists what is allowed.
func (l *loader) addCUE(err error) {
	var probs []cueProblem
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		path := unquoteLabels(e.Path())
		if len(path) > 0 && path[0] == "#App" {
			path = path[1:]
		}
		if format == cueNotAllowed {
			// CUE reports an unknown list field once per element; the
			// field is what is wrong.
			for len(path) > 1 {
				if _, ok := index(path[len(path)-1]); !ok {
					break
				}
				path = path[:len(path)-1]
			}
		}
		probs = append(probs, cueProblem{path: path, format: format, args: args, pos: l.pickPos(e, path)})
	}
	for _, p := range probs {
		if p.format == cueNotAllowed {
			l.unknown[strings.Join(p.path, "\x00")] = true
		}
	}
	groups := map[string][]cueProblem{}
	var order []string
	for _, p := range probs {
		k := strings.Join(p.path, "\x00")
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	kindBroken := map[string]bool{}
	for _, k := range order {
		if g := groups[k]; len(g[0].path) > 0 && g[0].path[len(g[0].path)-1] == "kind" {
			kindBroken[strings.Join(g[0].path[:len(g[0].path)-1], "\x00")] = true
		}
	}
	for _, k := range order {
		g := groups[k]
		path := g[0].path
		if g[0].format == cueNotAllowed && len(path) > 0 && kindBroken[strings.Join(path[:len(path)-1], "\x00")] {
			// The struct's kind is wrong, so the fields its kind would
			// allow are reported as not allowed; the kind error says it.
			continue
		}
		l.addGroup(path, g)
	}
}

func (l *loader) addGroup(path []string, g []cueProblem) {
	disjunction := false
	var conflicts, others []cueProblem
	var described []string // branches that are named constraints, in words
	for _, p := range g {
		switch {
		case p.format == cueDisjunction:
			disjunction = true
		case p.format == cueConflict && len(p.args) == 2 && literal(p.args[0]) && literal(p.args[1]):
			conflicts = append(conflicts, p)
		case p.format == cueOutOfBound && len(p.args) == 2 && l.describeConstraint(fmt.Sprint(p.args[1])) != "":
			// A branch such as #RankedMetricName beside an enum's literals.
			described = append(described, l.describeConstraint(fmt.Sprint(p.args[1])))
			others = append(others, p)
		default:
			others = append(others, p)
		}
	}
	// An enum whose literals stand beside a named constraint (the metric
	// names and #RankedMetricName) lists both. A single literal beside a
	// constraint is a default (*"DATABASE_URL" | #EnvVar): the constraint
	// alone says what is wanted.
	if len(described) > 0 && len(conflicts) < 2 {
		described = nil
	}
	switch {
	case disjunction && len(others) == len(described) && len(conflicts) > 0:
		// Every branch is a literal that differs from the user's value: an
		// enum. Say what the value is and what is allowed.
		got := l.userValue().LookupPath(stringsPath(path))
		gotStr := fmt.Sprint(got)
		var allowed []string
		for _, c := range conflicts {
			for _, a := range c.args {
				if s := fmt.Sprint(a); s != gotStr && !slices.Contains(allowed, s) {
					allowed = append(allowed, s)
				}
			}
		}
		slices.Sort(allowed)
		for _, d := range described {
			allowed = append(allowed, "or "+d)
		}
		msg := fmt.Sprintf("invalid value %s; allowed: %s", gotStr, strings.Join(allowed, ", "))
		l.cueErr(path, conflicts[0].pos, msg)
	default:
		if !disjunction {
			others = append(others, conflicts...)
		}
		for _, p := range others {
			l.cueErr(path, p.pos, l.message(path, p))
		}
	}
}

// message rewrites the CUE messages users meet most into ones that say
// what to change.
func (l *loader) message(path []string, p cueProblem) string {
	switch p.format {
	case cueIncomplete:
		return l.missing(path)
	case cueNotAllowed:
		if len(path) == 0 {
			return "field not allowed"
		}
		if len(path) == 2 {
			if words, ok := sectionKeys[path[0]]; ok {
				return fmt.Sprintf("invalid %s %q: want %s", words[0], path[1], words[1])
			}
		}
		field := path[len(path)-1]
		known := l.knownFields(path[:len(path)-1])
		msg := fmt.Sprintf("unknown field %q", field)
		if s := suggest(field, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		if len(known) > 0 {
			msg += "; allowed fields: " + strings.Join(known, ", ")
		}
		return msg
	}
	if p.format == cueListLengths && len(p.args) == 2 {
		if n, err := l.userValue().LookupPath(stringsPath(path)).Len().Int64(); err == nil {
			want := fmt.Sprint(p.args[1])
			if fmt.Sprint(p.args[1]) == strconv.FormatInt(n, 10) {
				want = fmt.Sprint(p.args[0])
			}
			return fmt.Sprintf("the list has %d entries; it needs at least %s", n, want)
		}
	}
	if p.format == cueOutOfBound && len(p.args) == 2 {
		if fmt.Sprint(p.args[1]) == `!=""` {
			return "must not be empty"
		}
		if want := l.describeConstraint(fmt.Sprint(p.args[1])); want != "" {
			return fmt.Sprintf("invalid value %v: want %s", p.args[0], want)
		}
		if want := boundWords(fmt.Sprint(p.args[1])); want != "" {
			return fmt.Sprintf("invalid value %v: want a number %s%s", p.args[0], want, budgetLimitHint(path))
		}
	}
	if p.format == cueIntBounds && len(p.args) == 2 {
		// An integer where no integer fits the bounds (maxRegression: 1
		// against >0 & <1): CUE names the bounds, not the value.
		lo, hi := boundWords(fmt.Sprint(p.args[0])), boundWords(fmt.Sprint(p.args[1]))
		if got := l.user.LookupPath(stringsPath(path)); got.IsConcrete() && lo != "" && hi != "" {
			return fmt.Sprintf("invalid value %v: want a number %s and %s", got, lo, hi)
		}
	}
	if p.format == cueMismatch && len(p.args) == 4 {
		got := l.userValue().LookupPath(stringsPath(path))
		if got.Exists() {
			gotStr := fmt.Sprint(got)
			want, wantType := p.args[0], p.args[2]
			if fmt.Sprint(want) == gotStr {
				want, wantType = p.args[1], p.args[3]
			}
			msg := fmt.Sprintf("invalid value %s: want %v", gotStr, wantType)
			if d := l.describeConstraint(fmt.Sprint(want)); d != "" {
				msg += ", " + d
			}
			return msg
		}
	}
	return fmt.Sprintf(p.format, p.args...)
}

// sectionKeys describes the keys of the IR's map sections, for a key that
// does not match its pattern (CUE reports it as a field not allowed).
var sectionKeys = map[string][2]string{
	"providers":  {"provider name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"models":     {"model id", "a model id: letters, digits and . _ : / @ -"},
	"aliases":    {"alias", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"budgets":    {"budget name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"rateLimits": {"rate limit name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"tools":      {"tool name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"agents":     {"agent name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"stores":     {"store name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"retrievers": {"retriever name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	"evals":      {"eval name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
}

// namedConstraints are the schema's named string constraints and what they
// mean in words; describeConstraint looks a printed constraint up here.
var namedConstraints = []struct{ def, words string }{
	{"#Name", "a name: lower-case letters, digits, '_' and '-', starting with a letter"},
	{"#ModelID", "a model id: letters, digits and . _ : / @ -"},
	{"#SemVer", "a semantic version such as \"0.1.0\""},
	{"#EnvVar", "an environment variable name such as \"OPENAI_API_KEY\""},
	{"#Duration", "a duration such as \"30s\" or \"250ms\""},
	{"#URL", "an http or https URL such as \"https://api.openai.com/v1\""},
	{"#Address", "a listen address such as \"127.0.0.1:8080\" or \":8080\""},
	{"#TableName", "a table name: lower-case letters, digits and '_', not starting with a digit"},
	{"#RankedMetricName", "a ranked retrieval metric with its cutoff: recall@K, mrr@K or ndcg@K, such as \"recall@4\""},
}

func (l *loader) describeConstraint(printed string) string {
	for _, c := range namedConstraints {
		if fmt.Sprint(l.schema.LookupPath(cue.MakePath(cue.Def(c.def)))) == printed {
			return c.words
		}
	}
	return ""
}

// missing describes a required field the user did not set, quoting the
// schema's documentation of the field so the message says what it is for.
func (l *loader) missing(path []string) string {
	if len(path) == 0 {
		return "the IR is incomplete"
	}
	field := path[len(path)-1]
	if l.userValue().LookupPath(stringsPath(path)).Exists() {
		return fmt.Sprintf("%s must be a concrete value, not a type or constraint", field)
	}
	msg := fmt.Sprintf("missing required field %q", field)
	if doc := l.fieldDoc(path); doc != "" {
		msg += ": " + doc
	}
	return msg
}

// fieldDoc returns the first sentence of the schema's doc comment on the
// field at path.
func (l *loader) fieldDoc(path []string) string {
	v := l.app.LookupPath(stringsPath(path))
	for _, cg := range v.Doc() {
		text := strings.Join(strings.Fields(cg.Text()), " ")
		if i := strings.Index(text, ". "); i >= 0 {
			text = text[:i+1]
		}
		if text != "" {
			return text
		}
	}
	return ""
}

// knownFields lists the fields the schema allows in the struct at path.
// It is cached per path: a file with many unknown fields in one struct
// would otherwise list that struct's fields once per error.
func (l *loader) knownFields(path []string) []string {
	key := strings.Join(path, "\x00")
	if out, ok := l.known[key]; ok {
		return out
	}
	out := l.listFields(path)
	l.known[key] = out
	return out
}

func (l *loader) listFields(path []string) []string {
	v := l.app.LookupPath(stringsPath(path))
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var out []string
	for it.Next() {
		if sel := it.Selector(); sel.IsString() && !l.unknown[strings.Join(append(slices.Clip(path), sel.Unquoted()), "\x00")] {
			out = append(out, sel.Unquoted())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// pickPos chooses, among the positions CUE gives for an error, the one in
// the user's file; when there is none (a required field the user left
// out), it uses where the user wrote the enclosing value.
func (l *loader) pickPos(e cueerrors.Error, path []string) Position {
	for _, p := range append(e.InputPositions(), e.Position()) {
		if pos := convertPos(p); pos.Line > 0 && pos.Filename == l.name {
			return pos
		}
	}
	return l.posOf(stringsPath(path))
}

// findIncomplete reports required fields that are missing. CUE only
// reports incompleteness once everything else is consistent; walking the
// value lets a user see both kinds of problem in one round.
func (l *loader) findIncomplete() {
	var walk func(v cue.Value, path []string)
	walk = func(v cue.Value, path []string) {
		if d, ok := v.Default(); ok {
			v = d
		}
		kind := v.IncompleteKind()
		if kind == cue.StructKind || kind == cue.BottomKind {
			// A struct with an error inside it is bottom, but its other
			// fields are still there to walk.
			if it, err := v.Fields(); err == nil {
				for it.Next() {
					if sel := it.Selector(); sel.IsString() {
						walk(it.Value(), append(slices.Clip(path), sel.Unquoted()))
					}
				}
				return
			}
		}
		if kind == cue.ListKind {
			if it, err := v.List(); err == nil {
				for i := 0; it.Next(); i++ {
					walk(it.Value(), append(slices.Clip(path), strconv.Itoa(i)))
				}
			}
			return
		}
		if kind != cue.BottomKind && v.Err() == nil && !v.IsConcrete() {
			l.cueErr(path, l.posOf(stringsPath(path)), l.missing(path))
		}
	}
	walk(l.app, nil)
}

// literal reports whether a CUE error argument prints as a concrete scalar
// (a quoted string, a number, a boolean), as the branches of an enum do.
// CUE's arguments are internal formatter values, so their printed form is
// what can be inspected.
func literal(a any) bool {
	s := fmt.Sprint(a)
	switch {
	case s == "true" || s == "false" || s == "null":
		return true
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"':
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// stringsPath converts a CUE error path back into a cue.Path. List indices
// come as decimal strings; IR keys never are (names start with a letter).
func stringsPath(path []string) cue.Path {
	sels := make([]cue.Selector, len(path))
	for i, s := range path {
		if n, ok := index(s); ok {
			sels[i] = cue.Index(n)
		} else {
			sels[i] = cue.Str(s)
		}
	}
	return cue.MakePath(sels...)
}

// unquoteLabels turns the labels of a CUE error path, which are quoted
// when they are not identifiers ("\"gpt-4o\""), back into plain strings.
func unquoteLabels(path []string) []string {
	out := make([]string, len(path))
	for i, s := range path {
		if u, err := strconv.Unquote(s); err == nil && strings.HasPrefix(s, `"`) {
			s = u
		}
		out[i] = s
	}
	return out
}

func formatPath(path []string) string { return stringsPath(path).String() }

func index(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
		n = n*10 + int(r-'0')
	}
	return n, true
}
