package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/retrieval"
	"github.com/aidgen/aid/runtime/retrieval/embedcache"
)

// Environment variables of the embedding cache.
const (
	// envEmbedCache is the cache's directory, or "off" for none.
	envEmbedCache = "AID_EMBED_CACHE"
	// envEmbedCacheMB is the cache's bound in MiB.
	envEmbedCacheMB = "AID_EMBED_CACHE_MB"
)

// embeddingCacheNote says where embeddings are cached, in the commands'
// help.
const embeddingCacheNote = `Embeddings are cached on disk, so that a memory store re-ingested by the next
command embeds (and pays for) only chunks it has not seen: by a hash of the
provider's configuration, the model id, the width and the text, in
$AID_EMBED_CACHE, else aid/embeddings in the user cache directory
(~/.cache/aid/embeddings on Linux), bounded to $AID_EMBED_CACHE_MB MiB
(default 256; the least recently used vectors go first).
AID_EMBED_CACHE=off turns it off; deleting the directory clears it.`

// embeddingCache opens the commands' embedding cache for an application's
// providers, or returns nil when it is turned off or cannot be opened
// (said on stderr: the commands work without it). The returned function
// bounds the directory.
func embeddingCache(s *streams, desc app.Description) (retrieval.EmbeddingCache, func()) {
	dir := os.Getenv(envEmbedCache)
	if dir == "off" {
		return nil, func() {}
	}
	if dir == "" {
		var err error
		if dir, err = embedcache.DefaultDir(); err != nil {
			fmt.Fprintf(s.err, "aidgen: not caching embeddings: %v\n", err)
			return nil, func() {}
		}
	}
	var maxBytes int64
	if v := os.Getenv(envEmbedCacheMB); v != "" {
		mb, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mb <= 0 {
			fmt.Fprintf(s.err, "aidgen: not caching embeddings: %s=%q is not a positive number of MiB\n", envEmbedCacheMB, v)
			return nil, func() {}
		}
		maxBytes = mb << 20
	}
	// A provider's scope is a hash of its whole description: a fake's seed
	// or an API's base URL change the vectors a model id gives.
	scopes := make(map[string]string, len(desc.Providers))
	for _, p := range desc.Providers {
		b, err := json.Marshal(p)
		if err != nil {
			continue // not cached
		}
		scopes[p.Name] = embedcache.Scope(b)
	}
	c, err := embedcache.Open(dir, maxBytes, scopes)
	if err != nil {
		fmt.Fprintf(s.err, "aidgen: not caching embeddings: %v\n", err)
		return nil, func() {}
	}
	return c, func() {
		if err := c.Close(); err != nil {
			fmt.Fprintf(s.err, "aidgen: %v\n", err)
		}
	}
}
