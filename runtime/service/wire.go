package service

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
)

// wireToolCall is a tool call in the chat-completions wire format.
type wireToolCall struct {
	// Index is set in stream deltas only.
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func toWireCalls(calls []gateway.ToolCall) []wireToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]wireToolCall, len(calls))
	for i, c := range calls {
		out[i] = wireToolCall{ID: c.ID, Type: "function", Function: wireFunction{Name: c.Name, Arguments: string(c.Arguments)}}
	}
	return out
}

// wireContent is a message's content as clients send it: a string, null, or
// an array of text parts.
type wireContent struct {
	text string
	set  bool
	// refused says why the content cannot be read, for check to refuse
	// with the message's param: an error of UnmarshalJSON would reach
	// decodeBody without the place it came from.
	refused     string
	unsupported bool // refused is a kind of content the service does not take
}

// UnmarshalJSON accepts a string, null or an array of {"type":"text"} parts,
// and refuses other part types (images, audio, files), which no request of
// the gateway can carry.
func (c *wireContent) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	const want = "content must be a string, null or an array of text parts"
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"':
		c.set = true
		// The decoder has checked the string: without escapes, in valid
		// UTF-8, it is its own text.
		if in := b[1 : len(b)-1]; bytes.IndexByte(in, '\\') < 0 && utf8.Valid(in) {
			c.text = string(in)
			return nil
		}
		return json.Unmarshal(b, &c.text)
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type    string  `json:"type"`
			Text    *string `json:"text"`
			Refusal *string `json:"refusal"`
		}
		if json.Unmarshal(b, &parts) != nil {
			c.refused = want
			return nil
		}
		var sb strings.Builder
		for i, p := range parts {
			switch {
			case p.Type == "text" && p.Text != nil:
				sb.WriteString(*p.Text)
			case p.Type == "refusal" && p.Refusal != nil:
				sb.WriteString(*p.Refusal)
			case p.Type == "text" || p.Type == "refusal":
				c.refused = fmt.Sprintf("content part %d of type %q has no %s", i, p.Type, p.Type)
				return nil
			default:
				c.refused, c.unsupported = fmt.Sprintf("content part %d has type %q: only text parts are supported", i, p.Type), true
				return nil
			}
		}
		c.text, c.set = sb.String(), true
		return nil
	default:
		c.refused = want
		return nil
	}
}

// check refuses content UnmarshalJSON could not read; at is the message's
// param.
func (c *wireContent) check(at string) error {
	switch {
	case c.refused == "":
		return nil
	case c.unsupported:
		return invalid(CodeUnsupportedParameter, at+".content", c.refused)
	}
	return invalid(CodeInvalidRequest, at+".content", c.refused)
}

// wireMessage is a message as clients send it.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    wireContent    `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls"`
	ToolCallID string         `json:"tool_call_id"`
	Name       string         `json:"name"`
}

// outMessage is a message as the service sends it.
type outMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	Name       string         `json:"name,omitempty"`
}

func toOutMessages(msgs []gateway.Message) []outMessage {
	out := make([]outMessage, len(msgs))
	for i, m := range msgs {
		o := outMessage{Role: string(m.Role), ToolCalls: toWireCalls(m.ToolCalls), ToolCallID: m.ToolCallID, Name: m.Name}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			c := m.Content
			o.Content = &c
		}
		out[i] = o
	}
	return out
}

// toHistory maps client messages to a thread: user, assistant and tool
// messages in order; system and developer messages are counted and left out
// (the agent's instructions are the system prompt), unless system says to
// keep them, as system messages (a call straight to an alias). param names
// the field for errors. The thread must be one an OpenAI model accepts: a
// tool message answers a call of the assistant message before it, once, and
// every call of an assistant message is answered before the next user or
// assistant message, or the end of the history (the run's input follows
// it). Otherwise the provider would refuse the run's first call.
func toHistory(param string, msgs []wireMessage, system bool) (history []gateway.Message, ignored int, err error) {
	if len(msgs) > 0 {
		history = make([]gateway.Message, 0, len(msgs))
	}
	var calls toolCalls
	for i, m := range msgs {
		// The field's name is built only for an error.
		at := func() string { return param + "[" + strconv.Itoa(i) + "]" }
		if m.Content.refused != "" {
			return nil, 0, m.Content.check(at())
		}
		if m.Role == "user" || m.Role == "assistant" {
			if err := calls.done(param); err != nil {
				return nil, 0, err
			}
		}
		switch m.Role {
		case "system", "developer":
			if system {
				history = append(history, gateway.Message{Role: gateway.RoleSystem, Content: m.Content.text, Name: m.Name})
				continue
			}
			ignored++
		case "user":
			if !m.Content.set {
				return nil, 0, invalid(CodeInvalidRequest, at()+".content", "a user message needs content")
			}
			history = append(history, gateway.Message{Role: gateway.RoleUser, Content: m.Content.text, Name: m.Name})
		case "assistant":
			gm := gateway.Message{Role: gateway.RoleAssistant, Content: m.Content.text, Name: m.Name}
			calls = toolCalls{at: i}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Function.Name == "" {
					return nil, 0, invalid(CodeInvalidRequest, fmt.Sprintf("%s.tool_calls[%d]", at(), j), "a tool call needs an id and a function name")
				}
				if slices.Contains(calls.ids, c.ID) {
					return nil, 0, invalid(CodeInvalidRequest, fmt.Sprintf("%s.tool_calls[%d]", at(), j), fmt.Sprintf("tool call id %q appears twice in this message", c.ID))
				}
				calls.ids = append(calls.ids, c.ID)
				args := c.Function.Arguments
				if args == "" {
					args = "{}"
				}
				if !json.Valid([]byte(args)) {
					return nil, 0, invalid(CodeInvalidRequest, fmt.Sprintf("%s.tool_calls[%d].function.arguments", at(), j), "tool call arguments must be a JSON document")
				}
				gm.ToolCalls = append(gm.ToolCalls, gateway.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(args)})
			}
			if !m.Content.set && len(gm.ToolCalls) == 0 {
				return nil, 0, invalid(CodeInvalidRequest, at()+".content", "an assistant message needs content or tool calls")
			}
			history = append(history, gm)
		case "tool":
			if m.ToolCallID == "" {
				return nil, 0, invalid(CodeInvalidRequest, at()+".tool_call_id", "a tool message needs the id of the call it answers")
			}
			if !m.Content.set {
				return nil, 0, invalid(CodeInvalidRequest, at()+".content", "a tool message needs content: the call's result")
			}
			if err := calls.answer(at(), m.ToolCallID, param); err != nil {
				return nil, 0, err
			}
			history = append(history, gateway.Message{Role: gateway.RoleTool, Content: m.Content.text, ToolCallID: m.ToolCallID, Name: m.Name})
		case "":
			return nil, 0, invalid(CodeInvalidRequest, at()+".role", "a message needs a role")
		default:
			return nil, 0, invalid(CodeInvalidRequest, at()+".role", fmt.Sprintf("role %q is not supported: use system, developer, user, assistant or tool", m.Role))
		}
	}
	if err := calls.done(param); err != nil {
		return nil, 0, err
	}
	return history, ignored, nil
}

// toolCalls are the calls of the last assistant message of a thread, and
// which of them tool messages have answered.
type toolCalls struct {
	at       int      // the assistant message's index
	ids      []string // its calls' ids, in order
	answered []string
}

// answer records the tool message at answering id.
func (c *toolCalls) answer(at, id, param string) error {
	switch {
	case len(c.ids) == 0:
		return invalid(CodeInvalidRequest, at, fmt.Sprintf("a tool message must answer a tool call of the assistant message before it; tool_call_id %q answers none", id))
	case !slices.Contains(c.ids, id):
		return invalid(CodeInvalidRequest, at, fmt.Sprintf("tool_call_id %q is not a call of the assistant message %s[%d] (its calls: %s)", id, param, c.at, strings.Join(c.ids, ", ")))
	case slices.Contains(c.answered, id):
		return invalid(CodeInvalidRequest, at, fmt.Sprintf("tool call %q is answered twice", id))
	}
	c.answered = append(c.answered, id)
	return nil
}

// done refuses calls left unanswered, and forgets the calls.
func (c *toolCalls) done(param string) error {
	var missing []string
	for _, id := range c.ids {
		if !slices.Contains(c.answered, id) {
			missing = append(missing, id)
		}
	}
	at := c.at
	*c = toolCalls{}
	if len(missing) > 0 {
		return invalid(CodeInvalidRequest, fmt.Sprintf("%s[%d]", param, at), fmt.Sprintf(
			"every tool call of an assistant message must be answered by a tool message before the next user or assistant message; unanswered: %s", strings.Join(missing, ", ")))
	}
	return nil
}

// usageJSON is a run's usage.
type usageJSON struct {
	InputTokens      int64 `json:"input_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	OutputTokens     int64 `json:"output_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// usageJSONOf is a run's usage as the runs API reports it.
func usageJSONOf(u gateway.Usage) usageJSON {
	return usageJSON{
		InputTokens: u.InputTokens, CacheReadTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteInputTokens(),
		OutputTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
	}
}

// pendingCall is the call a paused run waits on, and where to decide it.
type pendingCall struct {
	CallID    string `json:"call_id"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"`
	Reason    string `json:"reason"`
	ResumeURL string `json:"resume_url,omitempty"`
	// Policy is how the approval policy judged the call: the rule that
	// asks, and its reason.
	Policy *agents.PolicyRecord `json:"policy,omitempty"`
}

// pendingOf is the call a paused run waits on; decider says whether the
// key it is shown to may decide it, and only then does it say where
// (ResumeURL): a message a key reads never tells it how to do what its
// role may not do.
func pendingOf(cp *agents.Checkpoint, decider bool) *pendingCall {
	if cp == nil || cp.Pending == nil {
		return nil
	}
	c, ok := cp.Pending.Call()
	if !ok {
		return nil
	}
	p := &pendingCall{CallID: c.ID, Tool: c.Name, Arguments: c.Arguments, Reason: string(cp.Pending.Reason), Policy: c.Policy}
	if decider {
		p.ResumeURL = "/v1/runs/" + cp.RunID + "/resume"
	}
	return p
}

// aidExt is aid's extension object on chat-completion answers and errors:
// the run behind them, with the partial result of a run that stopped
// early.
type aidExt struct {
	RunID       string              `json:"run_id"`
	Status      string              `json:"status"`
	Agent       string              `json:"agent,omitempty"`
	Path        []string            `json:"path,omitempty"`
	Pending     *pendingCall        `json:"pending,omitempty"`
	Steps       []agents.StepRecord `json:"steps,omitempty"`
	LastText    string              `json:"last_text,omitempty"`
	CostUSD     float64             `json:"cost_usd,omitempty"`
	ContinueURL string              `json:"continue_url,omitempty"`
}

func extOf(res agents.RunResult, decider bool) *aidExt {
	if res.RunID == "" {
		return nil
	}
	ext := &aidExt{RunID: res.RunID, Status: string(res.Status), Agent: res.Agent, Path: res.Path, Pending: pendingOf(res.Checkpoint, decider)}
	if agents.Continuable(res.Status) {
		// The partial result of a run that stopped early.
		ext.Steps, ext.LastText, ext.CostUSD, ext.ContinueURL = res.Steps, res.LastText, res.CostUSD, continueURL(res.RunID, res.Status)
	}
	return ext
}

// continueURL is where a run that stopped early is continued; empty for
// any other status.
func continueURL(runID string, status agents.Status) string {
	if !agents.Continuable(status) {
		return ""
	}
	return "/v1/runs/" + runID + "/continue"
}

// runJSON is a run as the runs API answers it.
type runJSON struct {
	RunID    string              `json:"run_id"`
	Agent    string              `json:"agent"`
	Path     []string            `json:"path"`
	Status   string              `json:"status"`
	Answer   string              `json:"answer,omitempty"`
	LastText string              `json:"last_text,omitempty"`
	Steps    []agents.StepRecord `json:"steps"`
	Usage    usageJSON           `json:"usage"`
	CostUSD  float64             `json:"cost_usd"`
	Pending  *pendingCall        `json:"pending,omitempty"`
	// ContinueURL is set for a run that stopped early (max_steps,
	// timed_out, cancelled): POST it to continue the run.
	ContinueURL string       `json:"continue_url,omitempty"`
	Messages    []outMessage `json:"messages,omitempty"`
	Error       *apiError    `json:"error,omitempty"`
}

func runOf(res agents.RunResult, err error, reqID string, decider bool) runJSON {
	out := runJSON{
		RunID: res.RunID, Agent: res.Agent, Path: res.Path, Status: string(res.Status), Answer: res.Answer, LastText: res.LastText,
		Steps: res.Steps, CostUSD: res.CostUSD, Pending: pendingOf(res.Checkpoint, decider), Messages: toOutMessages(res.Messages),
		ContinueURL: continueURL(res.RunID, res.Status),
		Usage:       usageJSONOf(res.Usage),
	}
	if out.Steps == nil {
		out.Steps = []agents.StepRecord{}
	}
	if err != nil {
		out.Error = classify(err, reqID, res.RunID)
	}
	return out
}
