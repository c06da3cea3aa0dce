package embedcache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

func model(provider, id string, dims int) gateway.PinnedModel {
	return gateway.PinnedModel{Alias: "embed", Spec: gateway.ModelSpec{Provider: provider, ID: id, Dimensions: dims, Kind: gateway.KindEmbedding}}
}

func vec(seed float32, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		v[i] = seed + float32(i)/10
	}
	return v
}

func TestRoundTripAndKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	c, err := Open(dir, 0, map[string]string{"fake": Scope([]byte("seed 1")), "other": Scope([]byte("seed 2"))})
	if err != nil {
		t.Fatal(err)
	}
	m := model("fake", "embed-1", 4)
	c.Store(ctx, m, []string{"a", "b"}, [][]float32{vec(1, 4), vec(2, 4)})
	got := c.Lookup(ctx, m, []string{"b", "a", "c"})
	if !slices.Equal(got[0], vec(2, 4)) || !slices.Equal(got[1], vec(1, 4)) || got[2] != nil {
		t.Errorf("lookup: %v", got)
	}
	// Everything that decides a vector is in its key.
	for _, other := range []gateway.PinnedModel{model("other", "embed-1", 4), model("fake", "embed-2", 4), model("fake", "embed-1", 8), model("unscoped", "embed-1", 4)} {
		if got := c.Lookup(ctx, other, []string{"a"}); got[0] != nil {
			t.Errorf("%+v finds the vector of fake/embed-1/4", other.Spec)
		}
	}
	// A second cache on the directory (another process) sees them.
	again, _ := Open(dir, 0, map[string]string{"fake": Scope([]byte("seed 1"))})
	if got := again.Lookup(ctx, m, []string{"a"}); !slices.Equal(got[0], vec(1, 4)) {
		t.Errorf("another cache on the directory: %v", got)
	}
	// A provider without a scope is neither stored nor looked up.
	c.Store(ctx, model("unscoped", "x", 4), []string{"z"}, [][]float32{vec(3, 4)})
	if n := c.stored.Load(); n != 2 {
		t.Errorf("stored %d vectors, want 2", n)
	}
}

// TestDamagedFilesMiss: a truncated, altered or foreign file is a miss,
// never a wrong vector.
func TestDamagedFilesMiss(t *testing.T) {
	ctx := context.Background()
	c, _ := Open(t.TempDir(), 0, map[string]string{"fake": "s"})
	m := model("fake", "e", 3)
	c.Store(ctx, m, []string{"t"}, [][]float32{vec(1, 3)})
	p := c.path(m, "t")
	good, _ := os.ReadFile(p)
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)-3],
		"flipped":   append(append([]byte{}, good[:10]...), append([]byte{good[10] ^ 1}, good[11:]...)...),
		"empty":     nil,
		"other":     []byte("not a vector at all, of some length...."),
	} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := c.Lookup(ctx, m, []string{"t"}); got[0] != nil {
			t.Errorf("%s file gives %v", name, got[0])
		}
	}
}

// TestTrimKeepsTheBound writes more than the bound and checks that Close
// deletes the least recently used vectors, keeps the recently read ones,
// removes stale temporary files and leaves foreign files alone.
func TestTrimKeepsTheBound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const dims = 64
	size := int64(len(encode(vec(0, dims))))
	c, _ := Open(dir, 20*size, map[string]string{"fake": "s"})
	m := model("fake", "e", dims)
	clock := time.Now().Add(-time.Hour)
	c.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	var texts []string
	for i := range 50 {
		text := fmt.Sprint("text ", i)
		texts = append(texts, text)
		c.Store(ctx, m, []string{text}, [][]float32{vec(float32(i), dims)})
		_ = os.Chtimes(c.path(m, text), c.now(), c.now())
	}
	c.Lookup(ctx, m, texts[:3]) // the oldest three, used again
	if err := os.MkdirAll(filepath.Join(dir, "v1", "ab"), 0o700); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "v1", "ab", "notes.txt")
	if err := os.WriteFile(foreign, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, "v1", "ab", tmpPrefix+"123")
	os.WriteFile(stale, []byte("half"), 0o600)
	os.Chtimes(stale, time.Now().Add(-2*staleTemp), time.Now().Add(-2*staleTemp))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var n int
	for _, got := range c.Lookup(ctx, m, texts) {
		if got != nil {
			n++
		}
	}
	if n > 20 || n < 15 {
		t.Errorf("%d vectors kept, want at most the bound of 20 and at least nine tenths of it", n)
	}
	if got := c.Lookup(ctx, m, texts[:3]); got[0] == nil || got[1] == nil || got[2] == nil {
		t.Error("recently read vectors were trimmed")
	}
	if got := c.Lookup(ctx, m, texts[3:4]); got[0] != nil {
		t.Error("the least recently used vector was kept")
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("a foreign file was deleted: %v", err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a stale temporary file was kept")
	}
}

// TestConcurrentProcesses has caches on one directory write, read and trim
// at once, as processes would: every vector read is whole.
func TestConcurrentProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const dims = 32
	m := model("fake", "e", dims)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			c, _ := Open(dir, int64(len(encode(vec(0, dims))))*30, map[string]string{"fake": "s"})
			for i := range 100 {
				text := fmt.Sprint("t", i%40)
				c.Store(ctx, m, []string{text}, [][]float32{vec(float32(i%40), dims)})
				if got := c.Lookup(ctx, m, []string{text}); got[0] != nil && !slices.Equal(got[0], vec(float32(i%40), dims)) {
					t.Errorf("writer %d read a wrong vector for %s", w, text)
				}
				if i%25 == 0 {
					if err := c.Trim(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
}
