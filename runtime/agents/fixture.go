package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// FixtureRow is one row of a fixture tool: the arguments it answers and the
// result it gives.
type FixtureRow struct {
	// Args is the arguments the row answers, a JSON object. Calls match it
	// by canonical equality: key order, white space and the spelling of
	// numbers (1, 1.0, 1e0) do not matter.
	Args json.RawMessage
	// Result is the call's result, any JSON value: a string is the
	// observation as is, anything else its compact JSON.
	Result json.RawMessage
	// Error, when set instead of Result, makes the call fail with this
	// message, for rows that play a tool's failure.
	Error string
	// Source says where the row was read (file:line), for messages; empty
	// for rows built in code.
	Source string
}

// LoadFixture reads the rows of a fixture file: a JSON array of rows, or
// JSON Lines with one row per line (blank lines are skipped). A row is
// {"args": {...}, "result": <any JSON>} or {"args": {...}, "error": "..."}.
// Errors name the file, line and column of the offending row.
func LoadFixture(path string) ([]FixtureRow, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read fixture: %w", err)
	}
	return ParseFixture(path, data)
}

// ParseFixture reads fixture rows from data in LoadFixture's format; name
// is the file name messages carry.
func ParseFixture(name string, data []byte) ([]FixtureRow, error) {
	start := significant(data, 0)
	if start < int64(len(data)) && data[start] == '[' {
		return parseFixtureArray(name, data)
	}
	var rows []FixtureRow
	var errs []error
	off := int64(0)
	for line := range bytes.Lines(data) {
		lineOff := off
		off += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := syntaxError(name, data, lineOff, line); err != nil {
			errs = append(errs, err)
			continue
		}
		row, err := parseFixtureRow(line)
		pos := lineCol(name, data, significant(data, lineOff))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pos, err))
			continue
		}
		row.Source = lineOf(name, data, lineOff)
		rows = append(rows, row)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: the fixture has no rows", name)
	}
	return rows, nil
}

func parseFixtureArray(name string, data []byte) ([]FixtureRow, error) {
	if err := syntaxError(name, data, 0, data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	_, _ = dec.Token() // [
	var rows []FixtureRow
	var errs []error
	for dec.More() {
		off := significant(data, dec.InputOffset())
		var raw json.RawMessage
		_ = dec.Decode(&raw) // the syntax check guarantees a value
		row, err := parseFixtureRow(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", lineCol(name, data, off), err))
			continue
		}
		row.Source = lineOf(name, data, off)
		rows = append(rows, row)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: the fixture has no rows", name)
	}
	return rows, nil
}

// parseFixtureRow decodes one row strictly.
func parseFixtureRow(raw []byte) (FixtureRow, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return FixtureRow{}, errors.New(`a row is an object {"args": {...}, "result": ...}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r struct {
		Args   json.RawMessage `json:"args"`
		Result json.RawMessage `json:"result"`
		Error  *string         `json:"error"`
	}
	if err := dec.Decode(&r); err != nil {
		return FixtureRow{}, err
	}
	switch {
	case r.Args == nil:
		return FixtureRow{}, errors.New(`the row has no "args"`)
	case r.Result == nil && r.Error == nil:
		return FixtureRow{}, errors.New(`the row has neither "result" nor "error"`)
	case r.Result != nil && r.Error != nil:
		return FixtureRow{}, errors.New(`the row has both "result" and "error"`)
	case r.Error != nil && *r.Error == "":
		return FixtureRow{}, errors.New(`the row's "error" is empty`)
	}
	row := FixtureRow{Args: r.Args, Result: r.Result}
	if r.Error != nil {
		row.Error = *r.Error
	}
	if _, err := objectOf(row.Args); err != nil {
		return FixtureRow{}, fmt.Errorf("args: %w", err)
	}
	return row, nil
}

// FixtureTool returns an implementation that answers each call with the row
// whose arguments equal the call's, canonically (key order, white space and
// number spelling aside): the tool kind for demos and evaluations, with
// results that never change. A call no row matches is an error observation
// that names the nearest row (the one sharing the most top-level argument
// values, then differing in the fewest keys, then with the smallest edit
// distance between the differing values, then the first), so that the
// model, or the person writing the fixture, sees what was expected. Rows
// with equal arguments are an error.
func FixtureTool(rows []FixtureRow) (Implementation, error) {
	if len(rows) == 0 {
		return nil, errors.New("fixture tool: no rows")
	}
	f := &fixtureTool{rows: make([]fixtureRow, len(rows)), byArgs: make(map[string]int, len(rows))}
	var errs []error
	for i, r := range rows {
		where := r.where(i)
		if r.Result == nil && r.Error == "" {
			errs = append(errs, fmt.Errorf("fixture tool: %s has neither a result nor an error", where))
			continue
		}
		obj, err := objectOf(r.Args)
		if err != nil {
			errs = append(errs, fmt.Errorf("fixture tool: %s: args: %w", where, err))
			continue
		}
		fr := fixtureRow{FixtureRow: r, index: i, values: make(map[string]string, len(obj))}
		for k, v := range obj {
			fr.values[k] = canonical(v)
		}
		fr.key = canonical(obj)
		if r.Result != nil {
			var v any
			if err := json.Unmarshal(r.Result, &v); err != nil {
				errs = append(errs, fmt.Errorf("fixture tool: %s: result: %w", where, err))
				continue
			}
			if s, ok := v.(string); ok {
				fr.observation = s
			} else {
				var buf bytes.Buffer
				_ = json.Compact(&buf, r.Result) // valid: it was just decoded
				fr.observation = buf.String()
			}
		}
		if prev, dup := f.byArgs[fr.key]; dup {
			errs = append(errs, fmt.Errorf("fixture tool: %s and %s have the same arguments %s", rows[prev].where(prev), where, fr.key))
			continue
		}
		f.byArgs[fr.key] = i
		f.rows[i] = fr
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return f, nil
}

type fixtureTool struct {
	rows   []fixtureRow
	byArgs map[string]int
}

type fixtureRow struct {
	FixtureRow
	index       int
	key         string            // canonical arguments
	values      map[string]string // canonical value by top-level key
	observation string
}

func (r FixtureRow) where(i int) string {
	if r.Source != "" {
		return fmt.Sprintf("row %d (%s)", i+1, r.Source)
	}
	return fmt.Sprintf("row %d", i+1)
}

// Call implements Implementation.
func (f *fixtureTool) Call(_ context.Context, args json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	obj, err := objectOf(args)
	if err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	key := canonical(obj)
	if i, ok := f.byArgs[key]; ok {
		r := f.rows[i]
		if r.Error != "" {
			return "", errors.New(r.Error)
		}
		return r.observation, nil
	}
	values := make(map[string]string, len(obj))
	for k, v := range obj {
		values[k] = canonical(v)
	}
	best, bestShared, bestDiff, bestEdits := -1, -1, 0, 0
	var bestKeys []string
	for i, r := range f.rows {
		shared, edits, diff := 0, 0, []string{}
		for k, v := range values {
			rv, ok := r.values[k]
			switch {
			case ok && rv == v:
				shared++
			case ok:
				edits += editDistance(rv, v)
				diff = append(diff, k)
			default:
				diff = append(diff, k)
			}
		}
		for k := range r.values {
			if _, ok := values[k]; !ok {
				diff = append(diff, k)
			}
		}
		if shared > bestShared || (shared == bestShared && (len(diff) < bestDiff || (len(diff) == bestDiff && edits < bestEdits))) {
			best, bestShared, bestDiff, bestEdits, bestKeys = i, shared, len(diff), edits, diff
		}
	}
	r := f.rows[best]
	slices.Sort(bestKeys)
	return "", fmt.Errorf("no fixture row has the arguments %s; the nearest is %s with %s (differs in %s)", key, r.where(r.index), r.key, strings.Join(bestKeys, ", "))
}

// editDistance is the Levenshtein distance between the first 256 bytes of
// a and b: enough to tell a typo from another value without letting a huge
// argument cost quadratic time.
func editDistance(a, b string) int {
	a, b = a[:min(len(a), 256)], b[:min(len(b), 256)]
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// objectOf decodes a JSON object, keeping numbers as written.
func objectOf(raw json.RawMessage) (map[string]any, error) {
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

// canonical encodes a decoded JSON value with sorted keys, no white space
// and numbers in one spelling, so that equal arguments encode equally.
func canonical(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(canonNumbers(v)) // decoded JSON always encodes
	return strings.TrimSuffix(buf.String(), "\n")
}

func canonNumbers(v any) any {
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
			out[k] = canonNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = canonNumbers(e)
		}
		return out
	}
	return v
}

// syntaxError reports a JSON syntax error in part, which starts at off in
// data, with its position in data.
func syntaxError(name string, data []byte, off int64, part []byte) error {
	if json.Valid(part) {
		return nil
	}
	var v any
	err := json.Unmarshal(part, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		at := off + se.Offset
		if se.Offset > 0 {
			at--
		}
		return fmt.Errorf("%s: %v", lineCol(name, data, at), err)
	}
	return fmt.Errorf("%s: invalid JSON: %v", lineCol(name, data, off), err)
}

// significant returns the offset of the first byte at or after off that is
// not white space or a separator.
func significant(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',':
			off++
		default:
			return off
		}
	}
	return off
}

// lineCol renders name:line:col of the byte at off.
func lineCol(name string, data []byte, off int64) string {
	line, col := lineColOf(data, off)
	return name + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col)
}

// lineOf renders name:line of the byte at off.
func lineOf(name string, data []byte, off int64) string {
	line, _ := lineColOf(data, off)
	return name + ":" + strconv.Itoa(line)
}

func lineColOf(data []byte, off int64) (line, col int) {
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
