package appeval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/eval"
	"github.com/aidgen/aid/runtime/internal/jsoncanon"
	"github.com/aidgen/aid/runtime/kind"
	"github.com/aidgen/aid/runtime/rules"
)

// An eval never fires a production side effect it did not ask for: every
// declared tool's implementation is wrapped (interceptTool) so that, in a
// sample of an eval whose target is an agent, the call goes as the eval's
// plan says (eval.ToolMode): to the implementation (live), or to an
// answer that never reaches it (stub, replay). Outside an eval sample the
// wrapper calls the implementation and nothing else.

// toolIndex is what an eval needs to know of the application's tools to
// plan them: the tools the kinds built, and the agents with their tool
// lists expanded to those.
type toolIndex struct {
	tools  map[string]agents.Tool
	agents map[string]agents.Agent
}

// hasAgentEval reports whether one of evals targets an agent, whose tools
// must then be intercepted.
func hasAgentEval(evals []Eval) bool {
	return slices.ContainsFunc(evals, func(e Eval) bool { return e.Target.Agent != "" })
}

// evalTools is one eval's plan of every tool: its mode and its stub.
type evalTools struct {
	eval  string
	tools map[string]*toolStub // by the name the model calls
}

// toolStub is what an eval does with one tool.
type toolStub struct {
	mode     eval.ToolMode
	declared bool                  // the eval declares the tool's mode
	fixture  agents.Implementation // the eval's rows, matched by argument
	result   *string               // the eval's answer to every call
}

// planTools builds the tool plan of an eval whose target is an agent: the
// declared mode of each tool, or the default (stub for a tool that
// writes, live for one that reads), with the eval's fixtures read. A tool
// that writes, that the target can reach (itself, or through handoffs and
// delegates), and that the eval gives no mode, is refused: the eval would
// otherwise change the world, or fail every call of it.
func (a *App) planTools(e Eval) (*evalTools, error) {
	out := &evalTools{eval: e.Name, tools: map[string]*toolStub{}}
	plans := map[string]EvalTool{}
	for _, p := range e.Tools {
		if err := p.Mode.Check(); err != nil {
			return nil, fmt.Errorf("eval %q: tool %q: %w", e.Name, p.Tool, err)
		}
		if p.Mode != eval.ToolStub && (p.Stub != nil || len(p.Result) > 0) {
			return nil, fmt.Errorf("eval %q: tool %q is %s; rows or a result apply to a stub", e.Name, p.Tool, p.Mode)
		}
		if p.Stub != nil && len(p.Result) > 0 {
			return nil, fmt.Errorf("eval %q: tool %q: the stub has both rows and a result; keep one", e.Name, p.Tool)
		}
		plans[p.Tool] = p
	}
	used := map[string]bool{}
	for name, t := range a.tools.tools {
		p, ok := plans[name]
		if !ok && t.From != "" {
			p, ok = plans[t.From]
		}
		s := &toolStub{mode: eval.ToolLive, declared: ok}
		if t.Effects == agents.EffectsWrite {
			s.mode = eval.ToolStub
		}
		if ok {
			used[p.Tool] = true
			s.mode = p.Mode
			switch {
			case p.Stub != nil:
				// The stub's kind reads its rows as it would for a tool
				// of its own, without reaching anything.
				built, err := p.Stub.NewTools(context.Background(), t, kind.Env{Files: a.Files(), Scope: a.Scope()})
				if err != nil {
					return nil, fmt.Errorf("eval %q: the stub of tool %q: %w", e.Name, name, err)
				}
				if len(built) != 1 {
					return nil, fmt.Errorf("eval %q: the stub of tool %q: its %s kind built %d tools, want 1", e.Name, name, p.Stub.ToolKind(), len(built))
				}
				s.fixture = built[0].Implementation
			case len(p.Result) > 0:
				r := eval.Observation(p.Result)
				s.result = &r
			}
		}
		out.tools[name] = s
	}
	var errs []error
	for _, p := range e.Tools {
		if !used[p.Tool] {
			errs = append(errs, fmt.Errorf("eval %q declares tool %q, which the application does not have", e.Name, p.Tool))
		}
	}
	reach, via := a.reachableTools(e.Target.Agent)
	for _, name := range reach {
		s := out.tools[name]
		if s != nil && s.mode == eval.ToolStub && !s.declared {
			errs = append(errs, &UnstubbedToolError{Eval: e.Name, Tool: name, Agent: e.Target.Agent, Via: via[name]})
		}
	}
	return out, errors.Join(errs...)
}

// UnstubbedToolError is an eval whose target agent can call a tool that
// writes, for which the eval declares no mode: the call would change the
// world, so the eval is refused until it says what the tool does.
type UnstubbedToolError struct {
	// Eval is the eval.
	Eval string
	// Tool is the tool that writes.
	Tool string
	// Agent is the eval's target agent; Via the agent that offers the
	// tool, reached from it through handoffs and delegates.
	Agent, Via string
}

// Error implements error.
func (e *UnstubbedToolError) Error() string {
	via := ""
	if e.Via != e.Agent {
		via = fmt.Sprintf(" (through agent %q)", e.Via)
	}
	return fmt.Sprintf("eval %q: target agent %q can call tool %q%s, which writes; an eval stubs a tool that writes and needs its answers: "+
		"declare tools: %s: {mode: \"stub\", fixture: \"<rows>.json\"} (or result: <JSON>, or give each case its answers in the dataset's \"tools\"), "+
		"or mode: \"live\" to let the eval call it", e.Eval, e.Agent, e.Tool, via, e.Tool)
}

// reachableTools lists the tools agent can call, itself or through the
// agents it hands off or delegates to, sorted, with the first agent found
// to offer each (rules.ReachableTools).
func (a *App) reachableTools(agent string) ([]string, map[string]string) {
	via := rules.ReachableTools(agent, func(name string) (rules.Agent, bool) {
		ag, ok := a.tools.agents[name]
		return rules.Agent{Tools: ag.Tools, Handoffs: ag.Handoffs, Delegates: ag.Delegates}, ok
	})
	return slices.Sorted(maps.Keys(via)), via
}

// sampleTools is the tool plan of one sample, on its context: the eval's
// plan, the case's own answers, and the calls made so far.
type sampleTools struct {
	plan *evalTools
	c    eval.Case

	mu    sync.Mutex
	calls []eval.ToolCall
}

type sampleToolsKey struct{}

// withSampleTools puts the tool plan of one sample of case c on ctx.
func withSampleTools(ctx context.Context, plan *evalTools, c eval.Case) (context.Context, *sampleTools) {
	st := &sampleTools{plan: plan, c: c}
	return context.WithValue(ctx, sampleToolsKey{}, st), st
}

// recorded returns the calls the sample made, in the order they finished.
func (st *sampleTools) recorded() []eval.ToolCall {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.calls)
}

// interceptTool wraps the implementation of the tool name so that, in an
// eval's sample, the eval's plan decides whether the call reaches it.
func interceptTool(name string, impl agents.Implementation) agents.Implementation {
	return agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		st, ok := ctx.Value(sampleToolsKey{}).(*sampleTools)
		if !ok {
			return impl.Call(ctx, args)
		}
		return st.call(ctx, name, impl, args)
	})
}

// call answers one call as the sample's plan says, and records it.
func (st *sampleTools) call(ctx context.Context, name string, impl agents.Implementation, args json.RawMessage) (string, error) {
	s := st.plan.tools[name]
	if s == nil {
		// A tool the plan does not know was added after it was made;
		// nothing says it only reads.
		s = &toolStub{mode: eval.ToolStub}
	}
	var out string
	var err error
	switch s.mode {
	case eval.ToolLive:
		out, err = impl.Call(ctx, args)
	case eval.ToolReplay:
		out, err = st.answer(name, args, func() (string, error) {
			return "", fmt.Errorf("replay of %s: the recorded run made no call of %s with these arguments, so the eval does not call it", name, name)
		})
	default:
		out, err = st.answer(name, args, func() (string, error) {
			switch {
			case s.fixture != nil:
				return s.fixture.Call(ctx, args)
			case s.result != nil:
				return *s.result, nil
			}
			return "", fmt.Errorf("eval stub of %s: case %q has no answer to this call and eval %q's stub of %s has no fixture or result; the eval does not call the tool", name, st.c.ID, st.plan.eval, name)
		})
	}
	var compact bytes.Buffer
	if json.Compact(&compact, args) != nil {
		compact.Reset()
		compact.Write(args)
	}
	rec := eval.ToolCall{Tool: name, Mode: s.mode, Args: eval.Clip(compact.String(), eval.ReportTextBytes)}
	if err != nil {
		rec.Error = eval.Clip(err.Error(), eval.ReportTextBytes)
	} else {
		rec.Result = eval.Clip(out, eval.ReportTextBytes)
	}
	st.mu.Lock()
	st.calls = append(st.calls, rec)
	st.mu.Unlock()
	return out, err
}

// answer answers a call from the case's own answers for the tool: the one
// whose arguments equal the call's (canonically, as a fixture row's do),
// else one for any arguments, else what otherwise gives.
func (st *sampleTools) answer(name string, args json.RawMessage, otherwise func() (string, error)) (string, error) {
	key, err := jsoncanon.Args(args)
	if err != nil {
		return "", fmt.Errorf("arguments: %w", err)
	}
	var anyArgs *eval.ToolAnswer
	for i, a := range st.c.Tools {
		if a.Tool != name {
			continue
		}
		if a.Args == nil {
			if anyArgs == nil {
				anyArgs = &st.c.Tools[i]
			}
			continue
		}
		if k, err := jsoncanon.Args(a.Args); err == nil && k == key {
			return toolAnswer(a)
		}
	}
	if anyArgs != nil {
		return toolAnswer(*anyArgs)
	}
	return otherwise()
}

func toolAnswer(a eval.ToolAnswer) (string, error) {
	if a.Error != "" {
		return "", errors.New(strings.TrimSpace(a.Error))
	}
	return eval.Observation(a.Result), nil
}
