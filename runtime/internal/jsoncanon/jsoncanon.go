// Package jsoncanon spells JSON values canonically, so that two spellings
// of one value compare equal: keys sorted, no white space, each number in
// one spelling (1, 1.0 and 1e0 alike). The fixture tool kind matches a
// call's arguments to its rows in this form, and an eval's stubs match a
// case's recorded arguments to a call's in the same form, so that a stub
// answers exactly the calls a fixture row would.
package jsoncanon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Object decodes a JSON object, keeping numbers as written.
func Object(raw json.RawMessage) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return obj, nil
}

// String encodes a decoded JSON value with sorted keys, no white space
// and numbers in one spelling, so that equal arguments encode equally.
func String(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(numbers(v)) // decoded JSON always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

// Args is the canonical form of a JSON object of arguments; empty
// arguments are the empty object.
func Args(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	obj, err := Object(raw)
	if err != nil {
		return "", err
	}
	return String(obj), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10))
		}
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = numbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = numbers(e)
		}
		return out
	}
	return v
}
