// Package jsonschemas compiles the JSON Schemas the runtime validates
// against (tool arguments, agent outputs, eval answers) one way: hermetic,
// so a schema never makes the process fetch or read another document.
//
// It is not ir's schema checking, which reports problems at positions in
// the app file and cannot import the runtime.
package jsonschemas

import (
	"bytes"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile parses raw and compiles it as the resource loc. A $ref to any
// other document is refused, naming it, instead of being loaded.
func Compile(loc string, raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parse schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("add schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	return s, nil
}

// refuseLoader keeps compilation hermetic: it refuses every URL.
type refuseLoader struct{}

// Load refuses url.
func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema reference %q: external schemas are not loaded; inline the definition", url)
}
