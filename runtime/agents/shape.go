package agents

import (
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// shape is the fast path of a compiled schema that only asks for a flat
// object: a document accepted by it is valid, with no allocation, and any
// other (invalid, or beyond what the shape reads) goes to the schema's
// validator, which decides and says why. It is built only from a schema
// that has no keyword but type, properties, required,
// additionalProperties (a boolean) and annotations at its top, and
// properties of scalar types (with a type, a string enum, or neither), so
// that what it accepts is exactly what the validator accepts.
//
// A tool's arguments are checked at every call; most tools take a few
// strings and numbers, and decoding them into maps to walk the compiled
// schema was the most of a step's allocations.
type shape struct {
	props    map[string]int // property name: its index in kinds
	kinds    []propShape
	required []int // indexes in kinds of the required properties
	closed   bool  // additionalProperties false
}

// propShape is what a property accepts.
type propShape struct {
	types jsonTypes
	enum  []string // when set, the strings accepted, and only them
}

// jsonTypes is a set of JSON types.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
)

// newShape returns the fast path of s, or nil when s asks for more than a
// shape reads.
func newShape(s *jsonschema.Schema) *shape {
	if s == nil || !bare(s) || s.Types == nil {
		return nil
	}
	if ts := s.Types.ToStrings(); len(ts) != 1 || ts[0] != "object" {
		return nil
	}
	f := &shape{props: make(map[string]int, len(s.Properties))}
	switch a := s.AdditionalProperties.(type) {
	case nil:
	case bool:
		f.closed = !a
	default:
		return nil
	}
	if len(s.Properties) > 64 {
		return nil // a step's seen set is one word
	}
	for name, p := range s.Properties {
		ps, ok := scalarShape(p)
		if !ok {
			return nil
		}
		f.props[name] = len(f.kinds)
		f.kinds = append(f.kinds, ps)
	}
	for _, name := range s.Required {
		i, ok := f.props[name]
		if !ok {
			// A required property with no schema of its own: any value,
			// objects and arrays included, which a shape does not read.
			return nil
		}
		f.required = append(f.required, i)
	}
	return f
}

// scalarShape is what a property schema accepts, when it has a type and
// every type it allows is a scalar one, with at most an enum of strings.
func scalarShape(p *jsonschema.Schema) (propShape, bool) {
	if p == nil || p.Types == nil {
		return propShape{}, false // any value, objects and arrays included
	}
	enum := p.Enum
	p2 := *p
	p2.Enum = nil
	if !bare(&p2) || p.Properties != nil || p.Required != nil || p.AdditionalProperties != nil {
		return propShape{}, false
	}
	var ps propShape
	for _, t := range p.Types.ToStrings() {
		switch t {
		case "null":
			ps.types |= typeNull
		case "boolean":
			ps.types |= typeBoolean
		case "number":
			ps.types |= typeNumber
		case "integer":
			ps.types |= typeInteger
		case "string":
			ps.types |= typeString
		default:
			return propShape{}, false // an object or an array
		}
	}
	if ps.types == 0 {
		return propShape{}, false
	}
	if enum != nil {
		if ps.types != typeString {
			return propShape{}, false
		}
		for _, v := range enum.Values {
			s, ok := v.(string)
			if !ok {
				return propShape{}, false
			}
			ps.enum = append(ps.enum, s)
		}
		if ps.enum == nil {
			ps.enum = []string{} // an empty enum accepts nothing
		}
	}
	return ps, true
}

// bare reports whether s asserts nothing but its type, properties,
// required and additionalProperties: every other keyword the compiled
// schema can hold is unset. TestShapeKnowsTheSchema fails when the
// validator's Schema gains a field this does not look at.
func bare(s *jsonschema.Schema) bool {
	return s.Bool == nil && s.Ref == nil && s.RecursiveRef == nil && s.DynamicRef == nil &&
		s.Enum == nil && s.Const == nil && s.Not == nil && len(s.AllOf) == 0 && len(s.AnyOf) == 0 && len(s.OneOf) == 0 &&
		s.If == nil && s.Then == nil && s.Else == nil && s.Format == nil &&
		s.MaxProperties == nil && s.MinProperties == nil && s.PropertyNames == nil && len(s.PatternProperties) == 0 &&
		len(s.Dependencies) == 0 && len(s.DependentRequired) == 0 && len(s.DependentSchemas) == 0 && s.UnevaluatedProperties == nil &&
		s.MinItems == nil && s.MaxItems == nil && !s.UniqueItems && s.Contains == nil && s.MinContains == nil && s.MaxContains == nil &&
		s.Items == nil && s.AdditionalItems == nil && len(s.PrefixItems) == 0 && s.Items2020 == nil && s.UnevaluatedItems == nil &&
		s.MinLength == nil && s.MaxLength == nil && s.Pattern == nil && s.ContentEncoding == nil && s.ContentMediaType == nil && s.ContentSchema == nil &&
		s.Maximum == nil && s.Minimum == nil && s.ExclusiveMaximum == nil && s.ExclusiveMinimum == nil && s.MultipleOf == nil &&
		len(s.Extensions) == 0
}

// accepts reports whether doc is a JSON object the shape's schema
// accepts; false means that the validator must decide, not that doc is
// invalid. A nil shape accepts nothing.
func (f *shape) accepts(doc string) bool {
	if f == nil {
		return false
	}
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	i = skipSpace(doc, i+1)
	var seen uint64
	if i < len(doc) && doc[i] == '}' {
		i++
	} else {
		for {
			if i >= len(doc) || doc[i] != '"' {
				return false
			}
			end, escaped, ok := scanString(doc, i)
			if !ok || escaped || !utf8.ValidString(doc[i+1:end-1]) {
				// An escaped name, or one the decoder would change, is
				// left to the validator.
				return false
			}
			name := doc[i+1 : end-1]
			i = skipSpace(doc, end)
			if i >= len(doc) || doc[i] != ':' {
				return false
			}
			i = skipSpace(doc, i+1)
			k, known := f.props[name]
			var p propShape
			if known {
				if seen&(1<<k) != 0 {
					return false // a repeated name is left to the validator
				}
				seen |= 1 << k
				p = f.kinds[k]
			} else if f.closed {
				return false
			}
			if i, ok = p.value(doc, i, known); !ok {
				return false
			}
			i = skipSpace(doc, i)
			if i >= len(doc) {
				return false
			}
			if doc[i] == '}' {
				i++
				break
			}
			if doc[i] != ',' {
				return false
			}
			i = skipSpace(doc, i+1)
		}
	}
	if skipSpace(doc, i) != len(doc) {
		return false
	}
	for _, k := range f.required {
		if seen&(1<<k) == 0 {
			return false
		}
	}
	return true
}

// value reads the scalar at doc[i:] and returns where it ends and whether
// p accepts it; a property that is not known accepts any scalar.
func (p propShape) value(doc string, i int, known bool) (int, bool) {
	if i >= len(doc) {
		return i, false
	}
	var t jsonTypes
	end := i
	switch c := doc[i]; {
	case c == '"':
		e, escaped, ok := scanString(doc, i)
		if !ok {
			return i, false
		}
		if p.enum != nil {
			if escaped {
				return i, false
			}
			found := false
			for _, v := range p.enum {
				if v == doc[i+1:e-1] {
					found = true
					break
				}
			}
			if !found {
				return i, false
			}
		}
		t, end = typeString, e
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]struct {
			text string
			t    jsonTypes
		}{{"true", typeBoolean}, {"false", typeBoolean}, {"null", typeNull}} {
			if len(doc)-i >= len(lit.text) && doc[i:i+len(lit.text)] == lit.text {
				t, end = lit.t, i+len(lit.text)
				break
			}
		}
		if t == 0 {
			return i, false
		}
	case c == '-' || c >= '0' && c <= '9':
		e, integer, ok := scanNumber(doc, i)
		if !ok {
			return i, false
		}
		t, end = typeNumber, e
		if integer {
			t |= typeInteger
		}
	default:
		return i, false // an object or an array
	}
	if !known {
		return end, true
	}
	return end, p.types&t != 0
}

func skipSpace(doc string, i int) int {
	for i < len(doc) && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i++
	}
	return i
}

// scanString reads the JSON string starting at doc[i], a quote, and
// returns the index past its closing quote and whether it holds an escape.
func scanString(doc string, i int) (end int, escaped, ok bool) {
	for j := i + 1; j < len(doc); j++ {
		switch c := doc[j]; {
		case c == '"':
			return j + 1, escaped, true
		case c < 0x20:
			return 0, false, false
		case c == '\\':
			escaped = true
			j++
			if j >= len(doc) {
				return 0, false, false
			}
			switch doc[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(doc) {
					return 0, false, false
				}
				for _, h := range []byte(doc[j+1 : j+5]) {
					if !isHex(h) {
						return 0, false, false
					}
				}
				j += 4
			default:
				return 0, false, false
			}
		}
	}
	return 0, false, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanNumber reads the JSON number starting at doc[i] and returns the
// index past it and whether it is written as an integer (no fraction, no
// exponent).
func scanNumber(doc string, i int) (end int, integer, ok bool) {
	j := i
	if doc[j] == '-' {
		j++
	}
	digits := func() int {
		n := 0
		for j < len(doc) && doc[j] >= '0' && doc[j] <= '9' {
			j++
			n++
		}
		return n
	}
	switch {
	case j < len(doc) && doc[j] == '0':
		j++
	case digits() == 0:
		return 0, false, false
	}
	integer = true
	if j < len(doc) && doc[j] == '.' {
		j++
		if digits() == 0 {
			return 0, false, false
		}
		integer = false
	}
	if j < len(doc) && (doc[j] == 'e' || doc[j] == 'E') {
		j++
		if j < len(doc) && (doc[j] == '+' || doc[j] == '-') {
			j++
		}
		if digits() == 0 {
			return 0, false, false
		}
		integer = false
	}
	return j, integer, true
}
