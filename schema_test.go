package aid_test

import (
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	aid "github.com/aidgen/aid"
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
