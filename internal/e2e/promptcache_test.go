package e2e_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// promptCache is claudeServer's prompt cache, as the Messages API
// documents cache_control: a request is a sequence of blocks (the tools,
// then the system blocks, then each turn's content blocks, with the turn's
// role), and a block with cache_control is a breakpoint. A request reads
// the longest prefix, ending at or before its last breakpoint, that an
// earlier request cached and that has not expired (a read refreshes its
// lifetime); it writes the blocks after that prefix up to its last
// breakpoint, each at the lifetime of the first breakpoint at or after
// it, and caches the prefix ending at each breakpoint for that
// breakpoint's ttl ("5m" unless "1h"); the blocks after the last
// breakpoint are plain input. A block's tokens are its JSON, without
// cache_control, over four, rounded up. Anthropic's minimum cacheable
// length (1,024 tokens for Sonnet) is left out: a desk conversation of a
// test is shorter than a real one.
type promptCache struct {
	mu      sync.Mutex
	entries map[[32]byte]cacheEntry // by the hash of the prefix
	now     func() time.Time
}

// cacheEntry is a cached prefix: its lifetime, and when it expires.
type cacheEntry struct {
	ttl time.Duration
	exp time.Time
}

// claudeUsage is the usage of one answer: plain input, cache reads, 5m
// and 1h cache writes, output.
type claudeUsage struct{ in, read, w5m, w1h, out int64 }

// input is all the input tokens of the answer.
func (u claudeUsage) input() int64 { return u.in + u.read + u.w5m + u.w1h }

// reset empties the cache.
func (c *promptCache) reset() {
	c.mu.Lock()
	c.entries = map[[32]byte]cacheEntry{}
	c.mu.Unlock()
}

// usage caches the request body's prefixes and returns what it read,
// wrote and did not cache.
func (c *promptCache) usage(body []byte) (claudeUsage, error) {
	var req struct {
		Tools    []map[string]any `json:"tools"`
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return claudeUsage{}, fmt.Errorf("decoding the request's blocks: %w", err)
	}
	type block struct {
		tokens int64
		ttl    time.Duration // zero when the block is no breakpoint
		prefix [32]byte      // the hash of the blocks up to this one
	}
	var blocks []block
	h := sha256.New()
	add := func(role string, b map[string]any) error {
		var ttl time.Duration
		if cc, ok := b["cache_control"].(map[string]any); ok {
			if cc["type"] != "ephemeral" {
				return fmt.Errorf("cache_control %v: type must be ephemeral", cc)
			}
			switch cc["ttl"] {
			case nil, "5m":
				ttl = 5 * time.Minute
			case "1h":
				ttl = time.Hour
			default:
				return fmt.Errorf("cache_control %v: ttl must be 5m or 1h", cc)
			}
		}
		plain := make(map[string]any, len(b))
		for k, v := range b {
			if k != "cache_control" {
				plain[k] = v
			}
		}
		raw, err := json.Marshal(plain)
		if err != nil {
			return err
		}
		h.Write([]byte(role))
		h.Write(raw)
		var bl block
		copy(bl.prefix[:], h.Sum(nil))
		bl.tokens, bl.ttl = int64((len(raw)+3)/4), ttl
		blocks = append(blocks, bl)
		return nil
	}
	for _, t := range req.Tools {
		if err := add("tool", t); err != nil {
			return claudeUsage{}, err
		}
	}
	for _, s := range req.System {
		if err := add("system", s); err != nil {
			return claudeUsage{}, err
		}
	}
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if err := add(m.Role, b); err != nil {
				return claudeUsage{}, err
			}
		}
	}
	last := -1
	for i, b := range blocks {
		if b.ttl > 0 {
			last = i
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	read := -1
	for i := last; i >= 0 && read < 0; i-- {
		if e, ok := c.entries[blocks[i].prefix]; ok && e.exp.After(now) {
			read = i
			c.entries[blocks[i].prefix] = cacheEntry{ttl: e.ttl, exp: now.Add(e.ttl)}
		}
	}
	var u claudeUsage
	for i, b := range blocks {
		switch {
		case i <= read:
			u.read += b.tokens
		case i <= last:
			var ttl time.Duration
			for j := i; ttl == 0; j++ {
				ttl = blocks[j].ttl
			}
			if ttl == time.Hour {
				u.w1h += b.tokens
			} else {
				u.w5m += b.tokens
			}
		default:
			u.in += b.tokens
		}
		if e := c.entries[b.prefix]; b.ttl > 0 && now.Add(b.ttl).After(e.exp) {
			c.entries[b.prefix] = cacheEntry{ttl: b.ttl, exp: now.Add(b.ttl)}
		}
	}
	return u, nil
}
