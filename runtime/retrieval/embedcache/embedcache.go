// Package embedcache keeps embeddings on disk, so that a program that
// embeds the same texts in every run (each aidgen command over a memory
// store re-ingests it) asks the model only for texts it has not seen. It is
// a retrieval.EmbeddingCache.
//
// A vector is one file, named by the SHA-256 of what decides it: a scope
// naming the model's provider and its configuration (a fake provider's
// seed, an API's base URL), the pinned model id, the width, and the text.
// A file is written to a temporary name and renamed into place, so that
// processes sharing the directory never read half a vector; it carries a
// checksum, so that a damaged one is a miss. Files live under the
// directory's "v1" folder, the only one the cache writes or deletes in.
// The directory is bounded:
// Close, after a run that stored vectors, deletes the least recently used
// ones (a hit refreshes a file's time) until it holds at most MaxBytes.
// Everything is best effort: a vector that cannot be read or written is a
// miss, and the model is asked again.
//
// What it is not: not a cache of chat completions, and not shared between
// machines.
package embedcache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aidgen/aid/runtime/gateway"
)

// DefaultMaxBytes bounds a cache directory that Open is not given a bound
// for: 256 MiB, about 250,000 vectors of width 256.
const DefaultMaxBytes = 256 << 20

// magic starts every file: the format and its version.
const magic = "aidvec1\x00"

// Cache is an embedding cache in one directory. It is safe for concurrent
// use, and for use by several processes sharing the directory.
type Cache struct {
	dir      string
	root     string // dir/v1: the files of this format, the only ones Trim touches
	maxBytes int64
	scopes   map[string]string // provider name → scope
	stored   atomic.Int64      // files written by this Cache
	now      func() time.Time
}

// Open returns the cache in dir, creating it if needed, bounded to
// maxBytes (zero means DefaultMaxBytes). scopes maps each provider name to
// a string that changes whenever the provider's configuration changes what
// vectors it gives (Scope makes one); a model of a provider without a
// scope is not cached.
func Open(dir string, maxBytes int64, scopes map[string]string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("embedding cache: no directory")
	}
	if maxBytes < 0 {
		return nil, fmt.Errorf("embedding cache: bound must be positive, got %d", maxBytes)
	}
	if maxBytes == 0 {
		maxBytes = DefaultMaxBytes
	}
	root := filepath.Join(dir, "v1")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("embedding cache: %w", err)
	}
	return &Cache{dir: dir, root: root, maxBytes: maxBytes, scopes: scopes, now: time.Now}, nil
}

// Scope returns a scope for a provider from a description of its
// configuration: its hash, so that no configuration is written to disk.
func Scope(description []byte) string {
	sum := sha256.Sum256(description)
	return hex.EncodeToString(sum[:])
}

// DefaultDir is the cache directory of aid's commands: "aid/embeddings"
// in the user cache directory ($XDG_CACHE_HOME, else ~/.cache, on Linux).
func DefaultDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("embedding cache: %w", err)
	}
	return filepath.Join(base, "aid", "embeddings"), nil
}

// Dir returns the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// path returns the file of a text's vector, or "" when the model's
// provider has no scope.
func (c *Cache) path(m gateway.PinnedModel, text string) string {
	scope, ok := c.scopes[m.Spec.Provider]
	if !ok {
		return ""
	}
	h := sha256.New()
	for _, s := range []string{"aid-embedding/v1", scope, m.Spec.ID, strconv.Itoa(m.Spec.Dimensions), text} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	name := hex.EncodeToString(h.Sum(nil))
	return filepath.Join(c.root, name[:2], name)
}

// Lookup implements retrieval.EmbeddingCache.
func (c *Cache) Lookup(ctx context.Context, m gateway.PinnedModel, texts []string) [][]float32 {
	out := make([][]float32, len(texts))
	now := c.now()
	for i, t := range texts {
		if ctx.Err() != nil {
			break
		}
		p := c.path(m, t)
		if p == "" {
			break
		}
		v, ok := read(p, m.Spec.Dimensions)
		if !ok {
			continue
		}
		out[i] = v
		_ = os.Chtimes(p, now, now) // recently used: trimmed last
	}
	return out
}

// Store implements retrieval.EmbeddingCache.
func (c *Cache) Store(ctx context.Context, m gateway.PinnedModel, texts []string, vecs [][]float32) {
	for i, t := range texts {
		if ctx.Err() != nil || i >= len(vecs) {
			return
		}
		p := c.path(m, t)
		if p == "" {
			return
		}
		if len(vecs[i]) != m.Spec.Dimensions || write(p, vecs[i]) != nil {
			continue
		}
		c.stored.Add(1)
	}
}

// encode returns a vector's file contents.
func encode(v []float32) []byte {
	b := make([]byte, 0, len(magic)+4+4*len(v)+4)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// read returns the vector in file p if it is whole, of width dims and
// finite.
func read(p string, dims int) ([]float32, bool) {
	b, err := os.ReadFile(p)
	head := len(magic) + 4
	if err != nil || len(b) != head+4*dims+4 || string(b[:len(magic)]) != magic ||
		binary.LittleEndian.Uint32(b[len(magic):]) != uint32(dims) ||
		binary.LittleEndian.Uint32(b[len(b)-4:]) != crc32.ChecksumIEEE(b[:len(b)-4]) {
		return nil, false
	}
	v := make([]float32, dims)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[head+4*i:]))
		if math.IsNaN(float64(v[i])) || math.IsInf(float64(v[i]), 0) {
			return nil, false
		}
	}
	return v, true
}

// tmpPrefix starts the names of files being written.
const tmpPrefix = ".tmp-"

// write writes a vector to p through a temporary file renamed into place,
// so that a reader sees the whole file or none.
func write(p string, v []float32) error {
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, tmpPrefix)
	if err != nil {
		return err
	}
	_, werr := f.Write(encode(v))
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), p); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// staleTemp is how old a temporary file must be for Trim to take it for
// the leftover of a process that died while writing.
const staleTemp = time.Hour

// Close bounds the directory if this Cache stored anything (see Trim).
func (c *Cache) Close() error {
	if c.stored.Load() == 0 {
		return nil
	}
	return c.Trim()
}

// Trim deletes the least recently used vectors until the directory holds
// at most its bound, down to nine tenths of it so that the next runs do
// not trim again at once, and deletes temporary files left by processes
// that died while writing. Files another process deletes or writes
// meanwhile are skipped.
func (c *Cache) Trim() error {
	type entry struct {
		path string
		size int64
		used time.Time
	}
	var entries []entry
	var total int64
	err := filepath.WalkDir(c.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // deleted meanwhile
		}
		if strings.HasPrefix(d.Name(), tmpPrefix) {
			if c.now().Sub(info.ModTime()) > staleTemp {
				os.Remove(p)
			}
			return nil
		}
		if !isKey(d.Name()) {
			return nil // not a file of this cache: left alone
		}
		entries = append(entries, entry{path: p, size: info.Size(), used: info.ModTime()})
		total += info.Size()
		return nil
	})
	if err != nil {
		return fmt.Errorf("embedding cache: trimming %s: %w", c.dir, err)
	}
	if total <= c.maxBytes {
		return nil
	}
	slices.SortFunc(entries, func(a, b entry) int { return a.used.Compare(b.used) })
	goal := c.maxBytes / 10 * 9
	for _, e := range entries {
		if total <= goal {
			break
		}
		if err := os.Remove(e.path); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= e.size
		}
	}
	return nil
}

// isKey reports whether name is a vector file's name: 64 hexadecimal
// digits.
func isKey(name string) bool {
	if len(name) != 64 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}
