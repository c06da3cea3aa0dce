package policy

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Action is what a policy decides about a call.
type Action string

// The actions.
const (
	// Allow runs the call.
	Allow Action = "allow"
	// Deny does not run the call; the model reads why.
	Deny Action = "deny"
	// Ask pauses the run until a person decides.
	Ask Action = "ask"
)

func (a Action) valid() bool { return a == Allow || a == Deny || a == Ask }

// The approval shorthands a tool may carry, as the agents runtime and the
// schema spell them.
const (
	// ShorthandNever allows the tool's calls that no rule decides.
	ShorthandNever = "never"
	// ShorthandAlways asks about the tool's calls that no rule decides.
	ShorthandAlways = "always"
)

// Rule is one rule of a Policy.
type Rule struct {
	// Tool is a tool's name, or a glob matched against tool names
	// (path.Match syntax: *, ?, [...]).
	Tool string
	// When, when set, is a CEL condition of type bool the call must meet
	// for the rule to match (see the package documentation for its
	// variables).
	When string
	// Action is what the rule decides: allow, deny or ask.
	Action Action
	// Reason says why: the model reads it with a denial, the person
	// asked reads it with the pending call.
	Reason string
}

// Policy is an ordered list of rules and a default; the first rule that
// matches a call decides it.
type Policy struct {
	// Rules are tried in order.
	Rules []Rule
	// Default decides the calls of tools without an approval shorthand
	// that no rule matches; empty means Allow.
	Default Action
}

// Tool is a tool the policy governs.
type Tool struct {
	// Name is the tool's name.
	Name string
	// Approval is the tool's shorthand, ShorthandNever or ShorthandAlways;
	// empty means none, so that the Default applies.
	Approval string
	// From is the declaration the tool was imported from, when a kind made
	// several tools of one declaration (an MCP server's tools, named with
	// the import's prefix); empty for a tool declared under its own name.
	// A rule whose glob matches the declaration's name governs every tool
	// imported from it, as the declaration's shorthand does.
	From string
	// Unlisted marks a declaration that stands for tools whose names are
	// known only when the application starts (an MCP server imported
	// whole), for Check before then: Name and From are the declaration's,
	// and a rule whose glob matches no tool is not a problem, since it may
	// match one of them; Compile, given the real tools, checks it.
	Unlisted bool
}

// Source says what decided a call.
type Source string

// The sources of a decision.
const (
	// SourceRule is a rule of the policy (Decision.Rule says which).
	SourceRule Source = "rule"
	// SourceTool is the tool's approval shorthand.
	SourceTool Source = "tool"
	// SourceDefault is the policy's default.
	SourceDefault Source = "default"
	// SourceGuardrail is a guardrail whose action is ask (package agents
	// records it on the call it asks about; Decide never returns it).
	SourceGuardrail Source = "guardrail"
)

// Decision is what the policy decided about one call, and why.
type Decision struct {
	// Action is allow, deny or ask.
	Action Action
	// Source says what decided.
	Source Source
	// Rule is the number of the deciding rule, from 1; zero unless Source
	// is SourceRule.
	Rule int
	// Reason is the deciding rule's reason, or why a condition could not
	// be judged.
	Reason string
}

// Input is a call as conditions see it.
type Input struct {
	// Tool is the tool's name.
	Tool string
	// Arguments is the call's JSON arguments, an object.
	Arguments json.RawMessage
	// Agent is the calling agent.
	Agent string
	// User is the run's user id; empty when it has none.
	User string
	// Thread is the run's thread id; empty when it has none.
	Thread string
}

// Problem is one thing wrong with a policy, at a rule's field or at a
// tool's approval shorthand.
type Problem struct {
	// Rule is the index of the rule, from 0; -1 for a problem of the
	// default or of a tool.
	Rule int
	// Field is the field at fault: "tool", "when" or "action" of a rule,
	// "default", or "approval" of Tool.
	Field string
	// Tool names the tool whose shorthand is at fault, for Field
	// "approval": its declaration's name (From) for an imported tool.
	Tool string
	// Message says what is wrong and how to fix it.
	Message string
}

// Error is a policy that cannot be used: every Problem found.
type Error struct {
	// Problems are the problems, in the order of the policy.
	Problems []Problem
}

// Error implements error.
func (e *Error) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		switch {
		case p.Rule >= 0:
			msgs[i] = fmt.Sprintf("approval rule %d: %s: %s", p.Rule+1, p.Field, p.Message)
		case p.Tool != "":
			msgs[i] = fmt.Sprintf("tool %q: approval: %s", p.Tool, p.Message)
		default:
			msgs[i] = fmt.Sprintf("approvals: %s: %s", p.Field, p.Message)
		}
	}
	return "approval policy: " + strings.Join(msgs, "; ")
}

// Compiled is a checked policy, ready to decide calls. It is safe for
// concurrent use.
type Compiled struct {
	rules    []compiledRule
	tools    map[string]Action // each tool's shorthand, as an action
	from     map[string]string // each imported tool's declaration (Tool.From)
	fallback Action
}

type compiledRule struct {
	Rule
	cond Condition // nil without a condition
}

// Language compiles conditions (Rule.When, a cel guardrail's): package
// policy/cel's Language is CEL. It is given where conditions are compiled,
// and nil when there are none, so that a program whose policy and
// guardrails have no condition does not link a condition language.
type Language interface {
	// Compile compiles expr, which must be a bool over the variables of
	// a call (Vars); guard adds a guardrail's text and point. The error
	// says why it cannot be compiled.
	Compile(expr string, guard bool) (Condition, error)
}

// Condition is a compiled condition. It is safe for concurrent use.
type Condition interface {
	// Holds evaluates the condition over v; an error (a missing key
	// without has(), a type error, a cost limit) means it could not be
	// judged.
	Holds(v *Vars) (bool, error)
}

// Vars are the variables a condition sees.
type Vars struct {
	// Tool is the called tool's name.
	Tool string
	// Args is the call's JSON arguments, never nil (empty where there are
	// none).
	Args map[string]any
	// Agent is the calling agent; User and Thread the run's user and
	// thread ids, empty when it has none.
	Agent, User, Thread string
	// Text and Point are a guardrail's value as text and where it is
	// checked (GuardInput); empty for an approval rule.
	Text, Point string
}

// NoLanguageError reports a condition given where no condition language
// is: the program was not given one (Language), so that it does not link
// one it does not use.
type NoLanguageError struct {
	// Condition is the condition.
	Condition string
}

// Error implements error.
func (e *NoLanguageError) Error() string {
	return fmt.Sprintf("condition %q: no condition language is set; give cel.Language{} (package runtime/agents/policy/cel) as app.Description.Conditions or agents.Config.Conditions (aidgen sets it for an application whose rules or guardrails have conditions)", e.Condition)
}

// compileCondition compiles a condition with lang, a *NoLanguageError
// when lang is nil.
func compileCondition(lang Language, expr string, guard bool) (Condition, error) {
	if lang == nil {
		return nil, &NoLanguageError{Condition: expr}
	}
	return lang.Compile(expr, guard)
}

// Check returns every problem of p for the tools it governs, in the
// order of the policy, compiling its conditions with lang; none means
// Compile accepts it.
func Check(p Policy, tools []Tool, lang Language) []Problem {
	_, problems := compile(p, tools, lang)
	return problems
}

// Compile checks p for the tools it governs and compiles its conditions
// with lang (nil when it has none). A policy with problems is an *Error
// listing them.
func Compile(p Policy, tools []Tool, lang Language) (*Compiled, error) {
	c, problems := compile(p, tools, lang)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return c, nil
}

func compile(p Policy, tools []Tool, lang Language) (*Compiled, []Problem) {
	var problems []Problem
	add := func(rule int, field, tool, format string, args ...any) {
		problems = append(problems, Problem{Rule: rule, Field: field, Tool: tool, Message: fmt.Sprintf(format, args...)})
	}
	c := &Compiled{tools: make(map[string]Action, len(tools)), from: map[string]string{}, fallback: p.Default}
	if c.fallback == "" {
		c.fallback = Allow
	}
	if !c.fallback.valid() {
		add(-1, "default", "", "%q is not allow, deny or ask", p.Default)
	}
	names := make([]string, 0, len(tools))
	unlisted := false
	shorthandAt := map[string]bool{} // the declarations whose shorthand has a problem already
	for _, t := range tools {
		names = append(names, t.Name)
		unlisted = unlisted || t.Unlisted
		if t.From != "" {
			c.from[t.Name] = t.From
		}
		switch t.Approval {
		case "":
		case ShorthandNever:
			c.tools[t.Name] = Allow
		case ShorthandAlways:
			c.tools[t.Name] = Ask
		default:
			if d := declaration(t); !shorthandAt[d] {
				shorthandAt[d] = true
				add(-1, "approval", d, "%q is not %q or %q", t.Approval, ShorthandNever, ShorthandAlways)
			}
		}
	}
	slices.Sort(names)
	matched := make([][]string, len(p.Rules)) // the tools each rule's glob matches
	for i, r := range p.Rules {
		cr := compiledRule{Rule: r}
		if !r.Action.valid() {
			add(i, "action", "", "%q is not allow, deny or ask", r.Action)
		}
		switch {
		case r.Tool == "":
			add(i, "tool", "", "names no tool: give a tool's name or a glob such as \"issue_*\"")
		default:
			if _, err := path.Match(r.Tool, ""); err != nil {
				add(i, "tool", "", "%q is not a valid glob (%v); globs use *, ? and [...]", r.Tool, err)
				break
			}
			for _, n := range names {
				if c.matches(r.Tool, n) {
					matched[i] = append(matched[i], n)
				}
			}
			if len(matched[i]) == 0 && !unlisted {
				if strings.ContainsAny(r.Tool, `*?[\`) {
					add(i, "tool", "", "glob %q matches no tool; the tools are %s", r.Tool, strings.Join(names, ", "))
				} else {
					add(i, "tool", "", "there is no tool %q; the tools are %s", r.Tool, strings.Join(names, ", "))
				}
			}
		}
		if r.When != "" {
			cond, err := compileCondition(lang, r.When, false)
			if err != nil {
				add(i, "when", "", "%v", err)
			}
			cr.cond = cond
		}
		c.rules = append(c.rules, cr)
	}
	// A rule is unreachable when an earlier one with no condition (or the
	// same condition) matches every tool it matches.
	for j, r := range p.Rules {
		if len(matched[j]) == 0 {
			continue
		}
		for i := range j {
			q := p.Rules[i]
			if len(matched[i]) == 0 || (q.When != "" && q.When != r.When) {
				continue
			}
			if covers(matched[i], matched[j]) {
				add(j, "tool", "", "this rule can never decide: rule %d (%s) matches every call it matches; remove it, or move it above rule %d", i+1, describe(q), i+1)
				break
			}
		}
	}
	// decider is the first rule without a condition that matches every call
	// of a tool, or -1.
	decider := func(tool string) int {
		for i, q := range p.Rules {
			if q.When == "" && slices.Contains(matched[i], tool) {
				return i
			}
		}
		return -1
	}
	// A declaration's shorthand is unreachable when such rules decide
	// every call of each of its tools.
	var decls []string
	byDecl := map[string][]Tool{}
	for _, t := range tools {
		d := declaration(t)
		if _, ok := byDecl[d]; !ok {
			decls = append(decls, d)
		}
		byDecl[d] = append(byDecl[d], t)
	}
	for _, d := range decls {
		ts := byDecl[d]
		if ts[0].Approval == "" || shorthandAt[d] {
			continue
		}
		first := -1
		for _, t := range ts {
			i := decider(t.Name)
			if i < 0 {
				first = -1
				break
			}
			if first < 0 {
				first = i
			}
		}
		if first < 0 {
			continue
		}
		q := p.Rules[first]
		if len(ts) == 1 {
			add(-1, "approval", d, "approval %q is never used: approval rule %d (%s) decides every call of %s; remove approval or the rule", ts[0].Approval, first+1, describe(q), ts[0].Name)
		} else {
			add(-1, "approval", d, "approval %q is never used: approval rules (the first, rule %d: %s) decide every call of each tool %s imports; remove approval or the rules", ts[0].Approval, first+1, describe(q), d)
		}
	}
	return c, problems
}

// declaration is the name of the declaration t comes from.
func declaration(t Tool) string {
	if t.From != "" {
		return t.From
	}
	return t.Name
}

// matches reports whether the glob of a rule matches the tool: its name, or
// the name of the declaration it was imported from.
func (c *Compiled) matches(glob, tool string) bool {
	if ok, _ := path.Match(glob, tool); ok {
		return true
	}
	from, ok := c.from[tool]
	if !ok {
		return false
	}
	ok, _ = path.Match(glob, from)
	return ok
}

// covers reports whether every name of b is in a (both sorted).
func covers(a, b []string) bool {
	for _, n := range b {
		if _, ok := slices.BinarySearch(a, n); !ok {
			return false
		}
	}
	return true
}

func describe(r Rule) string {
	if r.When == "" {
		return fmt.Sprintf("%s %s", r.Action, r.Tool)
	}
	return fmt.Sprintf("%s %s when %s", r.Action, r.Tool, r.When)
}

// Decide decides a call of a tool. Tools not given to Compile are decided
// by the rules that match their names, then the default.
func (c *Compiled) Decide(in Input) Decision {
	var vars *Vars // built at the first condition
	for i, r := range c.rules {
		if !c.matches(r.Tool, in.Tool) {
			continue
		}
		if r.cond != nil {
			if vars == nil {
				var args map[string]any
				if err := json.Unmarshal(in.Arguments, &args); err != nil || args == nil {
					return Decision{Action: Deny, Source: SourceRule, Rule: i + 1, Reason: fmt.Sprintf("the condition of approval rule %d cannot judge arguments that are not a JSON object", i+1)}
				}
				vars = &Vars{Tool: in.Tool, Args: args, Agent: in.Agent, User: in.User, Thread: in.Thread}
			}
			hold, err := r.cond.Holds(vars)
			if err != nil {
				return Decision{Action: Deny, Source: SourceRule, Rule: i + 1, Reason: fmt.Sprintf("the condition of approval rule %d (%s) could not be judged: %v", i+1, r.When, err)}
			}
			if !hold {
				continue
			}
		}
		return Decision{Action: r.Action, Source: SourceRule, Rule: i + 1, Reason: r.Reason}
	}
	if a, ok := c.tools[in.Tool]; ok {
		return Decision{Action: a, Source: SourceTool}
	}
	return Decision{Action: c.fallback, Source: SourceDefault}
}

// AlwaysAllows reports whether every call of the tool is allowed, whatever
// its arguments: the rules that may match it all allow, up to one without
// a condition, or leave it to a shorthand or default that allows.
func (c *Compiled) AlwaysAllows(tool string) bool {
	for _, r := range c.rules {
		if !c.matches(r.Tool, tool) {
			continue
		}
		if r.Action != Allow {
			return false
		}
		if r.cond == nil {
			return true
		}
	}
	if a, ok := c.tools[tool]; ok {
		return a == Allow
	}
	return c.fallback == Allow
}

// Unruled reports whether the policy has nothing to decide about the
// tool: no rule may match it, it has no approval of its own, and the
// default allows. Every call of it is allowed by the default, and a caller
// that records decisions need not judge or record one.
func (c *Compiled) Unruled(tool string) bool {
	if c.fallback != Allow {
		return false
	}
	if _, ok := c.tools[tool]; ok {
		return false
	}
	for _, r := range c.rules {
		if c.matches(r.Tool, tool) {
			return false
		}
	}
	return true
}

// MayAsk reports whether some call of the tool could be decided Ask: a
// rule that may match it asks, or the rules may leave it to a shorthand or
// default that asks.
func (c *Compiled) MayAsk(tool string) bool {
	for _, r := range c.rules {
		if !c.matches(r.Tool, tool) {
			continue
		}
		if r.Action == Ask {
			return true
		}
		if r.cond == nil {
			return false // it decides every call of the tool
		}
	}
	if a, ok := c.tools[tool]; ok {
		return a == Ask
	}
	return c.fallback == Ask
}
