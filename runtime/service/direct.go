package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// directAlias is an exposed alias, ready to call.
type directAlias struct {
	name string
	opts []gateway.CallOption // its fallbacks
}

// directFields are the fields of a chat completion that only a call on an
// exposed alias applies: an agent decides its own sampling.
type directFields struct {
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	Seed                *int64          `json:"seed"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
}

// newDirect indexes the exposed aliases of cfg, checked by Config.check.
func newDirect(cfg *Config) map[string]*directAlias {
	if len(cfg.Aliases) == 0 {
		return nil
	}
	out := make(map[string]*directAlias, len(cfg.Aliases))
	for _, a := range cfg.Aliases {
		d := &directAlias{name: a.Name}
		if len(a.Fallbacks) > 0 {
			d.opts = []gateway.CallOption{gateway.WithFallbacks(a.Fallbacks...)}
		}
		out[a.Name] = d
	}
	return out
}

// directRequest translates a chat completion for an exposed alias into a
// gateway request: every message (system and developer ones included, as
// system messages), the client's tools and tool choice, a JSON-schema
// response format and the sampling fields. What the gateway cannot carry
// is refused by name rather than dropped.
func directRequest(req *chatRequest) (gateway.Request, error) {
	switch {
	case len(req.Messages) == 0:
		return gateway.Request{}, invalid(CodeInvalidRequest, "messages", "messages must not be empty")
	case present(req.Functions):
		return gateway.Request{}, unsupported("functions", "functions are deprecated and not supported: send tools")
	case req.N != nil && *req.N != 1:
		return gateway.Request{}, unsupported("n", "n must be 1: a call gives one answer")
	}
	msgs, _, err := toHistory("messages", req.Messages, true)
	if err != nil {
		return gateway.Request{}, err
	}
	out := gateway.Request{Messages: msgs, Temperature: req.Temperature, TopP: req.TopP, Seed: req.Seed, ParallelToolCalls: req.ParallelToolCalls}
	if out.Tools, err = directTools(req.Tools); err != nil {
		return gateway.Request{}, err
	}
	if out.ToolChoice, err = directToolChoice(req.ToolChoice); err != nil {
		return gateway.Request{}, err
	}
	if out.ResponseFormat, err = directResponseFormat(req.ResponseFormat); err != nil {
		return gateway.Request{}, err
	}
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return gateway.Request{}, invalid(CodeInvalidRequest, f.name, f.name+" must be at least 1")
		}
		out.MaxOutputTokens = *f.v // max_completion_tokens, listed last, wins
	}
	if present(req.Stop) {
		var one string
		if err := json.Unmarshal(req.Stop, &one); err == nil {
			out.Stop = []string{one}
		} else if err := json.Unmarshal(req.Stop, &out.Stop); err != nil {
			return gateway.Request{}, invalid(CodeInvalidRequest, "stop", "stop must be a string or an array of strings")
		}
	}
	return out, nil
}

// directTools reads the client's tools: functions with a name and, when
// given, parameters that are a JSON object.
func directTools(raw json.RawMessage) ([]gateway.ToolDef, error) {
	if !present(raw) {
		return nil, nil
	}
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, fieldError("tools", raw, err, "an array of function tools")
	}
	out := make([]gateway.ToolDef, len(tools))
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		switch {
		case t.Type != "function":
			return nil, unsupported(at+".type", fmt.Sprintf("tool type %q is not supported: only function tools", t.Type))
		case t.Function == nil || t.Function.Name == "":
			return nil, invalid(CodeInvalidRequest, at+".function.name", "a function tool needs a name")
		case present(t.Function.Parameters) && !bytes.HasPrefix(bytes.TrimSpace(t.Function.Parameters), []byte("{")):
			return nil, invalid(CodeInvalidRequest, at+".function.parameters", "parameters must be a JSON Schema object")
		}
		out[i] = gateway.ToolDef{Name: t.Function.Name, Description: t.Function.Description}
		if present(t.Function.Parameters) {
			out[i].Parameters = t.Function.Parameters
		}
	}
	return out, nil
}

// directToolChoice reads tool_choice: auto, none, required, or a named
// function.
func directToolChoice(raw json.RawMessage) (gateway.ToolChoice, error) {
	if !present(raw) {
		return gateway.ToolChoice{}, nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		switch m := gateway.ToolChoiceMode(mode); m {
		case gateway.ToolChoiceAuto, gateway.ToolChoiceNone, gateway.ToolChoiceRequired:
			return gateway.ToolChoice{Mode: m}, nil
		}
		return gateway.ToolChoice{}, invalid(CodeInvalidRequest, "tool_choice", fmt.Sprintf("tool_choice %q is not auto, none or required", mode))
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Function.Name == "" {
		return gateway.ToolChoice{}, unsupported("tool_choice", `tool_choice must be auto, none, required or {"type":"function","function":{"name":...}}`)
	}
	return gateway.ToolChoice{Mode: gateway.ToolChoiceTool, Name: named.Function.Name}, nil
}

// directResponseFormat reads response_format: text (the default) or a JSON
// schema; json_object has no equivalent in the gateway.
func directResponseFormat(raw json.RawMessage) (*gateway.JSONSchema, error) {
	if !present(raw) {
		return nil, nil
	}
	var f struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fieldError("response_format", raw, err, "an object")
	}
	switch {
	case f.Type == "text":
		return nil, nil
	case f.Type != "json_schema":
		return nil, unsupported("response_format.type", fmt.Sprintf("response_format %q is not supported: use text or json_schema", f.Type))
	case f.JSONSchema == nil || f.JSONSchema.Name == "":
		return nil, invalid(CodeInvalidRequest, "response_format.json_schema.name", "a json_schema response format needs a name")
	}
	js := &gateway.JSONSchema{Name: f.JSONSchema.Name, Description: f.JSONSchema.Description, Strict: f.JSONSchema.Strict != nil && *f.JSONSchema.Strict}
	if present(f.JSONSchema.Schema) {
		js.Schema = f.JSONSchema.Schema
	}
	return js, nil
}

// directExt is aid's extension object on an answer of an exposed alias:
// which alias answered and what it cost.
type directExt struct {
	// Alias is the alias that answered: the one asked for, or a fallback.
	Alias    string  `json:"alias"`
	FellBack bool    `json:"fell_back,omitempty"`
	CostUSD  float64 `json:"cost_usd"`
}

// chatUsage is a chat completion's usage, an agent's or an exposed
// alias's, with the prompt tokens the provider served from its cache
// (prompt_tokens_details.cached_tokens, as OpenAI reports them) and those
// it wrote to it (cache_write_tokens, an aid extension beside it: the
// OpenAI format has no field for a priced cache write).
type chatUsage struct {
	PromptTokens        int64                `json:"prompt_tokens"`
	CompletionTokens    int64                `json:"completion_tokens"`
	TotalTokens         int64                `json:"total_tokens"`
	PromptTokensDetails *promptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// promptTokensDetails splits the prompt tokens by how the cache served
// them.
type promptTokensDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

func usageOf(u gateway.Usage) *chatUsage {
	out := &chatUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens}
	if u.CachedInputTokens > 0 || u.CacheWriteInputTokens() > 0 {
		out.PromptTokensDetails = &promptTokensDetails{CachedTokens: u.CachedInputTokens, CacheWriteTokens: u.CacheWriteInputTokens()}
	}
	return out
}

// directChat answers a chat completion whose model is an exposed alias
// straight from the gateway: no run, no agent. The budget named by
// Config.AliasBudget is charged under the request's id (or its thread's);
// errors have the shapes of every other chat completion.
func (s *Service) directChat(w http.ResponseWriter, r *http.Request, req *chatRequest, a *directAlias) error {
	ri := info(r)
	ri.alias = a.name
	greq, err := directRequest(req)
	if err != nil {
		return err
	}
	ctx := r.Context()
	opts := a.opts
	if s.cfg.AliasBudget != "" {
		key := ri.id
		if s.aliasScope == gateway.ScopeThread {
			if th, _ := principalOf(r).scopeIDs(r.Header.Get("X-Aid-Thread-Id"), ""); th != "" {
				key = th
			}
		}
		opts = append(append(make([]gateway.CallOption, 0, len(opts)+1), opts...), gateway.WithBudget(s.cfg.AliasBudget, key))
		defer s.endScopes(ctx, ri.id)
	}
	id := "chatcmpl-" + ri.id
	if !req.Stream {
		res, err := s.cfg.Gateway.Generate(ctx, a.name, greq, opts...)
		if err != nil {
			return err
		}
		finish := string(res.FinishReason)
		msg := &outMessage{Role: "assistant", ToolCalls: toWireCalls(res.ToolCalls)}
		if res.Text != "" || len(res.ToolCalls) == 0 {
			msg.Content = &res.Text
		}
		writeJSON(w, http.StatusOK, chatCompletion[directExt]{
			ID: id, Object: "chat.completion", Created: time.Now().Unix(), Model: res.Model,
			Choices: []chatChoice{{Message: msg, FinishReason: &finish}},
			Usage:   usageOf(res.Usage),
			Aid:     &directExt{Alias: res.Alias, FellBack: res.FellBack, CostUSD: res.CostUSD},
		})
		return nil
	}
	ri.err = s.directStream(w, ctx, ri.id, a, greq, opts, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	return nil
}

// directStream streams a call on an exposed alias as chat.completion.chunk
// events. The stream opens with the first piece of the answer, so that a
// call refused before anything came (a budget, a provider down after
// retries and fallbacks) still gets an HTTP error; a failure after that is
// an error event, as OpenAI sends one.
func (s *Service) directStream(w http.ResponseWriter, ctx context.Context, reqID string, a *directAlias, greq gateway.Request, opts []gateway.CallOption, usage bool) *apiError {
	id := "chatcmpl-" + reqID
	created := time.Now().Unix()
	model := ""
	if pm, err := s.cfg.Gateway.Resolve(a.name); err == nil {
		model = pm.Spec.ID
	}
	var out *sse
	chunk := func(d *chatDelta, finish *string) chatCompletion[directExt] {
		return chatChunk[directExt](id, created, model, d, finish)
	}
	open := func() {
		if out == nil {
			out = newSSE(w, s.limits.WriteTimeout)
			empty := ""
			out.data(chunk(&chatDelta{Role: "assistant", Content: &empty}, nil))
		}
	}
	for c, err := range s.cfg.Gateway.Stream(ctx, a.name, greq, opts...) {
		if err != nil {
			if out == nil {
				return writeError(w, err, nil)
			}
			ae := classify(err, reqID, "")
			out.data(errorBody{Error: ae})
			out.close()
			return ae
		}
		if c.Result != nil {
			open()
			res := c.Result
			model = res.Model
			finish := string(res.FinishReason)
			last := chunk(&chatDelta{}, &finish)
			last.Aid = &directExt{Alias: res.Alias, FellBack: res.FellBack, CostUSD: res.CostUSD}
			out.data(last)
			if usage {
				out.data(usageChunk[directExt](id, created, model, usageOf(res.Usage), nil))
			}
			out.done()
			return nil
		}
		open()
		d := &chatDelta{}
		if c.Text != "" {
			d.Content = &c.Text
		}
		for _, tc := range c.ToolCalls {
			cd := chatCallDelta{Index: tc.Index, ID: tc.ID}
			if tc.ID != "" {
				cd.Type = "function"
			}
			cd.Function.Name, cd.Function.Arguments = tc.Name, tc.Arguments
			d.ToolCalls = append(d.ToolCalls, cd)
		}
		out.data(chunk(d, nil))
	}
	// The gateway ends every stream with a result or an error.
	ae := newError(http.StatusBadGateway, TypeServer, CodeUpstream, "the stream ended without an answer")
	if out == nil {
		writeJSON(w, ae.Status, errorBody{Error: ae})
		return ae
	}
	out.data(errorBody{Error: ae})
	out.close()
	return ae
}

// aliasModels returns the exposed aliases as model objects, in the order
// configured.
func (s *Service) aliasModels() []modelObject {
	out := make([]modelObject, len(s.cfg.Aliases))
	for i, a := range s.cfg.Aliases {
		out[i] = modelObject{ID: a.Name, Object: "model", OwnedBy: "aid"}
	}
	return out
}
