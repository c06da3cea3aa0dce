package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// text returns a licence text from testdata.
func text(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeModule writes a module directory holding files (name → contents)
// under root and returns the module.
func fakeModule(t *testing.T, root, path string, files map[string]string) Module {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(path)+"@v1.0.0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Module{Path: path, Version: "v1.0.0", Dir: dir}
}

func TestLicenseFile(t *testing.T) {
	for name, want := range map[string]bool{
		"LICENSE": true, "LICENSE.md": true, "LICENSE.txt": true, "licence": true, "COPYING": true,
		"COPYING.LESSER": true, "LICENSE-APACHE": true, "LICENSE_MIT.txt": true, "UNLICENSE": true,
		"license.go": false, "license_test.go": false, "LICENSES.md": false, "licensed.md": false,
		"NOTICE": false, "README.md": false, "copyright": false,
	} {
		if got := licenseFile(name); got != want {
			t.Errorf("licenseFile(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestClassify(t *testing.T) {
	root := t.TempDir()
	tests := []struct {
		name       string
		files      map[string]string
		noDir      bool
		wantIDs    []string
		wantStatus Status
		wantDetail string // a substring of Detail
	}{
		{name: "MIT", files: map[string]string{"LICENSE": text(t, "MIT.txt"), "go.mod": "module x"},
			wantIDs: []string{"MIT"}, wantStatus: StatusOK},
		{name: "Apache in LICENSE.txt", files: map[string]string{"LICENSE.txt": text(t, "Apache-2.0.txt")},
			wantIDs: []string{"Apache-2.0"}, wantStatus: StatusOK},
		{name: "dual licence in two files", files: map[string]string{"LICENSE-MIT": text(t, "MIT.txt"), "LICENSE-APACHE": text(t, "Apache-2.0.txt")},
			wantIDs: []string{"Apache-2.0", "MIT"}, wantStatus: StatusOK},
		{name: "two licences in one file", files: map[string]string{"LICENSE": text(t, "MIT.txt") + "\n\n" + text(t, "Apache-2.0.txt")},
			wantIDs: []string{"Apache-2.0", "MIT"}, wantStatus: StatusOK},
		{name: "GPL", files: map[string]string{"COPYING": text(t, "GPL-3.0.txt")},
			wantIDs: []string{"GPL-3.0-or-later"}, wantStatus: StatusNotPermissive, wantDetail: "GPL-3.0-or-later is not a permissive licence"},
		{name: "MIT beside GPL fails", files: map[string]string{"LICENSE": text(t, "MIT.txt"), "COPYING": text(t, "GPL-3.0.txt")},
			wantIDs: []string{"GPL-3.0-or-later", "MIT"}, wantStatus: StatusNotPermissive, wantDetail: "GPL-3.0-or-later"},
		{name: "MPL needs review", files: map[string]string{"LICENSE": text(t, "MPL-2.0.txt")},
			wantIDs: []string{"MPL-2.0"}, wantStatus: StatusNotPermissive},
		{name: "Go files named license are not licence files", files: map[string]string{"LICENSE": text(t, "MIT.txt"), "license.go": "package licensecheck", "license_test.go": "package licensecheck"},
			wantIDs: []string{"MIT"}, wantStatus: StatusOK},
		{name: "no licence file", files: map[string]string{"README.md": "MIT licensed, honest", "NOTICE": text(t, "MIT.txt")},
			wantStatus: StatusMissing, wantDetail: "no LICENSE, LICENCE, COPYING or UNLICENSE file"},
		{name: "a LICENSES directory is not a file", files: map[string]string{"LICENSES/": ""},
			wantStatus: StatusMissing},
		{name: "not in the module cache", noDir: true,
			wantStatus: StatusMissing, wantDetail: "go mod download"},
		{name: "proprietary text", files: map[string]string{"LICENCE.md": text(t, "proprietary.txt")},
			wantStatus: StatusUnknown, wantDetail: "LICENCE.md: only 0% of its text is a known licence (no known licence)"},
		{name: "MIT with an added clause", files: map[string]string{"LICENSE": text(t, "MIT.txt") + strings.Repeat("\nThe Software shall be used for good, not evil, and by no one who disagrees with this.", 6)},
			wantIDs: []string{"MIT"}, wantStatus: StatusUnknown, wantDetail: "a known licence (MIT)"},
		{name: "empty licence file", files: map[string]string{"LICENSE": ""},
			wantStatus: StatusUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Module{Path: "example.com/" + strings.ReplaceAll(tt.name, " ", "-"), Version: "v1.0.0"}
			if !tt.noDir {
				m = fakeModule(t, root, m.Path, tt.files)
			}
			row := classify(m)
			if row.Status != tt.wantStatus {
				t.Errorf("status = %q (%s), want %q", row.Status, row.Detail, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantIDs, row.Licenses); diff != "" {
				t.Errorf("licences (-want +got):\n%s", diff)
			}
			if !strings.Contains(row.Detail, tt.wantDetail) {
				t.Errorf("detail = %q, want it to contain %q", row.Detail, tt.wantDetail)
			}
		})
	}
}

func TestParseAllowList(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    map[string]allowEntry
		wantErr string
	}{
		{name: "comments and entries", in: "# reviewed\n\nexample.com/mpl  MPL-2.0, file-level copyleft; we ship it unmodified\n",
			want: map[string]allowEntry{"example.com/mpl": {reason: "MPL-2.0, file-level copyleft; we ship it unmodified", line: 3}}},
		{name: "no reason", in: "example.com/mpl\n", wantErr: "allow.txt:1: example.com/mpl has no reason"},
		{name: "a version", in: "example.com/mpl@v1.2.0 fine\n", wantErr: "allow.txt:1: \"example.com/mpl@v1.2.0\": name the module without a version"},
		{name: "twice", in: "example.com/a ok\nexample.com/a again\n", wantErr: "allow.txt:2: example.com/a is already listed on line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAllowList(strings.NewReader(tt.in), "allow.txt")
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(allowEntry{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestRun drives the command on a fake module tree: the table on stdout,
// the problems on stderr, the exit code.
func TestRun(t *testing.T) {
	root := t.TempDir()
	mit := fakeModule(t, root, "example.com/mit", map[string]string{"LICENSE": text(t, "MIT.txt")})
	apache := fakeModule(t, root, "example.com/apache", map[string]string{"LICENSE": text(t, "Apache-2.0.txt")})
	apache.TestOnly = true
	gpl := fakeModule(t, root, "example.com/gpl", map[string]string{"COPYING": text(t, "GPL-3.0.txt")})
	bare := fakeModule(t, root, "example.com/bare", map[string]string{"main.go": "package bare"})
	tests := []struct {
		name       string
		mods       []Module
		allow      string
		wantCode   int
		wantStdout []string // lines, after collapsing runs of spaces
		wantStderr []string // substrings
	}{{
		name:     "permissive modules pass",
		mods:     []Module{mit, apache},
		wantCode: 0,
		wantStdout: []string{
			"MODULE VERSION SCOPE LICENCE STATUS",
			"example.com/apache v1.0.0 test Apache-2.0 ok",
			"example.com/mit v1.0.0 build MIT ok",
			"licenses: 2 modules, all permissive or reviewed",
		},
	}, {
		name:       "a GPL module fails",
		mods:       []Module{mit, gpl},
		wantCode:   1,
		wantStdout: []string{"MODULE VERSION SCOPE LICENCE STATUS", "example.com/gpl v1.0.0 build GPL-3.0-or-later not permissive", "example.com/mit v1.0.0 build MIT ok"},
		wantStderr: []string{"licenses: 1 problem(s)", "  example.com/gpl v1.0.0: not permissive: GPL-3.0-or-later is not a permissive licence"},
	}, {
		name:       "a module without a licence file fails",
		mods:       []Module{bare, mit},
		wantCode:   1,
		wantStdout: []string{"MODULE VERSION SCOPE LICENCE STATUS", "example.com/bare v1.0.0 build - missing", "example.com/mit v1.0.0 build MIT ok"},
		wantStderr: []string{"  example.com/bare v1.0.0: missing: no LICENSE, LICENCE, COPYING or UNLICENSE file in " + bare.Dir},
	}, {
		name:       "a reviewed exception passes",
		mods:       []Module{gpl, mit},
		allow:      "# reviewed\nexample.com/gpl used only by a dev tool we never ship\n",
		wantCode:   0,
		wantStdout: []string{"MODULE VERSION SCOPE LICENCE STATUS", "example.com/gpl v1.0.0 build GPL-3.0-or-later allowed: used only by a dev tool we never ship", "example.com/mit v1.0.0 build MIT ok", "licenses: 2 modules, all permissive or reviewed"},
	}, {
		name:       "stale and needless exceptions fail",
		mods:       []Module{mit},
		allow:      "example.com/gone it was reviewed once\nexample.com/mit reviewed anyway\n",
		wantCode:   1,
		wantStderr: []string{"allow.txt:2: example.com/mit is MIT, which needs no exception; remove its line", "allow.txt:1: example.com/gone is not in the dependency graph; remove its line"},
	}, {
		name:       "a malformed allow-list stops the check",
		mods:       []Module{mit},
		allow:      "example.com/gpl\n",
		wantCode:   2,
		wantStderr: []string{"allow.txt:1: example.com/gpl has no reason"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allowPath := filepath.Join(t.TempDir(), "allow.txt")
			if err := os.WriteFile(allowPath, []byte(tt.allow), 0o644); err != nil {
				t.Fatal(err)
			}
			list := func(_ context.Context, dir string, goos []string) ([]Module, error) {
				if dir != "." || !slices.Equal(goos, []string{"linux", "darwin", "windows"}) {
					t.Errorf("lister called with %q %q", dir, goos)
				}
				return tt.mods, nil
			}
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"-allow", allowPath}, &stdout, &stderr, list)
			if code != tt.wantCode {
				t.Errorf("exit code = %d, want %d\nstderr:\n%s", code, tt.wantCode, stderr.String())
			}
			if tt.wantStdout != nil {
				var lines []string
				for l := range strings.Lines(stdout.String()) {
					lines = append(lines, strings.Join(strings.Fields(l), " "))
				}
				if diff := cmp.Diff(tt.wantStdout, lines); diff != "" {
					t.Errorf("stdout (-want +got):\n%s", diff)
				}
			}
			got := strings.ReplaceAll(stderr.String(), allowPath, "allow.txt")
			for _, want := range tt.wantStderr {
				if !strings.Contains(got, want) {
					t.Errorf("stderr lacks %q:\n%s", want, got)
				}
			}
		})
	}
}

func TestParseList(t *testing.T) {
	in := `{"ImportPath": "fmt", "Standard": true}
{"ImportPath": "github.com/aidgen/aid/ir", "Module": {"Path": "github.com/aidgen/aid", "Main": true, "Dir": "/src/aid"}}
{"ImportPath": "example.com/a/sub", "Module": {"Path": "example.com/a", "Version": "v1.2.0", "Dir": "/cache/example.com/a@v1.2.0"}}
{"ImportPath": "example.com/a", "Module": {"Path": "example.com/a", "Version": "v1.2.0", "Dir": "/cache/example.com/a@v1.2.0"}}
{"ImportPath": "example.com/b", "Module": {"Path": "example.com/b", "Version": "v0.1.0", "Dir": "/cache/example.com/fork@v0.2.0",
  "Replace": {"Path": "example.com/fork", "Version": "v0.2.0", "Dir": "/cache/example.com/fork@v0.2.0"}}}
{"ImportPath": "example.com/c", "Module": {"Path": "example.com/c", "Version": "v1.0.0",
  "Replace": {"Path": "../c", "Dir": "/src/c"}}}
`
	got, err := parseList(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Module{
		"example.com/a": {Path: "example.com/a", Version: "v1.2.0", Dir: "/cache/example.com/a@v1.2.0"},
		"example.com/b": {Path: "example.com/b", Version: "v0.1.0 => example.com/fork v0.2.0", Dir: "/cache/example.com/fork@v0.2.0"},
		"example.com/c": {Path: "example.com/c", Version: "v1.0.0 => ../c", Dir: "/src/c"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := parseList(strings.NewReader(`{"ImportPath": `)); err == nil || !strings.Contains(err.Error(), "decoding go list output") {
		t.Errorf("truncated output: error = %v", err)
	}
}

// TestListModulesOnThisModule runs the real go list on this module, offline,
// to check the flags and the build/test split that the fake lister above
// takes for granted.
func TestListModulesOnThisModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	mods, err := listModules(context.Background(), "../../..", []string{"linux"})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]Module{}
	for _, m := range mods {
		byPath[m.Path] = m
	}
	// This command imports licensecheck, so it is a build dependency.
	if m, ok := byPath["github.com/google/licensecheck"]; !ok || m.TestOnly || m.Dir == "" {
		t.Errorf("licensecheck = %+v (listed %v), want a build dependency with a directory", m, ok)
	}
	if _, ok := byPath["github.com/aidgen/aid"]; ok {
		t.Error("the main module is listed")
	}
	testOnly := 0
	for _, m := range mods {
		if m.TestOnly {
			testOnly++
		}
	}
	if testOnly == 0 {
		t.Error("no module is test-only; the test listing is not separated from the build's")
	}
}
