package ir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/aidgen/aid/runtime/rules"
)

// schemaIssue is one problem in a JSON Schema, at its place in the schema.
type schemaIssue struct {
	// at is the JSON pointer of the offending value, as unescaped tokens;
	// nil is the schema itself.
	at []string
	// msg says what is wrong, without the compiler's internal URLs.
	msg string
}

// schema checks that raw is a JSON Schema the validator compiles, and
// reports each problem at the offending value inside the schema; a tool's
// input must also describe an object, the only shape function calling
// accepts. One compiler serves the whole load, so the metaschema is loaded
// once, and identical schemas are compiled once.
func (c *checker) schema(p cue.Path, raw json.RawMessage, object bool) {
	issues, seen := c.schemaIssues[string(raw)]
	if !seen {
		issues = c.compileSchema(raw)
		if c.schemaIssues == nil {
			c.schemaIssues = map[string][]schemaIssue{}
		}
		c.schemaIssues[string(raw)] = issues
	}
	for _, is := range issues {
		c.errAt(c.inSchema(p, is.at), "invalid JSON Schema: %s", is.msg)
	}
	if len(issues) > 0 || !object {
		return
	}
	for _, pr := range rules.ToolInput(raw) {
		at := make([]string, len(pr.Path))
		for i, sel := range pr.Path {
			at[i] = fmt.Sprint(sel)
		}
		c.errAt(c.inSchema(p, at), "%s", pr.Msg)
	}
}

// inSchema is the CUE path of the value at the JSON pointer tokens inside
// the schema at p. A token is a list index where the user wrote a list.
func (c *checker) inSchema(p cue.Path, tokens []string) cue.Path {
	sels := slices.Clip(p.Selectors())
	for _, t := range tokens {
		sel := cue.Str(t)
		if n, err := strconv.Atoi(t); err == nil && n >= 0 {
			if v := c.user.LookupPath(cue.MakePath(sels...)); v.IncompleteKind() == cue.ListKind {
				sel = cue.Index(n)
			}
		}
		sels = append(sels, sel)
	}
	return cue.MakePath(sels...)
}

// refusingLoader refuses every URL the compiler would fetch: a schema the
// IR declares must be self-contained, because neither the model nor the
// runtime's validator can follow a reference outside it, and vet must not
// read files or the network on a schema's say-so.
type refusingLoader struct{}

// errExternal is the cause refusingLoader gives.
var errExternal = errors.New("external references are not loaded")

func (refusingLoader) Load(string) (any, error) { return nil, errExternal }

func (c *checker) compileSchema(raw json.RawMessage) []schemaIssue {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return []schemaIssue{{msg: fmt.Sprintf("not JSON: %v", err)}}
	}
	if c.compiler == nil {
		c.compiler = jsonschema.NewCompiler()
		c.compiler.UseLoader(refusingLoader{})
	}
	c.schemaN++
	base := fmt.Sprintf("mem://schema/%d.json", c.schemaN)
	if err := c.compiler.AddResource(base, doc); err != nil {
		return []schemaIssue{{msg: hideURL(err.Error(), base)}}
	}
	if _, err := c.compiler.Compile(base); err != nil {
		return schemaIssues(err, doc, base)
	}
	return nil
}

// schemaIssues turns a compile failure into positioned problems: a
// metaschema failure into its leaf causes, each at its place in the
// schema; a reference that does not resolve into a problem at the $ref
// that names it. No message shows the compiler's internal URL.
func schemaIssues(err error, doc any, base string) []schemaIssue {
	var (
		sve       *jsonschema.SchemaValidationError
		ve        *jsonschema.ValidationError
		noPointer *jsonschema.JSONPointerNotFoundError
		noAnchor  *jsonschema.AnchorNotFoundError
		load      *jsonschema.LoadURLError
	)
	switch {
	case errors.As(err, &sve) && errors.As(sve.Err, &ve):
		return metaschemaIssues(ve)
	case errors.As(err, &noPointer):
		return refIssue(doc, base, noPointer.URL, func(ref string) string {
			_, frag, _ := strings.Cut(noPointer.URL, "#")
			ptr, _ := url.PathUnescape(frag)
			msg := fmt.Sprintf("$ref %q does not resolve: the schema has nothing at %s", ref, ptr)
			if s := nearestKey(doc, ptr); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", "#"+s)
			}
			return msg
		})
	case errors.As(err, &noAnchor):
		return refIssue(doc, base, noAnchor.Reference, func(ref string) string {
			_, anchor, _ := strings.Cut(noAnchor.Reference, "#")
			return fmt.Sprintf("$ref %q does not resolve: the schema defines no $anchor %q", ref, anchor)
		})
	case errors.As(err, &load):
		is := refIssue(doc, base, load.URL, func(ref string) string {
			return fmt.Sprintf("$ref %q points outside the schema, which must be self-contained (neither the model nor the validator fetches it); define it under $defs and refer to it as \"#/$defs/<name>\"", ref)
		})
		if at := is[0].at; len(at) > 0 && at[len(at)-1] == "$schema" {
			is[0].msg = fmt.Sprintf("$schema %q is not a JSON Schema draft the validator knows; remove $schema or use %q", load.URL, "https://json-schema.org/draft/2020-12/schema")
		}
		return is
	}
	return []schemaIssue{{msg: hideURL(strings.Join(strings.Fields(err.Error()), " "), base)}}
}

// refIssue places a problem with a reference at the $ref (or $schema)
// whose target, resolved against the schema's URL, is target.
func refIssue(doc any, base, target string, describe func(ref string) string) []schemaIssue {
	b, _ := url.Parse(base)
	for _, r := range references(doc, nil) {
		u, err := url.Parse(r.value)
		if err != nil {
			continue
		}
		abs := b.ResolveReference(u)
		if abs.String() == target || (!strings.Contains(target, "#") && abs.Fragment != "" && strings.TrimSuffix(abs.String(), "#"+abs.Fragment) == target) {
			return []schemaIssue{{at: r.at, msg: describe(r.value)}}
		}
	}
	return []schemaIssue{{msg: describe(hideURL(target, base))}}
}

type reference struct {
	at    []string
	value string
}

// references lists the $ref and $schema values of a schema document with
// their pointers, in document order (keys sorted).
func references(doc any, at []string) []reference {
	var out []reference
	switch v := doc.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := append(slices.Clip(at), k)
			if s, ok := v[k].(string); ok && (k == "$ref" || k == "$schema") {
				out = append(out, reference{at: p, value: s})
				continue
			}
			out = append(out, references(v[k], p)...)
		}
	case []any:
		for i, e := range v {
			out = append(out, references(e, append(slices.Clip(at), strconv.Itoa(i)))...)
		}
	}
	return out
}

// nearestKey suggests, for a JSON pointer that names nothing, the pointer
// to the sibling key closest to its last token.
func nearestKey(doc any, ptr string) string {
	if !strings.HasPrefix(ptr, "/") {
		return ""
	}
	tokens := strings.Split(ptr[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	cur := doc
	for _, t := range tokens[:len(tokens)-1] {
		m, ok := cur.(map[string]any)
		if !ok {
			return ""
		}
		if cur, ok = m[t]; !ok {
			return ""
		}
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	s := suggest(tokens[len(tokens)-1], keys)
	if s == "" {
		return ""
	}
	i := strings.LastIndex(ptr, "/")
	return ptr[:i+1] + strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// metaschemaIssues reduces a metaschema failure to its leaf causes, one
// issue per place in the schema. Where one branch of an alternative (such
// as type: a name or a list of names) got the right kind of value, the
// other branches' "got string, want array" is noise, and is left out.
func metaschemaIssues(ve *jsonschema.ValidationError) []schemaIssue {
	p := message.NewPrinter(language.English)
	type leaf struct {
		at   []string
		kind jsonschema.ErrorKind
	}
	var leaves []leaf
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		leaves = append(leaves, leaf{e.InstanceLocation, e.ErrorKind})
	}
	walk(ve)
	var out []schemaIssue
	for _, l := range leaves {
		if _, isType := l.kind.(*kind.Type); isType && slices.ContainsFunc(leaves, func(o leaf) bool {
			_, oType := o.kind.(*kind.Type)
			return !oType && slices.Equal(o.at, l.at)
		}) {
			continue
		}
		msg := l.kind.LocalizedString(p)
		if e, ok := l.kind.(*kind.Enum); ok {
			if got, ok := e.Got.(string); ok {
				var want []string
				for _, w := range e.Want {
					if s, ok := w.(string); ok {
						want = append(want, s)
					}
				}
				if s := suggest(got, want); s != "" {
					msg = fmt.Sprintf("%q is not allowed (did you mean %q?); %s", got, s, msg)
				}
			}
		}
		if !slices.ContainsFunc(out, func(o schemaIssue) bool { return slices.Equal(o.at, l.at) && o.msg == msg }) {
			out = append(out, schemaIssue{at: l.at, msg: msg})
		}
	}
	return out
}

// hideURL removes the compiler's internal URL for a schema from a message:
// it names nothing the user wrote.
func hideURL(msg, base string) string {
	msg = strings.ReplaceAll(msg, base+"#", "#")
	return strings.ReplaceAll(msg, base, "the schema")
}
