package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/agents/tools/mcp"
	"github.com/aidgen/aid/runtime/kind"
)

type mcpToolsFlags struct {
	tags []string
	json bool
}

func newMCP(s *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Inspect the application's MCP servers",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newMCPTools(s))
	return cmd
}

func newMCPTools(s *streams) *cobra.Command {
	var f mcpToolsFlags
	cmd := &cobra.Command{
		Use:   "tools FILE SERVER",
		Short: "Print the tools an MCP server offers, with their schemas and annotations",
		Long: `Tools connects to an MCP server of the application's mcpServers as the
service would (the same command, environment, URL and headers), reads its
tools/list and prints each tool: its description, the effects a tool of kind
mcp gets when the IR states none (read only for a tool annotated
readOnlyHint), its annotations, and its input and output schemas. Writing the
IR's tools starts from this.

Exit status: 0 listed, 1 the server could not be reached or listed,
2 usage or configuration error.`,
		Example: `  # The tools of the filesystem server of the mcp-files example.
  aidgen mcp tools examples/mcp-files/app.cue files

  # As JSON, the tools as the server describes them.
  aidgen mcp tools app.cue tracker --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageErr(errors.New("mcp tools needs an application file and a server; usage: aidgen mcp tools FILE SERVER"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMCPTools(cmd.Context(), s, args[0], args[1], f)
		},
	}
	tagFlag(cmd, &f.tags)
	cmd.Flags().BoolVar(&f.json, "json", false, "print the tools as a JSON array, as the server lists them")
	return cmd
}

func runMCPTools(ctx context.Context, s *streams, path, server string, f mcpToolsFlags) error {
	desc, err := loadDescription(s, path, f.tags)
	if err != nil {
		return err
	}
	var servers []string
	var srv mcp.Server
	for _, r := range desc.Resources {
		if c, ok := r.Kind.(mcp.Server); ok {
			servers = append(servers, r.Name)
			if r.Name == server {
				srv = c
			}
		}
	}
	switch {
	case len(servers) == 0:
		return usageErr(fmt.Errorf("%s declares no mcpServers", path))
	case !slices.Contains(servers, server):
		return usageErr(fmt.Errorf("%s has no MCP server %q; its servers: %s", path, server, strings.Join(servers, ", ")))
	}
	env := kind.Env{Files: kind.DirFiles(desc.Dir), Resources: desc.Resources}
	if !f.json {
		if err := srv.Describe(ctx, env, server, s.out); err != nil {
			return &exitError{code: ExitInvalid, err: err}
		}
		return nil
	}
	tools, err := mcp.ListTools(ctx, server, env)
	if err != nil {
		return &exitError{code: ExitInvalid, err: err}
	}
	b, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(s.out, "%s\n", b)
	return nil
}
