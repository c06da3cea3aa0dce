package fake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aidgen/aid/runtime/gateway"
)

// Step is one scripted answer.
type Step struct {
	// Text is the answer's text.
	Text string
	// ToolCalls are the tool calls the answer asks for.
	ToolCalls []gateway.ToolCall
	// Err, when set, is returned instead of an answer. In a stream, an Err
	// with no Text fails the stream before it opens; with Text, the text is
	// delivered first and the stream then breaks with Err.
	Err error
	// Usage, when set, is reported as is; otherwise the usage is estimated.
	Usage *gateway.Usage
	// FinishReason, when set, is reported as is; otherwise it is
	// tool_calls for an answer with tool calls and stop for the rest.
	FinishReason gateway.FinishReason
	// Delay is added to Config.Latency for this step.
	Delay time.Duration
	// Answer makes the step a final answer drawn from the answer key: with
	// Config.AnswerKey set, the text is the key's answer (right or wrong,
	// by the seeded coin) to the call's case, shaped by the request's JSON
	// schema if it has one (see AnswerDocument); without an answer key, or
	// for a call that is no eval sample and whose input is no case (a demo
	// conversation), the step answers Text, so that one script serves demos
	// and evaluations.
	// An answer step has no tool calls.
	Answer bool
}

// Case is one evaluation case of an answer key.
type Case struct {
	// ID is the case id, as the eval runner puts it on the context with
	// gateway.WithSample.
	ID string
	// Input is the user input of the case, matched against the last user
	// message when the context carries no sample. Whitespace is collapsed
	// before matching.
	Input string
	// Answer is the expected answer.
	Answer string
}

// AnswerKey configures answer-key mode.
type AnswerKey struct {
	// Cases lists the cases and their expected answers.
	Cases []Case
	// Accuracy is the probability of a correct answer, in [0, 1].
	Accuracy float64
	// Wrong is the wrong answer used when no other case has a different
	// answer to borrow; empty means "I don't know."
	Wrong string
}

// Config configures a fake provider. The zero value is echo mode.
type Config struct {
	// Script is consumed in order by calls to any model.
	Script []Step
	// ByModel holds a script per model id; it takes precedence over
	// Script for the models it names.
	ByModel map[string][]Step
	// Agents holds a script per agent name, for calls that carry a
	// gateway.CallInfo (the agent runtime puts one on every model call): the
	// call of step n of an agent's turn answers the agent's n-th step,
	// whatever the order in which concurrent runs arrive, so every run of
	// the same conversation plays the same way. It takes precedence over
	// ByModel and Script, which still answer calls without call info and
	// calls of agents it does not name; with neither, such a call answers
	// from the answer key if there is one, and fails with an
	// *UnscriptedAgentError otherwise. Tool calls without an id get
	// call_<agent>_<step>_<n>. LoadScript reads these scripts from a file.
	Agents map[string][]Step
	// Conversations holds, per agent name, several scripts the agent
	// plays, each selected by the call: the first conversation whose When
	// matches plays, a conversation without When is the default, and a
	// call no conversation matches fails. Steps are played as those of
	// Agents are; an agent is scripted in Agents or here, not both.
	Conversations map[string][]Conversation
	// SummaryKeep marks the lines of a conversation the summariser keeps
	// (see below); empty means DefaultSummaryKeep. A compaction call
	// (gateway.CallInfo.Compaction) for which Agents and Conversations
	// hold no script is answered by the summariser, in every mode: its
	// answer is the request's lines that start with this mark, each once,
	// in order.
	SummaryKeep string
	// Loop restarts an exhausted script instead of failing; for an agent
	// script, step n of a turn plays step (n-1) mod len+1.
	Loop bool
	// AnswerKey, when set, selects answer-key mode: for every call without
	// a script, and for the Answer steps of agent scripts. It cannot be
	// combined with Script or ByModel.
	AnswerKey *AnswerKey
	// Seed seeds the answer key's coin and the embeddings.
	Seed uint64
	// Latency delays every call; the delay ends early when the context
	// ends.
	Latency time.Duration
	// Capabilities overrides what the provider declares; nil means tools,
	// json, streaming and embeddings.
	Capabilities []gateway.Capability
	// Record keeps every request for Requests, for tests that inspect what
	// the gateway sent.
	Record bool
	// Analyzer is the text analysis the embeddings hash (runtime/analysis's
	// English); nil means the provider does not embed, and Embed fails
	// saying so. It is a field rather than an import so that a program
	// whose fake models do not embed does not link the stemmer.
	Analyzer Analyzer
}

// ErrScriptExhausted is returned when a scripted fake has no step left.
var ErrScriptExhausted = errors.New("fake: script exhausted")

// UnknownCaseError is returned in answer-key mode for a call whose case
// cannot be found, by id or by input.
type UnknownCaseError struct {
	// Case is the case id from the context, if any.
	Case string
	// Input is the last user message, when matched by input.
	Input string
}

// Error implements error.
func (e *UnknownCaseError) Error() string {
	if e.Case != "" {
		return fmt.Sprintf("fake: answer key has no case %q", e.Case)
	}
	return fmt.Sprintf("fake: answer key has no case with input %q", e.Input)
}

// Provider is the fake gateway.Provider. It is safe for concurrent use.
type Provider struct {
	cfg     Config
	caps    []gateway.Capability
	byID    map[string]*Case
	byInput map[string]*Case
	answers []string // distinct answers, sorted, for plausible wrong ones

	mu       sync.Mutex
	pos      map[string]int // script position per script key
	calls    int
	requests []gateway.Request
}

// New returns a fake provider. It fails on an answer key with duplicate case
// ids or inputs, or an accuracy outside [0, 1].
func New(cfg Config) (*Provider, error) {
	p := &Provider{cfg: cfg, pos: make(map[string]int)}
	p.caps = cfg.Capabilities
	if p.caps == nil {
		p.caps = []gateway.Capability{gateway.CapabilityTools, gateway.CapabilityJSON, gateway.CapabilityStreaming, gateway.CapabilityEmbeddings}
	}
	if err := checkAgentScripts(cfg.Agents, cfg.Conversations); err != nil {
		return nil, err
	}
	if ak := cfg.AnswerKey; ak != nil {
		if len(cfg.Script) > 0 || len(cfg.ByModel) > 0 {
			return nil, errors.New("fake: choose a script or an answer key, not both")
		}
		if ak.Accuracy < 0 || ak.Accuracy > 1 || math.IsNaN(ak.Accuracy) {
			return nil, fmt.Errorf("fake: accuracy %v is outside [0, 1]", ak.Accuracy)
		}
		p.byID = make(map[string]*Case, len(ak.Cases))
		p.byInput = make(map[string]*Case, len(ak.Cases))
		for i := range ak.Cases {
			c := &ak.Cases[i]
			if c.ID == "" {
				return nil, fmt.Errorf("fake: answer key case %d has no id", i)
			}
			if _, dup := p.byID[c.ID]; dup {
				return nil, fmt.Errorf("fake: answer key case %q appears twice", c.ID)
			}
			p.byID[c.ID] = c
			if c.Input != "" {
				in := normalize(c.Input)
				if prev, dup := p.byInput[in]; dup {
					return nil, fmt.Errorf("fake: cases %q and %q have the same input", prev.ID, c.ID)
				}
				p.byInput[in] = c
			}
			if !slices.Contains(p.answers, c.Answer) {
				p.answers = append(p.answers, c.Answer)
			}
		}
		slices.Sort(p.answers)
	}
	return p, nil
}

// Kind implements gateway.Provider; the fake reports "fake" as its
// gen_ai.provider.name.
func (p *Provider) Kind() string { return "fake" }

// Capabilities implements gateway.Provider.
func (p *Provider) Capabilities() []gateway.Capability { return p.caps }

// Calls returns how many chat calls the provider has answered or failed.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Requests returns the requests received, when Config.Record is set.
func (p *Provider) Requests() []gateway.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.requests)
}

// Generate implements gateway.Provider.
func (p *Provider) Generate(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	// The model and the request are passed by pointer, and the answer built
	// by a function of its own, to keep this frame small: it is on the
	// stack of every call waiting for Config.Latency.
	st, err := p.next(ctx, &model, &req)
	if err == nil {
		err = wait(ctx, p.cfg.Latency+st.Delay)
	}
	if err != nil {
		return gateway.Response{}, err
	}
	if st.Err != nil {
		return gateway.Response{}, st.Err
	}
	return respond(&model, &req, &st), nil
}

// next picks the step answering req.
func (p *Provider) next(ctx context.Context, model *gateway.ModelSpec, req *gateway.Request) (Step, error) {
	if err := ctx.Err(); err != nil {
		return Step{}, err
	}
	p.mu.Lock()
	p.calls++
	if p.cfg.Record {
		p.record(req)
	}
	var script []Step
	key, scripted := "", false
	ci, hasCI := gateway.CallInfoFromContext(ctx)
	agentScript, byAgent := p.cfg.Agents[ci.Agent]
	var err error
	if convs, ok := p.cfg.Conversations[ci.Agent]; ok && hasCI {
		agentScript, err = pickConversation(ctx, ci.Agent, convs, req)
		byAgent = true
	}
	byAgent = byAgent && hasCI
	if err != nil {
		p.mu.Unlock()
		return Step{}, err
	}
	if ci.Compaction && !byAgent {
		p.mu.Unlock()
		return Step{Text: summarise(req, p.cfg.SummaryKeep)}, nil
	}
	if byAgent {
		script, scripted = agentScript, true
	} else if s, ok := p.cfg.ByModel[model.ID]; ok {
		script, key, scripted = s, "model:"+model.ID, true
	} else if len(p.cfg.Script) > 0 {
		script, scripted = p.cfg.Script, true
	}
	var st Step
	if byAgent {
		st, err = p.agentStep(ci, script)
	} else if scripted {
		i := p.pos[key]
		switch {
		case i < len(script):
			st = script[i]
			p.pos[key] = i + 1
		case p.cfg.Loop && len(script) > 0:
			st = script[0]
			p.pos[key] = 1
		default:
			err = fmt.Errorf("%w after %d steps (model %s)", ErrScriptExhausted, len(script), model.ID)
		}
	}
	p.mu.Unlock()
	switch {
	case err != nil:
		return st, err
	case scripted && !st.Answer:
		return st, nil
	}
	return p.reply(ctx, ci, hasCI, req, scripted, st)
}

// record keeps req (Config.Record). It is not inlined, to keep the copy of
// req out of next's frame.
//
//go:noinline
func (p *Provider) record(req *gateway.Request) {
	p.requests = append(p.requests, *req)
}

// reply is next for a call that no plain scripted step answers: a scripted
// answer step (Step.Answer, when scripted), the answer key's answer, an
// agent without a script, or an echo. It is not inlined, to keep its frame
// out of next's.
//
//go:noinline
func (p *Provider) reply(ctx context.Context, ci gateway.CallInfo, hasCI bool, req *gateway.Request, scripted bool, st Step) (Step, error) {
	switch {
	case scripted:
		return p.answerStep(ctx, ci, *req, st)
	case p.cfg.AnswerKey != nil:
		text, err := p.answer(ctx, *req)
		return Step{Text: text}, err
	case hasCI && len(p.cfg.Agents)+len(p.cfg.Conversations) > 0:
		scripted := slices.Sorted(maps.Keys(p.cfg.Agents))
		scripted = slices.Sorted(slices.Values(append(scripted, slices.Collect(maps.Keys(p.cfg.Conversations))...)))
		return Step{}, &UnscriptedAgentError{Agent: ci.Agent, Scripted: scripted}
	}
	return Step{Text: "echo: " + lastUser(req)}, nil
}

// answer returns the answer-key mode's answer to req.
func (p *Provider) answer(ctx context.Context, req gateway.Request) (string, error) {
	sample, ok := gateway.SampleFrom(ctx)
	var c *Case
	if ok && sample.Case != "" {
		if c = p.byID[sample.Case]; c == nil {
			return "", &UnknownCaseError{Case: sample.Case}
		}
	} else {
		in := lastUser(&req)
		if c = p.byInput[normalize(in)]; c == nil {
			return "", &UnknownCaseError{Input: in}
		}
		sample = gateway.SampleKey{Case: c.ID}
	}
	correct, pick := Coin(p.cfg.Seed, sample, p.cfg.AnswerKey.Accuracy)
	text := c.Answer
	if !correct {
		text = p.wrong(c.Answer, pick)
	}
	if rf := req.ResponseFormat; rf != nil {
		doc, err := AnswerDocument(rf.Schema, text)
		if err != nil {
			return "", fmt.Errorf("fake: answer case %q as JSON: %w", c.ID, err)
		}
		return doc, nil
	}
	return text, nil
}

// wrong returns a deterministic wrong answer: another case's answer, or the
// configured fixed one.
func (p *Provider) wrong(right string, pick uint64) string {
	n := len(p.answers)
	if slices.Contains(p.answers, right) {
		n--
	}
	if n <= 0 {
		if w := p.cfg.AnswerKey.Wrong; w != "" && w != right {
			return w
		}
		return "I don't know."
	}
	k := int(pick % uint64(n))
	for _, a := range p.answers {
		if a == right {
			continue
		}
		if k == 0 {
			return a
		}
		k--
	}
	return "I don't know."
}

// Coin is the answer key's seeded coin: it reports whether the sample is
// answered correctly (probability accuracy) and returns further
// deterministic bits for choosing a wrong answer. It is exported so that
// tests and baselines can predict the fake exactly.
func Coin(seed uint64, s gateway.SampleKey, accuracy float64) (correct bool, pick uint64) {
	h := hashString(mix(seed^0x9e3779b97f4a7c15), s.Case)
	h = mix(h ^ uint64(s.Index))
	u := float64(h>>11) / (1 << 53)
	return u < accuracy, mix(h + 1)
}

// respond builds the answer of a step, with plausible usage. It is not
// inlined, to keep its frame out of Generate's (see there).
//
//go:noinline
func respond(model *gateway.ModelSpec, req *gateway.Request, st *Step) gateway.Response {
	resp := gateway.Response{Text: st.Text, ToolCalls: st.ToolCalls, FinishReason: st.FinishReason, Model: model.ID}
	if resp.FinishReason == "" {
		resp.FinishReason = gateway.FinishStop
		if len(st.ToolCalls) > 0 {
			resp.FinishReason = gateway.FinishToolCalls
		}
	}
	if st.Usage != nil {
		resp.Usage = *st.Usage
		return resp
	}
	out := gateway.EstimateTokens(resp.Text)
	for _, c := range resp.ToolCalls {
		out += 4 + gateway.EstimateTokens(c.Name) + gateway.EstimateTokens(string(c.Arguments))
	}
	if limit := int64(req.MaxOutputTokens); limit > 0 && out > limit {
		resp.Text = truncate(resp.Text, int(limit)*4)
		resp.FinishReason = gateway.FinishLength
		out = limit
	}
	out = max(out, 1)
	in := gateway.EstimateInputTokens(*req)
	resp.Usage = gateway.Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	return resp
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// wait sleeps for d, or until ctx ends.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func lastUser(req *gateway.Request) string {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == gateway.RoleUser {
			return req.Messages[i].Content
		}
	}
	return ""
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// Stream implements gateway.Provider: the answer arrives word by word, tool
// calls in two fragments each, then the finish reason and the usage.
func (p *Provider) Stream(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.DeltaStream, error) {
	st, err := p.next(ctx, &model, &req)
	if err == nil {
		err = wait(ctx, p.cfg.Latency+st.Delay)
	}
	if err != nil {
		return nil, err
	}
	if st.Err != nil && st.Text == "" {
		return nil, st.Err
	}
	resp := respond(&model, &req, &st)
	s := &stream{ctx: ctx, fail: st.Err}
	for _, w := range splitWords(resp.Text) {
		s.deltas = append(s.deltas, gateway.Delta{Text: w, Model: model.ID})
	}
	for i, c := range resp.ToolCalls {
		args := string(c.Arguments)
		half := len(args) / 2
		s.deltas = append(s.deltas,
			gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, ID: c.ID, Name: c.Name, Arguments: args[:half]}}},
			gateway.Delta{ToolCalls: []gateway.ToolCallDelta{{Index: i, Arguments: args[half:]}}},
		)
	}
	if s.fail == nil {
		u := resp.Usage
		s.deltas = append(s.deltas, gateway.Delta{FinishReason: resp.FinishReason, Usage: &u, Model: model.ID})
	}
	return s, nil
}

// splitWords splits text after each run of spaces, so that the pieces
// concatenate back to text.
func splitWords(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i-1] == ' ' && text[i] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

type stream struct {
	ctx    context.Context
	deltas []gateway.Delta
	fail   error
	closed bool
}

// Next implements gateway.DeltaStream.
func (s *stream) Next() (gateway.Delta, error) {
	if s.closed {
		return gateway.Delta{}, errors.New("fake: stream closed")
	}
	if err := s.ctx.Err(); err != nil {
		return gateway.Delta{}, err
	}
	if len(s.deltas) == 0 {
		if s.fail != nil {
			return gateway.Delta{}, s.fail
		}
		return gateway.Delta{}, io.EOF
	}
	d := s.deltas[0]
	s.deltas = s.deltas[1:]
	return d, nil
}

// Close implements gateway.DeltaStream.
func (s *stream) Close() error {
	s.closed = true
	return nil
}

// Embed implements gateway.Provider. A text's vector hashes its words,
// word pairs and character trigrams into the model's width and is
// normalised to unit length (see embed), so equal texts get equal vectors
// and texts sharing words or word stems point the same way.
func (p *Provider) Embed(ctx context.Context, model gateway.ModelSpec, texts []string) (gateway.EmbedResponse, error) {
	if err := wait(ctx, p.cfg.Latency); err != nil {
		return gateway.EmbedResponse{}, err
	}
	if model.Dimensions <= 0 {
		return gateway.EmbedResponse{}, fmt.Errorf("fake: model %s declares no dimensions", model.ID)
	}
	if p.cfg.Analyzer == nil {
		return gateway.EmbedResponse{}, fmt.Errorf("fake: model %s: this provider embeds nothing: its Config.Analyzer is nil (analysis.English{}, which lowering sets on a fake provider with an embedding model)", model.ID)
	}
	resp := gateway.EmbedResponse{Vectors: make([][]float32, len(texts)), Model: model.ID}
	for i, t := range texts {
		resp.Vectors[i] = p.embed(model.ID, t, model.Dimensions)
	}
	resp.Usage = gateway.EstimateEmbedUsage(texts)
	resp.Usage.Estimated = false
	return resp, nil
}

// hashString folds s into h with FNV-1a and finalises with mix.
func hashString(h uint64, s string) uint64 {
	const prime = 1099511628211
	h ^= 14695981039346656037
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= prime
	}
	h ^= uint64(len(s))
	h *= prime
	return mix(h)
}

// mix is the splitmix64 finaliser: it spreads every input bit over the
// output.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
