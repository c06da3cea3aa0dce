package service

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aidgen/aid/runtime/agents"
)

// chatRequest is the part of CreateChatCompletionRequest the service reads.
// Fields it does not list (sampling parameters, metadata) are accepted and
// not applied; the ones below that it refuses are read so that it can.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []wireMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User           string          `json:"user"`
	N              *int            `json:"n"`
	Tools          json.RawMessage `json:"tools"`
	Functions      json.RawMessage `json:"functions"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
	directFields
}

// present reports whether a raw field was sent with a value.
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// check refuses what the service does not serve; decider says whether the
// key may decide paused runs, which the message then says how to.
func (req *chatRequest) check(decider bool) error {
	switch {
	case present(req.Tools) && string(req.Tools) != "[]":
		return unsupported("tools", "client-side tools are not supported: the agent's tools run on the server")
	case present(req.Functions):
		return unsupported("functions", "client-side functions are not supported: the agent's tools run on the server")
	case present(req.ToolChoice) && string(req.ToolChoice) != `"auto"` && string(req.ToolChoice) != `"none"`:
		return unsupported("tool_choice", "tool_choice may only be auto or none: the agent decides which of its tools to call")
	case req.N != nil && *req.N != 1:
		return unsupported("n", "n must be 1: a run gives one answer")
	case present(req.ResponseFormat) && !textFormat(req.ResponseFormat):
		return unsupported("response_format", "response_format is not supported: an agent's output schema is part of its configuration")
	case len(req.Messages) == 0:
		return invalid(CodeInvalidRequest, "messages", "messages must not be empty")
	}
	n := len(req.Messages) - 1
	if err := req.Messages[n].Content.check(fmt.Sprintf("messages[%d]", n)); err != nil {
		return err // the others are toHistory's
	}
	if last := req.Messages[len(req.Messages)-1]; last.Role != "user" || !last.Content.set {
		msg := fmt.Sprintf("the last message must be a user message with content (the run's input); got role %q", last.Role)
		if decider {
			msg += ". Resume a paused run with POST /v1/runs/{id}/resume"
		}
		return invalid(CodeInvalidRequest, "messages", msg)
	}
	return nil
}

func textFormat(raw json.RawMessage) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) == nil && f.Type == "text"
}

func unsupported(param, msg string) error {
	e := invalid(CodeUnsupportedParameter, param, msg)
	return e
}

// chatCompletion is the one answer object of the chat-completions wire
// format, a chat completion or a chunk of one (Object says which), of an
// agent's run (E is aidExt) and of an exposed alias (E is directExt) alike:
// the same fields, the same usage (chatUsage, cached tokens included), and
// aid's extension object, which differs, as Aid.
type chatCompletion[E any] struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []chatChoice `json:"choices"`
	Usage   *chatUsage   `json:"usage,omitempty"`
	Aid     *E           `json:"aid,omitempty"`
}

// chatChunk is a chat.completion.chunk of one choice, its delta d and its
// finish reason (nil but on the last).
func chatChunk[E any](id string, created int64, model string, d *chatDelta, finish *string) chatCompletion[E] {
	return chatCompletion[E]{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: []chatChoice{{Delta: d, FinishReason: finish}}}
}

// usageChunk is the chunk after the last that carries the usage, and no
// choice, when the request's stream_options asked for it.
func usageChunk[E any](id string, created int64, model string, u *chatUsage, aid *E) chatCompletion[E] {
	return chatCompletion[E]{ID: id, Object: "chat.completion.chunk", Created: created, Model: model,
		Choices: []chatChoice{}, Usage: u, Aid: aid}
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      *outMessage `json:"message,omitempty"`
	Delta        *chatDelta  `json:"delta,omitempty"`
	FinishReason *string     `json:"finish_reason"`
	Logprobs     *struct{}   `json:"logprobs"`
}

// chatDelta is a chunk's piece of the answer.
type chatDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	ToolCalls []chatCallDelta `json:"tool_calls,omitempty"`
}

// chatCallDelta is a chunk's piece of a tool call. A call's first piece
// carries its id, type and name; later ones only arguments.
type chatCallDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatCompletions runs the agent named by model on the conversation.
func (s *Service) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req chatRequest
	if err := decodeBody(r, &req, false); err != nil {
		return err
	}
	if a, ok := s.direct[req.Model]; ok {
		return s.directChat(w, r, &req, a)
	}
	if err := req.check(mayDecide(r)); err != nil {
		return err
	}
	agent := req.Model
	if agent == "" {
		if s.cfg.Entry == "" {
			return invalid(CodeInvalidRequest, "model", "model is required: this service has no entry agent")
		}
		agent = s.cfg.Entry
	}
	history, ignored, err := toHistory("messages", req.Messages[:len(req.Messages)-1], false)
	if err != nil {
		return err
	}
	input := req.Messages[len(req.Messages)-1].Content.text
	opts := agents.RunOptions{History: history}
	opts.ThreadID, opts.UserID = principalOf(r).scopeIDs(r.Header.Get("X-Aid-Thread-Id"), req.User)
	pause, err := pauseShape(r)
	if err != nil {
		return err
	}
	if ignored > 0 {
		w.Header().Set("X-Aid-Ignored-System-Messages", strconv.Itoa(ignored))
	}
	if req.Stream {
		cs := &chatStream{w: w, timeout: s.limits.WriteTimeout, model: agent, created: time.Now().Unix(), reqID: info(r).id,
			usage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage, pause: pause, decider: mayDecide(r)}
		opts.OnEvent = cs.event
		res, err := s.runAgent(r, agent, input, opts)
		info(r).err = cs.finish(res, err, s.said(res))
		return nil
	}
	res, err := s.runAgent(r, agent, input, opts)
	if res.RunID != "" {
		w.Header().Set("X-Aid-Run-Id", res.RunID)
	}
	if err != nil {
		info(r).err = writeError(w, err, extOf(res, mayDecide(r)))
		return nil
	}
	writeJSON(w, http.StatusOK, completionOf(res, pause, s.said(res), mayDecide(r)))
	return nil
}

// PauseHeader is the request header that chooses how a chat completion
// answers a run paused for a decision: PauseMessage (the default) or
// PauseToolCalls.
const PauseHeader = "X-Aid-Pause"

// The values of PauseHeader.
const (
	// PauseMessage answers a pause with an assistant message that says
	// what waits (the tool, its arguments) and how to approve or reject it
	// (the resume URL), finish_reason stop, and the pending call in the
	// aid extension: a stock client loop shows it and runs nothing, since
	// the tool is the server's.
	PauseMessage = "message"
	// PauseToolCalls answers a pause as aid did before: the same message
	// with the pending call as its one tool call and finish_reason
	// tool_calls, for a client that handles aid's pauses itself.
	PauseToolCalls = "tool_calls"
)

// pauseShape reads PauseHeader.
func pauseShape(r *http.Request) (string, error) {
	switch v := r.Header.Get(PauseHeader); v {
	case "", PauseMessage:
		return PauseMessage, nil
	case PauseToolCalls:
		return PauseToolCalls, nil
	default:
		return "", invalid(CodeInvalidRequest, PauseHeader, fmt.Sprintf("header %s must be %s or %s, not %.40q", PauseHeader, PauseMessage, PauseToolCalls, v))
	}
}

// pauseText is the assistant message of a paused run: what waits, and, to
// a key that may decide it (p.ResumeURL set), how to.
func pauseText(runID string, p *pendingCall) string {
	why := "it needs approval"
	if p.Reason != string(agents.PauseApproval) {
		why = "it was " + p.Reason + " before it finished"
	}
	if p.Policy != nil && p.Policy.Reason != "" {
		why += ": " + p.Policy.Reason
	}
	if p.ResumeURL == "" {
		return fmt.Sprintf("Run %s is paused: tool %s waits for approval of the call %s with arguments %s (%s). "+
			"The run goes on once someone allowed to decide it has.", runID, p.Tool, p.CallID, p.Arguments, why)
	}
	return fmt.Sprintf("Run %s is paused: tool %s waits for a decision on the call %s with arguments %s (%s). "+
		`Approve it with POST %s and the body {"action":"approve"}, or reject it with {"action":"reject"}.`,
		runID, p.Tool, p.CallID, p.Arguments, why, p.ResumeURL)
}

// chatStream answers a chat completion with stream true. The text the
// run's agents produce at depth 0 goes out as content chunks as the model
// writes it, as OpenAI's API streams content: text of a step that ends in
// tool calls (a preamble such as "Let me look that up.") is part of that
// assistant message, so it is streamed too, and the text of each later
// step is set apart from what came before by a blank line. With no
// preamble the content is exactly the run's answer. Text of delegated runs
// is not streamed: it is an observation for the delegating agent, not the
// answer. The stream opens at the first piece of text, or at the run's end
// if none came, so that a run refused before it starts still gets an HTTP
// error; a failure after that is an error chunk, as OpenAI sends one.
type chatStream struct {
	w       http.ResponseWriter
	timeout time.Duration
	sse     *sse
	id      string
	model   string
	created int64
	usage   bool
	reqID   string
	pause   string // PauseMessage or PauseToolCalls
	decider bool   // the key may decide a pause (pendingOf)
	step    int    // the step of the last text streamed
	sent    bool   // some text was streamed
}

func (c *chatStream) chunk(d chatDelta, finish *string) chatCompletion[aidExt] {
	return chatChunk[aidExt](c.id, c.created, c.model, &d, finish)
}

// open starts the stream with the role chunk, naming the run in the
// headers while they can still be written.
func (c *chatStream) open(runID string) {
	if c.sse != nil {
		return
	}
	if runID != "" {
		c.w.Header().Set("X-Aid-Run-Id", runID)
		c.id = "chatcmpl-" + runID
	}
	c.sse = newSSE(c.w, c.timeout)
	empty := ""
	c.sse.data(c.chunk(chatDelta{Role: "assistant", Content: &empty}, nil))
}

// content streams a piece of text of step.
func (c *chatStream) content(step int, text string) {
	if c.sent && step != c.step {
		text = "\n\n" + text
	}
	c.step, c.sent = step, true
	c.sse.data(c.chunk(chatDelta{Content: &text}, nil))
}

// event is the run's hook; the runtime calls it one event at a time.
func (c *chatStream) event(ev agents.Event) {
	if ev.Kind != agents.EventText || ev.Depth != 0 || ev.Text == "" {
		return
	}
	c.open(ev.RunID)
	c.model = ev.Agent
	c.content(ev.Step, ev.Text)
}

// finish ends the stream with the run's outcome: a pause's call, the
// finish reason, the usage when asked for, and [DONE]; or the error.
func (c *chatStream) finish(res agents.RunResult, err error, said string) *apiError {
	if err != nil {
		if c.sse == nil {
			if res.RunID != "" {
				c.w.Header().Set("X-Aid-Run-Id", res.RunID)
			}
			return writeError(c.w, err, extOf(res, c.decider))
		}
		ae := classify(err, c.reqID, res.RunID)
		c.sse.data(errorBody{Error: ae, Aid: extOf(res, c.decider)})
		c.sse.close()
		return ae
	}
	c.open(res.RunID)
	cc := completionOf(res, c.pause, said, c.decider)
	c.model = cc.Model
	msg := cc.Choices[0].Message
	switch {
	case cc.Aid != nil && cc.Aid.Pending != nil:
		// A pause: its message says what waits and how to decide it, after
		// what was streamed, as the non-streamed answer does.
		c.content(-1, pauseText(res.RunID, cc.Aid.Pending))
		if len(msg.ToolCalls) > 0 {
			calls := make([]chatCallDelta, len(msg.ToolCalls))
			for i, tc := range msg.ToolCalls {
				calls[i] = chatCallDelta{Index: i, ID: tc.ID, Type: tc.Type}
				calls[i].Function.Name, calls[i].Function.Arguments = tc.Function.Name, tc.Function.Arguments
			}
			c.sse.data(c.chunk(chatDelta{ToolCalls: calls}, nil))
		}
	case !c.sent && *msg.Content != "":
		c.content(0, *msg.Content)
	}
	last := c.chunk(chatDelta{}, cc.Choices[0].FinishReason)
	last.Aid = cc.Aid
	c.sse.data(last)
	if c.usage {
		c.sse.data(usageChunk(c.id, c.created, c.model, cc.Usage, cc.Aid))
	}
	c.sse.done()
	return nil
}

// completionOf renders a completed or paused run as a chat completion; pause
// is PauseMessage or PauseToolCalls, said what the run's agents said
// (Service.said), the message's content, before a pause's text; decider
// whether the key that asked may decide the pause (pendingOf).
func completionOf(res agents.RunResult, pause, said string, decider bool) chatCompletion[aidExt] {
	finish := "stop"
	msg := &outMessage{Role: "assistant"}
	if p := pendingOf(res.Checkpoint, decider); p != nil {
		text := pauseText(res.RunID, p)
		if said != "" {
			text = said + "\n\n" + text
		}
		msg.Content = &text
		if pause == PauseToolCalls {
			finish = "tool_calls"
			msg.ToolCalls = []wireToolCall{{ID: p.CallID, Type: "function", Function: wireFunction{Name: p.Tool, Arguments: p.Arguments}}}
		}
	} else {
		answer := cmp.Or(said, res.Answer)
		msg.Content = &answer
	}
	return chatCompletion[aidExt]{
		ID: "chatcmpl-" + res.RunID, Object: "chat.completion", Created: time.Now().Unix(), Model: res.Agent,
		Choices: []chatChoice{{Message: msg, FinishReason: &finish}},
		Usage:   usageOf(res.Usage),
		Aid:     extOf(res, decider),
	}
}

// said is the content of a chat completion of res, streamed or not (one
// rule for both, which chatStream follows as the text arrives): the text
// the run's own agents wrote, step by step, each step's set apart from the
// one before by a blank line. A preamble before a tool call or a handoff
// ("Let me pass you to billing.") is part of it, as in OpenAI's assistant
// messages, and then the answer; a delegated run's text is not (it is an
// observation for the delegating agent), nor is the text of an agent with
// an output schema but its validated answer (the runtime withholds the
// rest). Without a preamble it is exactly the run's answer.
func (s *Service) said(res agents.RunResult) string {
	steps := res.Steps
	if cp := res.Checkpoint; res.Status == agents.StatusPaused && cp != nil && cp.Pending != nil {
		steps = append(slices.Clip(steps), cp.Pending.Step)
	}
	// One text, the common case, is returned as it is, without a copy.
	var first string
	var b strings.Builder
	for i, st := range steps {
		if st.Text == "" {
			continue
		}
		if a, ok := s.cfg.Agents.Agent(st.Agent); ok && len(a.Output) > 0 && (i != len(steps)-1 || res.Status != agents.StatusCompleted) {
			continue
		}
		switch {
		case first == "":
			first = st.Text
			continue
		case b.Len() == 0:
			b.WriteString(first)
		}
		b.WriteString("\n\n")
		b.WriteString(st.Text)
	}
	if b.Len() == 0 {
		return first
	}
	return b.String()
}

// modelObject is an agent as an OpenAI model object.
type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels lists the agents, then the exposed aliases.
func (s *Service) listModels(w http.ResponseWriter, _ *http.Request) error {
	names := s.cfg.Agents.Agents()
	data := make([]modelObject, len(names), len(names)+len(s.cfg.Aliases))
	for i, n := range names {
		data[i] = modelObject{ID: n, Object: "model", OwnedBy: "aid"}
	}
	data = append(data, s.aliasModels()...)
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}

func (s *Service) getModel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("model")
	for _, n := range s.cfg.Agents.Agents() {
		if n == name {
			writeJSON(w, http.StatusOK, modelObject{ID: n, Object: "model", OwnedBy: "aid"})
			return nil
		}
	}
	if _, ok := s.direct[name]; ok {
		writeJSON(w, http.StatusOK, modelObject{ID: name, Object: "model", OwnedBy: "aid"})
		return nil
	}
	e := newError(http.StatusNotFound, TypeNotFound, CodeModelNotFound, fmt.Sprintf("no agent or exposed alias %q", name))
	p := "model"
	e.Param = &p
	return e
}
