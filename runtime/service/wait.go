package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/gateway"
	"github.com/aidgen/aid/runtime/retrieval"
)

// waitClock accumulates the wall time a request spends waiting on
// providers, tools and searchers. Waits that overlap (parallel read tools, a
// search's embedding inside the search) count once: the clock runs while at
// least one wait is open.
type waitClock struct {
	mu     sync.Mutex
	open   int
	since  time.Time
	waited time.Duration
	// emit, when set, receives the request's step events (a runs stream).
	emit func(event string, data any)
}

// waitClockFrom returns the clock of the request ctx belongs to: it is
// part of the request's reqInfo, so that a request carries one context
// value, not two.
func waitClockFrom(ctx context.Context) *waitClock {
	if ri, ok := ctx.Value(infoKey{}).(*reqInfo); ok {
		return &ri.clock
	}
	return nil
}

// begin opens a wait; the returned func closes it.
func (c *waitClock) begin() func() {
	if c == nil {
		return func() {}
	}
	c.mu.Lock()
	if c.open == 0 {
		c.since = time.Now()
	}
	c.open++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		c.open--
		if c.open == 0 {
			c.waited += time.Since(c.since)
		}
		c.mu.Unlock()
	}
}

// total returns the time waited so far, the open wait included.
func (c *waitClock) total() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.waited
	if c.open > 0 {
		d += time.Since(c.since)
	}
	return d
}

func (c *waitClock) event(name string, data any) {
	if c != nil && c.emit != nil {
		c.emit(name, data)
	}
}

// InstrumentProvider wraps a provider so that the service sees the time a
// request waits on it (the added-latency metric subtracts it) and, on a runs
// stream, an event per model call. Wrap every provider when building the
// gateway; outside a service request the wrapper only forwards.
func InstrumentProvider(p gateway.Provider) gateway.Provider {
	return instrumentedProvider{p}
}

type instrumentedProvider struct{ gateway.Provider }

// ModelCallEvent is the data of a model_call event on a runs stream: one
// answer of the model, as it arrives.
type ModelCallEvent struct {
	// Agent is the agent that called, Step its step in its turn.
	Agent string `json:"agent,omitempty"`
	Step  int    `json:"step,omitempty"`
	// Model is the pinned model id called.
	Model string `json:"model"`
	// Text is the model's text.
	Text string `json:"text,omitempty"`
	// ToolCalls are the calls the model asked for.
	ToolCalls []wireToolCall `json:"tool_calls,omitempty"`
	// FinishReason says why the model stopped.
	FinishReason string `json:"finish_reason,omitempty"`
	// DurationMS is how long the provider took.
	DurationMS float64 `json:"duration_ms"`
	// Error is the provider's failure, when it failed.
	Error string `json:"error,omitempty"`
}

func (p instrumentedProvider) Generate(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.Response, error) {
	c := waitClockFrom(ctx)
	start := time.Now()
	end := c.begin()
	resp, err := p.Provider.Generate(ctx, model, req)
	end()
	if c != nil && c.emit != nil {
		ev := ModelCallEvent{Model: model.ID, Text: resp.Text, FinishReason: string(resp.FinishReason),
			ToolCalls: toWireCalls(resp.ToolCalls), DurationMS: ms(time.Since(start))}
		if ci, ok := gateway.CallInfoFromContext(ctx); ok {
			ev.Agent, ev.Step = ci.Agent, ci.Step
		}
		if err != nil {
			ev.Error = err.Error()
		}
		c.event("model_call", ev)
	}
	return resp, err
}

func (p instrumentedProvider) Stream(ctx context.Context, model gateway.ModelSpec, req gateway.Request) (gateway.DeltaStream, error) {
	c := waitClockFrom(ctx)
	start := time.Now()
	end := c.begin()
	s, err := p.Provider.Stream(ctx, model, req)
	if err != nil {
		end()
		if c != nil && c.emit != nil {
			ev := ModelCallEvent{Model: model.ID, Error: err.Error(), DurationMS: ms(time.Since(start))}
			if ci, ok := gateway.CallInfoFromContext(ctx); ok {
				ev.Agent, ev.Step = ci.Agent, ci.Step
			}
			c.event("model_call", ev)
		}
		return nil, err
	}
	is := &instrumentedStream{DeltaStream: s, end: end}
	if c != nil && c.emit != nil {
		// On a runs stream the call is reported when it ends, as a
		// Generate call is: the whole answer, after its token events.
		is.ev = &ModelCallEvent{Model: model.ID}
		if ci, ok := gateway.CallInfoFromContext(ctx); ok {
			is.ev.Agent, is.ev.Step = ci.Agent, ci.Step
		}
		is.start, is.clock = start, c
	}
	return is, nil
}

// instrumentedStream counts a stream as waiting until it ends or is closed
// and, on a runs stream, reports the call when it ends.
type instrumentedStream struct {
	gateway.DeltaStream
	once  sync.Once
	end   func()
	ev    *ModelCallEvent // nil unless a runs stream wants the call
	clock *waitClock
	start time.Time
	text  strings.Builder
	calls []wireToolCall
}

func (s *instrumentedStream) Next() (gateway.Delta, error) {
	d, err := s.DeltaStream.Next()
	if s.ev != nil && err == nil {
		s.add(d)
	}
	if err != nil {
		if !errors.Is(err, io.EOF) && s.ev != nil {
			s.ev.Error = err.Error()
		}
		s.once.Do(s.done)
	}
	return d, err
}

// add accumulates a delta into the call's event.
func (s *instrumentedStream) add(d gateway.Delta) {
	s.text.WriteString(d.Text)
	for _, tc := range d.ToolCalls {
		if tc.Index < 0 || tc.Index > 1024 {
			continue
		}
		for len(s.calls) <= tc.Index {
			s.calls = append(s.calls, wireToolCall{Type: "function"})
		}
		c := &s.calls[tc.Index]
		if tc.ID != "" {
			c.ID = tc.ID
		}
		if tc.Name != "" {
			c.Function.Name = tc.Name
		}
		c.Function.Arguments += tc.Arguments
	}
	if d.FinishReason != "" {
		s.ev.FinishReason = string(d.FinishReason)
	}
	if d.Model != "" {
		s.ev.Model = d.Model
	}
}

// done closes the wait and reports the call, once.
func (s *instrumentedStream) done() {
	s.end()
	if s.ev == nil {
		return
	}
	s.ev.Text, s.ev.ToolCalls, s.ev.DurationMS = s.text.String(), s.calls, ms(time.Since(s.start))
	if s.ev.FinishReason == "" && s.ev.Error == "" {
		s.ev.Error = "the stream ended before the model finished"
	}
	s.clock.event("model_call", *s.ev)
}

func (s *instrumentedStream) Close() error {
	s.once.Do(s.done)
	return s.DeltaStream.Close()
}

func (p instrumentedProvider) Embed(ctx context.Context, model gateway.ModelSpec, texts []string) (gateway.EmbedResponse, error) {
	defer waitClockFrom(ctx).begin()()
	return p.Provider.Embed(ctx, model, texts)
}

// InstrumentTool wraps a tool implementation so that the service sees the
// time a request waits on it. Wrap every implementation when building the
// agents runtime. (A runs stream's tool_call events come from the run's
// own events, which every kind of call has.)
func InstrumentTool(name string, impl agents.Implementation) agents.Implementation {
	return agents.ToolFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		defer waitClockFrom(ctx).begin()()
		return impl.Call(ctx, args)
	})
}

// InstrumentTools wraps every implementation of a map with InstrumentTool.
func InstrumentTools(impls map[string]agents.Implementation) map[string]agents.Implementation {
	out := make(map[string]agents.Implementation, len(impls))
	for name, impl := range impls {
		out[name] = InstrumentTool(name, impl)
	}
	return out
}

// InstrumentSearcher wraps a searcher so that the service sees the time a
// request waits on it. The search's embedding call is a provider wait too;
// overlapping waits count once.
func InstrumentSearcher(s agents.Searcher) agents.Searcher {
	return instrumentedSearcher{s}
}

type instrumentedSearcher struct{ agents.Searcher }

func (s instrumentedSearcher) Search(ctx context.Context, query string, k int) ([]retrieval.Hit, error) {
	defer waitClockFrom(ctx).begin()()
	return s.Searcher.Search(ctx, query, k)
}

// Description forwards the wrapped searcher's description, so that the
// model still sees it.
func (s instrumentedSearcher) Description() string {
	if d, ok := s.Searcher.(interface{ Description() string }); ok {
		return d.Description()
	}
	return ""
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
