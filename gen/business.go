package gen

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/dave/jennifer/jen"

	"github.com/aidgen/aid/runtime/agents/guard"
	"github.com/aidgen/aid/runtime/app"
)

// schema is the part of a JSON Schema the input types are made from.
// Anything else (patterns, bounds, formats) is the runtime's to check: it
// validates the arguments against the whole schema before a call.
type schema struct {
	Type                 json.RawMessage    `json:"type"`
	Description          string             `json:"description"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Items                *schema            `json:"items"`
	Enum                 []json.RawMessage  `json:"enum"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
}

// types returns the schema's type names, with "null" last, and whether
// it may be null.
func (s *schema) types() ([]string, bool, error) {
	if len(s.Type) == 0 {
		return nil, false, nil
	}
	var one string
	if err := json.Unmarshal(s.Type, &one); err == nil {
		return []string{one}, one == "null", nil
	}
	var many []string
	if err := json.Unmarshal(s.Type, &many); err != nil {
		return nil, false, fmt.Errorf("type is neither a string nor a list of strings")
	}
	nullable := slices.Contains(many, "null")
	many = slices.DeleteFunc(slices.Clone(many), func(t string) bool { return t == "null" })
	return many, nullable, nil
}

// inputTypes turns a JSON Schema into Go type declarations: named, the
// schema's nested objects becoming their own struct types named after the
// path to them.
type inputTypes struct {
	decls []jen.Code
	names map[string]bool
}

// declare declares the struct type name for an object schema.
func (it *inputTypes) declare(name, doc string, s *schema, where string) error {
	if it.names[name] {
		return fmt.Errorf("%s: the Go type name %s is used twice; rename a tool or property", where, name)
	}
	it.names[name] = true
	props := make([]string, 0, len(s.Properties))
	for p := range s.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	fields := make([]jen.Code, 0, len(props))
	seen := map[string]string{}
	for _, p := range props {
		ps := s.Properties[p]
		if ps == nil {
			ps = &schema{}
		}
		fname := goName(p)
		if other, ok := seen[fname]; ok {
			return fmt.Errorf("%s: properties %q and %q both become the Go field %s; rename one", where, other, p, fname)
		}
		seen[fname] = p
		required := slices.Contains(s.Required, p)
		t, comment, err := it.typeOf(name+fname, ps, where+"."+p)
		if err != nil {
			return err
		}
		tag := p
		if !required {
			tag += ",omitempty"
			// An optional scalar or struct is a pointer, so that an
			// absent argument is told from its zero value.
			if pointable(ps) {
				t = jen.Op("*").Add(t)
			}
		}
		var lines []string
		if d := strings.TrimSpace(ps.Description); d != "" {
			lines = append(lines, strings.Split(d, "\n")...)
		}
		if comment != "" {
			lines = append(lines, comment)
		}
		if !required {
			lines = append(lines, "Optional.")
		}
		f := jen.Null()
		for _, l := range lines {
			f.Comment(l).Line()
		}
		f.Id(fname).Add(t).Tag(map[string]string{"json": tag})
		fields = append(fields, f)
	}
	decl := jen.Comment(doc).Line().Type().Id(name).Struct(fields...)
	it.decls = append(it.decls, decl)
	return nil
}

// pointable reports whether an optional property of schema s becomes a
// pointer: scalars and objects do, lists, maps and raw JSON (whose nil
// already means absent) do not.
func pointable(s *schema) bool {
	ts, _, err := s.types()
	if err != nil || len(ts) != 1 {
		return len(ts) == 0 && enumKind(s) == "string"
	}
	switch ts[0] {
	case "array":
		return false
	case "object":
		return len(s.Properties) > 0
	}
	return true
}

// enumKind is "string" when every value of the schema's enum is a string.
func enumKind(s *schema) string {
	if len(s.Enum) == 0 {
		return ""
	}
	for _, e := range s.Enum {
		var v string
		if json.Unmarshal(e, &v) != nil {
			return ""
		}
	}
	return "string"
}

// typeOf spells the Go type of a property schema; name is the type name a
// nested object gets. The comment, when not empty, says what the type does
// not (an enum's values, why a property stays raw JSON).
func (it *inputTypes) typeOf(name string, s *schema, where string) (jen.Code, string, error) {
	ts, nullable, err := s.types()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", where, err)
	}
	raw := func(why string) (jen.Code, string, error) {
		return jen.Qual("encoding/json", "RawMessage"), "Raw JSON: " + why + ".", nil
	}
	if len(ts) == 0 {
		if enumKind(s) == "string" {
			ts = []string{"string"}
		} else if !nullable {
			return raw("the schema names no type")
		}
	}
	if len(ts) != 1 {
		return raw("the schema allows several types")
	}
	var enum string
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			vals[i] = string(e)
		}
		enum = "One of " + strings.Join(vals, ", ") + "."
	}
	switch ts[0] {
	case "string":
		return jen.String(), enum, nil
	case "integer":
		return jen.Int64(), enum, nil
	case "number":
		return jen.Float64(), enum, nil
	case "boolean":
		return jen.Bool(), enum, nil
	case "array":
		items := s.Items
		if items == nil {
			return jen.Index().Qual("encoding/json", "RawMessage"), "Items are raw JSON: the schema does not type them.", nil
		}
		t, c, err := it.typeOf(name+"Item", items, where+"[]")
		if err != nil {
			return nil, "", err
		}
		if c != "" {
			c = "Items: " + c
		}
		return jen.Index().Add(t), c, nil
	case "object":
		if len(s.Properties) == 0 {
			var add schema
			if len(s.AdditionalProperties) > 0 && json.Unmarshal(s.AdditionalProperties, &add) == nil && len(add.Type) > 0 {
				t, c, err := it.typeOf(name+"Value", &add, where+"{}")
				if err != nil {
					return nil, "", err
				}
				if c != "" {
					c = "Values: " + c
				}
				return jen.Map(jen.String()).Add(t), c, nil
			}
			return jen.Map(jen.String()).Qual("encoding/json", "RawMessage"), "", nil
		}
		if err := it.declare(name, name+" is the "+where+" argument.", s, where); err != nil {
			return nil, "", err
		}
		return jen.Id(name), "", nil
	case "null":
		return raw("the schema allows only null")
	}
	return raw(fmt.Sprintf("the schema's type %q is not one the generator knows", ts[0]))
}

// goName turns a tool or property name (snake_case, kebab-case, camelCase)
// into an exported Go identifier: lookup_order becomes LookupOrder.
func goName(s string) string {
	var b strings.Builder
	upper := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	out := b.String()
	if out == "" || !unicode.IsLetter([]rune(out)[0]) {
		out = "X" + out
	}
	for _, ini := range []string{"Id", "Url", "Usd", "Api", "Http", "Json"} {
		out = replaceWord(out, ini, strings.ToUpper(ini))
	}
	return out
}

// replaceWord replaces word in s where it stands as a whole camel-case
// word (followed by an upper-case letter, a digit or the end), so that
// OrderId becomes OrderID and Identity stays.
func replaceWord(s, word, with string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, word)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(word)
		if end == len(s) || unicode.IsUpper(rune(s[end])) || unicode.IsDigit(rune(s[end])) {
			b.WriteString(s[:i] + with)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
}

// goTool is a tool whose code the team writes.
type goTool struct {
	tool  app.Tool
	fn    string // the function's name, LookupOrder
	input string // its input type's name, LookupOrderInput
	file  string // the stub's path, business/lookup_order_tool.go
}

// goTools lists the description's tools implemented by Go code (no kind),
// sorted by name, with the Go names they get; names that collide are an
// error.
func goTools(desc app.Description) ([]goTool, error) {
	var out []goTool
	byFn := map[string]string{}
	for _, t := range desc.Tools {
		if t.Kind != nil {
			continue
		}
		name := t.Decl.Name
		fn := goName(name)
		if other, ok := byFn[fn]; ok {
			return nil, fmt.Errorf("tools %q and %q both become the Go function %s; rename one", other, name, fn)
		}
		if fn == "Implementations" {
			return nil, fmt.Errorf("tool %q becomes the Go function Implementations, which the business package already declares; rename it", name)
		}
		byFn[fn] = name
		out = append(out, goTool{tool: t, fn: fn, input: fn + "Input", file: "business/" + fileName(name) + "_tool.go"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tool.Decl.Name < out[j].tool.Decl.Name })
	return out, nil
}

// fileName keeps a tool name's letters, digits and underscores, lower
// case, for a file name the go tool reads on every platform; the _tool.go
// suffix keeps a name like deploy_linux from becoming a build constraint.
func fileName(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// goGuardrail is a guardrail of kind go and the Go function behind it.
type goGuardrail struct {
	name string // the function's name in the app file (Guardrail.Func)
	fn   string // its Go name
	file string // the stub's path, business/injection_guardrail.go
	used []string
}

// goGuardrails lists the functions the description's go guardrails name,
// sorted, each once (guardrails may share one), with the Go names they
// get; a name that collides with a tool's function or another's is an
// error.
func goGuardrails(desc app.Description, tools []goTool) ([]goGuardrail, error) {
	byName := map[string]*goGuardrail{}
	for _, g := range desc.Guardrails {
		if g.Kind != guard.KindGo || g.Func == "" {
			continue
		}
		if gg, ok := byName[g.Func]; ok {
			gg.used = append(gg.used, g.Name)
			continue
		}
		byName[g.Func] = &goGuardrail{name: g.Func, fn: goName(g.Func), file: "business/" + fileName(g.Func) + "_guardrail.go", used: []string{g.Name}}
	}
	taken := map[string]string{"Implementations": "the business package", "GuardrailFuncs": "the business package"}
	for _, t := range tools {
		taken[t.fn] = "tool " + strconv.Quote(t.tool.Decl.Name)
		taken[t.input] = "tool " + strconv.Quote(t.tool.Decl.Name)
	}
	var out []goGuardrail
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		g := byName[name]
		if other, ok := taken[g.fn]; ok {
			return nil, fmt.Errorf("guardrail function %q becomes the Go function %s, which %s already declares; rename it", name, g.fn, other)
		}
		taken[g.fn] = "guardrail function " + strconv.Quote(name)
		out = append(out, *g)
	}
	return out, nil
}

// guardrailStub renders a go guardrail's stub: the function the team
// fills in. Until then it fails with a typed error naming itself, so the
// guardrail's check cannot be made and the run fails: a value is never
// let through unjudged.
func guardrailStub(g goGuardrail) *jen.File {
	f := jen.NewFile("business")
	importNames(f)
	f.HeaderComment(fmt.Sprintf("Written once by aidgen build for the %s guardrail function. This file is yours:", g.name))
	f.HeaderComment("aidgen never overwrites it.")
	comment(f, fmt.Sprintf("%s judges a value for the guardrails %s (kind go). It returns a finding\nwith Tripped set when the guardrail's action applies, and what matched; an\nerror fails the run, since a check that could not be made never lets a value\nthrough.", g.fn, strings.Join(g.used, ", ")))
	f.Func().Id(g.fn).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("v").Qual(pkgGuard, "Value")).Params(jen.Qual(pkgGuard, "Finding"), jen.Error()).Block(
		jen.Return(jen.Qual(pkgGuard, "Finding").Values(), jen.Op("&").Qual(pkgKind, "DeferredError").Values(jen.Dict{
			jen.Id("Feature"): jen.Lit("guardrail function " + g.name),
		})),
	)
	return f
}

// businessGen renders business/tools_gen.go: the input types of the go
// tools and the registration of their functions and of the go guardrails'.
func businessGen(tools []goTool, guards []goGuardrail) (*jen.File, error) {
	f := newFile("business")
	packageComment(f, "Package business is the team's code behind the application's tools and\nguardrails: one function per tool of kind go and per function a guardrail\nof kind go names, each in a file aidgen writes once and never overwrites.\nThis file, tools_gen.go, is regenerated on every build.")
	it := &inputTypes{names: map[string]bool{}}
	for _, t := range tools {
		var s schema
		if len(t.tool.Decl.Input) > 0 {
			if err := json.Unmarshal(t.tool.Decl.Input, &s); err != nil {
				return nil, fmt.Errorf("tool %q: reading its input schema: %w", t.tool.Decl.Name, err)
			}
		}
		doc := fmt.Sprintf("%s is the arguments of the %s tool, as its JSON Schema declares them.", t.input, t.tool.Decl.Name)
		if err := it.declare(t.input, doc, &s, "tool "+t.tool.Decl.Name+" input"); err != nil {
			return nil, err
		}
	}
	for _, d := range it.decls {
		f.Add(d)
		f.Line()
	}
	if len(guards) > 0 {
		comment(f, "GuardrailFuncs returns the code behind the application's go guardrails, by\nthe function names they give, for app.Options.GuardrailFuncs.")
		f.Func().Id("GuardrailFuncs").Params().Map(jen.String()).Qual(pkgGuard, "Func").Block(
			jen.Return(jen.Map(jen.String()).Qual(pkgGuard, "Func").Add(block(func() []jen.Code {
				var items []jen.Code
				for _, g := range guards {
					items = append(items, jen.Lit(g.name).Op(":").Id(g.fn))
				}
				return items
			}()))),
		)
		if len(tools) == 0 {
			return f, nil
		}
	}
	comment(f, "Implementations returns the code behind the application's go tools, by tool\nname, for app.Options.Implementations.")
	f.Func().Id("Implementations").Params().Map(jen.String()).Qual(pkgAgents, "Implementation").Block(
		jen.Return(jen.Map(jen.String()).Qual(pkgAgents, "Implementation").Add(block(func() []jen.Code {
			var items []jen.Code
			for _, t := range tools {
				items = append(items, jen.Lit(t.tool.Decl.Name).Op(":").Qual(pkgAgents, "Typed").Call(jen.Id(t.fn)))
			}
			return items
		}()))),
	)
	return f, nil
}

// stub renders a tool's stub: the function the team fills in. Until then
// it says, with a typed error naming the tool, that it is not built.
func stub(t goTool) *jen.File {
	f := jen.NewFile("business")
	importNames(f)
	f.HeaderComment(fmt.Sprintf("Written once by aidgen build for the %s tool. This file is yours: aidgen", t.tool.Decl.Name))
	f.HeaderComment("never overwrites it.")
	doc := fmt.Sprintf("%s implements the %s tool", t.fn, t.tool.Decl.Name)
	if d := strings.TrimSpace(t.tool.Decl.Description); d != "" {
		doc += ": " + d
	} else {
		doc += "."
	}
	comment(f, doc)
	comment(f, "Its result is the observation the model reads: a string as is, anything\nelse as JSON.")
	f.Func().Id(t.fn).Params(jen.Id("ctx").Qual("context", "Context"), jen.Id("in").Id(t.input)).Params(jen.String(), jen.Error()).Block(
		jen.Return(jen.Lit(""), jen.Op("&").Qual(pkgKind, "DeferredError").Values(jen.Dict{
			jen.Id("Feature"): jen.Lit("tool " + t.tool.Decl.Name),
		})),
	)
	return f
}
