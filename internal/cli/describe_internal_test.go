package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/kind"
)

// tools is a resource kind that lists its tools, or cannot be reached.
type tools struct{ Up bool }

func (tools) ResourceKind() string { return "servers" }

func (t tools) Describe(_ context.Context, _ kind.Env, name string, w io.Writer) error {
	if !t.Up {
		return errors.New("connection refused")
	}
	_, err := fmt.Fprintf(w, "%s: read_file, list_dir\n", name)
	return err
}

// mute is a resource kind that cannot describe its resources.
type mute struct{}

func (mute) ResourceKind() string { return "servers" }

// TestDescribeExitCodes: what a resource offers is printed (exit 0); a
// resource its kind cannot reach is exit 1; one not declared, or whose kind
// cannot describe it, a usage error.
func TestDescribeExitCodes(t *testing.T) {
	desc := app.Description{Name: "x", Resources: []kind.Resource{{Name: "fs", Kind: tools{Up: true}}, {Name: "down", Kind: tools{}}, {Name: "quiet", Kind: mute{}}}}
	for _, tt := range []struct {
		name string
		code int
		want string
	}{
		{"fs", ExitOK, "fs: read_file, list_dir\n"},
		{"down", ExitInvalid, "connection refused"},
		{"quiet", ExitUsage, "cannot describe"},
		{"nope", ExitUsage, `no servers resource "nope"`},
	} {
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetContext(t.Context())
		err := describeResource(cmd, &streams{out: &out, err: io.Discard}, desc, "servers", tt.name)
		code := ExitOK
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if got := out.String() + fmt.Sprint(err); code != tt.code || !strings.Contains(got, tt.want) {
			t.Errorf("describe %s: exit %d, %q; want exit %d and %q", tt.name, code, got, tt.code, tt.want)
		}
	}
}

// TestDescribeCommand runs the command on an application without
// resources, and with a wrong number of arguments.
func TestDescribeCommand(t *testing.T) {
	t.Chdir("../..")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"describe", "testdata/cases/minimal/app.cue", "mcpServers", "fs"}, "minimal declares no resources"},
		{[]string{"describe", "testdata/cases/minimal/app.cue"}, "usage: aidgen describe FILE KIND NAME"},
		{[]string{"describe", "testdata/cases/unknown-alias/app.cue", "mcpServers", "fs"}, "not a valid application"},
	} {
		var out, errb bytes.Buffer
		if code := Main(tt.args, strings.NewReader(""), &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tt.args, code, errb.String(), ExitUsage, tt.want)
		}
	}
}
