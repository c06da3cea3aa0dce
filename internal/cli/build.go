package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	"github.com/aidgen/aid/gen"
	"github.com/aidgen/aid/internal/lower"
	"github.com/aidgen/aid/ir"
	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/kind"
)

func newBuild(s *streams) *cobra.Command {
	var (
		out, runtimeDir, module, runtimeVersion string
		check, noReplace                        bool
		tags                                    []string
	)
	cmd := &cobra.Command{
		Use:   "build FILE -o DIR",
		Short: "Generate the Go service of an application",
		Long: `Build validates an application file and writes the Go service that runs it
into DIR: go.mod, main.go, aid_gen.go (the application description as a Go
literal) and, for tools implemented in Go, the business package, whose
tools_gen.go declares each tool's typed input and whose one file per tool
(NAME_tool.go) is the team's: written when missing, never overwritten.

Every file is rendered before any is written, and each is written atomically
(a temporary file renamed over it), so a failed build leaves DIR as it was.
The same application always gives the same bytes.

The files the application reads when it serves (agent scripts, fixtures,
answer keys, the documents its retrievers ingest) are copied under DIR/app,
which the service embeds: it runs from any directory, without its sources.

go.mod requires the runtime at aidgen's own version. With --runtime, or by
default when aidgen runs from a source checkout, it also replaces the runtime
with that checkout, and go.sum copies the checkout's, so the service builds
offline. When DIR lies in a git repository that holds the checkout too (the
checkout itself, or a repository that vendors aid as a submodule), the
replace is relative (../..), so that the repository, service and checkout
together, can be committed, cloned and built anywhere. Otherwise it is the
checkout's absolute path: DIR then builds wherever it is moved on this
machine only, and build says so when DIR lies in a repository.
--runtime-version requires a published version instead, without a replace:
what to commit when the checkout is not in the service's repository.

At run time the service needs what its app file names, and nothing of the
checkout: the environment variables of its providers' API keys (apiKeyEnv),
its bearer tokens (service.auth.tokenEnv), its state's and pgvector stores'
DSNs (dsnEnv: PostgreSQL 15 or later with the vector extension), its http
tools' urlEnv and headersFromEnv, and its MCP servers' env,
bearerTokenEnv and OAuth clientSecretEnv and tokenKeyEnv (and, for an
authorization-code grant, the tokens of aidgen mcp login in
$AID_STATE_DIR/mcp-oauth); the commands of stdio MCP servers on PATH; and network
reach to its providers' and tools' URLs. The fake provider needs nothing.
Run the built binary with -h for its flags (-listen, -app-dir, -log-level,
-debug-listen, -state-dsn, the queue's and the retention's), each with its
environment variable.

--check writes nothing: it prints a unified diff of every generated file that
differs from DIR and exits 1 when there is one, for CI.

Exit status is 0 on success, 1 when the file is invalid or --check finds a
difference, 2 on a usage error.`,
		Example: `  aidgen build examples/support-desk/app.cue -o ./support-desk
  cd support-desk && go build .

  # In CI: fail when the checked-in service is stale.
  aidgen build app.cue -o service --check`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr(errors.New("build needs one application file; usage: aidgen build FILE -o DIR"))
			}
			if out == "" {
				return usageErr(errors.New("build needs an output directory; usage: aidgen build FILE -o DIR"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, err := ir.Load(args[0], ir.Tags(tags...))
			if err != nil {
				if es, ok := ir.IsInvalid(err); ok {
					fmt.Fprintln(s.err, es.Error())
					return &exitError{code: ExitInvalid}
				}
				return usageErr(err)
			}
			desc, err := lower.Document(doc)
			if err != nil {
				return &exitError{code: ExitInvalid, err: err}
			}
			if runtimeVersion != "" && (runtimeDir != "" || noReplace) {
				return usageErr(errors.New("--runtime-version requires a published runtime; it goes with neither --runtime nor --no-replace"))
			}
			rt := runtimeDir
			if rt == "" && !noReplace && runtimeVersion == "" {
				rt = sourceCheckout()
			}
			opts, err := buildOptions(out, rt, module)
			if err != nil {
				return usageErr(err)
			}
			if repo := repoRoot(out); repo != "" && filepath.IsAbs(filepath.FromSlash(opts.Runtime)) && !check {
				fmt.Fprintf(s.err, "note: go.mod replaces the runtime with %s, outside the repository at %s: the service builds on this machine only; to commit it, give --runtime-version\n", opts.Runtime, repo)
			}
			opts.RuntimeVersion = runtimeVersion
			if opts.Files, opts.AppDir, err = appFiles(desc, doc.Dir); err != nil {
				return &exitError{code: ExitInvalid, err: err}
			}
			files, err := gen.Generate(desc, opts)
			if err != nil {
				return &exitError{code: ExitInvalid, err: err}
			}
			if check {
				return checkFiles(s, out, files)
			}
			return writeFiles(s, out, files)
		},
	}
	tagFlag(cmd, &tags)
	cmd.Flags().StringVarP(&out, "out", "o", "", "the `directory` to write the service into")
	cmd.Flags().StringVar(&runtimeDir, "runtime", "", "an aid checkout (`path`) to replace the runtime with; default: the checkout aidgen was built from, if any")
	cmd.Flags().BoolVar(&noReplace, "no-replace", false, "require the runtime by version only, without a replace, even from a source checkout")
	cmd.Flags().StringVar(&runtimeVersion, "runtime-version", "", "require the runtime at this published `version` (v0.2.0), without a replace")
	cmd.Flags().StringVar(&module, "module", "", "the service's module `path`; default: the application's name")
	cmd.Flags().BoolVar(&check, "check", false, "write nothing; print a diff and exit 1 when DIR differs from what the file generates")
	return cmd
}

// buildOptions reads the runtime's module files when the service replaces
// the runtime with a checkout, and names the checkout for go.mod by its
// path relative to out when a repository holds both (replacePath), else
// by its absolute path, so that the service builds wherever its
// directory is moved.
func buildOptions(out, runtimeDir, module string) (gen.Options, error) {
	opts := gen.Options{Module: module}
	if runtimeDir == "" {
		return opts, nil
	}
	absRT, err := filepath.Abs(runtimeDir)
	if err != nil {
		return opts, fmt.Errorf("resolving the runtime checkout: %w", err)
	}
	mod, err := os.ReadFile(filepath.Join(absRT, "go.mod"))
	if err != nil {
		return opts, fmt.Errorf("--runtime %s is not an aid checkout: %w", runtimeDir, err)
	}
	if !bytes.Contains(mod, []byte("module "+gen.RuntimeModule+"\n")) {
		return opts, fmt.Errorf("--runtime %s is not an aid checkout: its go.mod is not module %s", runtimeDir, gen.RuntimeModule)
	}
	sum, err := os.ReadFile(filepath.Join(absRT, "go.sum"))
	if err != nil {
		return opts, fmt.Errorf("reading the runtime's go.sum: %w", err)
	}
	rel, err := replacePath(out, absRT)
	if err != nil {
		return opts, err
	}
	opts.RuntimeGoMod, opts.GoSum, opts.Runtime = mod, sum, filepath.ToSlash(rel)
	return opts, nil
}

// replacePath is how the go.mod of a service written to out names the
// runtime checkout rt (absolute): by a relative path when one git
// repository holds both, since the repository is what is committed and
// cloned, and a relative replace builds in every clone; by rt otherwise,
// since a relative path to a checkout outside the repository breaks as
// soon as either moves.
func replacePath(out, rt string) (string, error) {
	absOut, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("resolving the output directory: %w", err)
	}
	repo := repoRoot(absOut)
	if repo == "" || !within(repo, rt) {
		return rt, nil
	}
	rel, err := filepath.Rel(absOut, rt)
	if err != nil {
		return rt, nil
	}
	return rel, nil
}

// repoRoot is the root of the git repository dir lies in (the nearest
// directory at or above it holding .git, a directory or, in a worktree
// or submodule, a file), or "" when there is none. dir need not exist
// yet.
func repoRoot(dir string) string {
	d, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// within reports whether path is root or lies under it.
func within(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// appFiles reads the files the application reads when it serves, from
// the app file's directory dir, laid out for gen.
func appFiles(desc app.Description, dir string) (map[string][]byte, string, error) {
	files, err := desc.ReadFiles(kind.DirFiles(dir))
	if err != nil {
		return nil, "", fmt.Errorf("reading the application's files: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, "", fmt.Errorf("resolving the application's directory: %w", err)
	}
	return gen.LayOut(files, filepath.ToSlash(abs))
}

// sourceCheckout is the aid checkout this binary was built from, when it
// still exists: the directory two levels above this file's, if it holds
// aid's go.mod. A binary built with -trimpath, or moved to another machine,
// has none.
func sourceCheckout() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	root := filepath.Dir(filepath.Dir(filepath.Dir(file)))
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.Contains(mod, []byte("module "+gen.RuntimeModule+"\n")) {
		return ""
	}
	return root
}

// sortedPaths lists the generated files in a stable order.
func sortedPaths(files map[string][]byte) []string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// writeFiles writes every generated file into dir, each atomically, and
// a stub only where none exists. It says what it did, file by file.
func writeFiles(s *streams, dir string, files map[string][]byte) error {
	paths := sortedPaths(files)
	for _, p := range paths {
		target := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return &exitError{code: ExitUsage, err: fmt.Errorf("creating %s: %w", filepath.Dir(target), err)}
		}
		if gen.FileKind(p) == gen.Stub {
			wrote, err := writeNew(target, files[p])
			if err != nil {
				return &exitError{code: ExitUsage, err: err}
			}
			if wrote {
				fmt.Fprintf(s.out, "wrote %s (yours to edit)\n", target)
			} else {
				fmt.Fprintf(s.out, "kept %s\n", target)
			}
			continue
		}
		if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, files[p]) {
			fmt.Fprintf(s.out, "unchanged %s\n", target)
			continue
		}
		if err := writeAtomic(target, files[p]); err != nil {
			return &exitError{code: ExitUsage, err: err}
		}
		fmt.Fprintf(s.out, "wrote %s\n", target)
	}
	for _, orphan := range orphanStubs(dir, files) {
		fmt.Fprintf(s.err, "aidgen: %s implements a tool the application no longer declares; delete it\n", orphan)
	}
	stale, err := staleCopies(dir, files)
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	for _, p := range stale {
		if err := os.Remove(p); err != nil {
			return &exitError{code: ExitUsage, err: fmt.Errorf("removing %s: %w", p, err)}
		}
		fmt.Fprintf(s.out, "removed %s\n", p)
	}
	removeEmptyDirs(filepath.Join(dir, gen.DirFiles))
	return nil
}

// staleCopies lists the files under dir's copy of the application's files
// (gen.DirFiles) that the application no longer reads: the tree is the
// generator's, and a stale copy would still be embedded.
func staleCopies(dir string, files map[string][]byte) ([]string, error) {
	root := filepath.Join(dir, gen.DirFiles)
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipDir
		}
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if _, ok := files[filepath.ToSlash(rel)]; !ok {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", root, err)
	}
	return out, nil
}

// removeEmptyDirs removes the empty directories under root, root included,
// deepest first; it leaves anything it cannot remove.
func removeEmptyDirs(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for _, d := range slices.Backward(dirs) {
		_ = os.Remove(d) // fails, as it should, on a directory that is not empty
	}
}

// orphanStubs lists the stub files in dir/business whose tool is gone.
func orphanStubs(dir string, files map[string][]byte) []string {
	matches, _ := filepath.Glob(filepath.Join(dir, "business", "*_tool.go"))
	var out []string
	for _, m := range matches {
		if _, ok := files["business/"+filepath.Base(m)]; !ok {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// writeAtomic replaces target with data through a temporary file in the
// same directory, so that a reader (or a crash) never sees half a file.
func writeAtomic(target string, data []byte) error {
	tmp, err := tempFile(target, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", target, err)
	}
	return nil
}

// writeNew writes target only when it does not exist, atomically: the
// link fails rather than replace a file the team wrote in the meantime.
func writeNew(target string, data []byte) (bool, error) {
	if _, err := os.Lstat(target); err == nil {
		return false, nil
	}
	tmp, err := tempFile(target, data)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, target); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("writing %s: %w", target, err)
	}
	return true, nil
}

// tempFile writes data to a new temporary file beside target.
func tempFile(target string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", target, err)
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing %s: %w", target, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("writing %s: %w", target, err)
	}
	return f.Name(), nil
}

// checkFiles compares what would be written with dir: a generated file
// that differs or is missing, and a stub that is missing, are printed as a
// unified diff, and make the check fail. A stub that exists is the team's
// and is not compared.
func checkFiles(s *streams, dir string, files map[string][]byte) error {
	stale := 0
	for _, p := range sortedPaths(files) {
		target := filepath.Join(dir, filepath.FromSlash(p))
		old, err := os.ReadFile(target)
		switch {
		case err == nil && gen.FileKind(p) == gen.Stub:
			continue
		case err == nil && bytes.Equal(old, files[p]):
			continue
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return &exitError{code: ExitUsage, err: fmt.Errorf("reading %s: %w", target, err)}
		}
		from := target
		if err != nil {
			from = "/dev/null"
		}
		diff, derr := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
			A: difflib.SplitLines(string(old)), B: difflib.SplitLines(string(files[p])),
			FromFile: from, ToFile: target, Context: 3,
		})
		if derr != nil {
			return &exitError{code: ExitUsage, err: fmt.Errorf("diffing %s: %w", target, derr)}
		}
		if !strings.HasSuffix(diff, "\n") {
			diff += "\n"
		}
		fmt.Fprint(s.out, diff)
		stale++
	}
	extra, err := staleCopies(dir, files)
	if err != nil {
		return &exitError{code: ExitUsage, err: err}
	}
	for _, p := range extra {
		old, err := os.ReadFile(p)
		if err != nil {
			return &exitError{code: ExitUsage, err: fmt.Errorf("reading %s: %w", p, err)}
		}
		diff, derr := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(string(old)), FromFile: p, ToFile: "/dev/null", Context: 3})
		if derr != nil {
			return &exitError{code: ExitUsage, err: fmt.Errorf("diffing %s: %w", p, derr)}
		}
		if !strings.HasSuffix(diff, "\n") {
			diff += "\n"
		}
		fmt.Fprint(s.out, diff)
		stale++
	}
	if stale > 0 {
		return &exitError{code: ExitInvalid, err: fmt.Errorf("%d generated file(s) in %s differ from the application; run aidgen build to update them", stale, dir)}
	}
	return nil
}
