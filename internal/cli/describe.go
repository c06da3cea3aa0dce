package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/aidgen/aid/runtime/app"
	"github.com/aidgen/aid/runtime/kind"
)

func newDescribe(s *streams) *cobra.Command {
	var tags []string
	cmd := &cobra.Command{
		Use:   "describe FILE KIND NAME",
		Short: "Print what a resource of the application offers",
		Long: `Describe prints what a resource of the application offers, as its kind
describes it: a resource is a named declaration of its own top-level section
(KIND is the section, such as mcpServers) that the elements of another kind
share. For a server of tools, the tools it offers with their input schemas and
annotations, so that writing the application starts from what the server
offers.

It reaches the resource as the application would (its environment, its
files); nothing else of the application is assembled.

Exit status: 0 described, 1 the resource could not be reached, 2 usage or
configuration error (an invalid file, no such resource, a kind that cannot
describe its resources).`,
		Example: `  aidgen describe app.cue mcpServers files`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 3 {
				return usageErr(errors.New("describe needs an application file, a resource kind and a name; usage: aidgen describe FILE KIND NAME"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			desc, err := loadDescription(s, args[0], tags)
			if err != nil {
				return err
			}
			return describeResource(cmd, s, desc, args[1], args[2])
		},
	}
	tagFlag(cmd, &tags)
	return cmd
}

// describeResource prints what the resource offers: a resource its kind
// could not reach is exit 1; one that is not declared, or whose kind cannot
// describe it, a usage error.
func describeResource(cmd *cobra.Command, s *streams, desc app.Description, k, name string) error {
	describable := false
	for _, r := range desc.Resources {
		if r.Kind != nil && r.Kind.ResourceKind() == k && r.Name == name {
			_, describable = r.Kind.(kind.Describer)
		}
	}
	err := app.Describe(cmd.Context(), desc, app.Options{}, k, name, s.out)
	switch {
	case err == nil:
		return nil
	case describable:
		return &exitError{code: ExitInvalid, err: err}
	}
	return usageErr(err)
}
