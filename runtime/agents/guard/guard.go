package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/internal/jsonschemas"
)

// Point is where in a run a guardrail checks a value.
type Point string

// The points.
const (
	// Input is the user's message, before the model reads it.
	Input Point = "input"
	// ToolArguments is a call's arguments, before the call runs.
	ToolArguments Point = "toolArguments"
	// ToolResult is a call's observation, before the model reads it.
	ToolResult Point = "toolResult"
	// Output is the final answer, before the caller reads it.
	Output Point = "output"
)

// Points are the points in the order a run reaches them.
var Points = []Point{Input, ToolArguments, ToolResult, Output}

// Kind is how a guardrail judges a value.
type Kind string

// The kinds.
const (
	KindPattern Kind = "pattern"
	KindCEL     Kind = "cel"
	KindSchema  Kind = "schema"
	KindGo      Kind = "go"
	KindModel   Kind = "model"
)

// Kinds are the kinds, as the schema lists them.
var Kinds = []Kind{KindPattern, KindCEL, KindSchema, KindGo, KindModel}

// Action is what a tripped guardrail does.
type Action string

// The actions.
const (
	// Block ends the run with status blocked and the guardrail's message.
	Block Action = "block"
	// Redact replaces what matched (the whole value, for kinds that do not
	// say where) before anyone reads it.
	Redact Action = "redact"
	// Ask pauses the run for a person, as an approval rule does; only at
	// toolArguments, where there is a call to approve.
	Ask Action = "ask"
	// Log records the verdict and lets the value through.
	Log Action = "log"
)

// Stream says what a client streaming an answer may see of it before an
// output guardrail has judged it.
type Stream string

// The output stream modes.
const (
	// Hold withholds the answer's text until the guardrail passed it; the
	// default.
	Hold Stream = "hold"
	// PostHoc streams the text as it comes; the verdict follows as an
	// event, and a block or redaction applies to the result and the
	// record, not to what was streamed.
	PostHoc Stream = "posthoc"
)

// Builtins are the named built-in patterns.
var Builtins = []string{"card", "email", "iban", "injection", "phone"}

// Guardrail is one declared guardrail.
type Guardrail struct {
	// Name identifies it in agents' lists, verdicts and metrics.
	Name string
	// Kind is how it judges.
	Kind Kind
	// Points are where it checks.
	Points []Point
	// Action is what it does when it trips.
	Action Action
	// Message is what the caller reads of a block, and the reason a person
	// reads with an ask.
	Message string
	// Patterns are RE2 regular expressions (pattern).
	Patterns []string
	// Words are words matched whole, case-insensitively (pattern).
	Words []string
	// Builtins name built-in patterns (pattern): see Builtins.
	Builtins []string
	// When is the CEL condition that trips it (cel).
	When string
	// Schema is the JSON Schema the value must match (schema).
	Schema json.RawMessage
	// Func names the registered Go function (go).
	Func string
	// Tools limits the tool points to these tools (names or path.Match
	// globs); empty means every tool.
	Tools []string
	// Stream says what a streaming client sees before an output guardrail
	// judged the answer; empty means Hold.
	Stream Stream
	// Replacement is what a redaction writes in place of each match; empty
	// means "[redacted]".
	Replacement string
	// Beside lets an input guardrail run beside the run's first model
	// call instead of before it: the call is cancelled when it trips, and
	// nothing of the answer is streamed and no tool runs until it passed.
	// A redacting guardrail cannot: the model must read the redacted text.
	Beside bool
	// Model is the alias of the model that judges (model); a model
	// guardrail has exactly one of Model and Agent.
	Model string
	// Agent is the agent that judges (model), in a run of its own beside
	// the guarded run (as a delegate runs): its instructions say what
	// trips the guardrail, the value judged is its input, and its output
	// schema is the verdict. It may cause no effect (CheckAgents).
	Agent string
	// Prompt tells the model what trips the guardrail (model, with Model);
	// the value judged is the user's message of its call.
	Prompt string
	// Verdict is the JSON Schema of the model's answer (model): an object
	// with a required boolean "tripped" and, optionally, a string
	// "reason"; empty means DefaultVerdict.
	Verdict json.RawMessage
	// OnError is what a model guardrail does when it gets no verdict;
	// empty means ErrorTrip.
	OnError OnError
	// Timeout bounds a model guardrail's call; zero means
	// DefaultModelTimeout.
	Timeout time.Duration
}

// Finding is a checker's judgement of one value.
type Finding struct {
	// Tripped is true when the guardrail's action applies.
	Tripped bool
	// Matched says what tripped it, briefly: the built-in or pattern and
	// the text it matched, the condition, the schema error.
	Matched []string
	// Spans are the byte ranges [start, end) that matched, for a
	// redaction; none means the whole value.
	Spans [][2]int
	// CostUSD is what judging cost (a model guardrail's call).
	CostUSD float64
}

// Value is what a Checker judges.
type Value = policy.GuardInput

// Func is a guardrail implemented in Go, registered by name.
type Func func(ctx context.Context, v Value) (Finding, error)

// Problem is one thing wrong with a guardrail, at one of its fields.
type Problem struct {
	// Field is the field at fault: "kind", "points", "action", "patterns",
	// "words", "builtins", "when", "schema", "func", "stream", "beside",
	// "model", "agent", "prompt", "verdict", "onError", "timeout".
	Field string
	// Index is the position in a list field, from 0; -1 otherwise.
	Index int
	// Message says what is wrong and how to fix it.
	Message string
}

// Error is a guardrail that cannot be used: every Problem found.
type Error struct {
	// Guardrail is its name.
	Guardrail string
	// Problems are its problems, in field order.
	Problems []Problem
}

// Error implements error.
func (e *Error) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Field + ": " + p.Message
	}
	return fmt.Sprintf("guardrail %q: %s", e.Guardrail, strings.Join(msgs, "; "))
}

// MissingFuncError reports a go guardrail whose Go function the program
// did not register. A go guardrail runs only in a program that links the
// team's code: a built service (its business package) or a Go program
// importing the runtime; aidgen run, eval and replay interpret the app
// file and link none, so they refuse an application that has one.
type MissingFuncError struct {
	// Guardrail is the guardrail's name, Func the name it gives its
	// function.
	Guardrail, Func string
}

// Error implements error.
func (e *MissingFuncError) Error() string {
	return fmt.Sprintf("guardrail %q: kind go: no Go function is registered as %q. A go guardrail runs only in a program that links its code and registers it (app.Options.GuardrailFuncs, agents.Config.GuardrailFuncs): a built service, or a Go program importing the runtime. aidgen run, eval and replay interpret the app file and link no Go code, so they cannot run it; use a pattern, cel, schema or model guardrail there", e.Guardrail, e.Func)
}

// DeferredError reports a guardrail feature that is not built.
type DeferredError struct {
	// Feature names it.
	Feature string
}

// Error implements error.
func (e *DeferredError) Error() string {
	return e.Feature + " is not implemented yet"
}

// Checker is a compiled guardrail. It is safe for concurrent use.
type Checker struct {
	g       Guardrail
	res     []namedRE
	cond    *policy.GuardCondition
	schema  *jsonschema.Schema
	fn      Func
	replace string

	// A model guardrail's: what it calls, what it tells the model, the
	// verdict's schema, and what judges (see Judge).
	classifier Classifier
	system     string
	verdict    *jsonschema.Schema
	verdictRaw json.RawMessage
	judge      string
}

type namedRE struct {
	name  string
	re    *regexp.Regexp
	valid func(string) bool // a built-in's check of a match; nil accepts it
	// may is a built-in's quick test that text may hold a match at all,
	// for the common text that does not: Go's regexp runs a large
	// expression such as the injection phrasings on an NFA, tens of
	// microseconds for a sentence. nil means always.
	may func(string) bool
}

// Check returns every problem of g; funcs is the registered Go functions,
// nil when they are not known yet (aidgen vet: the go guardrail's function
// is then not looked up).
func Check(g Guardrail, funcs map[string]Func, lang policy.Language) []Problem {
	_, problems := compile(g, funcs, funcs != nil, lang)
	return problems
}

// Compile checks g and compiles it with what deps gives: the Go
// functions by name, the classifier of a model guardrail. A guardrail with
// problems is an *Error; a go guardrail whose function deps lacks a
// *MissingFuncError; a model guardrail without a classifier a
// *NoClassifierError.
func Compile(g Guardrail, deps Deps) (*Checker, error) {
	c, problems := compile(g, deps.Funcs, false, deps.Conditions)
	if len(problems) > 0 {
		return nil, &Error{Guardrail: g.Name, Problems: problems}
	}
	if g.Kind == KindGo {
		if c.fn = deps.Funcs[g.Func]; c.fn == nil {
			return nil, &MissingFuncError{Guardrail: g.Name, Func: g.Func}
		}
	}
	if g.Kind == KindModel {
		if deps.Classify == nil {
			return nil, &NoClassifierError{Guardrail: g.Name}
		}
		c.classifier = deps.Classify
		if g.Agent == "" {
			c.system, c.judge = c.systemPrompt(), judgeOf(g, c.verdictRaw)
			return c, nil
		}
		digest, ok := "", false
		if deps.AgentDigest != nil {
			digest, ok = deps.AgentDigest(g.Agent)
		}
		if !ok {
			return nil, &Error{Guardrail: g.Name, Problems: []Problem{{Field: "agent", Index: -1, Message: fmt.Sprintf("agent %q is not declared", g.Agent)}}}
		}
		c.judge = "agent " + g.Agent + "@" + digest
	}
	return c, nil
}

func compile(g Guardrail, funcs map[string]Func, lookup bool, lang policy.Language) (*Checker, []Problem) {
	var ps []Problem
	add := func(field string, i int, format string, args ...any) {
		ps = append(ps, Problem{Field: field, Index: i, Message: fmt.Sprintf(format, args...)})
	}
	c := &Checker{g: g, replace: g.Replacement}
	if c.replace == "" {
		c.replace = "[redacted]"
	}
	if !slices.Contains(Kinds, g.Kind) {
		add("kind", -1, "%q is not one of pattern, cel, schema, go, model", g.Kind)
	}
	if len(g.Points) == 0 {
		add("points", -1, "names no point: give input, toolArguments, toolResult or output")
	}
	for i, p := range g.Points {
		if !slices.Contains(Points, p) {
			add("points", i, "%q is not input, toolArguments, toolResult or output", p)
		}
		if slices.Index(g.Points, p) < i {
			add("points", i, "%q is listed twice", p)
		}
	}
	switch g.Action {
	case Block, Redact, Log:
	case Ask:
		for i, p := range g.Points {
			if p != ToolArguments {
				add("points", i, "action ask pauses a tool call for a person, so it checks toolArguments only, not %s; use block or log here", p)
			}
		}
	default:
		add("action", -1, "%q is not block, redact, ask or log", g.Action)
	}
	if g.Action == Block && g.Message == "" {
		add("message", -1, "a blocking guardrail needs the message the caller reads")
	}
	switch g.Stream {
	case "", Hold, PostHoc:
		if g.Stream != "" && !slices.Contains(g.Points, Output) {
			add("stream", -1, "stream says how an answer is streamed, so it needs the output point")
		}
	default:
		add("stream", -1, "%q is not hold or posthoc", g.Stream)
	}
	if g.Beside {
		switch {
		case !slices.Contains(g.Points, Input):
			add("beside", -1, "only an input guardrail runs beside the first model call")
		case g.Action == Redact:
			add("beside", -1, "a redacting guardrail cannot run beside the model call: the model must read the redacted text")
		}
	}
	if g.Action == Redact && slices.Contains(g.Points, ToolArguments) && g.Kind != KindPattern {
		add("action", -1, "redact at toolArguments replaces what matched inside the arguments, which only a pattern guardrail can say; use block or ask")
	}
	set := func(field string, has bool) {
		if has {
			add(field, -1, "is for %s guardrails, not %s", kindOf(field), g.Kind)
		}
	}
	if g.Kind != KindPattern {
		set("patterns", len(g.Patterns) > 0)
		set("words", len(g.Words) > 0)
		set("builtins", len(g.Builtins) > 0)
	}
	if g.Kind != KindCEL {
		set("when", g.When != "")
	}
	if g.Kind != KindSchema {
		set("schema", len(g.Schema) > 0)
	}
	if g.Kind != KindGo {
		set("func", g.Func != "")
	}
	if g.Kind != KindModel {
		set("model", g.Model != "")
		set("agent", g.Agent != "")
		set("prompt", g.Prompt != "")
		set("verdict", len(g.Verdict) > 0)
		set("onError", g.OnError != "")
		set("timeout", g.Timeout != 0)
	}
	switch g.Kind {
	case KindPattern:
		if len(g.Patterns)+len(g.Words)+len(g.Builtins) == 0 {
			add("patterns", -1, "a pattern guardrail needs patterns, words or builtins")
		}
		for i, p := range g.Patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				add("patterns", i, "%q does not compile: %v", p, err)
				continue
			}
			c.res = append(c.res, namedRE{name: "pattern " + p, re: re})
		}
		if len(g.Words) > 0 {
			quoted := make([]string, len(g.Words))
			for i, w := range g.Words {
				if strings.TrimSpace(w) == "" {
					add("words", i, "is empty")
				}
				quoted[i] = regexp.QuoteMeta(w)
			}
			c.res = append(c.res, namedRE{name: "words", re: regexp.MustCompile(`(?i)\b(?:` + strings.Join(quoted, "|") + `)\b`)})
		}
		for i, b := range g.Builtins {
			n, ok := builtins[b]
			if !ok {
				add("builtins", i, "%q is not a built-in; the built-ins are %s", b, strings.Join(Builtins, ", "))
				continue
			}
			c.res = append(c.res, n)
		}
	case KindCEL:
		if g.When == "" {
			add("when", -1, "a cel guardrail needs the condition that trips it")
			break
		}
		cond, err := policy.CompileGuard(lang, g.When)
		if err != nil {
			add("when", -1, "%v", err)
		}
		c.cond = cond
	case KindSchema:
		if len(g.Schema) == 0 {
			add("schema", -1, "a schema guardrail needs the JSON Schema the value must match")
			break
		}
		s, err := jsonschemas.Compile("urn:aid:guardrail:"+g.Name, g.Schema)
		if err != nil {
			add("schema", -1, "%v", err)
		}
		c.schema = s
	case KindGo:
		switch {
		case g.Func == "":
			add("func", -1, "a go guardrail needs the name its function is registered under")
		case lookup && funcs[g.Func] == nil:
			add("func", -1, "no Go function is registered as %q", g.Func)
		}
	case KindModel:
		c.checkModel(add)
	}
	return c, ps
}

func kindOf(field string) Kind {
	switch field {
	case "when":
		return KindCEL
	case "schema":
		return KindSchema
	case "func":
		return KindGo
	case "model", "agent", "prompt", "verdict", "onError", "timeout":
		return KindModel
	}
	return KindPattern
}

// Guardrail returns the guardrail c was compiled from.
func (c *Checker) Guardrail() Guardrail { return c.g }

// maxMatched bounds what a finding quotes of the text it matched, so that
// a verdict never carries a whole document.
const maxMatched = 80

// Check judges v. An error is a value the guardrail could not judge (a Go
// function's failure, a model guardrail's call cut short because ctx
// ended); a cel condition that cannot be judged trips, and so does a model
// guardrail that got no verdict, unless it says onError pass.
func (c *Checker) Check(ctx context.Context, v Value) (Finding, error) {
	switch c.g.Kind {
	case KindPattern:
		return c.match(v.Text), nil
	case KindCEL:
		hold, err := c.cond.Holds(v)
		if err != nil {
			return Finding{Tripped: true, Matched: []string{err.Error()}}, nil
		}
		if hold {
			return Finding{Tripped: true, Matched: []string{c.g.When}}, nil
		}
		return Finding{}, nil
	case KindSchema:
		doc := []byte(v.Text)
		if v.Point != string(ToolArguments) && !json.Valid(doc) {
			doc, _ = json.Marshal(v.Text)
		}
		val, err := jsonschema.UnmarshalJSON(strings.NewReader(string(doc)))
		if err == nil {
			err = c.schema.Validate(val)
		}
		if err != nil {
			return Finding{Tripped: true, Matched: []string{cut(err.Error())}}, nil
		}
		return Finding{}, nil
	case KindGo:
		f, err := c.fn(ctx, v)
		if err != nil {
			return Finding{}, fmt.Errorf("guardrail %q: go function %q: %w", c.g.Name, c.g.Func, err)
		}
		return f, nil
	case KindModel:
		return c.classify(ctx, v)
	}
	return Finding{}, &DeferredError{Feature: fmt.Sprintf("guardrail %q: kind %s", c.g.Name, c.g.Kind)}
}

// match runs every pattern over text.
func (c *Checker) match(text string) Finding {
	var f Finding
	for _, n := range c.res {
		if n.may != nil && !n.may(text) {
			continue
		}
		for _, loc := range n.re.FindAllStringIndex(text, -1) {
			m := text[loc[0]:loc[1]]
			if n.valid != nil && !n.valid(m) {
				continue
			}
			f.Tripped = true
			f.Spans = append(f.Spans, [2]int{loc[0], loc[1]})
			if len(f.Matched) < 8 {
				f.Matched = append(f.Matched, n.name+": "+cut(m))
			}
		}
	}
	return f
}

// Redact returns text with what f matched replaced: each span, or the
// whole text when f has none.
func (c *Checker) Redact(text string, f Finding) string {
	if len(f.Spans) == 0 {
		return c.replace
	}
	spans := slices.Clone(f.Spans)
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	at := 0
	for _, s := range spans {
		if s[0] < at {
			// Overlapping matches of two patterns: the earlier replacement
			// covers the overlap, the rest is replaced from where it ended.
			if s[1] <= at {
				continue
			}
			s[0] = at
		} else {
			b.WriteString(text[at:s[0]])
		}
		b.WriteString(c.replace)
		at = s[1]
	}
	b.WriteString(text[at:])
	return b.String()
}

func cut(s string) string {
	if len(s) <= maxMatched {
		return s
	}
	i := maxMatched
	for i > 0 && !utf8Start(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
