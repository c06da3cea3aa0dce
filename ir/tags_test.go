package ir_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aidgen/aid/ir"
)

// devProd is one app file for two environments: a keyless fake in dev, an
// OpenAI-compatible endpoint in prod, chosen by the env tag.
const devProd = `name:    "desk"
version: "0.1.0"
_env:     *"dev" | "prod" @tag(env,short=dev|prod)
_tokens:  *256 | int @tag(maxTokens,type=int)
_strict:  *false | bool @tag(strict,type=bool)
if _env == "dev" {
	providers: main: {kind: "fake", seed: 1}
}
if _env == "prod" {
	providers: main: {kind: "openai-compatible", baseURL: "https://llm.example.com/v1", apiKeyEnv: "LLM_KEY"}
}
models: "m-2024-01-01": {
	provider:        "main"
	contextWindow:   4096
	maxOutputTokens: _tokens
	cost: inputPer1kUSD: 0
}
aliases: default: "m-2024-01-01"
`

func TestTagsChooseTheEnvironment(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tags      []string
		kind      string
		maxTokens int
	}{
		{"default", nil, "fake", 256},
		{"key=value", []string{"env=prod"}, "openai-compatible", 256},
		{"shorthand", []string{"prod"}, "openai-compatible", 256},
		{"shorthand of the default", []string{"dev"}, "fake", 256},
		{"typed int", []string{"env=prod", "maxTokens=1024"}, "openai-compatible", 1024},
		{"typed bool", []string{"strict=true"}, "fake", 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := ir.LoadBytes("app.cue", []byte(devProd), ir.Tags(tc.tags...))
			if err != nil {
				t.Fatal(err)
			}
			if got := doc.Providers[0].Kind; got != tc.kind {
				t.Errorf("provider kind = %q, want %q", got, tc.kind)
			}
			if got := doc.Models[0].MaxOutputTokens; got != tc.maxTokens {
				t.Errorf("maxOutputTokens = %d, want %d", got, tc.maxTokens)
			}
		})
	}
}

// TestTagMistakes: a -t the file cannot take is a *TagError (the caller's
// mistake), a value outside the field's allowed ones is an IR error at the
// field, and a malformed attribute is an IR error at the attribute.
func TestTagMistakes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     string
		tags    []string
		tagErr  string // substring of the *TagError, or ""
		irErr   string // substring of the ir.Errors, or ""
		irPlace string // its position
	}{
		{name: "unknown tag", src: devProd, tags: []string{"region=eu"},
			tagErr: "-t region=eu: no field of the app file is marked @tag(region); the file's tags are: env, maxTokens, strict"},
		{name: "unknown shorthand", src: devProd, tags: []string{"staging"},
			tagErr: `-t staging: no @tag attribute of the app file declares the shorthand "staging"; its shorthands are: dev, prod`},
		{name: "not an int", src: devProd, tags: []string{"maxTokens=many"},
			tagErr: `app.cue:4:22: -t maxTokens=many: @tag(maxTokens) takes an int, and "many" is not one`},
		{name: "not a bool", src: devProd, tags: []string{"strict=yes please"},
			tagErr: `-t strict=yes please: @tag(strict) takes a bool (true or false), and "yes please" is not one`},
		{name: "no tags in the file", src: strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(devProd, " @tag(env,short=dev|prod)", ""), " @tag(maxTokens,type=int)", ""), " @tag(strict,type=bool)", ""), tags: []string{"env=prod"},
			tagErr: "-t env=prod: no field of the app file is marked @tag(env)"},
		{name: "value not allowed", src: devProd, tags: []string{"env=staging"},
			tagErr: `app.cue:3:11: -t env=staging: the field allows *"dev" | "prod", and "staging" is not one of them`},
		{name: "value conflicting through a reference", src: devProd + "_region: _env @tag(region)\n", tags: []string{"region=eu"},
			irErr: `"_region"`, irPlace: `"eu"`}, // reported by CUE, at the field the reference reaches
		{name: "bad type option", src: strings.Replace(devProd, "type=int", "type=integer", 1),
			irErr: `type must be string, int, number or bool, not "integer"`, irPlace: "app.cue:4:22"},
		{name: "tag in a list", src: devProd + "_l: [{x: *1 | int @tag(x)}]\n",
			irErr: "@tag is not allowed within a list", irPlace: "app.cue:19"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ir.LoadBytes("app.cue", []byte(tc.src), ir.Tags(tc.tags...))
			var te *ir.TagError
			var ie ir.Errors
			switch {
			case tc.tagErr != "":
				if !errors.As(err, &te) {
					t.Fatalf("err = %v, want a *ir.TagError", err)
				}
				if !strings.Contains(te.Error(), tc.tagErr) {
					t.Errorf("err = %q, want it to contain %q", te.Error(), tc.tagErr)
				}
			default:
				if !errors.As(err, &ie) {
					t.Fatalf("err = %v, want ir.Errors", err)
				}
				if !strings.Contains(err.Error(), tc.irErr) || !strings.Contains(err.Error(), tc.irPlace) {
					t.Errorf("err = %q, want %q at %s", err, tc.irErr, tc.irPlace)
				}
			}
		})
	}
}

func TestTagGivenTwice(t *testing.T) {
	_, err := ir.LoadBytes("app.cue", []byte(devProd), ir.Tags("env=prod", "dev"))
	if err == nil || !strings.Contains(err.Error(), `-t dev: the field allows (*"dev" | "prod") & "prod", and "dev" is not one of them`) {
		t.Fatalf("err = %v, want a conflict on _env", err)
	}
	doc, err := ir.LoadBytes("app.cue", []byte(devProd), ir.Tags("env=prod", "prod"))
	if err != nil {
		t.Fatal(err)
	}
	if doc.Providers[0].Kind != "openai-compatible" {
		t.Errorf("provider kind = %q", doc.Providers[0].Kind)
	}
}
