package agents

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// RequestRecord is the model request of a step, as a replay compares it.
// The messages are kept as the change from the request of the step before
// it in the same run (the run's own steps, or a delegated run's): its
// first Keep messages, then Messages. A run's thread only grows between
// two steps, so a step costs the messages it adds; a trimmed thread, a new
// agent's instructions or a run taken up in another process start afresh
// (Keep zero). A tool message is kept without its content, which is the
// observation of its call, kept with the call: the record costs no
// observation twice. The messages a step adds to the thread, its answer
// and its calls' results, are what the step's own record holds: the next
// step's request says it follows them (Answered) rather than repeat them.
type RequestRecord struct {
	// Keep is how many leading messages of the step before's request this
	// one repeats.
	Keep int `json:"keep,omitempty"`
	// Answered is true when, after those, the request holds the step
	// before's answer and a tool message per call of it, which the record
	// leaves out (answerMessages rebuilds them). Keep is then left out
	// when it is the whole of the step before's request, the common case.
	Answered bool `json:"answered,omitempty"`
	// Messages are the request's messages after those, system messages
	// included.
	Messages []SavedMessage `json:"messages,omitempty"`
	// Memory is true when the request carries a message of stored memory:
	// the last of its leading system messages.
	Memory bool `json:"memory,omitempty"`
	// Tools names the tools offered, in order; left out when they are the
	// step before's.
	Tools []string `json:"tools,omitempty"`
	// Fingerprint is a hash of what else the request asks: the tools'
	// definitions, the response format and the temperature; left out, with
	// Tools, when it is the step before's.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Learned are the definitions of the offered tools that their kind
	// learned from outside the application (Tool.Learned), which a
	// replay cannot read from the application; kept, with Tools, when
	// Fingerprint is.
	Learned []LearnedTool `json:"learned,omitempty"`
}

// learnedTools lists the learned definitions of the tools agent d offers,
// in the order offered.
func learnedTools(d *agentDef) []LearnedTool {
	var out []LearnedTool
	for _, def := range d.defs {
		if t := d.tools[def.Name]; t != nil && t.learned != nil {
			out = append(out, LearnedTool{Tool: def.Name, LearnedDefinition: *t.learned})
		}
	}
	return out
}

// Learned returns the learned definitions the recording holds
// (RequestRecord.Learned): the first of each tool, in the order recorded,
// the delegated runs' steps included. app.ReplayConfig builds the tools of
// a LearnedToolKind from them.
func (r *Recording) Learned() []LearnedTool {
	var out []LearnedTool
	seen := map[string]bool{}
	var walk func(steps []StepRecord)
	walk = func(steps []StepRecord) {
		for _, s := range steps {
			if s.Request != nil {
				for _, l := range s.Request.Learned {
					if !seen[l.Tool] {
						seen[l.Tool] = true
						out = append(out, l)
					}
				}
			}
			for _, c := range s.ToolCalls {
				if c.Delegate != nil {
					walk(c.Delegate.Steps)
				}
			}
		}
	}
	walk(r.Steps)
	return out
}

// fingerprint hashes what a request of agent d asks besides its messages.
func fingerprint(d *agentDef) string {
	b, err := json.Marshal(struct {
		Tools       []gateway.ToolDef   `json:"tools"`
		Format      *gateway.JSONSchema `json:"format,omitempty"`
		Temperature *float64            `json:"temperature,omitempty"`
	}{d.defs, d.format, d.spec.Temperature})
	if err != nil {
		panic(fmt.Sprintf("agents: fingerprint of agent %q: %v", d.spec.Name, err)) // plain data
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// recordRequest records the request of the step st is about to take, and
// remembers it for the next step's Keep. A request's messages are never
// changed once built (the loop appends to its thread past what a request
// holds), so the request itself is remembered, not a copy.
func (st *runState) recordRequest(req *gateway.Request) *RequestRecord {
	keep, prev := 0, len(st.lastReq)
	if prev > 0 && len(req.Messages) >= prev && &req.Messages[0] == &st.lastReq[0] {
		// The same thread, grown in place (request): what it held then it
		// holds now.
		keep = prev
	}
	for keep < len(st.lastReq) && keep < len(req.Messages) && sameMessage(&st.lastReq[keep], &req.Messages[keep]) {
		keep++
	}
	st.lastReq = req.Messages
	rest := req.Messages[keep:]
	answered := false
	if keep > 0 && len(st.steps) > 0 {
		if n := answerLen(&st.steps[len(st.steps)-1]); len(rest) >= n && followsStep(rest[:n], &st.steps[len(st.steps)-1]) {
			rest, answered = rest[n:], true
		}
	}
	var kept []SavedMessage
	if len(rest) > 0 {
		kept = make([]SavedMessage, len(rest))
		for i, m := range rest {
			kept[i] = withoutObservation(saveMessage(m))
		}
	}
	rec := &RequestRecord{Keep: keep, Answered: answered, Messages: kept, Memory: st.reqMemory}
	if answered && keep == prev {
		rec.Keep = 0 // the whole of it
	}
	if d := st.agent; d.fingerprint != st.lastFingerprint || keep == 0 {
		rec.Tools, rec.Fingerprint, rec.Learned = d.toolNames, d.fingerprint, d.learned
		st.lastFingerprint = d.fingerprint
	}
	return rec
}

// sameMessage reports whether two request messages are the same.
func sameMessage(a, b *gateway.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || a.ToolCallID != b.ToolCallID || a.Name != b.Name || a.Failed != b.Failed || len(a.ToolCalls) != len(b.ToolCalls) {
		return false
	}
	for i := range a.ToolCalls {
		if x, y := &a.ToolCalls[i], &b.ToolCalls[i]; x.ID != y.ID || x.Name != y.Name || !bytes.Equal(x.Arguments, y.Arguments) {
			return false
		}
	}
	return true
}

// answerLen is how many messages step s adds to its run's thread: its
// answer and a tool message per call.
func answerLen(s *StepRecord) int { return 1 + len(s.ToolCalls) }

// followsStep reports whether msgs are the messages step s added to its
// run's thread, as answerMessages rebuilds them (tool messages' content
// aside, which a request record leaves out).
func followsStep(msgs []gateway.Message, s *StepRecord) bool {
	a := &msgs[0]
	if a.Role != gateway.RoleAssistant || a.Content != s.Text || a.ToolCallID != "" || a.Name != "" || a.Failed || len(a.ToolCalls) != len(s.ToolCalls) {
		return false
	}
	for i := range s.ToolCalls {
		c, m := &s.ToolCalls[i], &msgs[1+i]
		if tc := &a.ToolCalls[i]; tc.ID != c.ID || tc.Name != c.Name || string(tc.Arguments) != modelArguments(*c) {
			return false
		}
		if m.Role != gateway.RoleTool || m.ToolCallID != c.ID || m.Name != c.Name || m.Failed != (c.ErrorKind != "") || len(m.ToolCalls) != 0 {
			return false
		}
	}
	return true
}

// answerMessages rebuilds the messages step s added to its run's thread,
// as a request record keeps them: its answer, then a tool message per
// call, without its observation.
func answerMessages(s *StepRecord) []SavedMessage {
	out := make([]SavedMessage, 0, answerLen(s))
	a := SavedMessage{Role: gateway.RoleAssistant, Content: s.Text}
	if len(s.ToolCalls) > 0 {
		a.ToolCalls = make([]SavedToolCall, len(s.ToolCalls))
		for i, c := range s.ToolCalls {
			a.ToolCalls[i] = SavedToolCall{ID: c.ID, Name: c.Name, Arguments: modelArguments(c)}
		}
	}
	out = append(out, a)
	for _, c := range s.ToolCalls {
		out = append(out, SavedMessage{Role: gateway.RoleTool, ToolCallID: c.ID, Name: c.Name, Failed: c.ErrorKind != ""})
	}
	return out
}

// withoutObservation is a request message as a RequestRecord keeps it: a
// tool message without its content, the observation its call keeps, and
// no provider reasoning, which only the checkpoint carries (a replay
// answers from the record, not the provider).
func withoutObservation(m SavedMessage) SavedMessage {
	if m.Role == gateway.RoleTool {
		m.Content = ""
	}
	m.Reasoning = nil
	return m
}

// requests rebuilds the whole request of each step from their records,
// the tools and fingerprint a record leaves out carried from the step
// before: nil for a step without one.
func requests(steps []StepRecord) ([]RequestRecord, error) {
	out := make([]RequestRecord, len(steps))
	var prev *RequestRecord
	for i, s := range steps {
		r := s.Request
		if r == nil {
			prev = nil
			continue
		}
		full := RequestRecord{Memory: r.Memory, Tools: r.Tools, Fingerprint: r.Fingerprint, Learned: r.Learned}
		if full.Fingerprint == "" {
			if prev == nil {
				return nil, fmt.Errorf("step %d leaves out the tools of a step before it that has no request", s.Number)
			}
			full.Tools, full.Fingerprint, full.Learned = prev.Tools, prev.Fingerprint, prev.Learned
		}
		switch {
		case r.Keep == 0 && !r.Answered:
			full.Messages = r.Messages
		case prev == nil || r.Keep > len(prev.Messages):
			n := 0
			if prev != nil {
				n = len(prev.Messages)
			}
			return nil, fmt.Errorf("step %d keeps %d messages of a request of %d", s.Number, r.Keep, n)
		case r.Answered:
			keep := cmp.Or(r.Keep, len(prev.Messages))
			full.Messages = slices.Concat(prev.Messages[:keep:keep], answerMessages(&steps[i-1]), r.Messages)
		default:
			full.Messages = slices.Concat(prev.Messages[:r.Keep:r.Keep], r.Messages)
		}
		out[i] = full
		prev = &out[i]
	}
	return out, nil
}

// RecordingFormat is the version of the event log Record writes.
// ReadRecording reads it and format 1, whose step requests never say
// they follow the step before's answer (RequestRecord.Answered), which a
// reader of format 1 would not know to rebuild.
const RecordingFormat = 2

// Recording is a run's event log: everything a replay needs, and what a
// person reads of a run. Record writes it as JSON Lines, one event per
// line; ReadRecording reads it back.
type Recording struct {
	// Run is the log's first line: the run, its application and how it
	// started and ended.
	Run RecordedRun
	// Steps are the run's steps in order, the one a run stopped or paused
	// in last (Pending), with the delegated runs' steps nested in their
	// calls.
	Steps []StepRecord
	// Pending is set when the run's last step was not completed: it paused
	// or stopped during its calls.
	Pending bool
}

// RecordedRun is the first line of an event log.
type RecordedRun struct {
	// Type is "run".
	Type string `json:"type"`
	// Format is RecordingFormat.
	Format int `json:"format"`
	// RunID identifies the run.
	RunID string `json:"run_id"`
	// App and AppVersion are the application the run ran in (Config.App,
	// Config.AppVersion).
	App        string `json:"app,omitempty"`
	AppVersion string `json:"app_version,omitempty"`
	// AppFile is the application file, when the writer knows it (aidgen
	// run --record).
	AppFile string `json:"app_file,omitempty"`
	// Agent is the agent the run started on.
	Agent string `json:"agent"`
	// ThreadID and UserID are the run's thread and user.
	ThreadID string `json:"thread_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	// History is the thread before the run; Input is its message.
	History []SavedMessage `json:"history,omitempty"`
	Input   string         `json:"input"`
	// Status is how the run ended, or stands.
	Status Status `json:"status"`
	// Answer is a completed run's answer.
	Answer string `json:"answer,omitempty"`
	// Path lists the agents the conversation went through.
	Path []string `json:"path"`
	// Usage and CostUSD are the run's.
	Usage   UsageRecord `json:"usage"`
	CostUSD float64     `json:"cost_usd"`
	// Continuations lists where the run was continued.
	Continuations []Continuation `json:"continuations,omitempty"`
	// Cancel says who cancelled a cancelled run.
	Cancel *CancelRequest `json:"cancel,omitempty"`
	// Grants are the grants people gave in the run.
	Grants []Grant `json:"grants,omitempty"`
	// Verdicts are the verdicts of its guardrails and hooks that did
	// something, in the order they were made.
	Verdicts []VerdictRecord `json:"verdicts,omitempty"`
	// Compactions are the compactions of its thread, in order; a replay
	// compacts where they did, its summaries answered from here.
	Compactions []CompactionRecord `json:"compactions,omitempty"`
	// UpdatedAt is when the run's record was last written, when the store
	// says: what a dataset sampled from recorded runs filters by time.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// recordedStep is one model call: a line of type "step". Its calls follow
// it, each a line of type "call" after the lines of its delegated run.
type recordedStep struct {
	Type    string `json:"type"`
	Depth   int    `json:"depth"`
	Pending bool   `json:"pending,omitempty"`
	StepRecord
}

// recordedCall is one tool call and its outcome: a line of type "call".
type recordedCall struct {
	Type  string `json:"type"`
	Depth int    `json:"depth"`
	Step  int    `json:"step"`
	Index int    `json:"index"`
	ToolCallRecord
}

// Record writes the event log of a stored run as JSON Lines: the run, then
// each step (its model request and answer, the pinned model that
// answered) and each of its tool calls (arguments, observation, the
// policy's decision, a person's approval), the steps of a delegated run
// before the call that delegated, and the step the run paused or stopped
// in last. appFile, when not empty, names the application file for
// aidgen replay.
func Record(w io.Writer, rec RunRecord, app, appVersion, appFile string) error {
	cp := rec.Checkpoint
	head := RecordedRun{
		Type: "run", Format: RecordingFormat, RunID: rec.RunID, App: cmpOr(cp.App, app), AppVersion: cmpOr(cp.AppVersion, appVersion), AppFile: appFile,
		ThreadID: cp.ThreadID, UserID: cp.UserID, Status: rec.Status, Path: cp.Path, Usage: cp.Usage, CostUSD: cp.CostUSD,
		Continuations: cp.Continuations, Grants: cp.Grants, Verdicts: cp.Verdicts, UpdatedAt: rec.UpdatedAt,
	}
	if len(cp.Path) > 0 {
		head.Agent = cp.Path[0]
	}
	if cp.Turn < len(cp.Messages) {
		head.History, head.Input = cp.Messages[:cp.Turn], cp.Messages[cp.Turn].Content
	}
	if c := cp.Compacted; c != nil {
		head.History, head.Compactions = c.History, c.Compactions // the history before a compaction rewrote it
	}
	if rec.Status == StatusCancelled {
		head.Cancel = cp.Cancel
	}
	steps := slices.Clone(cp.Steps)
	if cp.Pending != nil {
		steps = append(steps, cp.Pending.Step)
	}
	if rec.Status == StatusCompleted {
		head.Answer = LastText(steps)
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(head); err != nil {
		return fmt.Errorf("record run %s: %w", rec.RunID, err)
	}
	if err := recordSteps(enc, steps, 0, cp.Pending != nil); err != nil {
		return fmt.Errorf("record run %s: %w", rec.RunID, err)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func recordSteps(enc *json.Encoder, steps []StepRecord, depth int, pending bool) error {
	for i, s := range steps {
		calls := s.ToolCalls
		line := recordedStep{Type: "step", Depth: depth, Pending: pending && i == len(steps)-1, StepRecord: s}
		line.StepRecord.ToolCalls = make([]ToolCallRecord, len(calls))
		for j, c := range calls {
			line.StepRecord.ToolCalls[j] = ToolCallRecord{ID: c.ID, Name: c.Name, Arguments: modelArguments(c)}
		}
		if err := enc.Encode(line); err != nil {
			return err
		}
		for j, c := range calls {
			if c.Delegate != nil {
				if err := recordSteps(enc, c.Delegate.Steps, depth+1, false); err != nil {
					return err
				}
			}
			c := c
			if c.Delegate != nil {
				d := *c.Delegate
				d.Steps = nil // the lines above
				c.Delegate = &d
			}
			if err := enc.Encode(recordedCall{Type: "call", Depth: depth, Step: s.Number, Index: j, ToolCallRecord: c}); err != nil {
				return err
			}
		}
	}
	return nil
}

// modelArguments are a call's arguments as the model wrote them, before a
// person's edits.
func modelArguments(c ToolCallRecord) string {
	if a := c.Approval; a != nil && a.OriginalArguments != "" {
		return a.OriginalArguments
	}
	return c.Arguments
}

// RecordingError reports an event log that cannot be read: not JSON Lines
// of this format, or lines that do not fit together.
type RecordingError struct {
	// Line is the line at fault, from 1; zero for the log as a whole.
	Line int
	// Problem says what is wrong.
	Problem string
}

// Error implements error.
func (e *RecordingError) Error() string {
	if e.Line == 0 {
		return "event log: " + e.Problem
	}
	return fmt.Sprintf("event log line %d: %s", e.Line, e.Problem)
}

// maxRecordingLine bounds one line of an event log a reader accepts: a
// step's request after a trimmed thread, or a long observation.
const maxRecordingLine = 64 << 20

// ReadRecording reads an event log written by Record.
func ReadRecording(r io.Reader) (*Recording, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxRecordingLine)
	rec := &Recording{}
	// open holds, per depth, the steps being read and the step whose calls
	// come next; a step at depth d+1 belongs to the next call at depth d.
	type level struct{ steps []StepRecord }
	levels := []*level{{}}
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var kind struct {
			Type  string `json:"type"`
			Depth int    `json:"depth"`
		}
		if err := json.Unmarshal(line, &kind); err != nil {
			return nil, &RecordingError{Line: n, Problem: "not JSON: " + err.Error()}
		}
		if n == 1 {
			if kind.Type != "run" {
				return nil, &RecordingError{Line: n, Problem: fmt.Sprintf("the log starts with a %q line, not the run", kind.Type)}
			}
			if err := json.Unmarshal(line, &rec.Run); err != nil {
				return nil, &RecordingError{Line: n, Problem: err.Error()}
			}
			if rec.Run.Format != RecordingFormat && rec.Run.Format != 1 {
				return nil, &RecordingError{Line: n, Problem: fmt.Sprintf("format %d; this runtime reads formats 1 and %d", rec.Run.Format, RecordingFormat)}
			}
			continue
		}
		if kind.Depth < 0 || kind.Depth >= len(levels)+1 {
			return nil, &RecordingError{Line: n, Problem: fmt.Sprintf("depth %d without a step at depth %d before it", kind.Depth, kind.Depth-1)}
		}
		switch kind.Type {
		case "step":
			var s recordedStep
			if err := json.Unmarshal(line, &s); err != nil {
				return nil, &RecordingError{Line: n, Problem: err.Error()}
			}
			if kind.Depth == len(levels) {
				levels = append(levels, &level{})
			}
			lv := levels[kind.Depth]
			if len(lv.steps) > 0 && s.Number != lv.steps[len(lv.steps)-1].Number+1 || len(lv.steps) == 0 && s.Number != 1 && kind.Depth > 0 {
				return nil, &RecordingError{Line: n, Problem: fmt.Sprintf("step %d out of order", s.Number)}
			}
			lv.steps = append(lv.steps, s.StepRecord)
			if kind.Depth == 0 && s.Pending {
				rec.Pending = true
			}
		case "call":
			var c recordedCall
			if err := json.Unmarshal(line, &c); err != nil {
				return nil, &RecordingError{Line: n, Problem: err.Error()}
			}
			if kind.Depth >= len(levels) || len(levels[kind.Depth].steps) == 0 {
				return nil, &RecordingError{Line: n, Problem: "a call without its step"}
			}
			lv := levels[kind.Depth]
			s := &lv.steps[len(lv.steps)-1]
			if s.Number != c.Step || c.Index < 0 || c.Index >= len(s.ToolCalls) || s.ToolCalls[c.Index].ID != c.ID {
				return nil, &RecordingError{Line: n, Problem: fmt.Sprintf("call %d of step %d does not match the step before it", c.Index, c.Step)}
			}
			tc := c.ToolCallRecord
			if tc.Delegate != nil {
				if kind.Depth+1 < len(levels) {
					tc.Delegate.Steps = levels[kind.Depth+1].steps
					levels = levels[:kind.Depth+1]
				}
			} else if kind.Depth+1 < len(levels) {
				return nil, &RecordingError{Line: n, Problem: "steps of a delegated run before a call that delegated nothing"}
			}
			s.ToolCalls[c.Index] = tc
		default:
			return nil, &RecordingError{Line: n, Problem: fmt.Sprintf("unknown line type %q", kind.Type)}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &RecordingError{Line: n + 1, Problem: fmt.Sprintf("longer than %d bytes", maxRecordingLine)}
		}
		return nil, fmt.Errorf("read event log: %w", err)
	}
	if n == 0 {
		return nil, &RecordingError{Problem: "empty"}
	}
	if len(levels) > 1 {
		return nil, &RecordingError{Problem: "it ends inside a delegated run"}
	}
	rec.Steps = levels[0].steps
	if _, err := requests(rec.Steps); err != nil {
		return nil, &RecordingError{Problem: err.Error()}
	}
	return rec, nil
}
