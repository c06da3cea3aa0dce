package agents

import (
	"reflect"
	"slices"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/internal/jsonschemas"
)

// TestShapeKnowsTheSchema fails when the validator's compiled Schema has
// an exported field that bare does not look at (or is not an annotation
// or an identifier), as after an upgrade that adds a keyword: a shape
// would accept what the new keyword refuses.
func TestShapeKnowsTheSchema(t *testing.T) {
	known := []string{
		// identifiers and annotations, which assert nothing
		"DraftVersion", "Location", "ID", "Anchor", "RecursiveAnchor", "DynamicAnchor",
		"Title", "Description", "Default", "Comment", "ReadOnly", "WriteOnly", "Examples", "Deprecated",
		// what a shape reads
		"Types", "Properties", "Required", "AdditionalProperties",
		// what bare requires unset
		"Bool", "Ref", "RecursiveRef", "DynamicRef", "Enum", "Const", "Not", "AllOf", "AnyOf", "OneOf",
		"If", "Then", "Else", "Format",
		"MaxProperties", "MinProperties", "PropertyNames", "PatternProperties",
		"Dependencies", "DependentRequired", "DependentSchemas", "UnevaluatedProperties",
		"MinItems", "MaxItems", "UniqueItems", "Contains", "MinContains", "MaxContains",
		"Items", "AdditionalItems", "PrefixItems", "Items2020", "UnevaluatedItems",
		"MinLength", "MaxLength", "Pattern", "ContentEncoding", "ContentMediaType", "ContentSchema",
		"Maximum", "Minimum", "ExclusiveMaximum", "ExclusiveMinimum", "MultipleOf",
		"Extensions",
	}
	for f := range reflect.TypeFor[jsonschema.Schema]().Fields() {
		if f.IsExported() && !slices.Contains(known, f.Name) {
			t.Errorf("jsonschema.Schema.%s: a field bare does not look at", f.Name)
		}
	}
}

// shapeSchemas are schemas with a shape (the first ones) and without.
var shapeSchemas = []struct {
	schema string
	shaped bool
}{
	{`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`, true},
	{`{"type":"object","properties":{"n":{"type":"integer","description":"a count"},"x":{"type":["number","null"]},"b":{"type":"boolean"}},"required":["n"],"additionalProperties":false}`, true},
	{`{"type":"object","properties":{"color":{"type":"string","enum":["red","green"]}}}`, true},
	{`{"type":"object"}`, true},
	{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"q":{"type":"string"}},"additionalProperties":true}`, true},
	{`{"type":"object","properties":{"q":{"type":"string","minLength":3}}}`, false},
	{`{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string"}}}}`, false},
	{`{"type":"object","properties":{"q":{}}}`, false},
	{`{"type":"object","required":["q"]}`, false},
	{`{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":{"type":"string"}}`, false},
	{`{"properties":{"q":{"type":"string"}}}`, false},
	// format is an annotation to this compiler (jsonschemas.Compile does
	// not assert formats), as for the validator
	{`{"type":"object","properties":{"q":{"type":"string","format":"email"}}}`, true},
	{`{"type":"object","properties":{"q":{"type":"string"}},"minProperties":1}`, false},
	{`{"type":"object","properties":{"e":{"type":"integer","enum":[1,2]}}}`, false},
	{`{"type":"object","properties":{"q":{"$ref":"#/$defs/s"}},"$defs":{"s":{"type":"string"}}}`, false},
}

// shapeDocs are documents to check against each of shapeSchemas.
var shapeDocs = []string{
	`{"id":"A-1"}`, ` { "id" : "A-1" } `, `{"id":"A\"1"}`, `{"id":"\u0041"}`, `{"id":1}`, `{}`, `{"id":"A","id":"B"}`,
	`{"id":"A","x":null}`, `{"id":"A","x":{"y":1}}`, `{"id":"A","x":[1]}`, `{"id":"A",}`, `{"id":"A"} x`, `{"id":"A"`,
	`{"n":1}`, `{"n":1.0}`, `{"n":-0}`, `{"n":1e3}`, `{"n":01}`, `{"n":-}`, `{"n":1,"x":2.5,"b":true}`, `{"n":1,"x":null,"b":false}`,
	`{"n":1,"b":"true"}`, `{"n":1,"other":1}`, `{"n":truex}`, `{"n":1,"x":nul}`,
	`{"color":"red"}`, `{"color":"blue"}`, `{"color":"re\u0064"}`, `{"q":"abc"}`, `{"q":"ab"}`, `{"q":5}`, `{"tags":["a"]}`,
	`{"e":1}`, `{"e":3}`, `[]`, `"x"`, `null`, ``, `{"\u0069d":"A"}`, "{\"id\":\"a\x01\"}", "{\"i\xffd\":\"A\"}", `{"id":"\x"}`,
}

// TestShapeAgreesWithTheValidator checks every document against every
// schema: what a shape accepts, the validator accepts, and a shaped schema
// accepts its valid flat documents without the validator.
func TestShapeAgreesWithTheValidator(t *testing.T) {
	for _, sc := range shapeSchemas {
		s, err := jsonschemas.Compile("urn:test", []byte(sc.schema))
		if err != nil {
			t.Fatalf("%s: %v", sc.schema, err)
		}
		f := newShape(s)
		if (f != nil) != sc.shaped {
			t.Errorf("%s: shape %v, want %v", sc.schema, f != nil, sc.shaped)
		}
		fast := 0
		for _, doc := range shapeDocs {
			valid := validateJSON(s, []byte(doc)) == nil
			if f.accepts(doc) {
				fast++
				if !valid {
					t.Errorf("%s: the shape accepts %q, which the validator refuses", sc.schema, doc)
				}
			}
		}
		if sc.shaped && fast == 0 {
			t.Errorf("%s: the shape accepts none of the documents", sc.schema)
		}
	}
	s, err := jsonschemas.Compile("urn:test", []byte(shapeSchemas[0].schema))
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]bool{`{"id":"A-1"}`: true, `{"id":"A-1","more":2}`: true, `{"id":"A\"1"}`: true, `{"\u0069d":"A"}`: false, `{}`: false, `{"id":1}`: false} {
		if got := newShape(s).accepts(doc); got != want {
			t.Errorf("accepts(%s) = %v, want %v", doc, got, want)
		}
	}
}

// FuzzShape: whatever the document, a shape accepts it only when the
// validator does.
func FuzzShape(f *testing.F) {
	for _, doc := range shapeDocs {
		f.Add(doc)
	}
	var shapes []*shape
	var schemas []*jsonschema.Schema
	for _, sc := range shapeSchemas {
		s, err := jsonschemas.Compile("urn:test", []byte(sc.schema))
		if err != nil {
			f.Fatal(err)
		}
		if sh := newShape(s); sh != nil {
			shapes, schemas = append(shapes, sh), append(schemas, s)
		}
	}
	f.Fuzz(func(t *testing.T, doc string) {
		for i, sh := range shapes {
			if sh.accepts(doc) && validateJSON(schemas[i], []byte(doc)) != nil {
				t.Errorf("shape %d accepts %q, which the validator refuses", i, doc)
			}
		}
	})
}

// BenchmarkCheckArguments compares a tool call's argument check through
// the shape with the validator alone.
func BenchmarkCheckArguments(b *testing.B) {
	s, err := jsonschemas.Compile("urn:test", []byte(shapeSchemas[1].schema))
	if err != nil {
		b.Fatal(err)
	}
	const doc = `{"n":12,"x":3.5,"b":true}`
	b.Run("shape", func(b *testing.B) {
		f := newShape(s)
		b.ReportAllocs()
		for b.Loop() {
			if checkJSON(s, f, doc) != nil {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("validator", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if checkJSON(s, nil, doc) != nil {
				b.Fatal("invalid")
			}
		}
	})
}
