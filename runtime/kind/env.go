package kind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Env is what an extension point lends a kind's constructor: what a
// configuration cannot hold because it belongs to the process (the
// environment, clients, open connections) or to where the application was
// found (its files). runtime/app fills it once per assembled application;
// a team building a kind by hand may leave fields zero, and the methods
// below supply the defaults.
type Env struct {
	// Files reads the files the application names; the zero value reads
	// them from the working directory.
	Files Files
	// LookupEnv reads the environment (API keys, DSNs, header values);
	// nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// HTTPClient sends the HTTP requests of the kinds that make them; nil
	// means a client on DefaultTransport (HTTPClient).
	HTTPClient *http.Client
	// Logger receives what kinds log; nil means nothing is logged.
	Logger *slog.Logger
	// Seed, when set, replaces the seed of every seeded kind (the fake
	// provider), to draw a fresh sample without editing the application.
	Seed *int64
	// Scope holds what kinds open once per application and close with it
	// (Shared); nil makes Shared fail.
	Scope *Scope
	// Resources are the application's resources, which a kind's elements
	// find by name (Resource).
	Resources []Resource
	// Skills are the folders of the application's skills, by skill name,
	// relative to Files (a sandbox runs their scripts).
	Skills map[string]string
}

// Skill returns the folder of the application's skill name, relative to
// Files.
func (e Env) Skill(name string) (string, bool) {
	dir, ok := e.Skills[name]
	return dir, ok
}

// Lookup reads the environment variable name through LookupEnv.
func (e Env) Lookup(name string) (string, bool) {
	if e.LookupEnv == nil {
		return os.LookupEnv(name)
	}
	return e.LookupEnv(name)
}

// HTTPClient returns hc, or, when it is nil, a client on DefaultTransport:
// the client of a kind that was lent none. Kinds copy it before they set
// its redirect policy.
func HTTPClient(hc *http.Client) *http.Client {
	if hc == nil {
		return &http.Client{Transport: DefaultTransport}
	}
	return hc
}

// DefaultTransport is the HTTP transport of the kinds that make HTTP
// requests (providers, http tools, MCP servers) when the environment lends
// no client: http.DefaultTransport's settings (proxies from the
// environment, HTTP/2, dial and handshake timeouts) with room for
// MaxIdleConnsPerHost idle connections to each host. net/http keeps two,
// so a service calling one provider from many requests at once would close
// all but two connections after each call and dial (over TLS, handshake)
// anew for the next: at 1,000 requests per second on loopback that was 11%
// of the service's CPU.
var DefaultTransport http.RoundTripper = defaultTransport()

// MaxIdleConnsPerHost is how many idle connections DefaultTransport keeps
// to one host: the calls one replica makes to its busiest provider at once.
const MaxIdleConnsPerHost = 256

func defaultTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	t.MaxIdleConns = 4 * MaxIdleConnsPerHost
	return t
}

// Log returns Logger, or a logger that discards everything.
func (e Env) Log() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// Resource returns the configuration of the resource of the given kind
// (its section, such as "mcpServers") and name.
func (e Env) Resource(kind, name string) (ResourceKind, bool) {
	for _, r := range e.Resources {
		if r.Name == name && r.Kind != nil && r.Kind.ResourceKind() == kind {
			return r.Kind, true
		}
	}
	return nil, false
}

// ResourceKind is the typed configuration of a resource: a named
// declaration in a top-level IR section of its own that the elements of
// another kind share, and that is opened once per application (through
// Env.Scope) however many of them use it. An MCP server, which several
// tools of kind mcp call, is one. The description holds resources as
// Resource values; the kinds that use one find it with Env.Resource.
type ResourceKind interface {
	// ResourceKind returns the resource's kind: the name of the IR
	// section that declares it.
	ResourceKind() string
}

// Describer is implemented by a resource kind that can say what one of its
// resources offers, such as the tools of an MCP server with their input
// schemas and annotations, so that writing an application starts from what
// the resource offers: `aidgen describe FILE KIND NAME` prints it. It
// reaches the resource as the application would, through env.
type Describer interface {
	// Describe writes what the resource called name offers to w.
	Describe(ctx context.Context, env Env, name string, w io.Writer) error
}

// Resource is a named resource of an application.
type Resource struct {
	// Name is the resource's key in its section, as elements refer to it.
	Name string
	// Kind is the resource's typed configuration.
	Kind ResourceKind
}

// Files reads the files an application names (agent scripts, fixtures,
// datasets, documents) by the names the application gives them:
// slash-separated and relative to the application's directory, leading
// "../" segments included, or absolute. The files are on disk for aidgen
// and for a service given -app-dir, and in the binary for a generated
// service, which embeds copies of them, so that it runs from any
// directory. The zero value reads from the working directory.
type Files struct {
	fsys fs.FS  // nil: the operating system's files
	dir  string // the application's directory: an OS path, or a slash path in fsys
}

// DirFiles returns the files of an application whose directory is dir, on
// disk; an empty dir is the working directory.
func DirFiles(dir string) Files { return Files{dir: dir} }

// FSFiles returns the files of an application held in fsys, whose directory
// is dir inside fsys (slash-separated, "." for its root). A name that
// leaves fsys, or an absolute one, is not found.
func FSFiles(fsys fs.FS, dir string) Files {
	if dir == "" {
		dir = "."
	}
	return Files{fsys: fsys, dir: dir}
}

// Name is how messages name the file called name: its path on disk, or the
// name as written when the files are embedded.
func (f Files) Name(name string) string {
	if f.fsys != nil || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(f.dir, filepath.FromSlash(name))
}

// ReadFile returns the contents of the file called name.
func (f Files) ReadFile(name string) ([]byte, error) {
	if f.fsys == nil {
		return os.ReadFile(f.Name(name))
	}
	p, err := f.inFS(name)
	if err != nil {
		return nil, err
	}
	return fs.ReadFile(f.fsys, p)
}

// Open opens the file called name, for a reader that streams it.
func (f Files) Open(name string) (fs.File, error) {
	if f.fsys == nil {
		return os.Open(f.Name(name))
	}
	p, err := f.inFS(name)
	if err != nil {
		return nil, err
	}
	return f.fsys.Open(p)
}

// Dir returns the directory called name (slash-separated, relative to the
// application's directory, "" for that directory itself) as a file system,
// in which a retriever matches its patterns.
func (f Files) Dir(name string) (fs.FS, error) {
	if f.fsys == nil {
		if name == "" {
			name = "."
		}
		return os.DirFS(f.Name(name)), nil
	}
	p, err := f.inFS(name)
	if err != nil {
		return nil, err
	}
	return fs.Sub(f.fsys, p)
}

// inFS resolves name against the application's directory in fsys.
func (f Files) inFS(name string) (string, error) {
	if name == "" {
		name = "."
	}
	p := path.Join(f.dir, name)
	if path.IsAbs(name) || filepath.IsAbs(name) || !fs.ValidPath(p) {
		return "", &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: not among the application's files", fs.ErrNotExist)}
	}
	return p, nil
}

// Scope holds what the kinds of one application open once and share, such
// as a database pool or a server session, and closes them when the
// application is closed. It is safe for concurrent use.
type Scope struct {
	mu      sync.Mutex
	entries map[any]*scopeEntry
	closers []func() error
	checks  []Check
	closed  bool
}

// Check is a readiness check of something a kind opened in a Scope (a
// connection to a server its tools need): a service's /readyz calls it
// under Name, and is not ready while it fails.
type Check struct {
	// Name names what is checked in /readyz's answer, such as
	// "mcp_server:files".
	Name string
	// Check returns nil when what it checks can serve; it returns when ctx
	// ends.
	Check func(ctx context.Context) error
}

// AddCheck registers a readiness check of what the kind opened in s,
// typically from the open function of Shared, so that it is added once.
func (s *Scope) AddCheck(name string, check func(ctx context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, Check{Name: name, Check: check})
}

// Checks returns the readiness checks added to s, by name.
func (s *Scope) Checks() []Check {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.checks)
	slices.SortFunc(out, func(a, b Check) int { return strings.Compare(a.Name, b.Name) })
	return out
}

type scopeEntry struct {
	mu   sync.Mutex
	done bool
	val  any
}

// ErrScopeClosed is returned by Shared once its scope is closed.
var ErrScopeClosed = errors.New("kind: the application's scope is closed")

// Shared returns the value kept in s under key, opening it with open the
// first time and closing it (with the function open returns, which may be
// nil) when s is closed. Concurrent calls for one key open it once; a
// failed open is not kept, so the next call tries again. A key is a value
// of a type unexported from the kind's package, so that kinds never share
// one by accident, and always maps to one T.
func Shared[T any](s *Scope, key any, open func() (T, func() error, error)) (T, error) {
	var zero T
	if s == nil {
		return zero, errors.New("kind: the environment has no Scope to share connections in")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return zero, ErrScopeClosed
	}
	if s.entries == nil {
		s.entries = map[any]*scopeEntry{}
	}
	e, ok := s.entries[key]
	if !ok {
		e = &scopeEntry{}
		s.entries[key] = e
	}
	s.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return e.val.(T), nil
	}
	v, closeFn, err := open()
	if err != nil {
		return zero, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		if closeFn != nil {
			_ = closeFn()
		}
		return zero, ErrScopeClosed
	}
	if closeFn != nil {
		s.closers = append(s.closers, closeFn)
	}
	s.mu.Unlock()
	e.val, e.done = v, true
	return v, nil
}

// Close closes everything opened through s, the last opened first, and
// reports every failure. Later calls of Shared fail with ErrScopeClosed;
// closing again does nothing.
func (s *Scope) Close() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	closers := s.closers
	s.closers, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, c := range slices.Backward(closers) {
		if err := c(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
