// Package jsonpos says where in a JSON file something is, as
// name:line:col, for the errors of the kinds that read JSON files an
// application names: the fake provider's scripts, the fixture tool's rows
// and eval datasets. Lines and columns count from 1; a column counts bytes.
package jsonpos

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// SyntaxError returns nil when part, which starts at off in data, is valid
// JSON, and otherwise its syntax error at name:line:col of the offending
// byte in data.
func SyntaxError(name string, data []byte, off int64, part []byte) error {
	if json.Valid(part) {
		return nil
	}
	var v any
	err := json.Unmarshal(part, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at := off + se.Offset
		if se.Offset > 0 {
			at-- // Offset is just after the offending byte
		}
		return fmt.Errorf("%s: %v", LineCol(name, data, at), err)
	}
	return fmt.Errorf("%s: invalid JSON: %v", LineCol(name, data, off), err)
}

// Significant returns the offset of the first byte at or after off that is
// not white space or a separator: where the next value or key starts.
func Significant(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
		default:
			return off
		}
	}
	return off
}

// Position renders name:line:col of the value at or after off.
func Position(name string, data []byte, off int64) string {
	return LineCol(name, data, Significant(data, off))
}

// LineCol renders name:line:col of the byte at off.
func LineCol(name string, data []byte, off int64) string {
	line, col := lineCol(data, off)
	return name + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col)
}

// Line renders name:line of the byte at off.
func Line(name string, data []byte, off int64) string {
	line, _ := lineCol(data, off)
	return name + ":" + strconv.Itoa(line)
}

func lineCol(data []byte, off int64) (line, col int) {
	line, col = 1, 1
	for _, b := range data[:min(off, int64(len(data)))] {
		if b == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}
