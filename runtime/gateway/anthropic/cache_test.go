package anthropic_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aidgen/aid/runtime/gateway"
)

// cachingAPI is a handler of fakeServer that honours cache_control as the
// Messages API documents it: the request is a sequence of blocks (tools,
// then system blocks, then the turns' content blocks); a breakpoint caches
// the prefix up to its block for its ttl; a request reads the longest
// prefix ending at one of its breakpoints, or before, that an earlier
// request cached, writes the rest up to its last breakpoint, and reports
// input_tokens as what follows that breakpoint. A block's tokens are its
// JSON (without cache_control) over four, rounded up. Entries never expire
// within a test.
type cachingAPI struct {
	mu     sync.Mutex
	cached map[[32]byte]bool
	// usage is what each answer reported: plain input, reads, 5m and 1h
	// writes, output.
	usage []cacheUsage
	// answer gives the content and stop reason of answer n.
	answer func(n int) (content, stop string)
}

type cacheUsage struct{ in, read, w5m, w1h, out int64 }

func (c *cachingAPI) serve(w http.ResponseWriter, _ *http.Request, body map[string]any, n int) {
	type block struct {
		tokens int64
		ttl    string // "" when the block is no breakpoint
	}
	var blocks []block
	add := func(v any) {
		m, _ := v.(map[string]any)
		ttl := ""
		if cc, ok := m["cache_control"].(map[string]any); ok {
			ttl, _ = cc["ttl"].(string)
			if ttl == "" {
				ttl = "5m"
			}
		}
		plain := map[string]any{}
		for k, x := range m {
			if k != "cache_control" {
				plain[k] = x
			}
		}
		raw, _ := json.Marshal(plain)
		blocks = append(blocks, block{tokens: int64((len(raw) + 3) / 4), ttl: ttl})
	}
	seq := []any{}
	for _, t := range asList(body["tools"]) {
		add(t)
		seq = append(seq, t)
	}
	for _, s := range asList(body["system"]) {
		add(s)
		seq = append(seq, s)
	}
	for _, m := range asList(body["messages"]) {
		mm, _ := m.(map[string]any)
		for _, b := range asList(mm["content"]) {
			add(b)
			seq = append(seq, map[string]any{"role": mm["role"], "block": b})
		}
	}
	// prefix[i] identifies blocks 0..i, cache_control aside.
	prefix := make([][32]byte, len(seq))
	h := sha256.New()
	for i, b := range seq {
		m, _ := b.(map[string]any)
		inner := m
		if blk, ok := m["block"].(map[string]any); ok {
			inner = blk
		}
		cc := inner["cache_control"]
		delete(inner, "cache_control")
		raw, _ := json.Marshal(b)
		if cc != nil {
			inner["cache_control"] = cc
		}
		h.Write(raw)
		copy(prefix[i][:], h.Sum(nil))
	}
	last := -1
	for i, b := range blocks {
		if b.ttl != "" {
			last = i
		}
	}
	c.mu.Lock()
	read := -1 // the last block read from the cache
	for i := last; i >= 0 && read < 0; i-- {
		if c.cached[prefix[i]] {
			read = i
		}
	}
	var u cacheUsage
	for i, b := range blocks {
		switch {
		case i <= read:
			u.read += b.tokens
		case i <= last:
			// A written block is billed at the lifetime of the first
			// breakpoint at or after it.
			ttl := ""
			for j := i; j <= last && ttl == ""; j++ {
				ttl = blocks[j].ttl
			}
			if ttl == "1h" {
				u.w1h += b.tokens
			} else {
				u.w5m += b.tokens
			}
		default:
			u.in += b.tokens
		}
		if b.ttl != "" {
			c.cached[prefix[i]] = true
		}
	}
	content, stop := c.answer(n)
	u.out = int64((len(content) + 3) / 4)
	c.usage = append(c.usage, u)
	c.mu.Unlock()
	writeJSON(w, 200, fmt.Sprintf(`{"id":"msg_%d","type":"message","role":"assistant","model":%q,"content":%s,"stop_reason":%q,"stop_sequence":null,
		"usage":{"input_tokens":%d,"output_tokens":%d,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d,
		"cache_creation":{"ephemeral_5m_input_tokens":%d,"ephemeral_1h_input_tokens":%d}}}`,
		n, sonnet, content, stop, u.in, u.out, u.read, u.w5m+u.w1h, u.w5m, u.w1h))
}

func asList(v any) []any { l, _ := v.([]any); return l }

// deskTools are support-desk's tools, as its triage agent offers them.
var deskTools = []gateway.ToolDef{
	{Name: "lookup_order", Description: "Look up an order by its id: status, items, dates and the shipping address.", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^[A-Z]{2}-[0-9]{6}$"}},"required":["order_id"]}`)},
	{Name: "refund_order", Description: "Refund an order in full or in part; needs approval.", Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"},"amount":{"type":"number"},"reason":{"type":"string"}},"required":["order_id","amount","reason"]}`)},
	{Name: "search_kb", Description: "Search the knowledge base of policies: returns, shipping, warranty, payment.", Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)},
	{Name: "transfer_to_billing", Description: "Hand the conversation to billing for invoices, refunds and payment problems."},
}

// deskInstructions is a support desk's system prompt, of the length real
// ones have.
var deskInstructions = strings.Repeat("You are the triage agent of an online shop's support desk. Look orders up before answering, quote the knowledge base for policy, never promise a refund yourself: hand billing questions to billing. Answer in two sentences at most. ", 12)

// TestPromptCachingOnADeskConversation drives a support-desk conversation
// of five steps (the model looks four orders up, one tool call a step,
// and answers) through the gateway against cachingAPI, with the "auto"
// policy: breakpoints on the tools, the system prompt and the last turn,
// five-minute lifetime. From step 2 on, at least 70% of every step's input
// is read from the cache; the ledger equals Anthropic's price formula,
// summed over the answers' usage, to the nanodollar, with writes at 1.25×;
// and the reservation of every step covered its settlement.
func TestPromptCachingOnADeskConversation(t *testing.T) {
	api := &cachingAPI{cached: map[[32]byte]bool{}}
	const lookups = 4
	api.answer = func(n int) (string, string) {
		if n < lookups {
			return "[" + toolUse(fmt.Sprintf("toolu_%d", n), "lookup_order", fmt.Sprintf(`{"order_id":"AB-%06d"}`, n)) + "]", "tool_use"
		}
		return "[" + textBlock("All four orders shipped on 2024-06-03 and arrive this week.") + "]", "end_turn"
	}
	srv := newServer(t, api.serve)
	p := newProvider(t, srv.URL)
	m := spec(sonnet)
	m.Cost = gateway.CostProfile{
		InputPer1kUSD: 0.003, OutputPer1kUSD: 0.015, CachedInputPer1kUSD: ptr(0.0003),
		CacheWrite5mPer1kUSD: ptr(0.00375), CacheWrite1hPer1kUSD: ptr(0.006),
	}
	g := newGateway(t, map[string]gateway.Provider{"claude": p}, m)
	msgs := []gateway.Message{
		{Role: gateway.RoleSystem, Content: deskInstructions},
		{Role: gateway.RoleUser, Content: "Where are my orders AB-000000, AB-000001, AB-000002 and AB-000003?"},
	}
	policy := gateway.PromptCache{TTL: gateway.CacheTTL5m, Tools: true, System: true, History: true, Key: "desk"}
	var holds []float64
	for step := 0; step <= lookups; step++ {
		req := gateway.Request{Messages: msgs, Tools: deskTools, Cache: policy}
		hold, err := g.EstimateCost("large", req)
		if err != nil {
			t.Fatal(err)
		}
		holds = append(holds, hold)
		res, err := g.Generate(t.Context(), "large", req)
		if err != nil {
			t.Fatalf("step %d: %v", step+1, err)
		}
		if res.CostUSD > hold {
			t.Errorf("step %d cost $%v, above its hold of $%v", step+1, res.CostUSD, hold)
		}
		if len(res.ToolCalls) == 0 {
			break
		}
		tc := res.ToolCalls[0]
		msgs = append(msgs,
			gateway.Message{Role: gateway.RoleAssistant, ToolCalls: res.ToolCalls},
			gateway.Message{Role: gateway.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: `{"status":"shipped","shipped":"2024-06-03","items":[{"sku":"KB-1","qty":1}],"address":"1 Main St"}`})
	}
	if len(api.usage) != lookups+1 {
		t.Fatalf("%d calls, want %d", len(api.usage), lookups+1)
	}
	var want int64
	for i, u := range api.usage {
		input := u.in + u.read + u.w5m + u.w1h
		if i == 0 && u.w5m == 0 {
			t.Errorf("step 1 wrote nothing to the cache: %+v", u)
		}
		if i > 0 {
			if share := float64(u.read) / float64(input); share < 0.7 {
				t.Errorf("step %d read %d of %d input tokens from the cache (%.0f%%), want at least 70%%", i+1, u.read, input, 100*share)
			}
		}
		// Anthropic's formula, in nanodollars per token: input 3,000,
		// reads 300, 5m writes 3,750, 1h writes 6,000, output 15,000.
		want += u.in*3000 + u.read*300 + u.w5m*3750 + u.w1h*6000 + u.out*15000
	}
	spend, err := g.Spend(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if spend.Total.NanoUSD != want {
		t.Errorf("ledger holds %d nanodollars, the price formula says %d", spend.Total.NanoUSD, want)
	}
	var reads, writes int64
	for _, u := range api.usage {
		reads += u.read
		writes += u.w5m + u.w1h
	}
	if spend.Total.CachedInputTokens != reads || spend.Total.CacheWriteInputTokens != writes {
		t.Errorf("ledger records %d cache reads and %d writes, the API reported %d and %d", spend.Total.CachedInputTokens, spend.Total.CacheWriteInputTokens, reads, writes)
	}
	t.Logf("holds %v; usage %+v", holds, api.usage)
}

// TestCacheBreakpoints checks where each policy puts cache_control: after
// the last tool, after the last system block and on the last block of the
// last turn, with the policy's lifetime; "off" sends none.
func TestCacheBreakpoints(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ map[string]any, _ int) {
		writeJSON(w, 200, message(sonnet, "["+textBlock("ok")+"]", "end_turn", 1, 1))
	})
	p := newProvider(t, srv.URL)
	req := gateway.Request{
		Messages: []gateway.Message{
			{Role: gateway.RoleSystem, Content: "Be brief."},
			{Role: gateway.RoleUser, Content: "Where is AB-1?"},
			{Role: gateway.RoleAssistant, ToolCalls: []gateway.ToolCall{{ID: "toolu_1", Name: "lookup_order", Arguments: json.RawMessage(`{}`)}}},
			{Role: gateway.RoleTool, ToolCallID: "toolu_1", Content: "shipped"},
		},
		Tools:           deskTools,
		MaxOutputTokens: 16,
	}
	tests := []struct {
		name   string
		policy gateway.PromptCache
		want   []string // paths of the blocks marked, with their ttl
	}{
		{"off", gateway.PromptCache{}, nil},
		{"auto", gateway.PromptCache{Tools: true, System: true, History: true}, []string{"tools.3:5m", "system.0:5m", "messages.2.0:5m"}},
		{"explicit 1h system", gateway.PromptCache{TTL: gateway.CacheTTL1h, System: true}, []string{"system.0:1h"}},
		{"explicit history", gateway.PromptCache{History: true}, []string{"messages.2.0:5m"}},
	}
	for i, tt := range tests {
		req.Cache = tt.policy
		if _, err := p.Generate(t.Context(), spec(sonnet), req); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		body := srv.recorded()[i].Body
		var got []string
		mark := func(path string, v any) {
			m, _ := v.(map[string]any)
			if cc, ok := m["cache_control"].(map[string]any); ok {
				got = append(got, fmt.Sprintf("%s:%v", path, cc["ttl"]))
			}
		}
		for j, tl := range asList(body["tools"]) {
			mark(fmt.Sprintf("tools.%d", j), tl)
		}
		for j, s := range asList(body["system"]) {
			mark(fmt.Sprintf("system.%d", j), s)
		}
		for j, m := range asList(body["messages"]) {
			mm, _ := m.(map[string]any)
			for k, b := range asList(mm["content"]) {
				mark(fmt.Sprintf("messages.%d.%d", j, k), b)
			}
		}
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("%s: breakpoints %q, want %q", tt.name, got, tt.want)
		}
	}
}

func ptr(v float64) *float64 { return &v }
