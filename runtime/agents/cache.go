package agents

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/aidgen/aid/runtime/gateway"
)

// promptCache is the caching a step of the agent asks for: the agent's
// policy, with the key of its conversation (see cacheKey) when the policy
// caches anything. An agent without a policy asks for nothing and pays
// nothing for it.
func promptCache(d *agentDef, st *runState) gateway.PromptCache {
	c := d.spec.PromptCache
	if !c.Breakpoints() {
		return gateway.PromptCache{}
	}
	c.Key = cacheKey(d.spec.Name, st.threadID, st.id)
	return c
}

// cacheKey names the conversation whose steps share a prefix: the agent and
// its thread, or its run when the run is its own thread. It is a hash, so
// that an upstream's cache routing sees neither the thread id nor the
// agent's name, and of a fixed length an upstream accepts.
func cacheKey(agent, thread, run string) string {
	if thread == "" {
		thread = "run:" + run
	}
	h := sha256.New()
	h.Write([]byte(agent))
	h.Write([]byte{0})
	h.Write([]byte(thread))
	return "aid-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// validCache refuses a caching policy no provider can follow.
func validCache(c gateway.PromptCache) error {
	switch c.TTL {
	case "", gateway.CacheTTL5m, gateway.CacheTTL1h:
	default:
		return fmt.Errorf("prompt cache lifetime %q is not %q or %q", c.TTL, gateway.CacheTTL5m, gateway.CacheTTL1h)
	}
	if c.Key != "" {
		return fmt.Errorf("prompt cache key %q is set; the runtime sets one per agent and thread", c.Key)
	}
	return nil
}
