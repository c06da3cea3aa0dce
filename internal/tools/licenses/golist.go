package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// listedPackage is the part of `go list -json` output the check reads.
type listedPackage struct {
	ImportPath string
	Standard   bool
	Module     *struct {
		Path    string
		Version string
		Dir     string
		Main    bool
		Replace *struct {
			Path    string
			Version string
			Dir     string
		}
	}
}

// parseList reads the JSON stream of `go list -deps -json` and returns the
// modules, other than the main module, that provide the packages, keyed by
// module path. The standard library has no module and is skipped.
func parseList(r io.Reader) (map[string]Module, error) {
	mods := map[string]Module{}
	dec := json.NewDecoder(r)
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return mods, nil
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		if p.Standard || p.Module == nil || p.Module.Main {
			continue
		}
		m := Module{Path: p.Module.Path, Version: p.Module.Version, Dir: p.Module.Dir}
		if r := p.Module.Replace; r != nil {
			m.Version = strings.TrimSpace(fmt.Sprintf("%s => %s %s", m.Version, r.Path, r.Version))
			m.Dir = r.Dir
		}
		mods[m.Path] = m
	}
}

// listModules lists the modules whose packages the main module's packages
// import, for each operating system in goos, with their tests' imports and
// without them: a module only the tests need is marked TestOnly. Test
// dependencies are checked too, because the project runs them in CI and
// publishes the tests that import them, and a test-only module becomes a
// build dependency with a single import.
//
// It runs `go list` in dir with GOPROXY=off, so it never downloads: a module
// missing from the module cache is an error that says to run go mod
// download.
func listModules(ctx context.Context, dir string, goos []string) ([]Module, error) {
	build := map[string]Module{}
	all := map[string]Module{}
	for _, g := range goos {
		for _, test := range []bool{false, true} {
			args := []string{"list", "-mod=readonly", "-deps", "-json=ImportPath,Standard,Module"}
			if test {
				args = append(args, "-test")
			}
			args = append(args, "./...")
			cmd := exec.CommandContext(ctx, "go", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOOS="+g, "GOPROXY=off")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return nil, fmt.Errorf("GOOS=%s go %s (run go mod download first): %w\n%s", g, strings.Join(args, " "), err, stderr.Bytes())
			}
			mods, err := parseList(bytes.NewReader(out))
			if err != nil {
				return nil, fmt.Errorf("GOOS=%s go %s: %w", g, strings.Join(args, " "), err)
			}
			for path, m := range mods {
				all[path] = m
				if !test {
					build[path] = m
				}
			}
		}
	}
	var list []Module
	for path, m := range all {
		_, inBuild := build[path]
		m.TestOnly = !inBuild
		list = append(list, m)
	}
	return list, nil
}
