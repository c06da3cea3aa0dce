package ir

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// decodeBothWays loads src and decodes it twice: with the JSON Schema
// literals taken from the source, as Load does, and with every one
// marshalled by CUE. It returns both, and how many literals were taken
// from the source.
func decodeBothWays(t *testing.T, name string, src []byte) (fast, slow rawDocument, literals int) {
	t.Helper()
	sc, err := takeSchema()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.release(len(src))
	l := newLoader(name, sc)
	valid, err := l.unify(src)
	if err != nil || !valid {
		t.Fatalf("%s does not load: %v %v", name, err, l.errs)
	}
	if err := decodeValue(l.app, &fast, l.literals); err != nil {
		t.Fatal(err)
	}
	if err := decodeValue(l.app, &slow, nil); err != nil {
		t.Fatal(err)
	}
	return fast, slow, len(l.literals)
}

// TestDataLiteralsMatchCUE checks that a JSON Schema decoded from its
// source is, byte for byte, what CUE's MarshalJSON makes of it, and that
// anything CUE might evaluate differently from its text is left to CUE.
func TestDataLiteralsMatchCUE(t *testing.T) {
	const app = `name: "x", version: "1.0.0"
providers: p: kind: "fake"
models: "m-1": {provider: "p", contextWindow: 100, maxOutputTokens: 10, cost: inputPer1kUSD: 0}
aliases: m: "m-1"
agents: a: {model: "m", instructions: "Be brief."}
`
	tests := []struct {
		name, decl string
		fromSource bool
	}{
		{"plain", `tools: t: {description: "d", input: {type: "object", properties: {id: {type: "string", minLength: 1}}, required: ["id"]}}`, true},
		{"numbers", `tools: t: {description: "d", input: {type: "object", properties: {n: {type: "number", minimum: -1.5, maximum: 100, multipleOf: 0.25, default: 0, exclusiveMinimum: -3}}}}`, true},
		{"strings", `tools: t: {description: "d", input: {type: "object", "x-odd key": "<a & b>\t\"q\" \u00e9 \u2028", description: """
			multi
			line
			"""}}`, true},
		{"booleans and null", `tools: t: {description: "d", input: {type: "object", additionalProperties: false, "x-flag": true, "x-none": null, properties: {}}}`, true},
		{"nested shorthand", `tools: t: {description: "d", input: properties: a: type: "string", input: type: "object"}`, false},
		{"split declarations", "tools: t: {description: \"d\", input: {type: \"object\"}}\ntools: t: input: properties: {}", false},
		{"reference", "let s = {type: \"string\"}\ntools: t: {description: \"d\", input: {type: \"object\", properties: {a: s}}}", false},
		{"interpolation", `tools: t: {description: "d", input: {type: "object", description: "n=\(1+1)"}}`, false},
		{"expression", `tools: t: {description: "d", input: {type: "object", maxProperties: 1 + 1}}`, false},
		{"exponent", `tools: t: {description: "d", input: {type: "object", maximum: 1e3}}`, false},
		{"small decimal", `tools: t: {description: "d", input: {type: "object", minimum: 0.0000001}}`, false},
		{"negative zero", `tools: t: {description: "d", input: {type: "object", minimum: -0.0}}`, false},
		{"underscored int", `tools: t: {description: "d", input: {type: "object", maximum: 1_000}}`, false},
		{"raw string", `tools: t: {description: "d", input: {type: "object", pattern: #"^\d+$"#}}`, false},
		{"optional field", `tools: t: {description: "d", input: {type: "object", extra?: 1}}`, false},
		{"hidden field", `tools: t: {description: "d", input: {type: "object", _extra: 1}}`, false},
		{"comprehension", `tools: t: {description: "d", input: {type: "object", if true {title: "t"}}}`, false},
		{"top-level comprehension", "tools: t: {description: \"d\", input: {type: \"object\"}}\nfor k in [\"t\"] {tools: (k): input: title: \"t\"}", false},
		{"pattern on tools", "tools: t: {description: \"d\", input: {type: \"object\"}}\ntools: [string]: input: title: \"t\"", false},
		{"definition beside", "#T: {type: \"object\"}\ntools: t: {description: \"d\", input: {type: \"object\", title: \"t\"}}", true},
		{"agent output", "tools: t: {description: \"d\"}\nagents: a: output: {type: \"object\", properties: {answer: {type: \"string\"}}}", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := app + tt.decl + "\n"
			fast, slow, n := decodeBothWays(t, filepath.Join(t.TempDir(), "app.cue"), []byte(src))
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("decoded from source:\n%s\nmarshalled by CUE:\n%s", string(fast.Tools["t"].Input), string(slow.Tools["t"].Input))
				if fast.Agents["a"] != nil {
					t.Errorf("agent output from source %s, by CUE %s", fast.Agents["a"].Output, slow.Agents["a"].Output)
				}
			}
			if got := n > 0; got != tt.fromSource {
				t.Errorf("taken from source: %v, want %v", got, tt.fromSource)
			}
		})
	}
}

// TestDataLiteralsFiles decodes every valid test file and example both
// ways and expects the same documents.
func TestDataLiteralsFiles(t *testing.T) {
	files := []string{"../examples/capitals/app.cue", "../examples/support-desk/app.cue"}
	for _, c := range []string{"evals", "minimal", "openai", "orders", "tools"} {
		files = append(files, "../testdata/cases/"+c+"/app.cue")
	}
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fast, slow, _ := decodeBothWays(t, file, src)
			if !reflect.DeepEqual(fast, slow) {
				t.Errorf("%s decodes differently from source and through CUE", file)
			}
		})
	}
}
