package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// decodeBody reads a JSON body into v, refusing unknown fields only when
// strict, trailing data and a body over the limit. A body that does not fit
// v is refused in the client's terms: the field, as a param such as
// messages[1].role, and the type it must have in words ("model must be a
// string, not a number"), never the Go types it was decoded into.
func decodeBody(r *http.Request, v any, strict bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(http.StatusRequestEntityTooLarge, TypeInvalidRequest, CodeBodyTooLarge,
				fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit))
		}
		return invalid(CodeInvalidJSON, "", "the request body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return decodeError(body, err)
	}
	if dec.More() {
		return invalid(CodeInvalidJSON, "", "request body has data after the JSON value")
	}
	return nil
}

// decodeError describes an error of decoding body.
func decodeError(body []byte, err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return invalid(CodeInvalidJSON, "", "request body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid(CodeInvalidJSON, "", "request body is not valid JSON: it ends before the value does")
	case errors.As(err, &syntax):
		return invalid(CodeInvalidJSON, "", fmt.Sprintf("request body is not valid JSON: %s (at byte %d)", syntax.Error(), syntax.Offset))
	case errors.As(err, &typ):
		param := jsonPath(body, typ.Offset)
		if param == "" {
			return invalid(CodeInvalidJSON, "", fmt.Sprintf("the request body must be %s, not %s", typeWords(typ.Type), valueWords(typ.Value)))
		}
		return invalid(CodeInvalidJSON, param, fmt.Sprintf("%s must be %s, not %s", param, typeWords(typ.Type), valueWords(typ.Value)))
	}
	// encoding/json reports an unknown field with an untyped error.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		return invalid(CodeInvalidJSON, name, fmt.Sprintf("unknown field %q", name))
	}
	return invalid(CodeInvalidJSON, "", "request body is not valid JSON for this route")
}

// typeWords names a Go type as the JSON a client must send.
func typeWords(t reflect.Type) string {
	if t == nil {
		return "another JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "another JSON value"
}

// valueWords names the JSON value encoding/json found: "number", "number
// 1.5", "string", "object", "array", "bool".
func valueWords(v string) string {
	switch {
	case strings.HasPrefix(v, "number "):
		return strings.TrimPrefix(v, "number ")
	case v == "bool":
		return "a boolean"
	case v == "array", v == "object":
		return "an " + v
	case v == "":
		return "that"
	}
	return "a " + v
}

// jsonPath returns the path, as a param such as messages[1].role, of the
// value whose first token ends at offset in body: where encoding/json
// reports a value of the wrong type (its field path leaves out array
// indices). It returns "" for the top-level value, or when the body does
// not reach offset.
func jsonPath(body []byte, offset int64) string {
	type frame struct {
		array bool
		index int
		key   string
		inKey bool // an object frame waiting for a key
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				fmt.Fprintf(&b, "[%d]", f.index)
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	// valueDone moves the innermost container past the value just read.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].inKey = true
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].inKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			stack[n-1].key, stack[n-1].inKey = fmt.Sprint(tok), false
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == ']' || d == '}') {
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		// A value: tok is its first token.
		at := path()
		if dec.InputOffset() >= offset {
			return at
		}
		switch tok {
		case json.Delim('['):
			stack = append(stack, frame{array: true})
		case json.Delim('{'):
			stack = append(stack, frame{inKey: true})
		default:
			valueDone()
		}
	}
}
