// Package sandbox is the tool kind sandbox: the model sends a shell
// command and reads its exit status, output and the files it changed, the
// command running in an isolated environment of a declared backend. The
// first backend is bubblewrap (bwrap): new user, pid, ipc and uts
// namespaces (and network, unless the tool declares network), a read-only
// view of the system's programs and libraries and nothing else of the
// host's files, one writable workspace per run, resource limits (CPU time,
// memory, processes, file size, output, wall time), and an environment
// holding only the declared variables. A backend that is not available
// stops the application at start-up; a command never runs on the host.
package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aidgen/aid/runtime/agents"
	"github.com/aidgen/aid/runtime/kind"
)

// BackendBubblewrap runs commands with bwrap.
const BackendBubblewrap = "bubblewrap"

// Defaults of Limits.
const (
	DefaultCPUSeconds  = 10
	DefaultMemoryMB    = 512
	DefaultProcesses   = 64
	DefaultOutputBytes = 64 << 10
	DefaultFileMB      = 64
	DefaultWallTime    = 30 * time.Second
	// MaxWorkspaces bounds the workspaces kept at once; the one idle
	// longest is deleted to make room.
	MaxWorkspaces = 64
	// maxChanged bounds the changed files an observation lists.
	maxChanged = 20
)

// Kind is the configuration of a tool of kind sandbox, as the IR spells it
// (implementation: {kind: "sandbox", backend, network, env, limits}).
type Kind struct {
	// Backend is the isolation: "bubblewrap".
	Backend string `json:"backend"`
	// Network gives the command the host's network; without it the
	// command has none (a network namespace of its own, loopback only).
	Network bool `json:"network,omitempty"`
	// Env is the command's whole environment besides PATH, HOME and TMPDIR:
	// variable → value, written in the application, never read from the
	// service's environment.
	Env map[string]string `json:"env,omitempty"`
	// Skills are skills whose folders the command reads at
	// /skills/<name>, to run their scripts.
	Skills []string `json:"skills,omitempty"`
	// Limits bound each command.
	Limits Limits `json:"limits,omitempty"`
}

// Limits bound one command; a zero field takes its default.
type Limits struct {
	// CPUSeconds bounds the CPU time of each process (RLIMIT_CPU).
	CPUSeconds int `json:"cpuSeconds,omitempty"`
	// MemoryMB bounds each process's address space (RLIMIT_AS).
	MemoryMB int `json:"memoryMB,omitempty"`
	// Processes bounds the processes of the sandbox's user (RLIMIT_NPROC).
	Processes int `json:"processes,omitempty"`
	// FileMB bounds the size of a file the command writes (RLIMIT_FSIZE).
	FileMB int `json:"fileMB,omitempty"`
	// OutputBytes bounds the output read (stdout and stderr together); a
	// command that writes more is killed.
	OutputBytes int `json:"outputBytes,omitempty"`
	// WallTime bounds a command's time; its whole process group is killed
	// when it ends.
	WallTime time.Duration `json:"wallTime,omitempty"`
}

func (l Limits) withDefaults() Limits {
	or := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	l.CPUSeconds, l.MemoryMB, l.Processes = or(l.CPUSeconds, DefaultCPUSeconds), or(l.MemoryMB, DefaultMemoryMB), or(l.Processes, DefaultProcesses)
	l.FileMB, l.OutputBytes = or(l.FileMB, DefaultFileMB), or(l.OutputBytes, DefaultOutputBytes)
	if l.WallTime <= 0 {
		l.WallTime = DefaultWallTime
	}
	return l
}

// ToolKind implements agents.ToolKind.
func (Kind) ToolKind() string { return kind.ToolSandbox }

// UnavailableError is the start-up error of a sandbox whose backend cannot
// run here.
type UnavailableError struct {
	Backend string
	Err     error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sandbox backend %s is not available: %v; install it (Debian: apt-get install bubblewrap) — commands are never run outside a sandbox", e.Backend, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// NewTools implements agents.ToolKind: it checks that the backend runs a
// command here (stopping start-up otherwise), lays the skills' folders out
// read-only, and returns the tool.
func (k Kind) NewTools(ctx context.Context, decl agents.Tool, env kind.Env) ([]agents.BuiltTool, error) {
	sb, err := New(ctx, k, env)
	if err != nil {
		return nil, err
	}
	if env.Scope != nil {
		if _, err := kind.Shared(env.Scope, scopeKey{decl.Name}, func() (*Sandbox, func() error, error) { return sb, sb.Close, nil }); err != nil {
			_ = sb.Close()
			return nil, err
		}
	}
	return []agents.BuiltTool{{Tool: decl, Implementation: sb}}, nil
}

type scopeKey struct{ tool string }

// Sandbox runs commands for the runs of one application, each run in its
// own workspace.
type Sandbox struct {
	cfg    Kind
	limits Limits
	bwrap  string
	root   string // holds the workspaces and the skills' folders
	skills string // the skills' folders, or ""
	asUID  int    // the host user the sandbox runs as; -1 for the service's
	mu     sync.Mutex
	spaces map[string]*workspace
	closed bool
}

type workspace struct {
	dir  string
	used time.Time
	busy int
}

// New builds a sandbox and checks that its backend runs here.
func New(ctx context.Context, k Kind, env kind.Env) (*Sandbox, error) {
	if k.Backend != BackendBubblewrap {
		return nil, fmt.Errorf("sandbox: unknown backend %q; the backend is %q", k.Backend, BackendBubblewrap)
	}
	for name := range k.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, fmt.Errorf("sandbox: env: %q is not a variable name", name)
		}
	}
	bin, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, &UnavailableError{Backend: k.Backend, Err: err}
	}
	root, err := os.MkdirTemp("", "aid-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s := &Sandbox{cfg: k, limits: k.Limits.withDefaults(), bwrap: bin, root: root, asUID: -1, spaces: map[string]*workspace{}}
	if os.Geteuid() == 0 {
		// Never root on the host, even mapped: the sandbox's processes
		// are nobody's, whose process count RLIMIT_NPROC bounds.
		s.asUID = 65534
		if err := os.Chmod(root, 0o711); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("sandbox: %w", err)
		}
	}
	if len(k.Skills) > 0 {
		if err := s.layOutSkills(env); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	// The start-up check: a command runs, isolated, or the application
	// does not start.
	probe := "ws-probe"
	res, err := s.run(ctx, probe, "test ! -e /etc/shadow && echo ok")
	s.drop(probe)
	if err == nil && (res.status != 0 || strings.TrimSpace(res.out) != "ok") {
		err = fmt.Errorf("the probe command exited %d: %s", res.status, strings.TrimSpace(res.out))
	}
	if err != nil {
		_ = s.Close()
		return nil, &UnavailableError{Backend: k.Backend, Err: err}
	}
	return s, nil
}

// layOutSkills copies the files of the skills the tool names out of the
// application's files (embedded in a generated service) into a folder the
// command reads at /skills.
func (s *Sandbox) layOutSkills(env kind.Env) error {
	s.skills = filepath.Join(s.root, "skills")
	for _, name := range s.cfg.Skills {
		dir, ok := env.Skill(name)
		if !ok {
			return fmt.Errorf("sandbox: skill %q is not among the application's skills", name)
		}
		fsys, err := env.Files.Dir(dir)
		if err != nil {
			return fmt.Errorf("sandbox: skill %q: %w", name, err)
		}
		dst := filepath.Join(s.skills, name)
		err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			out := filepath.Join(dst, filepath.FromSlash(p))
			if d.IsDir() {
				return os.MkdirAll(out, 0o755)
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o755)
		})
		if err != nil {
			return fmt.Errorf("sandbox: skill %q: %w", name, err)
		}
	}
	return nil
}

// Close deletes every workspace.
func (s *Sandbox) Close() error {
	s.mu.Lock()
	s.closed = true
	s.spaces = map[string]*workspace{}
	s.mu.Unlock()
	return os.RemoveAll(s.root)
}

// EndRun deletes the workspace of the run runID: the run ended.
func (s *Sandbox) EndRun(runID string) { s.drop(runID) }

func (s *Sandbox) drop(runID string) {
	s.mu.Lock()
	w := s.spaces[runID]
	if w != nil && w.busy == 0 {
		delete(s.spaces, runID)
	}
	s.mu.Unlock()
	if w != nil && w.busy == 0 {
		_ = os.RemoveAll(w.dir)
	}
}

// acquire returns the workspace of runID, created on its first call.
func (s *Sandbox) acquire(runID string) (*workspace, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("the sandbox is closed")
	}
	if w := s.spaces[runID]; w != nil {
		w.busy++
		w.used = time.Now()
		return w, nil
	}
	if len(s.spaces) >= MaxWorkspaces {
		var oldest string
		for id, w := range s.spaces {
			if w.busy == 0 && (oldest == "" || w.used.Before(s.spaces[oldest].used)) {
				oldest = id
			}
		}
		if oldest == "" {
			return nil, fmt.Errorf("%d workspaces are in use; try again later", MaxWorkspaces)
		}
		_ = os.RemoveAll(s.spaces[oldest].dir)
		delete(s.spaces, oldest)
	}
	sum := sha256.Sum256([]byte(runID))
	dir := filepath.Join(s.root, "ws-"+hex.EncodeToString(sum[:12]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	if s.asUID >= 0 {
		if err := os.Chown(dir, s.asUID, s.asUID); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	w := &workspace{dir: dir, used: time.Now(), busy: 1}
	s.spaces[runID] = w
	return w, nil
}

func (s *Sandbox) release(w *workspace) {
	s.mu.Lock()
	w.busy--
	w.used = time.Now()
	s.mu.Unlock()
}

// Workspace returns the host folder of runID's workspace, for tests.
func (s *Sandbox) Workspace(runID string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.spaces[runID]
	if !ok {
		return "", false
	}
	return w.dir, true
}

// Call implements agents.Implementation: {"command": "..."} runs in the
// run's workspace.
func (s *Sandbox) Call(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(args, &in); err != nil || strings.TrimSpace(in.Command) == "" {
		return "", errors.New(`the arguments must be {"command": "<a shell command>"}`)
	}
	runID := "no-run"
	if ri, ok := agents.RunInfoFromContext(ctx); ok && ri.RunID != "" {
		runID = ri.RunID
	}
	res, err := s.run(ctx, runID, in.Command)
	if err != nil {
		return "", err
	}
	return res.String(), nil
}

// result is one command's outcome.
type result struct {
	status  int
	out     string
	stopped string // the limit that stopped it, if one did
	changed []string
}

func (r result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit status: %d\n", r.status)
	if r.stopped != "" {
		fmt.Fprintf(&b, "stopped by: %s\n", r.stopped)
	}
	b.WriteString("output:\n")
	b.WriteString(r.out)
	if !strings.HasSuffix(r.out, "\n") {
		b.WriteString("\n")
	}
	if len(r.changed) > 0 {
		b.WriteString("changed files:\n")
		for _, c := range r.changed {
			b.WriteString("- " + c + "\n")
		}
	}
	return b.String()
}

// The limits a command can meet, as results name them.
const (
	LimitWallTime = "wall time limit"
	LimitOutput   = "output limit"
	LimitCPU      = "cpu time limit"
	LimitFileSize = "file size limit"
)

// run runs command in runID's workspace.
func (s *Sandbox) run(ctx context.Context, runID, command string) (result, error) {
	w, err := s.acquire(runID)
	if err != nil {
		return result{}, err
	}
	defer s.release(w)
	before := snapshot(w.dir)
	l := s.limits
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--die-with-parent", "--new-session",
		"--uid", "65534", "--gid", "65534",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/sbin", "/sbin",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
		"--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
		"--bind", w.dir, "/workspace", "--chdir", "/workspace",
		"--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/workspace", "--setenv", "TMPDIR", "/tmp",
	}
	if _, err := os.Stat("/usr/lib64"); err == nil {
		args = append(args, "--symlink", "usr/lib64", "/lib64")
	}
	if !s.cfg.Network {
		args = append(args, "--unshare-net")
	} else {
		args = append(args, "--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf", "--ro-bind-try", "/etc/hosts", "/etc/hosts", "--ro-bind-try", "/etc/ssl", "/etc/ssl")
	}
	if s.skills != "" {
		args = append(args, "--ro-bind", s.skills, "/skills")
	}
	// Everything mounted: the root itself (bwrap's tmpfs) becomes
	// read-only, so that only /workspace and /tmp take writes.
	args = append(args, "--remount-ro", "/")
	for _, k := range slices.Sorted(maps.Keys(s.cfg.Env)) {
		args = append(args, "--setenv", k, s.cfg.Env[k])
	}
	args = append(args, "--", "/usr/bin/prlimit",
		// The soft CPU limit sends SIGXCPU; the hard one, a second later,
		// SIGKILL to a command that ignores it.
		"--cpu="+strconv.Itoa(l.CPUSeconds)+":"+strconv.Itoa(l.CPUSeconds+1), "--as="+strconv.Itoa(l.MemoryMB<<20),
		"--nproc="+strconv.Itoa(l.Processes), "--fsize="+strconv.Itoa(l.FileMB<<20), "--core=0",
		"--", "/bin/sh", "-c", command)

	cctx, cancel := context.WithTimeout(ctx, l.WallTime)
	defer cancel()
	cmd := exec.Command(s.bwrap, args...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = w.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.asUID >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.asUID), Gid: uint32(s.asUID)}
	}
	out := &capped{limit: l.OutputBytes, full: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		return result{}, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return result{}, fmt.Errorf("starting the sandbox: %w", err)
	}
	pw.Close()
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	var stopped string
	select {
	case <-copied:
	case <-out.full:
		stopped = LimitOutput
		kill()
		<-copied
	case <-cctx.Done():
		kill()
		<-copied
		if ctx.Err() != nil {
			_ = cmd.Wait()
			pr.Close()
			return result{}, ctx.Err()
		}
		stopped = LimitWallTime
	}
	pr.Close()
	werr := cmd.Wait()
	res := result{out: out.String(), stopped: stopped}
	var ee *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &ee):
		res.status = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.status = 128 + int(ws.Signal())
		}
	default:
		return result{}, werr
	}
	// prlimit's child dies of SIGXCPU or SIGXFSZ: sh reports 128+n. A
	// SIGKILL the service did not send (wall time and output set stopped)
	// is the hard CPU limit's: the memory limit fails allocations instead.
	switch {
	case stopped != "":
	case res.status == 128+int(syscall.SIGXCPU) || res.status == 128+int(syscall.SIGKILL):
		res.stopped = LimitCPU
	case res.status == 128+int(syscall.SIGXFSZ):
		res.stopped = LimitFileSize
	}
	if out.cut > 0 {
		res.out += fmt.Sprintf("\n[output cut at %d bytes: the command wrote more]", l.OutputBytes)
	}
	res.changed = changed(before, snapshot(w.dir))
	return res, nil
}

// capped keeps the first limit bytes written and signals full when more
// come.
type capped struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	limit int
	cut   int64
	once  sync.Once
	full  chan struct{}
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - c.buf.Len()
	if room >= len(p) {
		c.buf.Write(p)
		return len(p), nil
	}
	c.buf.Write(p[:max(room, 0)])
	c.cut += int64(len(p) - max(room, 0))
	c.once.Do(func() { close(c.full) })
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.ToValidUTF8(c.buf.String(), "\uFFFD")
}

type entry struct {
	size int64
	sum  string
}

// snapshot maps the workspace's regular files to their sizes and hashes,
// bounded: files past the first few thousand are not looked at.
func snapshot(dir string) map[string]entry {
	out := map[string]entry{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(out) >= 4096 {
			return fs.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		e := entry{size: info.Size()}
		if f, err := os.Open(p); err == nil {
			h := sha256.New()
			_, _ = io.Copy(h, io.LimitReader(f, 16<<20))
			f.Close()
			e.sum = hex.EncodeToString(h.Sum(nil))[:16]
		}
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	return out
}

// changed lists the files created, changed or deleted, at most maxChanged.
func changed(before, after map[string]entry) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(after)) {
		b, ok := before[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("%s (created, %d bytes, sha256 %s)", name, after[name].size, after[name].sum))
		case b != after[name]:
			out = append(out, fmt.Sprintf("%s (changed, %d bytes, sha256 %s)", name, after[name].size, after[name].sum))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(before)) {
		if _, ok := after[name]; !ok {
			out = append(out, name+" (deleted)")
		}
	}
	if len(out) > maxChanged {
		n := len(out) - maxChanged
		out = append(out[:maxChanged], fmt.Sprintf("… and %d more", n))
	}
	return out
}
