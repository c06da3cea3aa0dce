package agents

import (
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/internal/jsonschemas"
)

// ClientRequest is what the client that starts a run asks of it beyond the
// agent's configuration: the Responses API's function tools, tool choice,
// output bound and answer format (RunOptions.Client). It is kept with the
// run (Checkpoint.Client), so that a resumed, continued or recovered run,
// in this process or another, is driven as the client asked.
type ClientRequest struct {
	// Tools are functions the client runs itself, offered to the model
	// beside the agent's own tools (and to the agents a transfer hands the
	// run to; never to a delegated run). A step that calls one ends the
	// run, completed without an answer: RunResult.ClientCalls are the
	// calls, and the next run of the thread carries their results as tool
	// messages at the end of its history, with no input
	// (RunOptions.History, Run with an empty input). A call of the agent's
	// own tools in the same step is not run: its observation says so, and
	// the model may call it again.
	Tools []gateway.ToolDef `json:"tools,omitempty"`
	// ToolChoice constrains the run's first model call; later calls are
	// left to the model, since "required" on every call would never let
	// the run answer.
	ToolChoice gateway.ToolChoice `json:"tool_choice,omitzero"`
	// MaxOutputTokens bounds every model call's answer; zero means the
	// model's bound. A final answer cut by it marks its step Truncated.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// Format is a JSON Schema the run's answer must match, as an agent's
	// output schema does (with one repair round); it is refused for an
	// agent that has an output schema of its own.
	Format *gateway.JSONSchema `json:"format,omitempty"`
	// Instructions are the client's, sent as a system message after the
	// agent's own instructions (which they never replace) at every model
	// call of the run's own agents.
	Instructions string `json:"instructions,omitempty"`
	// Metadata are the client's labels for the run, kept with it and shown
	// back; the runtime never reads them.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Previous is the run whose thread this run continues (the Responses
	// API's previous_response_id), kept and shown back.
	Previous string `json:"previous,omitempty"`
}

// clientState is a run's ClientRequest, checked and compiled.
type clientState struct {
	req    ClientRequest
	names  []string           // the tools' names
	schema *jsonschema.Schema // Format, compiled
}

// newClientState checks req for the agent d: every tool named, no name
// the agent's (or its reach's) tools use, parameters that compile, a
// format that compiles and an agent without an output schema.
func (r *Runtime) newClientState(d *agentDef, req *ClientRequest) (*clientState, error) {
	if req == nil {
		return nil, nil
	}
	cs := &clientState{req: *req}
	cs.req.Tools = slices.Clip(slices.Clone(req.Tools))
	for i, t := range req.Tools {
		switch {
		case t.Name == "":
			return nil, &InvalidOptionError{Option: fmt.Sprintf("tools[%d].name", i), Problem: "a client tool needs a name"}
		case slices.Contains(cs.names, t.Name):
			return nil, &InvalidOptionError{Option: fmt.Sprintf("tools[%d].name", i), Problem: fmt.Sprintf("client tool %q is listed twice", t.Name)}
		}
		for _, n := range r.reachable(d) {
			if r.agents[n].tools[t.Name] != nil {
				return nil, &InvalidOptionError{Option: fmt.Sprintf("tools[%d].name", i), Problem: fmt.Sprintf("agent %q has a tool named %q of its own: name the client's function otherwise", n, t.Name)}
			}
		}
		if len(t.Parameters) > 0 {
			if _, err := jsonschemas.Compile("urn:aid:client-tool:"+t.Name, t.Parameters); err != nil {
				return nil, &InvalidOptionError{Option: fmt.Sprintf("tools[%d].parameters", i), Problem: err.Error()}
			}
		}
		cs.names = append(cs.names, t.Name)
	}
	switch tc := req.ToolChoice; tc.Mode {
	case "", gateway.ToolChoiceAuto, gateway.ToolChoiceNone, gateway.ToolChoiceRequired:
	case gateway.ToolChoiceTool:
		if !slices.Contains(cs.names, tc.Name) && d.tools[tc.Name] == nil {
			return nil, &InvalidOptionError{Option: "tool_choice", Problem: fmt.Sprintf("tool %q is neither a client tool nor a tool of agent %q", tc.Name, d.spec.Name)}
		}
	default:
		return nil, &InvalidOptionError{Option: "tool_choice", Problem: fmt.Sprintf("mode %q is not auto, none, required or a named tool", tc.Mode)}
	}
	if req.MaxOutputTokens < 0 {
		return nil, &InvalidOptionError{Option: "max_output_tokens", Problem: "must not be negative"}
	}
	if f := req.Format; f != nil {
		if d.output != nil {
			return nil, &InvalidOptionError{Option: "format", Problem: fmt.Sprintf("agent %q has an output schema of its own, which decides its answer's format", d.spec.Name)}
		}
		if f.Name == "" || len(f.Schema) == 0 {
			return nil, &InvalidOptionError{Option: "format", Problem: "a JSON schema format needs a name and a schema"}
		}
		s, err := jsonschemas.Compile("urn:aid:client-format:"+f.Name, f.Schema)
		if err != nil {
			return nil, &InvalidOptionError{Option: "format.schema", Problem: err.Error()}
		}
		cs.schema = s
	}
	return cs, nil
}

// client reports whether name is a client tool of the run.
func (st *runState) clientTool(name string) bool {
	return st.client != nil && slices.Contains(st.client.names, name)
}

// outputSchema is the schema the run's answer must match: the agent's, or
// the client's format.
func (st *runState) outputSchema() (*jsonschema.Schema, *gateway.JSONSchema) {
	if st.agent.output != nil {
		return st.agent.output, st.agent.format
	}
	if st.client != nil && st.client.schema != nil && !st.sub {
		return st.client.schema, st.client.req.Format
	}
	return nil, nil
}

// applyClient adds the client's request to a step's model request: its
// tools after the agent's, its format, its output bound, and its tool
// choice on the run's first call.
func (st *runState) applyClient(req *gateway.Request) {
	c := st.client
	if c == nil || st.sub {
		return
	}
	if len(c.req.Tools) > 0 {
		req.Tools = slices.Concat(req.Tools, c.req.Tools)
	}
	if c.req.Instructions != "" {
		n := 0
		for n < len(req.Messages) && req.Messages[n].Role == gateway.RoleSystem {
			n++
		}
		msgs := make([]gateway.Message, 0, len(req.Messages)+1)
		msgs = append(append(append(msgs, req.Messages[:n]...), gateway.Message{Role: gateway.RoleSystem, Content: c.req.Instructions}), req.Messages[n:]...)
		req.Messages = msgs
	}
	if req.ResponseFormat == nil {
		req.ResponseFormat = c.req.Format
	}
	req.MaxOutputTokens = c.req.MaxOutputTokens
	if len(st.steps) == 0 && st.agentSteps == 0 && st.pending == nil {
		req.ToolChoice = c.req.ToolChoice
		if req.ToolChoice.Mode == gateway.ToolChoiceNone {
			req.Tools = nil
			req.ToolChoice = gateway.ToolChoice{}
		}
	}
}

// clientCalls ends a step that calls client tools: the agent's own calls
// in it are not run (their observations say so, as tool messages after
// the step's), the client's calls wait for the client, and the run ends
// completed without an answer. It reports whether the step called a client
// tool.
func (st *runState) clientCalls(step *StepRecord) bool {
	if st.client == nil || st.sub {
		return false
	}
	any := false
	for _, c := range step.ToolCalls {
		if st.clientTool(c.Name) {
			any = true
			break
		}
	}
	if !any {
		return false
	}
	for i := range step.ToolCalls {
		c := &step.ToolCalls[i]
		if st.clientTool(c.Name) {
			c.Client = true
			continue
		}
		c.observe("error: not run: the same answer called the client's tools, which end the run; call it again if it is still needed", KindNotRun)
		st.appendMsg(gateway.Message{Role: gateway.RoleTool, Content: c.Observation, ToolCallID: c.ID, Name: c.Name, Failed: true})
	}
	st.steps = append(st.steps, *step)
	return true
}

// ClientCalls returns the calls of client tools that ended a run (the
// last step's calls marked Client), for the client to run.
func ClientCalls(steps []StepRecord) []ToolCallRecord {
	if len(steps) == 0 {
		return nil
	}
	var out []ToolCallRecord
	for _, c := range steps[len(steps)-1].ToolCalls {
		if c.Client {
			out = append(out, c)
		}
	}
	return out
}

// Thread returns the conversation a checkpoint holds, without system
// messages: the History of the thread's next run, as RunResult.Messages
// is for a run just driven.
func (cp *Checkpoint) Thread() []gateway.Message {
	out := make([]gateway.Message, len(cp.Messages))
	for i, m := range cp.Messages {
		out[i] = loadMessage(m)
	}
	return out
}
