package ir

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aidgen/aid/runtime/rules"
)

// Position is a place in an IR file.
type Position struct {
	// Filename is the file as it was named to Load.
	Filename string
	// Line is 1-based.
	Line int
	// Column is 1-based, counted in bytes.
	Column int
}

// String formats the position as file:line:col, or file when the line is
// unknown.
func (p Position) String() string {
	if p.Line == 0 {
		return p.Filename
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column)
}

func (p Position) compare(q Position) int {
	return cmp.Or(
		strings.Compare(p.Filename, q.Filename),
		cmp.Compare(p.Line, q.Line),
		cmp.Compare(p.Column, q.Column),
	)
}

// Error is one problem in an IR file, at the position of the offending
// value.
type Error struct {
	// Pos is where the offending value is written.
	Pos Position
	// Path is the dotted path of the offending value, such as
	// "agents.triage.model"; empty for syntax errors.
	Path string
	// Msg says what is wrong and what to change.
	Msg string
}

// Error formats the problem as file:line:col: path: message.
func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.Pos, e.Msg)
	}
	return fmt.Sprintf("%s: %s: %s", e.Pos, e.Path, e.Msg)
}

// Errors is every problem found in an IR file, in a stable order: by
// position, then path, then message. Load returns all of them at once so a
// user fixes a file in one round.
type Errors []*Error

// Error lists the problems, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// sortErrors orders errors by position, path and message and drops exact
// duplicates, which CUE reports when one value fails through several
// references.
func sortErrors(es Errors) Errors {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(a.Pos.compare(b.Pos), strings.Compare(a.Path, b.Path), strings.Compare(a.Msg, b.Msg))
	})
	return slices.CompactFunc(es, func(a, b *Error) bool {
		return a.Pos == b.Pos && a.Path == b.Path && a.Msg == b.Msg
	})
}

// suggest returns the candidate closest to name when it is close enough to
// be a likely typo, for "did you mean" hints: rules.Suggest, the one rule
// the runtime's messages use too.
func suggest(name string, candidates []string) string { return rules.Suggest(name, candidates) }

// Unknown references list the known names when there are at most
// listAll of them, and otherwise only the listNearest closest ones and how
// many others there are: an IR with 500 tools must not print them all on
// one line.
const (
	listAll     = 5
	listNearest = 3
)

// unknownRef formats the message for a reference that does not resolve:
// what was asked for, the likely intended name, and the known names (or
// the nearest few of them).
func unknownRef(what, name string, known []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown %s %q", what, name)
	if s := suggest(name, known); s != "" {
		fmt.Fprintf(&b, " (did you mean %q?)", s)
	}
	switch {
	case len(known) == 0:
		fmt.Fprintf(&b, "; no %s are defined", plural(what))
	case len(known) <= listAll:
		fmt.Fprintf(&b, "; known %s: %s", plural(what), strings.Join(known, ", "))
	default:
		fmt.Fprintf(&b, "; nearest known %s: %s (and %d others)", plural(what), strings.Join(nearest(name, known, listNearest), ", "), len(known)-listNearest)
	}
	return b.String()
}

// nearest returns the n candidates closest to name: rules.Nearest.
func nearest(name string, candidates []string, n int) []string {
	return rules.Nearest(name, candidates, n)
}

// boundWords says in words what a numeric bound as CUE prints it (">0",
// "<=1") asks for; "" when the bound is not a plain comparison.
func boundWords(bound string) string {
	for _, op := range []struct{ op, words string }{
		{">=", "at least"}, {"<=", "at most"}, {">", "greater than"}, {"<", "less than"},
	} {
		if rest, ok := strings.CutPrefix(bound, op.op); ok {
			if _, err := strconv.ParseFloat(rest, 64); err == nil {
				return op.words + " " + rest
			}
			return ""
		}
	}
	return ""
}

// budgetLimitHint says what to do with a budget limit of zero or less,
// which would allow no call at all, rather than leave it unset as a
// user writing 0 may have meant; "" for any other path.
func budgetLimitHint(path []string) string {
	if len(path) != 3 || path[0] != "budgets" {
		return ""
	}
	other := map[string]string{"maxUSD": "maxTotalTokens", "maxTotalTokens": "maxUSD"}[path[2]]
	if other == "" {
		return ""
	}
	return fmt.Sprintf("; a limit must leave room for a call: raise it, or remove %s and cap the budget with %s", path[2], other)
}

func plural(word string) string {
	if strings.HasSuffix(word, "s") {
		return word + "es"
	}
	return word + "s"
}
