package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/agents/tools/fixture"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/app/appeval"
	"github.com/aidgen/aid/runtime/eval"
)

// TestEvalToolModes runs the refunder agent (its script calls refund with
// {}) under each mode: live reaches the implementation; a stub answers
// from the case's own answer, else from rows matched by argument, else
// from the result; replay answers from the case's recorded call and fails
// a call the recording did not make; none of these reaches the tool. Every
// call is on the sample's answer with its mode.
func TestEvalToolModes(t *testing.T) {
	recorded := []eval.ToolAnswer{{Tool: "refund", Args: json.RawMessage(`{ }`), Result: json.RawMessage(`{"from":"recording"}`)}}
	tests := []struct {
		name   string
		tool   appeval.EvalTool
		cases  [2][]eval.ToolAnswer // the answers cases a and b carry
		reach  int64
		result [2]string
		err    [2]string
	}{
		{name: "live", tool: appeval.EvalTool{Tool: "refund", Mode: eval.ToolLive}, reach: 2, result: [2]string{"done", "done"}},
		{name: "stub result, case answer first", tool: appeval.EvalTool{Tool: "refund", Mode: eval.ToolStub, Result: json.RawMessage(`{"ok":1}`)},
			cases: [2][]eval.ToolAnswer{nil, {{Tool: "refund", Result: json.RawMessage(`"case b's"`)}}}, result: [2]string{`{"ok":1}`, "case b's"}},
		{name: "stub rows", tool: appeval.EvalTool{Tool: "refund", Mode: eval.ToolStub, Stub: fixture.Kind{File: "refund-rows.json"}}, result: [2]string{"row answer", "row answer"}},
		{name: "stub without answer", tool: appeval.EvalTool{Tool: "refund", Mode: eval.ToolStub},
			cases: [2][]eval.ToolAnswer{{{Tool: "refund", Args: json.RawMessage(`{"other":1}`), Error: "never"}}, {{Tool: "refund", Error: "refused by the case"}}},
			err:   [2]string{`eval stub of refund: case "a" has no answer to this call`, "refused by the case"}},
		{name: "replay", tool: appeval.EvalTool{Tool: "refund", Mode: eval.ToolReplay}, cases: [2][]eval.ToolAnswer{recorded, nil},
			result: [2]string{`{"from":"recording"}`, ""}, err: [2]string{"", "the recorded run made no call of refund with these arguments"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := desk(t)
			write(t, d.Dir, "refund-rows.json", `[{"args": {}, "result": "row answer"}, {"args": {"x": 1}, "result": "other"}]`)
			for i := range d.Evals {
				d.Evals[i].Tools = []appeval.EvalTool{tt.tool}
				d.Evals[i].Approvals = eval.ApprovalsApprove
			}
			var reached atomic.Int64
			impls := map[string]agents.Implementation{"refund": agents.ToolFunc(func(context.Context, json.RawMessage) (string, error) {
				reached.Add(1)
				return "done", nil
			})}
			a, err := assemble(t.Context(), d, app.Options{Implementations: impls})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			e, err := a.Eval("refunds")
			if err != nil {
				t.Fatal(err)
			}
			for i := range e.Dataset.Cases {
				e.Dataset.Cases[i].Tools = tt.cases[i]
			}
			res, err := eval.Run(t.Context(), e.Dataset, e.Runner, e.Metrics, eval.Options{Runs: 1, Concurrency: 1})
			if err != nil {
				t.Fatal(err)
			}
			if got := reached.Load(); got != tt.reach {
				t.Errorf("the tool was reached %d times, want %d", got, tt.reach)
			}
			for i, cr := range res.Cases {
				s := cr.Samples[0]
				if s.Err != nil {
					t.Fatalf("case %s: %v", cr.CaseID, s.Err)
				}
				calls := s.Answer.ToolCalls
				if len(calls) != 1 || calls[0].Tool != "refund" || calls[0].Mode != tt.tool.Mode || calls[0].Args != "{}" {
					t.Fatalf("case %s: calls %+v, want one refund call in mode %s", cr.CaseID, calls, tt.tool.Mode)
				}
				if calls[0].Result != tt.result[i] || (tt.err[i] == "") != (calls[0].Error == "") || !contains(calls[0].Error, tt.err[i]) {
					t.Errorf("case %s: call answered %q, error %q; want %q, error containing %q", cr.CaseID, calls[0].Result, calls[0].Error, tt.result[i], tt.err[i])
				}
			}
		})
	}
}

// TestEvalRefusesUnstubbedWrite: an eval whose target can call a tool that
// writes, and that says nothing of it, is refused when it is built, with
// an error naming the tool and saying how to declare its stub.
func TestEvalRefusesUnstubbedWrite(t *testing.T) {
	d := desk(t)
	d.Evals[1].Tools = nil
	a, err := assemble(t.Context(), d, app.Options{Implementations: goTools()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	_, err = a.Eval("refunds")
	var ue *appeval.UnstubbedToolError
	if !errors.As(err, &ue) || ue.Tool != "refund" || ue.Agent != "refunder" || !contains(err.Error(), `mode: "stub"`) {
		t.Fatalf("Eval = %v, want an UnstubbedToolError for refund", err)
	}
	d.Evals[1].Tools = []appeval.EvalTool{{Tool: "nope", Mode: eval.ToolLive}}
	if a, err = assemble(t.Context(), d, app.Options{Implementations: goTools()}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err = a.Eval("refunds"); err == nil || !contains(err.Error(), `declares tool "nope", which the application does not have`) {
		t.Fatalf("Eval = %v, want the unknown tool named", err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
