package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes shared by every command.
const (
	ExitOK      = 0
	ExitInvalid = 1
	ExitUsage   = 2
)

// exitError carries a command's exit code up to Main. Its message, when
// not empty, has already been shaped for the user.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr marks err as a usage error (exit 2): a bad command line, or an
// application whose configuration cannot run (no baseline, a store that
// does not open).
func usageErr(err error) error { return &exitError{code: ExitUsage, err: err} }

// streams are the standard streams a command reads and writes.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

// Main runs aidgen with args (without the program name) and returns the
// exit code. An interrupt (or SIGTERM) cancels the running command, which
// stops its samples and model calls and exits with an error.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, args, stdin, stdout, stderr)
}

// MainContext is Main with a context that cancels long-running commands.
func MainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	s := &streams{in: stdin, out: stdout, err: stderr}
	root := newRoot(s)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	return describe(s, err)
}

// describe is where every command error ends: it prints what the user
// needs (once) and picks the exit code.
func describe(s *streams, err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(s.err, "aidgen: %v\n", ee.err)
		}
		return ee.code
	}
	// Errors cobra raises itself (unknown command, bad flag) are usage
	// errors.
	fmt.Fprintf(s.err, "aidgen: %v\nRun 'aidgen --help' for usage.\n", err)
	return ExitUsage
}

func newRoot(s *streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "aidgen",
		Short: "Validate, build and evaluate aid applications",
		Long: `aidgen turns an aid application, described in one CUE file (app.cue), into a
running Go service, and gates its quality in CI with sampled evaluations.`,
		Example: `  # Check an application file against the schema and its own references.
  aidgen vet app.cue

  # Sample its evals and gate them against their baselines.
  aidgen eval examples/capitals/app.cue`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr(err) })
	root.AddCommand(newVet(s), newEval(s), newRun(s), newReplay(s), newIndex(s), newSearch(s), newBuild(s), newDescribe(s), newMCP(s), newWorker(s), newKeys(s), newVersion(s))
	return root
}

// tagFlag adds -t/--inject to a command that reads an app file: the CUE
// injection tags (ir.Tags) that choose, for example, the dev or the prod
// variant of one app file.
func tagFlag(cmd *cobra.Command, tags *[]string) {
	cmd.Flags().StringArrayVarP(tags, "inject", "t", nil, "set a `tag` of the app file: NAME=VALUE for the fields marked @tag(NAME), or a shorthand an attribute declares (repeatable)")
}
