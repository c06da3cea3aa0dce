// Command licenses checks the licence of every module in the module's
// dependency graph: it lists the modules that the packages of ./... import
// (tests included, for each operating system we build for), finds each
// module's licence files in the module cache, names their licences with
// github.com/google/licensecheck, and fails when a module has no licence
// file, one it cannot recognise, or a licence that is not permissive, unless
// the allow-list holds a reviewed exception for it.
//
//	go run ./internal/tools/licenses [-allow scripts/licenses-allow.txt] [-goos linux,darwin,windows]
//
// It runs from the module root, never downloads (go list runs with
// GOPROXY=off) and prints one row per module. scripts/test.sh runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, listModules))
}

// lister lists the modules of the graph rooted in dir; tests give a fake.
type lister func(ctx context.Context, dir string, goos []string) ([]Module, error)

// run is the command: 0 when every module passes, 1 when one does not or
// the allow-list is stale, 2 when the check could not run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, list lister) int {
	fs := flag.NewFlagSet("licenses", flag.ContinueOnError)
	fs.SetOutput(stderr)
	allowPath := fs.String("allow", "scripts/licenses-allow.txt", "the allow-list of reviewed exceptions: one `module/path reason` per line")
	goosFlag := fs.String("goos", "linux,darwin,windows", "comma-separated operating systems whose build graphs are checked")
	dir := fs.String("C", ".", "the module root")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "licenses: unexpected arguments %q\n", fs.Args())
		return 2
	}
	var goos []string
	for g := range strings.SplitSeq(*goosFlag, ",") {
		if g = strings.TrimSpace(g); g != "" {
			goos = append(goos, g)
		}
	}
	if len(goos) == 0 {
		fmt.Fprintln(stderr, "licenses: -goos names no operating system")
		return 2
	}

	f, err := os.Open(*allowPath)
	if err != nil {
		fmt.Fprintf(stderr, "licenses: reading the allow-list: %v\n", err)
		return 2
	}
	allow, err := parseAllowList(f, *allowPath)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "licenses: %v\n", err)
		return 2
	}
	mods, err := list(ctx, *dir, goos)
	if err != nil {
		fmt.Fprintf(stderr, "licenses: listing the dependency graph: %v\n", err)
		return 2
	}

	rows, problems := check(mods, allow, *allowPath)
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tVERSION\tSCOPE\tLICENCE\tSTATUS")
	for _, r := range rows {
		scope := "build"
		if r.Module.TestOnly {
			scope = "test"
		}
		lic := strings.Join(r.Licenses, ", ")
		if lic == "" {
			lic = "-"
		}
		status := string(r.Status)
		if r.Status == StatusAllowed {
			status += ": " + r.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Module.Path, r.Module.Version, scope, lic, status)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "licenses: %v\n", err)
		return 2
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "licenses: %d problem(s); fix the dependency, or review the licence and add a line to %s:\n", len(problems), *allowPath)
		for _, p := range problems {
			fmt.Fprintf(stderr, "  %s\n", p)
		}
		return 1
	}
	fmt.Fprintf(stdout, "licenses: %d modules, all permissive or reviewed\n", len(rows))
	return 0
}
