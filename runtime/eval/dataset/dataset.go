package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aidgen/aid/runtime/internal/jsonpos"
	"github.com/aidgen/aid/runtime/kind"
)

// Case is one evaluation case: an input for the target and the answer expected from it.
//
// In a dataset file, "input" and "expected" are usually JSON strings and are kept verbatim.
// Any other non-null JSON value (an object for a structured tool call, a number, an array) is
// accepted too and is stored as its compact JSON text, so that metrics such as
// eval.JSONSchemaValid or a custom structural comparison can decode it again; eval.ExactMatch
// compares that text as written.
type Case struct {
	// ID identifies the case within its dataset; it is how baselines pair cases across runs.
	ID string
	// Input is what the target receives.
	Input string
	// Expected is the reference answer the metrics compare against.
	Expected string
	// Tags group cases (for example by region or difficulty) for lookup and reporting.
	Tags []string
	// Metadata carries free-form per-case data that runners and custom metrics may use.
	Metadata map[string]any
	// Group, when set, names the cluster the case belongs to: cases whose scores move
	// together (several questions on one document, paraphrases of one question). The gate
	// treats a group, not a case, as the independent unit of its standard error (see the
	// package documentation); a case without a group is its own cluster. In a dataset file
	// it is the optional string field "group".
	Group string
	// Approvals, when set, decides the calls that pause this case's runs,
	// overriding the eval's own policy; in a dataset file it is the
	// optional field "approvals", "approve" or "reject".
	Approvals Approvals
	// Tools are the case's own answers to tool calls: a stub's answers
	// for this case, or the calls of the recorded run the case was
	// sampled from, which a tool in replay mode answers with (see
	// eval.ToolMode). In a dataset file it is the optional array "tools".
	Tools []ToolAnswer
	// Blocked is what the case expects of the guardrails, for the
	// guardrail_blocked metric: nil (the default) and true expect the run
	// blocked, false expects it not blocked. In a dataset file it is the
	// optional boolean field "blocked".
	Blocked *bool `json:",omitempty"`
	// Tripped names the guardrails the case expects to trip, for the
	// guardrail_tripped metric: exactly those, in any order; empty (but
	// not nil) expects none to, and nil (the default) at least one. In a
	// dataset file it is the optional array of guardrail names "tripped".
	Tripped []string `json:",omitempty"`
}

// HasTag reports whether the case carries the tag.
func (c Case) HasTag(tag string) bool { return slices.Contains(c.Tags, tag) }

// PromptData is what a model target's prompt template is rendered with: the
// case without its expected answer, which a prompt must never see. The eval
// renders templates with it (eval.ModelRunner), and aidgen vet checks them
// against its fields (ir), so that a misspelt field fails before an eval.
type PromptData struct {
	// ID is the case id.
	ID string
	// Input is the case input.
	Input string
	// Tags are the case tags.
	Tags []string
	// Metadata is the case metadata.
	Metadata map[string]any
}

// PromptData is the case as a prompt template sees it. Metadata is never
// nil, so that a template's index of a key the case lacks fails as any
// missing key does.
func (c Case) PromptData() PromptData {
	data := PromptData{ID: c.ID, Input: c.Input, Tags: c.Tags, Metadata: c.Metadata}
	if data.Metadata == nil {
		data.Metadata = map[string]any{}
	}
	return data
}

// Dataset is a named, versioned list of cases in a stable order.
//
// The order of Cases is the order of the file and is the order of every result, so that
// reports and baselines are reproducible.
type Dataset struct {
	// Name names the dataset; it is recorded in baselines.
	Name string
	// Version is the dataset's own version; a baseline records it so that a gate against a
	// baseline of another dataset version is visible in review.
	Version string
	// Cases holds the cases in file order.
	Cases []Case
}

// New checks cases (unique non-empty ids, non-empty inputs) and returns a dataset.
func New(name, version string, cases []Case) (*Dataset, error) {
	d := &Dataset{Name: name, Version: version, Cases: cases}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return d, nil
}

// Validate reports every case with an empty or duplicate id or an empty input.
func (d *Dataset) Validate() error {
	if d == nil {
		return errors.New("dataset is nil")
	}
	var errs []error
	seen := make(map[string]int, len(d.Cases))
	for i, c := range d.Cases {
		switch {
		case c.ID == "":
			errs = append(errs, fmt.Errorf("dataset %q: case %d: missing id", d.Name, i))
		case seen[c.ID] > 0:
			errs = append(errs, fmt.Errorf("dataset %q: case %d: duplicate id %q (first is case %d)", d.Name, i, c.ID, seen[c.ID]-1))
		default:
			seen[c.ID] = i + 1
		}
		if c.Input == "" {
			errs = append(errs, fmt.Errorf("dataset %q: case %d: missing input", d.Name, i))
		}
	}
	return errors.Join(errs...)
}

// Case returns the case with the given id.
func (d *Dataset) Case(id string) (Case, bool) {
	for _, c := range d.Cases {
		if c.ID == id {
			return c, true
		}
	}
	return Case{}, false
}

// Tagged returns the cases that carry the tag, in dataset order.
func (d *Dataset) Tagged(tag string) []Case {
	var out []Case
	for _, c := range d.Cases {
		if c.HasTag(tag) {
			out = append(out, c)
		}
	}
	return out
}

// Tags returns every tag used by the dataset, sorted.
func (d *Dataset) Tags() []string {
	var out []string
	for _, c := range d.Cases {
		out = append(out, c.Tags...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Subset returns a dataset with the same name and version holding only the cases that
// carry at least one of the tags, in dataset order.
func (d *Dataset) Subset(tags ...string) *Dataset {
	out := &Dataset{Name: d.Name, Version: d.Version}
	for _, c := range d.Cases {
		if slices.ContainsFunc(tags, c.HasTag) {
			out.Cases = append(out.Cases, c)
		}
	}
	return out
}

// Position is a place in a dataset or baseline file; Line and Col count from 1 and Col
// counts bytes, as the Go toolchain does.
type Position struct {
	// File is the file name as given to the loader.
	File string
	// Line is the 1-based line number.
	Line int
	// Col is the 1-based byte column.
	Col int
}

// String formats the position as file:line:col.
func (p Position) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is one problem in a dataset file, at a position.
type Error struct {
	// Pos is where the problem is.
	Pos Position
	// Msg says what is wrong and, where it helps, what to change.
	Msg string
}

// Error formats the problem as file:line:col: message.
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList holds every problem found in one dataset file, sorted by position.
type ErrorList []*Error

// Error lists the problems, one per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the problems so that errors.As finds a *Error.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Load reads a dataset file; a ".jsonl" file holds one case per line, any other
// file is JSON (see [ParseJSON]).
func Load(path string) (*Dataset, error) { return Read(kind.Files{}, path) }

// Read is Load for the dataset an application names, read
// through its files (on disk, or embedded in a generated service).
func Read(files kind.Files, name string) (*Dataset, error) {
	data, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("load dataset: %w", err)
	}
	path := files.Name(name)
	if strings.EqualFold(filepath.Ext(path), ".jsonl") {
		return ParseJSONL(path, data)
	}
	return ParseJSON(path, data)
}

// ParseJSON parses a JSON dataset: either an object
// {"name": ..., "version": ..., "cases": [...]} or a bare array of cases. A case has the
// fields "id", "input" and "expected" (required), "tags" (an array of strings),
// "metadata" (an object), "tools" (the case's answers to tool calls, see [ToolAnswer]), "blocked" (true or false: whether the guardrail_blocked metric expects the run
// blocked), "tripped" (the names of the guardrails the guardrail_tripped metric expects to
// trip; [] for none), "approvals" ("approve" or "reject": how the eval decides the
// calls that pause this case's runs, overriding the eval's policy) and "group" (a
// non-empty string naming the cluster of cases
// whose scores move together, see [Case]). A bare array takes
// its name from the file name without extension and has no version. The error, when not
// nil, is a [ErrorList] naming every problem with its position.
func ParseJSON(filename string, data []byte) (*Dataset, error) {
	p := newParser(filename, data)
	ds := &Dataset{Name: defaultName(filename)}
	if off, err := syntaxCheck(data); err != nil {
		p.errorf(off, "invalid JSON: %v", err)
		return nil, p.result()
	}
	start := int(jsonpos.Significant(data, 0))
	switch data[start] {
	case '[':
		p.parseCases(data[start:], start)
	case '{':
		p.parseDatasetObject(ds, data[start:], start)
	default:
		p.errorf(start, "dataset must be a JSON object with \"cases\" or an array of cases")
	}
	ds.Cases = p.cases
	if err := p.result(); err != nil {
		return nil, err
	}
	return ds, nil
}

// ParseJSONL parses a JSON Lines dataset: one case object per line, blank lines
// ignored. The name comes from the file name without extension and there is no version.
func ParseJSONL(filename string, data []byte) (*Dataset, error) {
	p := newParser(filename, data)
	ds := &Dataset{Name: defaultName(filename)}
	for start := 0; start < len(data); {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += start
		}
		line := data[start:end]
		if len(bytes.TrimSpace(line)) > 0 {
			if off, err := syntaxCheck(line); err != nil {
				p.errorf(start+off, "invalid JSON: %v", err)
			} else {
				s := int(jsonpos.Significant(line, 0))
				p.parseCase(bytes.TrimSpace(line), start+s)
			}
		}
		start = end + 1
	}
	ds.Cases = p.cases
	if len(ds.Cases) == 0 && len(p.errs) == 0 {
		p.errorf(0, "dataset has no cases")
	}
	if err := p.result(); err != nil {
		return nil, err
	}
	return ds, nil
}

func defaultName(filename string) string {
	base := filepath.Base(filename)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// syntaxCheck returns the offset and cause of the first JSON syntax error in data.
func syntaxCheck(data []byte) (int, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return 0, errors.New("empty input")
	}
	var raw json.RawMessage
	err := json.Unmarshal(data, &raw)
	if err == nil {
		return 0, nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(se.Offset) - 1
		return max(0, min(off, len(data)-1)), errors.New(se.Error())
	}
	return 0, err
}

// parser accumulates cases and positioned errors for one file.
type parser struct {
	file  string
	data  []byte
	lines []int // offsets at which each line starts
	errs  ErrorList
	cases []Case
	ids   map[string]int // id → offset of its first definition
}

func newParser(file string, data []byte) *parser {
	lines := []int{0}
	for i, b := range data {
		if b == '\n' {
			lines = append(lines, i+1)
		}
	}
	return &parser{file: file, data: data, lines: lines, ids: map[string]int{}}
}

// PositionAt is the position of byte offset off in data, the contents of
// file; the eval's baseline files report their errors with it.
func PositionAt(file string, data []byte, off int) Position { return newParser(file, data).pos(off) }

func (p *parser) pos(off int) Position {
	line, _ := slices.BinarySearch(p.lines, off+1)
	// BinarySearch returns the number of line starts ≤ off, which is the 1-based line.
	return Position{File: p.file, Line: line, Col: off - p.lines[line-1] + 1}
}

func (p *parser) errorf(off int, format string, args ...any) {
	p.errs = append(p.errs, &Error{Pos: p.pos(off), Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) result() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *Error) int {
		if a.Pos.Line != b.Pos.Line {
			return a.Pos.Line - b.Pos.Line
		}
		return a.Pos.Col - b.Pos.Col
	})
	return p.errs
}

// member is one key/value pair of a JSON object with the offsets of both.
type member struct {
	key    string
	keyOff int
	val    json.RawMessage
	valOff int
}

// members splits a syntactically valid JSON object into its members; base is the offset
// of obj in the file. A key that comes again is reported where it does, and only its first
// member is returned.
func (p *parser) members(obj []byte, base int) []member {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil { // '{'
		return nil
	}
	var out []member
	seen := map[string]bool{}
	for dec.More() {
		keyOff := int(jsonpos.Significant(obj, dec.InputOffset()))
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return out
		}
		if seen[key] {
			p.errorf(base+keyOff, "duplicate field %q", key)
			continue
		}
		seen[key] = true
		valOff := int(dec.InputOffset()) - len(val)
		out = append(out, member{key: key, keyOff: base + keyOff, val: val, valOff: base + valOff})
	}
	return out
}

// elements splits a syntactically valid JSON array into its elements with their offsets.
func elements(arr []byte, base int) (vals []json.RawMessage, offs []int) {
	dec := json.NewDecoder(bytes.NewReader(arr))
	if _, err := dec.Token(); err != nil { // '['
		return nil, nil
	}
	for dec.More() {
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return vals, offs
		}
		vals = append(vals, val)
		offs = append(offs, base+int(dec.InputOffset())-len(val))
	}
	return vals, offs
}

func kindOf(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

func (p *parser) parseDatasetObject(ds *Dataset, obj []byte, base int) {
	var sawCases bool
	for _, m := range p.members(obj, base) {
		switch m.key {
		case "name", "version":
			var s string
			if err := json.Unmarshal(m.val, &s); err != nil {
				p.errorf(m.valOff, "%s must be a string, got %s", m.key, kindOf(m.val))
				continue
			}
			if m.key == "name" {
				ds.Name = s
			} else {
				ds.Version = s
			}
		case "description":
			// Accepted for humans; not used.
		case "cases":
			sawCases = true
			if m.val[0] != '[' {
				p.errorf(m.valOff, "cases must be an array, got %s", kindOf(m.val))
				continue
			}
			p.parseCases(m.val, m.valOff)
		default:
			p.errorf(m.keyOff, "unknown field %q (want name, version, description, cases)", m.key)
		}
	}
	if !sawCases {
		p.errorf(base, "missing field \"cases\"")
	}
}

func (p *parser) parseCases(arr []byte, base int) {
	vals, offs := elements(arr, base)
	if len(vals) == 0 {
		p.errorf(base, "dataset has no cases")
	}
	for i, v := range vals {
		p.parseCase(v, offs[i])
	}
}

// parseCase decodes one case object at offset base, recording every problem.
func (p *parser) parseCase(obj []byte, base int) {
	if obj[0] != '{' {
		p.errorf(base, "case must be a JSON object, got %s", kindOf(obj))
		return
	}
	var c Case
	var haveID, haveInput, haveExpected bool
	idOff := base
	for _, m := range p.members(obj, base) {
		switch m.key {
		case "id":
			if err := json.Unmarshal(m.val, &c.ID); err != nil {
				p.errorf(m.valOff, "id must be a string, got %s", kindOf(m.val))
				haveID = true // reported; do not also say it is missing
				continue
			}
			if c.ID == "" {
				p.errorf(m.valOff, "id must not be empty")
			}
			haveID, idOff = true, m.valOff
		case "input", "expected":
			s, ok := p.textValue(m)
			if !ok {
				continue
			}
			if m.key == "input" {
				c.Input, haveInput = s, true
				if s == "" {
					p.errorf(m.valOff, "input must not be empty")
				}
			} else {
				c.Expected, haveExpected = s, true
			}
		case "tags":
			if err := json.Unmarshal(m.val, &c.Tags); err != nil || m.val[0] != '[' {
				p.errorf(m.valOff, "tags must be an array of strings")
			}
		case "group":
			if m.val[0] != '"' {
				p.errorf(m.valOff, "group must be a string, got %s", kindOf(m.val))
				continue
			}
			if err := json.Unmarshal(m.val, &c.Group); err != nil {
				p.errorf(m.valOff, "group: %v", err)
				continue
			}
			if c.Group == "" {
				p.errorf(m.valOff, "group must not be empty; leave it out for a case of its own")
			}
		case "approvals":
			var a string
			if err := json.Unmarshal(m.val, &a); err != nil || m.val[0] != '"' {
				p.errorf(m.valOff, "approvals must be %q or %q, got %s", ApprovalsApprove, ApprovalsReject, kindOf(m.val))
				continue
			}
			if c.Approvals = Approvals(a); a == "" || c.Approvals.Check() != nil {
				p.errorf(m.valOff, "approvals must be %q or %q, not %q", ApprovalsApprove, ApprovalsReject, a)
			}
		case "tools":
			p.parseToolAnswers(&c, m)
		case "blocked":
			var b bool
			if err := json.Unmarshal(m.val, &b); err != nil || (m.val[0] != 't' && m.val[0] != 'f') {
				p.errorf(m.valOff, "blocked must be true or false, got %s", kindOf(m.val))
				continue
			}
			c.Blocked = &b
		case "tripped":
			var names []string
			if err := json.Unmarshal(m.val, &names); err != nil || m.val[0] != '[' {
				p.errorf(m.valOff, "tripped must be an array of guardrail names, got %s", kindOf(m.val))
				continue
			}
			c.Tripped = []string{}
			for i, n := range names {
				switch {
				case n == "":
					p.errorf(m.valOff, "tripped[%d] is empty; name a guardrail", i)
				case slices.Contains(c.Tripped, n):
					p.errorf(m.valOff, "tripped names guardrail %q twice", n)
				default:
					c.Tripped = append(c.Tripped, n)
				}
			}
		case "metadata":
			if m.val[0] != '{' {
				p.errorf(m.valOff, "metadata must be an object, got %s", kindOf(m.val))
				continue
			}
			if err := json.Unmarshal(m.val, &c.Metadata); err != nil {
				p.errorf(m.valOff, "metadata: %v", err)
			}
		default:
			p.errorf(m.keyOff, "unknown field %q (want id, input, expected, tags, metadata, group, approvals, tools, blocked, tripped)", m.key)
		}
	}
	for _, miss := range []struct {
		ok   bool
		name string
	}{{haveID, "id"}, {haveInput, "input"}, {haveExpected, "expected"}} {
		if !miss.ok {
			p.errorf(base, "case %s: missing field %q", describeCase(c.ID), miss.name)
		}
	}
	if c.ID != "" {
		if first, dup := p.ids[c.ID]; dup {
			fp := p.pos(first)
			p.errorf(idOff, "duplicate id %q (first defined at %d:%d)", c.ID, fp.Line, fp.Col)
			return
		}
		p.ids[c.ID] = idOff
	}
	p.cases = append(p.cases, c)
}

func describeCase(id string) string {
	if id == "" {
		return "without id"
	}
	return fmt.Sprintf("%q", id)
}

// textValue returns a string member verbatim and any other non-null value as compact JSON.
func (p *parser) textValue(m member) (string, bool) {
	switch m.val[0] {
	case '"':
		var s string
		if err := json.Unmarshal(m.val, &s); err != nil {
			p.errorf(m.valOff, "%s: %v", m.key, err)
			return "", false
		}
		return s, true
	case 'n':
		p.errorf(m.valOff, "%s must not be null", m.key)
		return "", false
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, m.val); err != nil {
			p.errorf(m.valOff, "%s: %v", m.key, err)
			return "", false
		}
		return buf.String(), true
	}
}

// Approvals is how an eval decides the calls that pause a sample's run for
// approval: an agent with approval tools can then be gated. The zero value
// decides nothing, and a sample whose run pauses fails.
type Approvals string

// The approval policies of an eval.
const (
	// ApprovalsNone decides nothing: a paused run fails its sample.
	ApprovalsNone Approvals = ""
	// ApprovalsApprove approves every paused call.
	ApprovalsApprove Approvals = "approve"
	// ApprovalsReject rejects every paused call.
	ApprovalsReject Approvals = "reject"
)

// Check reports an approval policy that is not one of the above.
func (a Approvals) Check() error {
	switch a {
	case ApprovalsNone, ApprovalsApprove, ApprovalsReject:
		return nil
	}
	return fmt.Errorf("approvals must be %q or %q, not %q", ApprovalsApprove, ApprovalsReject, string(a))
}

// ToolAnswer is one answer a case gives a call of a tool: the case's own
// stub, or, for a case sampled from a recorded run, a call the run made.
// In a dataset file it is an element of the case's "tools" array:
// {"tool": "...", "args": {...}, "result": <any JSON>} or
// {"tool": "...", "args": {...}, "error": "..."}; without "args" it
// answers any call of the tool.
type ToolAnswer struct {
	// Tool is the tool's name, as the model calls it.
	Tool string `json:"tool"`
	// Args are the arguments the answer is for, a JSON object; nil answers
	// any call of the tool.
	Args json.RawMessage `json:"args,omitempty"`
	// Result is the answer, any JSON value; a string is the observation as
	// is.
	Result json.RawMessage `json:"result,omitempty"`
	// Error, when set instead of Result, fails the call with this message.
	Error string `json:"error,omitempty"`
}

// parseToolAnswers decodes a case's "tools" array.
func (p *parser) parseToolAnswers(c *Case, m member) {
	if m.val[0] != '[' {
		p.errorf(m.valOff, "tools must be an array of {\"tool\", \"args\", \"result\" or \"error\"}, got %s", kindOf(m.val))
		return
	}
	vals, offs := elements(m.val, m.valOff)
	for i, v := range vals {
		if v[0] != '{' {
			p.errorf(offs[i], "a tool answer must be an object {\"tool\", \"args\", \"result\" or \"error\"}, got %s", kindOf(v))
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.DisallowUnknownFields()
		var a struct {
			Tool   string          `json:"tool"`
			Args   json.RawMessage `json:"args"`
			Result json.RawMessage `json:"result"`
			Error  *string         `json:"error"`
		}
		if err := dec.Decode(&a); err != nil {
			p.errorf(offs[i], "tool answer: %v", err)
			continue
		}
		switch {
		case a.Tool == "":
			p.errorf(offs[i], "a tool answer needs \"tool\", the tool's name")
		case a.Args != nil && a.Args[0] != '{':
			p.errorf(offs[i], "tool answer for %q: args must be an object, got %s", a.Tool, kindOf(a.Args))
		case (a.Result == nil) == (a.Error == nil):
			p.errorf(offs[i], "tool answer for %q needs exactly one of \"result\" and \"error\"", a.Tool)
		case a.Error != nil && *a.Error == "":
			p.errorf(offs[i], "tool answer for %q: error must not be empty", a.Tool)
		default:
			ta := ToolAnswer{Tool: a.Tool, Args: a.Args, Result: a.Result}
			if a.Error != nil {
				ta.Error = *a.Error
			}
			c.Tools = append(c.Tools, ta)
		}
	}
}
