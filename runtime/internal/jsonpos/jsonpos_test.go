package jsonpos_test

import (
	"testing"

	"github.com/aidgen/aid/runtime/internal/jsonpos"
)

func TestPositions(t *testing.T) {
	data := []byte("[\n  {\"a\": 1},\n  {\"b\": }\n]")
	if got := jsonpos.SyntaxError("f.json", data, 0, data); got == nil || got.Error() != "f.json:3:9: invalid character '}' looking for beginning of value" {
		t.Errorf("syntax error: %v", got)
	}
	line := []byte(`{"b": }`) // the third line, as a JSONL reader sees it
	if got := jsonpos.SyntaxError("f.json", data, 16, line); got == nil || got.Error() != "f.json:3:9: invalid character '}' looking for beginning of value" {
		t.Errorf("syntax error of a part: %v", got)
	}
	if err := jsonpos.SyntaxError("f.json", data, 2, data[2:12]); err != nil {
		t.Errorf("valid part: %v", err)
	}
	if got := jsonpos.Position("f.json", data, 1); got != "f.json:2:3" {
		t.Errorf("position after the bracket: %s", got)
	}
	if got := jsonpos.Position("f.json", data, 12); got != "f.json:3:3" { // the comma and the line break are skipped
		t.Errorf("position after the comma: %s", got)
	}
	if got := jsonpos.Line("f.json", data, 20); got != "f.json:3" {
		t.Errorf("line: %s", got)
	}
	if got := jsonpos.LineCol("f.json", data, 1000); got != "f.json:4:2" {
		t.Errorf("past the end: %s", got)
	}
}
