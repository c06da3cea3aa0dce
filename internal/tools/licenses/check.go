package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/google/licensecheck"
)

// permissive lists the licences every module may have without review: they
// ask for a notice and nothing else of a program that links them. Anything
// else, weak copyleft such as MPL-2.0 included, needs a reviewed line in the
// allow-list, so that each such choice is written down once with a reason.
var permissive = map[string]bool{
	"0BSD":         true,
	"Apache-2.0":   true,
	"BSD-2-Clause": true,
	"BSD-3-Clause": true,
	"ISC":          true,
	"MIT":          true,
}

// minCoverage is the share of a licence file, in percent, that known
// licence texts must cover for the file to count as recognised. Below it
// the file holds terms licensecheck cannot name (an extra clause, a custom
// licence), which a person must read: the module is "unknown".
const minCoverage = 75

// maxLicenseBytes bounds how much of one licence file is read; real licence
// files are a few tens of kilobytes.
const maxLicenseBytes = 1 << 20

// Module is one module of the dependency graph.
type Module struct {
	// Path is the module path.
	Path string
	// Version is the selected version, with the replacement appended as
	// "=> path version" when go.mod replaces the module.
	Version string
	// Dir is the directory holding the module's files (the replacement's
	// when replaced); empty when the module is not in the module cache.
	Dir string
	// TestOnly is true when only tests import the module's packages.
	TestOnly bool
}

// Status is the verdict on one module.
type Status string

// The verdicts. Only StatusOK and StatusAllowed pass.
const (
	StatusOK            Status = "ok"
	StatusAllowed       Status = "allowed"
	StatusMissing       Status = "missing"
	StatusUnknown       Status = "unknown"
	StatusNotPermissive Status = "not permissive"
)

// Row is one line of the report.
type Row struct {
	Module Module
	// Licenses are the licence ids found in the module's licence files,
	// sorted.
	Licenses []string
	Status   Status
	// Detail says why the status is a problem, or gives the allow-list's
	// reason for an allowed module.
	Detail string
}

// licenseFile reports whether a file name is one a module's licence lives
// in: LICENSE, LICENCE, COPYING or UNLICENSE in any case, alone or followed
// by a suffix after "-", "_" or "." (LICENSE.md, LICENSE-APACHE,
// COPYING_LGPL.txt). Go source files are never licence files, although
// some are named so (license.go, license_test.go in a licence library).
func licenseFile(name string) bool {
	n := strings.ToLower(name)
	if strings.HasSuffix(n, ".go") {
		return false
	}
	for _, base := range []string{"license", "licence", "copying", "unlicense"} {
		rest, ok := strings.CutPrefix(n, base)
		if ok && (rest == "" || strings.ContainsRune("-_.", rune(rest[0]))) {
			return true
		}
	}
	return false
}

// classify finds the licence files in m.Dir and names their licences.
func classify(m Module) Row {
	row := Row{Module: m}
	if m.Dir == "" {
		row.Status, row.Detail = StatusMissing, "the module is not in the module cache (run go mod download)"
		return row
	}
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		row.Status, row.Detail = StatusMissing, fmt.Sprintf("reading the module directory: %v", err)
		return row
	}
	var unknown []string
	ids := map[string]bool{}
	files := 0
	for _, e := range entries {
		if !licenseFile(e.Name()) {
			continue
		}
		path := filepath.Join(m.Dir, e.Name())
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue // a directory such as LICENSES/, or a dangling link
		}
		files++
		text, err := readLimited(path)
		if err != nil {
			unknown = append(unknown, fmt.Sprintf("%s: %v", e.Name(), err))
			continue
		}
		cov := licensecheck.Scan(text)
		var found []string
		for _, match := range cov.Match {
			ids[match.ID] = true
			found = append(found, match.ID)
		}
		if cov.Percent < minCoverage {
			what := "no known licence"
			if len(found) > 0 {
				what = strings.Join(found, ", ")
			}
			unknown = append(unknown, fmt.Sprintf("%s: only %.0f%% of its text is a known licence (%s)", e.Name(), cov.Percent, what))
		}
	}
	for id := range ids {
		row.Licenses = append(row.Licenses, id)
	}
	sort.Strings(row.Licenses)
	switch {
	case files == 0:
		row.Status, row.Detail = StatusMissing, "no LICENSE, LICENCE, COPYING or UNLICENSE file in "+m.Dir
	case len(unknown) > 0:
		row.Status, row.Detail = StatusUnknown, strings.Join(unknown, "; ")
	default:
		var bad []string
		for _, id := range row.Licenses {
			if !permissive[id] {
				bad = append(bad, id)
			}
		}
		if len(bad) > 0 {
			row.Status, row.Detail = StatusNotPermissive, strings.Join(bad, ", ")+" is not a permissive licence"
		} else {
			row.Status = StatusOK
		}
	}
	return row
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxLicenseBytes))
}

// allowEntry is one reviewed exception.
type allowEntry struct {
	reason string
	line   int
}

// parseAllowList reads an allow-list: one "module/path reason for the
// exception" per line; blank lines and lines starting with # are ignored.
// A line without a reason, or a module listed twice, is an error: the point
// of the file is the recorded review.
func parseAllowList(r io.Reader, name string) (map[string]allowEntry, error) {
	allow := map[string]allowEntry{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		path, reason, _ := strings.Cut(line, " ")
		path, reason = strings.TrimSpace(path), strings.TrimSpace(reason)
		if strings.Contains(path, "@") {
			return nil, fmt.Errorf("%s:%d: %q: name the module without a version; the review covers the module, and its licence is checked again on every run", name, n, path)
		}
		if reason == "" {
			return nil, fmt.Errorf("%s:%d: %s has no reason; write why its licence is acceptable after the module path", name, n, path)
		}
		if prev, dup := allow[path]; dup {
			return nil, fmt.Errorf("%s:%d: %s is already listed on line %d", name, n, path, prev.line)
		}
		allow[path] = allowEntry{reason: reason, line: n}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return allow, nil
}

// check classifies every module, applies the allow-list and returns the
// rows, sorted by module path, and the problems, one sentence each. Besides
// the modules that fail, an allow-list line is a problem when its module is
// not in the graph or already passes: a stale exception would otherwise
// outlive its review.
func check(mods []Module, allow map[string]allowEntry, allowName string) ([]Row, []string) {
	mods = slices.Clone(mods)
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	var rows []Row
	var problems []string
	used := map[string]bool{}
	for _, m := range mods {
		row := classify(m)
		if e, ok := allow[m.Path]; ok {
			used[m.Path] = true
			if row.Status == StatusOK {
				problems = append(problems, fmt.Sprintf("%s:%d: %s is %s, which needs no exception; remove its line", allowName, e.line, m.Path, strings.Join(row.Licenses, ", ")))
			} else {
				row.Status, row.Detail = StatusAllowed, e.reason
			}
		}
		if row.Status != StatusOK && row.Status != StatusAllowed {
			problems = append(problems, fmt.Sprintf("%s %s: %s: %s", m.Path, m.Version, row.Status, row.Detail))
		}
		rows = append(rows, row)
	}
	var stale []string
	for path := range allow {
		if !used[path] {
			stale = append(stale, path)
		}
	}
	sort.Strings(stale)
	for _, path := range stale {
		problems = append(problems, fmt.Sprintf("%s:%d: %s is not in the dependency graph; remove its line", allowName, allow[path].line, path))
	}
	return rows, problems
}
