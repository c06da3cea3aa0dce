package rules_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/aidgen/aid/runtime/rules"
)

// models is a catalog: three rungs of decreasing price, a twin of small,
// and a narrow window.
var models = map[string]rules.Model{
	"large":  {ID: "m-large", Price: rules.Price{Input: 0.01, Output: 0.03}, ContextWindow: 8000, MaxOutputTokens: 500},
	"small":  {ID: "m-small", Price: rules.Price{Input: 0.001, Output: 0.002}, ContextWindow: 8000, MaxOutputTokens: 500},
	"twin":   {ID: "m-twin", Price: rules.Price{Input: 0.001, Output: 0.002}, ContextWindow: 8000, MaxOutputTokens: 500},
	"tiny":   {ID: "m-tiny", Price: rules.Price{Input: 0.0001, Output: 0.0002}, ContextWindow: 1000, MaxOutputTokens: 200},
	"filled": {ID: "m-filled", ContextWindow: 100, MaxOutputTokens: 100},
}

var known = rules.Known{
	Model: func(alias string) (rules.Model, bool) { m, ok := models[alias]; return m, ok },
	Tool:  func(n string) bool { return n == "lookup" || n == "transfer_to_billing" },
	Agent: func(n string) bool { return n == "triage" || n == "billing" },
	Retriever: func(n string) bool {
		return n == "kb" || n == strings.Repeat("r", 58)
	},
}

// TestCheckAgent feeds agents breaking each rule once and checks where
// and how each problem is reported; a sound agent has none.
func TestCheckAgent(t *testing.T) {
	sound := rules.Agent{Name: "triage", Model: "large", Ladder: []string{"large", "small", "tiny"}, Degrade: true, Budget: "b",
		Tools: []string{"lookup"}, Handoffs: []string{"billing"}, Retrievers: []string{"kb"}, Fallbacks: []string{"small"}, ThreadTokenBudget: 700}
	if p := rules.CheckAgent(sound, known); len(p) != 0 {
		t.Fatalf("a sound agent: %+v", p)
	}
	for _, tt := range []struct {
		name   string
		change func(*rules.Agent)
		field  string
		msg    string
	}{
		{"model off the ladder", func(a *rules.Agent) { a.Ladder = []string{"small", "tiny"} }, "ladder", `the ladder must contain the agent's model "large"`},
		{"rung twice", func(a *rules.Agent) { a.Ladder = []string{"large", "small", "small"} }, "ladder[2]", `alias "small" is on the ladder twice`},
		{"rung up", func(a *rules.Agent) { a.Ladder = []string{"large", "tiny", "small"} }, "ladder[2]", `put "small" above "tiny"`},
		{"rung at the same price", func(a *rules.Agent) { a.Ladder = []string{"large", "small", "twin"} }, "ladder[2]", "the two cost the same"},
		{"degrade from the last rung", func(a *rules.Agent) { a.Model, a.Ladder, a.Fallbacks = "tiny", []string{"large", "tiny"}, nil }, "onBudgetExhausted", `but "tiny" is its last rung`},
		{"degrade without a ladder", func(a *rules.Agent) { a.Ladder = nil }, "onBudgetExhausted", `add ladder: ["large", "<cheaper alias>"]`},
		{"degrade without a budget", func(a *rules.Agent) { a.Budget = "" }, "onBudgetExhausted", "the agent has no budget"},
		{"handoff to itself", func(a *rules.Agent) { a.Handoffs = []string{"triage"} }, "handoffs[0]", `agent "triage" cannot name itself`},
		{"delegate twice", func(a *rules.Agent) { a.Delegates = []string{"billing", "billing"} }, "delegates[1]", `agent "billing" is listed twice`},
		{"fallback to the model", func(a *rules.Agent) { a.Fallbacks = []string{"large"} }, "fallbacks[0]", `fallback "large" is the agent's model`},
		{"fallback twice", func(a *rules.Agent) { a.Fallbacks = []string{"small", "small"} }, "fallbacks[1]", `fallback "small" is listed twice`},
		{"thread beyond a rung's window", func(a *rules.Agent) { a.ThreadTokenBudget = 900 }, "memory.thread.tokenBudget", `"m-tiny" may answer with is 1100 tokens, more than its context window of 1000; lower tokenBudget to at most 800`},
		{"thread beyond a fallback's window", func(a *rules.Agent) {
			a.Ladder, a.Degrade, a.Fallbacks = nil, false, []string{"tiny"}
			a.ThreadTokenBudget = 900
		}, "fallbacks[0]", `fallback "tiny" (model "m-tiny") cannot take the thread`},
		{"a window the answer fills", func(a *rules.Agent) { a.Ladder, a.Degrade, a.Fallbacks = nil, false, []string{"filled"} }, "fallbacks[0]", `lower "m-filled"'s maxOutputTokens`},
		{"a tool named like a handoff", func(a *rules.Agent) { a.Tools = []string{"transfer_to_billing"} }, "tools[0]", `the name the runtime gives the tool for the handoff to agent "billing"`},
		{"a search tool too long", func(a *rules.Agent) { a.Retrievers = []string{strings.Repeat("r", 58)} }, "retrievers[0]", "shorten the retriever's name to at most 57 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := sound
			tt.change(&a)
			p := rules.CheckAgent(a, known)
			if len(p) != 1 || p[0].Field() != tt.field || !strings.Contains(p[0].Msg, tt.msg) {
				t.Fatalf("problems %+v, want one at %s saying %q", p, tt.field, tt.msg)
			}
		})
	}
}

// TestNamesUnknownToTheCaller checks that a rule passes over what the
// caller has not resolved (an alias to no chat model, an agent that is not
// declared): the caller reports those, in its own terms.
func TestNamesUnknownToTheCaller(t *testing.T) {
	a := rules.Agent{Name: "triage", Model: "ghost", Ladder: []string{"ghost", "phantom"}, Handoffs: []string{strings.Repeat("x", 60)}, Fallbacks: []string{"spirit"}, ThreadTokenBudget: 1 << 20}
	if p := rules.CheckAgent(a, known); len(p) != 0 {
		t.Errorf("problems with unknown names: %+v", p)
	}
}

func TestCheaperAndNeeds(t *testing.T) {
	for _, tt := range []struct {
		a, b rules.Price
		want bool
	}{
		{rules.Price{Input: 1, Output: 1}, rules.Price{Input: 2, Output: 2}, true},
		{rules.Price{Input: 1, Output: 2}, rules.Price{Input: 2, Output: 2}, true},
		{rules.Price{Input: 2, Output: 2}, rules.Price{Input: 2, Output: 2}, false},
		{rules.Price{Input: 1, Output: 3}, rules.Price{Input: 2, Output: 2}, false},
	} {
		if got := rules.Cheaper(tt.a, tt.b); got != tt.want {
			t.Errorf("Cheaper(%v, %v) = %v", tt.a, tt.b, got)
		}
	}
	if got := rules.Needs(rules.Agent{Retrievers: []string{"kb"}, Output: true}); strings.Join(got, ",") != "tools,json" {
		t.Errorf("Needs = %q", got)
	}
	if got := rules.Needs(rules.Agent{}); len(got) != 0 {
		t.Errorf("Needs of a bare agent = %q", got)
	}
	if p := rules.ToolName(strings.Repeat("t", 64)); len(p) != 0 {
		t.Errorf("a 64-character name: %+v", p)
	}
	if p := rules.ToolName(strings.Repeat("t", 65)); len(p) != 1 {
		t.Errorf("a 65-character name: %+v", p)
	}
}

// TestCheckRanking breaks each ranking rule once and checks the field each
// problem names; zero values (the defaults) and a sound ranking pass.
func TestCheckRanking(t *testing.T) {
	sound := rules.Ranking{Mode: rules.ModeHybrid, Fusion: rules.FusionWeighted, Collapse: rules.CollapseDocument,
		RRFK: 60, VectorWeight: 1, LexicalWeight: 0.5, Depth: rules.MaxDepth, BM25K1: 1.2, BM25B: 0.75}
	for _, r := range []rules.Ranking{{}, sound} {
		if p := rules.CheckRanking(r); len(p) != 0 {
			t.Errorf("%+v: %+v", r, p)
		}
	}
	nan := math.NaN()
	for _, tt := range []struct {
		name   string
		change func(*rules.Ranking)
		field  string
		msg    string
	}{
		{"mode", func(r *rules.Ranking) { r.Mode = "semantic" }, "mode", `unknown mode "semantic"`},
		{"fusion", func(r *rules.Ranking) { r.Fusion = "sum" }, "fusion", `unknown fusion "sum"`},
		{"collapse", func(r *rules.Ranking) { r.Collapse = "chunk" }, "collapse", `unknown collapse "chunk"`},
		{"negative rrfK", func(r *rules.Ranking) { r.RRFK = -1 }, "rrfK", "rrfK must be a positive number"},
		{"NaN rrfK", func(r *rules.Ranking) { r.RRFK = nan }, "rrfK", "rrfK must be a positive number"},
		{"negative weight", func(r *rules.Ranking) { r.LexicalWeight = -2 }, "weights", "weights must be positive numbers"},
		{"infinite weight", func(r *rules.Ranking) { r.VectorWeight = math.Inf(1) }, "weights", "weights must be positive numbers"},
		{"deep", func(r *rules.Ranking) { r.Depth = rules.MaxDepth + 1 }, "depth", "depth must be from 1 to 1000"},
		{"negative depth", func(r *rules.Ranking) { r.Depth = -1 }, "depth", "depth must be from 1 to 1000"},
		{"b", func(r *rules.Ranking) { r.BM25B = 1.5 }, "bm25", "b must be from 0 to 1"},
		{"k1", func(r *rules.Ranking) { r.BM25K1 = nan }, "bm25", "k1 must be a finite number"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := sound
			tt.change(&r)
			p := rules.CheckRanking(r)
			if len(p) != 1 || p[0].Field() != tt.field || !strings.Contains(p[0].Msg, tt.msg) {
				t.Errorf("problems %+v; want one at %s saying %q", p, tt.field, tt.msg)
			}
		})
	}
}

// TestToolInput: a tool's input schema must describe an object; the
// problem is at its type when it has one.
func TestToolInput(t *testing.T) {
	for _, tt := range []struct {
		schema string
		at     string // the problem's path; "-" for none
	}{
		{`{"type":"object","properties":{}}`, "-"},
		{`{"type":"string"}`, "[type]"},
		{`{"type":["object","null"]}`, "[type]"},
		{`{"properties":{}}`, "[]"},
		{`[]`, "[]"},
	} {
		ps := rules.ToolInput([]byte(tt.schema))
		got := "-"
		if len(ps) > 0 {
			got = fmt.Sprint(ps[0].Path)
			if !strings.Contains(ps[0].Msg, `must have type: "object"`) {
				t.Errorf("%s: %q", tt.schema, ps[0].Msg)
			}
		}
		if got != tt.at {
			t.Errorf("%s: problem at %s, want %s", tt.schema, got, tt.at)
		}
	}
}
