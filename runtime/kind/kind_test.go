package kind_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/aidgen/aid/runtime/kind"
)

// TestLists checks the lists every point reads: sorted, built and deferred
// apart, each name once, and copies the caller may change.
func TestLists(t *testing.T) {
	for _, p := range []kind.Point{kind.Providers, kind.Tools, kind.Stores} {
		built, deferred := kind.Names(p), kind.Deferred(p)
		if len(built) == 0 {
			t.Errorf("%s: no built kinds", p)
		}
		for _, list := range [][]string{built, deferred} {
			if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
				t.Errorf("%s: %q is not sorted or repeats a name", p, list)
			}
		}
		for _, n := range built {
			if info, ok := kind.Lookup(p, n); !ok || info.Deferred || kind.IsDeferred(p, n) {
				t.Errorf("%s %q: Lookup = %+v, %v", p, n, info, ok)
			}
			if slices.Contains(deferred, n) {
				t.Errorf("%s %q is both built and deferred", p, n)
			}
		}
		for _, n := range deferred {
			if !kind.IsDeferred(p, n) {
				t.Errorf("%s %q: IsDeferred is false", p, n)
			}
		}
		built[0] = "changed"
		if kind.Names(p)[0] == "changed" {
			t.Errorf("%s: changing Names' result changed the list", p)
		}
	}
	if _, ok := kind.Lookup(kind.Providers, "fakex"); ok {
		t.Error("Lookup found a misspelt kind")
	}
	info, _ := kind.Lookup(kind.Providers, kind.ProviderFake)
	info.Files[0] = "changed"
	if again, _ := kind.Lookup(kind.Providers, kind.ProviderFake); again.Files[0] == "changed" {
		t.Error("changing Lookup's Files changed the list")
	}
}

// TestFiles reads one tree through both kinds of Files: on disk and in a
// file system, by relative names with leading "../" and by absolute ones.
func TestFiles(t *testing.T) {
	root := t.TempDir()
	for name, content := range map[string]string{"app/script.json": "s", "app/docs/a.md": "a", "shared/data.json": "d"} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mem := fstest.MapFS{
		"app/script.json":  {Data: []byte("s")},
		"app/docs/a.md":    {Data: []byte("a")},
		"shared/data.json": {Data: []byte("d")},
	}
	for _, tt := range []struct {
		name  string
		files kind.Files
	}{
		{"disk", kind.DirFiles(filepath.Join(root, "app"))},
		{"fs", kind.FSFiles(mem, "app")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for name, want := range map[string]string{"script.json": "s", "./docs/a.md": "a", "../shared/data.json": "d"} {
				got, err := tt.files.ReadFile(name)
				if err != nil || string(got) != want {
					t.Errorf("ReadFile(%q) = %q, %v; want %q", name, got, err, want)
				}
			}
			if _, err := tt.files.ReadFile("missing.json"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
			}
			docs, err := tt.files.Dir("docs")
			if err != nil {
				t.Fatal(err)
			}
			if b, err := fs.ReadFile(docs, "a.md"); err != nil || string(b) != "a" {
				t.Errorf("Dir(docs) reads a.md as %q, %v", b, err)
			}
			self, err := tt.files.Dir("")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fs.Stat(self, "script.json"); err != nil {
				t.Errorf("Dir(\"\") is not the application's directory: %v", err)
			}
		})
	}
	// On disk an absolute name is read as is; embedded files have no
	// absolute names, and nothing outside the file system is reachable.
	abs := filepath.Join(root, "shared", "data.json")
	if b, err := kind.DirFiles("elsewhere").ReadFile(abs); err != nil || string(b) != "d" {
		t.Errorf("an absolute name on disk: %q, %v", b, err)
	}
	fsFiles := kind.FSFiles(mem, "app")
	for _, name := range []string{"/shared/data.json", "../../etc/passwd"} {
		if _, err := fsFiles.ReadFile(name); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "not among the application's files") {
			t.Errorf("ReadFile(%q) in a file system: %v", name, err)
		}
	}
	if got := kind.DirFiles("app").Name("script.json"); got != filepath.Join("app", "script.json") {
		t.Errorf("Name on disk = %q", got)
	}
	if got := fsFiles.Name("script.json"); got != "script.json" {
		t.Errorf("Name in a file system = %q", got)
	}
}

type key struct{ dsn string }

// TestShared opens one value per key however many goroutines ask at once,
// retries a failed open, and closes everything it opened, last first, once.
func TestShared(t *testing.T) {
	var s kind.Scope
	var opened atomic.Int32
	var closed []string
	var mu sync.Mutex
	open := func(name string) func() (string, func() error, error) {
		return func() (string, func() error, error) {
			opened.Add(1)
			return name, func() error {
				mu.Lock()
				defer mu.Unlock()
				closed = append(closed, name)
				return nil
			}, nil
		}
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if v, err := kind.Shared(&s, key{"a"}, open("a")); err != nil || v != "a" {
				t.Errorf("Shared(a) = %q, %v", v, err)
			}
		})
	}
	wg.Wait()
	if opened.Load() != 1 {
		t.Errorf("key a opened %d times, want once", opened.Load())
	}
	fail := errors.New("refused")
	if _, err := kind.Shared(&s, key{"b"}, func() (string, func() error, error) { return "", nil, fail }); !errors.Is(err, fail) {
		t.Errorf("a failed open: %v", err)
	}
	if v, err := kind.Shared(&s, key{"b"}, open("b")); err != nil || v != "b" {
		t.Errorf("the open after a failure: %q, %v", v, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(closed, []string{"b", "a"}) {
		t.Errorf("closed %q, want b then a, each once", closed)
	}
	if _, err := kind.Shared(&s, key{"c"}, open("c")); !errors.Is(err, kind.ErrScopeClosed) {
		t.Errorf("Shared after Close: %v", err)
	}
	if _, err := kind.Shared(nil, key{"a"}, open("a")); err == nil {
		t.Error("Shared without a scope succeeded")
	}
}

type server struct{ addr string }

func (server) ResourceKind() string { return "servers" }

type other struct{}

func (other) ResourceKind() string { return "others" }

// TestEnv checks the defaults an Env supplies and how kinds find a
// resource: by kind and name.
func TestEnv(t *testing.T) {
	var env kind.Env
	if env.Log() == nil {
		t.Error("Log of a zero Env is nil")
	}
	t.Setenv("AID_KIND_TEST", "x")
	if v, ok := env.Lookup("AID_KIND_TEST"); !ok || v != "x" {
		t.Errorf("Lookup without LookupEnv = %q, %v", v, ok)
	}
	env.Resources = []kind.Resource{{Name: "fs", Kind: other{}}, {Name: "fs", Kind: server{addr: "a"}}}
	if r, ok := env.Resource("servers", "fs"); !ok || r.(server).addr != "a" {
		t.Errorf("Resource(servers, fs) = %v, %v", r, ok)
	}
	if _, ok := env.Resource("servers", "db"); ok {
		t.Error("Resource found an undeclared name")
	}
}

// TestCheckOneOf checks the rule a group of OneOf states: none set is a
// problem of the configuration, several a problem at the second set, and
// an empty string is not set.
func TestCheckOneOf(t *testing.T) {
	info := kind.Info{OneOf: [][]string{{"url", "urlEnv", "conn.socket"}}}
	for _, tt := range []struct{ data, field, msg string }{
		{`{"url": "http://x"}`, "", ""},
		{`{"url": "", "conn": {"socket": "/run/x"}}`, "", ""},
		{`{}`, "", "set one of url, urlEnv and conn.socket"},
		{`{"url": "", "urlEnv": ""}`, "", "set one of url, urlEnv and conn.socket"},
		{`{"url": "http://x", "conn": {"socket": "/run/x"}}`, "conn.socket", "set either url or conn.socket, not more than one"},
	} {
		ps := info.CheckOneOf([]byte(tt.data))
		switch {
		case tt.msg == "" && len(ps) != 0:
			t.Errorf("%s: %+v", tt.data, ps)
		case tt.msg != "" && (len(ps) != 1 || ps[0].Field != tt.field || ps[0].Msg != tt.msg):
			t.Errorf("%s: %+v; want %q at %q", tt.data, ps, tt.msg, tt.field)
		}
	}
}

func TestCallerContext(t *testing.T) {
	if _, ok := kind.CallerFrom(context.Background()); ok {
		t.Fatal("a bare context carries a caller")
	}
	ctx := kind.WithCaller(context.Background(), kind.Caller{Key: "ops", Tenant: "acme"})
	c, ok := kind.CallerFrom(ctx)
	if !ok || c.Key != "ops" || c.Tenant != "acme" {
		t.Fatalf("CallerFrom = %+v, %v; want ops/acme", c, ok)
	}
}
