package jsonschemas_test

import (
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/internal/jsonschemas"
)

func TestCompile(t *testing.T) {
	s, err := jsonschemas.Compile("urn:test", []byte(`{"type":"object","required":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{}); err == nil {
		t.Error("an object without a validated")
	}
	for _, tt := range []struct{ raw, want string }{
		{`{"type":`, "parse schema"},
		{`{"$ref":"https://example.com/s.json"}`, `schema reference "https://example.com/s.json": external schemas are not loaded`},
		{`{"$ref":"file:///etc/passwd"}`, "external schemas are not loaded"},
		{`{"type":"strng"}`, "compile schema"},
	} {
		if _, err := jsonschemas.Compile("urn:test", []byte(tt.raw)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Compile(%s) = %v, want an error containing %q", tt.raw, err, tt.want)
		}
	}
}
