package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/kind"
)

func newMCP(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Work with the application's MCP servers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErr(errors.New("mcp needs a subcommand; usage: aidgen mcp login [FILE] NAME"))
		},
	}
	cmd.AddCommand(newMCPLogin(s))
	return cmd
}

func newMCPLogin(s *streams) *cobra.Command {
	var tags []string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "login [FILE] NAME",
		Short: "Sign in to an MCP server that declares oauth.authorizationCode",
		Long: `Login signs in to the MCP server NAME of the application (FILE, app.cue
by default) once, with the OAuth 2.1 authorization-code flow and PKCE (S256):
it prints a URL to open in a browser, listens on the loopback redirect the
server declares (redirectPort or redirectURL; any free port by default),
checks that the redirect carries the state it sent, exchanges the code, and
stores the tokens encrypted (AES-256-GCM) in the state directory:
$` + kind.EnvStateDir + `/` + mcp.TokenDirName + `, else $XDG_STATE_HOME/aid/` + mcp.TokenDirName + `
(~/.local/state/aid/` + mcp.TokenDirName + `). The key is read from the variable the
server's tokenKeyEnv names, or from a key file created with mode 0600 beside
the tokens. A service, aidgen run and aidgen eval read the tokens from there
and refresh them before they expire; give a service the same ` + kind.EnvStateDir + `
(and the key) as the login.

Exit status: 0 signed in, 1 the sign-in failed (refused, a forged redirect,
no redirect before --timeout), 2 usage or configuration error (an invalid
file, no such server, a server without oauth.authorizationCode).`,
		Example: `  aidgen mcp login calendar
  aidgen mcp login examples/desk/app.cue calendar`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErr(errors.New("mcp login needs a server name; usage: aidgen mcp login [FILE] NAME"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path, name := "app.cue", args[0]
			if len(args) == 2 {
				path, name = args[0], args[1]
			}
			desc, err := loadDescription(s, path, tags)
			if err != nil {
				return err
			}
			env := kind.Env{Files: kind.DirFiles(desc.Dir), Resources: desc.Resources}
			r, ok := env.Resource(kind.ResourceMCPServers, name)
			if !ok {
				return usageErr(fmt.Errorf("%s declares no MCP server %q in mcpServers", path, name))
			}
			server, ok := r.(mcp.Server)
			if !ok || server.OAuth == nil || server.OAuth.AuthorizationCode == nil {
				return usageErr(fmt.Errorf("MCP server %q declares no oauth.authorizationCode: there is nothing to sign in to", name))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			stored, err := server.Login(ctx, env, name, s.out)
			if err != nil {
				return &exitError{code: ExitInvalid, err: err}
			}
			fmt.Fprintf(s.out, "Signed in to MCP server %s; its tokens are stored encrypted in %s\n", name, stored)
			return nil
		},
	}
	tagFlag(cmd, &tags)
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the browser's redirect")
	return cmd
}
