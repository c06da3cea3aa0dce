package gateway

import "math"

// The token estimate is a documented heuristic, not a tokenizer: about four
// bytes of UTF-8 text per token, rounded up, plus a fixed overhead per
// message, per tool call, per tool definition and for the reply's priming.
// It errs high on English text and is the same for every provider, so a
// reservation never depends on which tokenizer a model uses.
const (
	bytesPerToken      = 4
	perMessageTokens   = 4
	perToolCallTokens  = 4
	perToolDefTokens   = 8
	perSchemaTokens    = 8
	replyPrimingTokens = 3
)

// EstimateTokens returns the heuristic token count of text: one token per
// four bytes, rounded up.
func EstimateTokens(text string) int64 {
	return int64((len(text) + bytesPerToken - 1) / bytesPerToken)
}

// EstimateInputTokens returns the heuristic token count of a request's
// prompt: its messages, tool calls, tool definitions and response schema.
func EstimateInputTokens(req Request) int64 {
	n := int64(replyPrimingTokens)
	for i := range req.Messages {
		m := &req.Messages[i]
		n += perMessageTokens + EstimateTokens(m.Content) + EstimateTokens(m.Name)
		for _, tc := range m.ToolCalls {
			n += perToolCallTokens + EstimateTokens(tc.Name) + EstimateTokens(string(tc.Arguments))
		}
	}
	for _, t := range req.Tools {
		n += perToolDefTokens + EstimateTokens(t.Name) + EstimateTokens(t.Description) + EstimateTokens(string(t.Parameters))
	}
	if rf := req.ResponseFormat; rf != nil {
		n += perSchemaTokens + EstimateTokens(rf.Name) + EstimateTokens(rf.Description) + EstimateTokens(string(rf.Schema))
	}
	return n
}

// EstimateUsage returns what a budget reserves for a request on a model
// before the call: an upper bound of its usage, not a guess. Byte-level BPE
// tokenizers (those of the OpenAI models and most open ones) never make a
// token of less than one byte, so the input is bounded by its UTF-8 length
// plus the per-message overheads; and a prompt longer than the model's
// context window is refused by the provider without charge, so the window
// bounds it too. The output is bounded by the request's (or the model's)
// output bound, which the gateway sends to the provider. Settling real usage
// against this hold can therefore never exceed it, which is what makes a
// budget impossible to overspend, at the price of holding more than a call
// will likely cost while it runs. A budget of exactly this much admits the
// call.
//
// It is the one number the gateway reserves; Gateway.EstimateUsage gives the
// same for an alias, or the error the call would be refused with.
func EstimateUsage(spec ModelSpec, req Request) Usage {
	in := upperInputTokens(req)
	if spec.ContextWindow > 0 {
		in = min(in, int64(spec.ContextWindow))
	}
	out := int64(maxOutput(spec, req))
	u := Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out, Estimated: true}
	// A call that asks for caching may write its whole prompt to the
	// cache, which costs more than reading it plain (1.25 or 2 times at
	// Anthropic): the hold prices the prompt at the dearer of the two.
	if c := req.Cache; c.Breakpoints() {
		if ttl := c.ttl(); spec.Cost.cacheWritePer1k(ttl) > spec.Cost.InputPer1kUSD {
			if ttl == CacheTTL1h {
				u.CacheWrite1hInputTokens = in
			} else {
				u.CacheWrite5mInputTokens = in
			}
		}
	}
	return u
}

// boundRequest returns req as the gateway sends it to e, with the output
// bound maxOutput gives, and applies the one rule that refuses a request too
// large for a model's context window before it is sent: the likely input
// (EstimateInputTokens, about four bytes per token) plus that output bound
// exceeds the window. The providers that speak the chat-completions format
// refuse exactly that sum with a 400, so the check saves a round trip and a
// reservation on a request that would fail. It uses the likely input, not
// the one-token-per-byte bound that EstimateUsage holds, because that bound
// would refuse many prompts that fit; a prompt whose text tokenizes worse
// than the heuristic (dense code, non-Latin scripts) may still pass and be
// refused by the provider, which is then an ordinary provider error. A model
// with no declared window is not checked. A call and Gateway.EstimateUsage
// both go through it, so that the estimate is what the call reserves.
func boundRequest(e *entry, req *Request) error {
	req.MaxOutputTokens = maxOutput(e.pinned.Spec, *req)
	window := e.pinned.Spec.ContextWindow
	if window <= 0 {
		return nil
	}
	in, out := EstimateInputTokens(*req), int64(req.MaxOutputTokens)
	if in+out <= int64(window) {
		return nil
	}
	return &ContextWindowExceededError{
		Alias: e.pinned.Alias, Model: e.pinned.Spec.ID,
		InputTokens: in, OutputTokens: out, ContextWindow: window,
	}
}

// upperInputTokens bounds a prompt's tokens by one token per byte, plus the
// same fixed overheads as EstimateInputTokens.
func upperInputTokens(req Request) int64 {
	n := int64(replyPrimingTokens)
	for i := range req.Messages {
		m := &req.Messages[i]
		n += perMessageTokens + int64(len(m.Content)+len(m.Name))
		for _, tc := range m.ToolCalls {
			n += perToolCallTokens + int64(len(tc.Name)+len(tc.Arguments))
		}
	}
	for _, t := range req.Tools {
		n += perToolDefTokens + int64(len(t.Name)+len(t.Description)+len(t.Parameters))
	}
	if rf := req.ResponseFormat; rf != nil {
		n += perSchemaTokens + int64(len(rf.Name)+len(rf.Description)+len(rf.Schema))
	}
	return n
}

// embedHold bounds the tokens of embedding texts by their bytes: what a
// budget reserves before an embedding call, for the reason EstimateUsage
// gives.
func embedHold(texts []string) Usage {
	var n int64
	for _, t := range texts {
		n += max(1, int64(len(t)))
	}
	return Usage{InputTokens: n, TotalTokens: n, Estimated: true}
}

// EstimateEmbedUsage returns the heuristic token count of embedding texts.
func EstimateEmbedUsage(texts []string) Usage {
	var n int64
	for _, t := range texts {
		n += max(1, EstimateTokens(t))
	}
	return Usage{InputTokens: n, TotalTokens: n, Estimated: true}
}

// EstimateCost returns the price of EstimateUsage in US dollars: exactly
// what a budget reserves for the request before the call, so that a budget
// of this much admits it.
func EstimateCost(spec ModelSpec, req Request) float64 {
	return Price(spec.Cost, EstimateUsage(spec, req)).USD()
}

// Price returns what usage costs under a cost profile, the provider's own
// formula: the plain input at the input price, the cache reads
// (Usage.CachedInputTokens) at the cached-input price, the cache writes at
// the write price of their lifetime (Usage.CacheWrite5mInputTokens and
// CacheWrite1hInputTokens, each a part of the input), and the output at the
// output price, each rounded up to the next billionth of a dollar. Parts
// that do not fit in the input are read the dearer way (see
// Usage.cacheParts). The amount carries the cache reads and writes it
// priced, so that a ledger can record them apart.
func Price(c CostProfile, u Usage) Amount {
	read, w5m, w1h := u.cacheParts()
	return Amount{
		NanoUSD: nanos(u.InputTokens-read-w5m-w1h, c.InputPer1kUSD) +
			nanos(read, c.cachedInputPer1k()) +
			nanos(w5m, c.cacheWritePer1k(CacheTTL5m)) +
			nanos(w1h, c.cacheWritePer1k(CacheTTL1h)) +
			nanos(u.OutputTokens, c.OutputPer1kUSD),
		Tokens:                u.total(),
		CachedInputTokens:     read,
		CacheWriteInputTokens: w5m + w1h,
	}
}

// nanos prices tokens at per1k dollars per thousand, in billionths of a
// dollar, rounded up; the small slack keeps float noise (2500.0000000000005)
// from adding a nanodollar.
func nanos(tokens int64, per1k float64) int64 {
	if tokens <= 0 || per1k <= 0 {
		return 0
	}
	return int64(math.Ceil(float64(tokens)*per1k*1e6 - 1e-6))
}

// maxOutput returns the output bound of a request on a model.
func maxOutput(spec ModelSpec, req Request) int {
	if req.MaxOutputTokens > 0 {
		if spec.MaxOutputTokens > 0 {
			return min(req.MaxOutputTokens, spec.MaxOutputTokens)
		}
		return req.MaxOutputTokens
	}
	return spec.MaxOutputTokens
}
