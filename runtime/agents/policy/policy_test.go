package policy_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aidgen/aid/runtime/agents/policy"
	"github.com/aidgen/aid/runtime/agents/policy/cel"
)

var tools = []policy.Tool{
	{Name: "lookup_order"},
	{Name: "issue_refund", Approval: policy.ShorthandAlways},
	{Name: "issue_credit"},
	{Name: "update_ticket", Approval: policy.ShorthandNever},
}

func TestDecide(t *testing.T) {
	p := policy.Policy{
		Default: policy.Ask,
		Rules: []policy.Rule{
			{Tool: "issue_*", When: "args.amount_usd > 500", Action: policy.Deny, Reason: "refunds above 500 USD need a manager"},
			{Tool: "issue_refund", When: `args.amount_usd <= 100 && agent == "billing"`, Action: policy.Allow},
			{Tool: "lookup_order", Action: policy.Allow},
			{Tool: "issue_credit", When: `has(args.note) && args.note.startsWith("goodwill")`, Action: policy.Allow},
			{Tool: "update_ticket", When: `user == "vip" || thread == "t-1"`, Action: policy.Ask, Reason: "a person sees VIP tickets"},
		},
	}
	c, err := policy.Compile(p, tools, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		in   policy.Input
		want policy.Decision
	}{
		{"deny above the bound", policy.Input{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount_usd": 900}`), Agent: "billing"},
			policy.Decision{Action: policy.Deny, Source: policy.SourceRule, Rule: 1, Reason: "refunds above 500 USD need a manager"}},
		{"the glob covers the other tool", policy.Input{Tool: "issue_credit", Arguments: json.RawMessage(`{"amount_usd": 501.5}`)},
			policy.Decision{Action: policy.Deny, Source: policy.SourceRule, Rule: 1, Reason: "refunds above 500 USD need a manager"}},
		{"an int compares with a double", policy.Input{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount_usd": 100}`), Agent: "billing"},
			policy.Decision{Action: policy.Allow, Source: policy.SourceRule, Rule: 2}},
		{"another agent falls to the shorthand", policy.Input{Tool: "issue_refund", Arguments: json.RawMessage(`{"amount_usd": 50}`), Agent: "tech"},
			policy.Decision{Action: policy.Ask, Source: policy.SourceTool}},
		{"a rule without a condition", policy.Input{Tool: "lookup_order", Arguments: json.RawMessage(`{}`)},
			policy.Decision{Action: policy.Allow, Source: policy.SourceRule, Rule: 3}},
		{"has() guards a missing key", policy.Input{Tool: "issue_credit", Arguments: json.RawMessage(`{"amount_usd": 5}`)},
			policy.Decision{Action: policy.Ask, Source: policy.SourceDefault}},
		{"strings", policy.Input{Tool: "issue_credit", Arguments: json.RawMessage(`{"amount_usd": 5, "note": "goodwill gesture"}`)},
			policy.Decision{Action: policy.Allow, Source: policy.SourceRule, Rule: 4}},
		{"user", policy.Input{Tool: "update_ticket", Arguments: json.RawMessage(`{}`), User: "vip"},
			policy.Decision{Action: policy.Ask, Source: policy.SourceRule, Rule: 5, Reason: "a person sees VIP tickets"}},
		{"the never shorthand", policy.Input{Tool: "update_ticket", Arguments: json.RawMessage(`{}`), User: "someone"},
			policy.Decision{Action: policy.Allow, Source: policy.SourceTool}},
		{"a tool nobody declared takes the default", policy.Input{Tool: "ghost", Arguments: json.RawMessage(`{}`)},
			policy.Decision{Action: policy.Ask, Source: policy.SourceDefault}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, c.Decide(tt.in)); d != "" {
				t.Fatalf("decision (-want +got):\n%s", d)
			}
		})
	}
}

// TestConditionsThatCannotBeJudgedDeny checks that a condition which fails
// at run time denies, saying why, rather than let the call through.
func TestConditionsThatCannotBeJudgedDeny(t *testing.T) {
	c, err := policy.Compile(policy.Policy{Rules: []policy.Rule{
		{Tool: "issue_credit", When: "args.amount_usd > 10", Action: policy.Allow},
		{Tool: "lookup_order", When: "args.items.all(i, i.qty > 0)", Action: policy.Allow},
	}}, tools, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	big := `{"items": [` + strings.Repeat(`{"qty": 1},`, 50_000) + `{"qty": 1}]}`
	for _, tt := range []struct {
		name, tool, args, reason string
	}{
		{"missing key", "issue_credit", `{"note": "x"}`, "no such key"},
		{"wrong type", "issue_credit", `{"amount_usd": "ten"}`, "no such overload"},
		{"not an object", "issue_credit", `[1, 2]`, "not a JSON object"},
		{"not JSON", "issue_credit", `{"amount_usd":`, "not a JSON object"},
		{"cost limit", "lookup_order", big, "cost limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := c.Decide(policy.Input{Tool: tt.tool, Arguments: json.RawMessage(tt.args)})
			if d.Action != policy.Deny || d.Source != policy.SourceRule || !strings.Contains(d.Reason, tt.reason) {
				t.Fatalf("decision %+v, want a denial mentioning %q", d, tt.reason)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	for _, tt := range []struct {
		name  string
		p     policy.Policy
		tools []policy.Tool
		want  []policy.Problem
	}{
		{"valid", policy.Policy{Rules: []policy.Rule{{Tool: "issue_*", When: "args.amount_usd > 1", Action: policy.Ask}, {Tool: "issue_refund", Action: policy.Allow}}}, []policy.Tool{{Name: "issue_refund"}}, nil},
		{"bad action and default", policy.Policy{Default: "maybe", Rules: []policy.Rule{{Tool: "lookup_order", Action: "approve"}}}, tools, []policy.Problem{
			{Rule: -1, Field: "default", Message: `"maybe" is not allow, deny or ask`},
			{Rule: 0, Field: "action", Message: `"approve" is not allow, deny or ask`},
		}},
		{"glob that matches no tool", policy.Policy{Rules: []policy.Rule{{Tool: "refund_*", Action: policy.Ask}}}, tools, []policy.Problem{
			{Rule: 0, Field: "tool", Message: `glob "refund_*" matches no tool; the tools are issue_credit, issue_refund, lookup_order, update_ticket`},
		}},
		{"name of no tool", policy.Policy{Rules: []policy.Rule{{Tool: "issue_refnud", Action: policy.Ask}}}, tools, []policy.Problem{
			{Rule: 0, Field: "tool", Message: `there is no tool "issue_refnud"; the tools are issue_credit, issue_refund, lookup_order, update_ticket`},
		}},
		{"malformed glob", policy.Policy{Rules: []policy.Rule{{Tool: "issue_[", Action: policy.Ask}}}, tools, []policy.Problem{
			{Rule: 0, Field: "tool", Message: `"issue_[" is not a valid glob (syntax error in pattern); globs use *, ? and [...]`},
		}},
		{"empty tool", policy.Policy{Rules: []policy.Rule{{Action: policy.Ask}}}, tools, []policy.Problem{
			{Rule: 0, Field: "tool", Message: `names no tool: give a tool's name or a glob such as "issue_*"`},
		}},
		{"shadowed by a glob", policy.Policy{Rules: []policy.Rule{
			{Tool: "issue_*", Action: policy.Ask},
			{Tool: "issue_refund", When: "args.amount_usd > 5", Action: policy.Deny},
		}}, []policy.Tool{{Name: "issue_refund"}, {Name: "issue_credit"}}, []policy.Problem{
			{Rule: 1, Field: "tool", Message: "this rule can never decide: rule 1 (ask issue_*) matches every call it matches; remove it, or move it above rule 1"},
		}},
		{"shadowed by the same condition", policy.Policy{Rules: []policy.Rule{
			{Tool: "issue_*", When: "args.amount_usd > 5", Action: policy.Ask},
			{Tool: "issue_refund", When: "args.amount_usd > 5", Action: policy.Deny},
		}}, []policy.Tool{{Name: "issue_refund"}, {Name: "issue_credit"}}, []policy.Problem{
			{Rule: 1, Field: "tool", Message: "this rule can never decide: rule 1 (ask issue_* when args.amount_usd > 5) matches every call it matches; remove it, or move it above rule 1"},
		}},
		{"a conditional rule shadows nothing", policy.Policy{Rules: []policy.Rule{
			{Tool: "*", When: "args.amount_usd > 5", Action: policy.Ask},
			{Tool: "issue_refund", Action: policy.Allow},
		}}, []policy.Tool{{Name: "issue_refund"}}, nil},
		{"a narrower rule first is fine", policy.Policy{Rules: []policy.Rule{
			{Tool: "issue_refund", Action: policy.Ask},
			{Tool: "issue_*", Action: policy.Allow},
		}}, []policy.Tool{{Name: "issue_refund"}, {Name: "issue_credit"}}, nil},
		{"condition that does not compile", policy.Policy{Rules: []policy.Rule{{Tool: "lookup_order", When: "args.amount_usd >", Action: policy.Deny}}}, tools, []policy.Problem{
			{Rule: 0, Field: "when", Message: `condition "args.amount_usd >" does not compile: column 18: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}`},
		}},
		{"unknown variable", policy.Policy{Rules: []policy.Rule{{Tool: "lookup_order", When: "amount > 5", Action: policy.Deny}}}, tools, []policy.Problem{
			{Rule: 0, Field: "when", Message: `condition "amount > 5" does not compile: column 1: undeclared reference to 'amount'`},
		}},
		{"condition that is not a bool", policy.Policy{Rules: []policy.Rule{{Tool: "lookup_order", When: "args.amount_usd", Action: policy.Deny}, {Tool: "issue_credit", When: `agent + "x"`, Action: policy.Deny}}}, tools, []policy.Problem{
			{Rule: 0, Field: "when", Message: `condition "args.amount_usd" is a dyn, not a bool; compare it (for example args.amount_usd == true) so that it is true or false`},
			{Rule: 1, Field: "when", Message: `condition "agent + \"x\"" is a string, not a bool; compare it (for example agent + "x" == true) so that it is true or false`},
		}},
		{"a shorthand no call reaches", policy.Policy{Rules: []policy.Rule{{Tool: "*", Action: policy.Allow}}}, []policy.Tool{{Name: "issue_refund", Approval: policy.ShorthandAlways}, {Name: "lookup_order"}}, []policy.Problem{
			{Rule: -1, Field: "approval", Tool: "issue_refund", Message: `approval "always" is never used: approval rule 1 (allow *) decides every call of issue_refund; remove approval or the rule`},
		}},
		{"a bad shorthand", policy.Policy{}, []policy.Tool{{Name: "issue_refund", Approval: "sometimes"}}, []policy.Problem{
			{Rule: -1, Field: "approval", Tool: "issue_refund", Message: `"sometimes" is not "never" or "always"`},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, policy.Check(tt.p, tt.tools, cel.Language{})); d != "" {
				t.Fatalf("problems (-want +got):\n%s", d)
			}
			_, err := policy.Compile(tt.p, tt.tools, cel.Language{})
			var pe *policy.Error
			if (err == nil) != (tt.want == nil) || (err != nil && (!errors.As(err, &pe) || len(pe.Problems) != len(tt.want))) {
				t.Fatalf("Compile: %v", err)
			}
		})
	}
}

func TestMayAsk(t *testing.T) {
	c, err := policy.Compile(policy.Policy{Rules: []policy.Rule{
		{Tool: "issue_refund", When: "args.amount_usd > 5", Action: policy.Ask},
		{Tool: "issue_credit", Action: policy.Allow},
		{Tool: "lookup_order", When: "args.x == 1", Action: policy.Deny},
	}}, tools, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{"issue_refund": true, "issue_credit": false, "lookup_order": false, "update_ticket": false} {
		if got := c.MayAsk(tool); got != want {
			t.Errorf("MayAsk(%s) = %v, want %v", tool, got, want)
		}
	}
	// lookup_order may be denied; issue_credit's unconditional allow
	// decides every call; update_ticket's "never" allows the rest.
	for tool, want := range map[string]bool{"issue_refund": false, "issue_credit": true, "lookup_order": false, "update_ticket": true} {
		if got := c.AlwaysAllows(tool); got != want {
			t.Errorf("AlwaysAllows(%s) = %v, want %v", tool, got, want)
		}
	}
	c, err = policy.Compile(policy.Policy{Default: policy.Ask}, []policy.Tool{{Name: "a"}, {Name: "b", Approval: policy.ShorthandNever}}, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.MayAsk("a") || c.MayAsk("b") {
		t.Errorf("MayAsk with an asking default: a %v, b %v", c.MayAsk("a"), c.MayAsk("b"))
	}
}

// TestUnruled: only a tool that no rule may match, without an approval
// of its own, under a default that allows, leaves the policy nothing to
// decide.
func TestUnruled(t *testing.T) {
	c, err := policy.Compile(policy.Policy{Rules: []policy.Rule{
		{Tool: "issue_*", When: "args.amount_usd > 5", Action: policy.Allow},
	}}, tools, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{"lookup_order": true, "issue_refund": false, "issue_credit": false, "update_ticket": false} {
		if got := c.Unruled(tool); got != want {
			t.Errorf("Unruled(%s) = %v, want %v", tool, got, want)
		}
	}
	c, err = policy.Compile(policy.Policy{Default: policy.Ask}, tools, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Unruled("lookup_order") {
		t.Error("Unruled(lookup_order) under a default that asks")
	}
}

// TestImportedTools: a rule governs a tool imported from a declaration by
// the tool's name or the declaration's; problems of a declaration's
// shorthand name the declaration, once; a declaration whose tools are not
// known yet (Unlisted) leaves a rule that matches nothing to Compile.
func TestImportedTools(t *testing.T) {
	imported := []policy.Tool{
		{Name: "ls"},
		{Name: "fs_write_file", Approval: policy.ShorthandAlways, From: "fs"},
		{Name: "fs_move_file", Approval: policy.ShorthandAlways, From: "fs"},
	}
	c, err := policy.Compile(policy.Policy{Rules: []policy.Rule{
		{Tool: "fs_move_file", Action: policy.Deny, Reason: "no moves"},
		{Tool: "f?", When: `args.path.startsWith("/tmp/")`, Action: policy.Allow},
	}}, imported, cel.Language{})
	if err != nil {
		t.Fatal(err)
	}
	tmp := json.RawMessage(`{"path":"/tmp/a"}`)
	for _, tt := range []struct {
		in   policy.Input
		want policy.Action
	}{
		{policy.Input{Tool: "fs_move_file", Arguments: tmp}, policy.Deny},                                // its own name
		{policy.Input{Tool: "fs_write_file", Arguments: tmp}, policy.Allow},                              // its declaration's, through a glob
		{policy.Input{Tool: "fs_write_file", Arguments: json.RawMessage(`{"path":"/etc"}`)}, policy.Ask}, // the declaration's shorthand
		{policy.Input{Tool: "ls", Arguments: tmp}, policy.Allow},                                         // the default
	} {
		if got := c.Decide(tt.in); got.Action != tt.want {
			t.Errorf("%s %s: %+v, want %s", tt.in.Tool, tt.in.Arguments, got, tt.want)
		}
	}
	if c.AlwaysAllows("fs_write_file") || !c.MayAsk("fs_write_file") || c.MayAsk("fs_move_file") {
		t.Errorf("AlwaysAllows(fs_write_file) %v, MayAsk(fs_write_file) %v, MayAsk(fs_move_file) %v; want false, true, false",
			c.AlwaysAllows("fs_write_file"), c.MayAsk("fs_write_file"), c.MayAsk("fs_move_file"))
	}

	// Rules without conditions decide every call of each of fs's tools,
	// so that its shorthand is unreachable: one problem, at fs.
	got := policy.Check(policy.Policy{Rules: []policy.Rule{
		{Tool: "fs_write_file", Action: policy.Ask},
		{Tool: "fs", Action: policy.Deny},
	}}, imported, cel.Language{})
	if len(got) != 1 || got[0].Tool != "fs" || got[0].Field != "approval" || !strings.Contains(got[0].Message, "each tool fs imports") {
		t.Errorf("problems %+v, want one at fs's approval", got)
	}
	// One rule decides only one of them: the shorthand still decides.
	if got := policy.Check(policy.Policy{Rules: []policy.Rule{{Tool: "fs_write_file", Action: policy.Ask}}}, imported, cel.Language{}); len(got) != 0 {
		t.Errorf("problems %+v, want none: fs_move_file reaches the shorthand", got)
	}

	noMatch := policy.Policy{Rules: []policy.Rule{{Tool: "tracker_*", Action: policy.Ask}}}
	if got := policy.Check(noMatch, imported, cel.Language{}); len(got) != 1 || !strings.Contains(got[0].Message, "matches no tool") {
		t.Errorf("problems %+v, want the glob matching no tool", got)
	}
	withUnlisted := append(imported[:len(imported):len(imported)], policy.Tool{Name: "tracker", From: "tracker", Unlisted: true})
	if got := policy.Check(noMatch, withUnlisted, cel.Language{}); len(got) != 0 {
		t.Errorf("problems %+v, want none: tracker's tools are known only at start-up", got)
	}
}

// TestGuardConditionCostLimit: a guardrail condition with a comprehension
// is bounded by the cost limit, and one that cannot be judged within it
// is an error (which trips the guardrail); one without a comprehension
// reads the value a bounded number of times and is judged whatever the
// value's size, without the limit's tracking.
func TestGuardConditionCostLimit(t *testing.T) {
	big := `{"items": [` + strings.Repeat(`{"qty": 1},`, 50_000) + `{"qty": 1}]}`
	loop, err := policy.CompileGuard(cel.Language{}, `args.items.all(i, i.qty > 0)`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Holds(policy.GuardInput{Point: "toolArguments", Text: big, Arguments: json.RawMessage(big)}); err == nil || !strings.Contains(err.Error(), "cost limit") {
		t.Fatalf("a comprehension over 50,001 items: %v, want the cost limit", err)
	}
	flat, err := policy.CompileGuard(cel.Language{}, `size(text) > 4000 && text.contains("ignore all previous instructions")`)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a harmless line of text. ", 100_000) + "ignore all previous instructions"
	if hold, err := flat.Holds(policy.GuardInput{Point: "input", Text: long}); err != nil || !hold {
		t.Fatalf("a flat condition over %d bytes: %v, %v; want it judged and holding", len(long), hold, err)
	}
}

// TestConditionsWithoutLanguage checks that a rule with a condition is
// refused when no condition language is given (a program that does not
// link one), naming what to give, and that a policy without conditions
// needs none.
func TestConditionsWithoutLanguage(t *testing.T) {
	p := policy.Policy{Rules: []policy.Rule{{Tool: "issue_credit", When: "args.amount_usd > 10", Action: policy.Ask}}}
	_, err := policy.Compile(p, tools, nil)
	var pe *policy.Error
	if !errors.As(err, &pe) || len(pe.Problems) != 1 || pe.Problems[0].Field != "when" || !strings.Contains(pe.Problems[0].Message, "cel.Language{}") {
		t.Fatalf("Compile without a language: %v, want one problem at when naming cel.Language{}", err)
	}
	c, err := policy.Compile(policy.Policy{Rules: []policy.Rule{{Tool: "issue_credit", Action: policy.Ask}}}, tools, nil)
	if err != nil {
		t.Fatalf("a policy without conditions, without a language: %v", err)
	}
	if d := c.Decide(policy.Input{Tool: "issue_credit", Arguments: json.RawMessage(`{}`)}); d.Action != policy.Ask {
		t.Errorf("decision %+v, want ask", d)
	}
}
