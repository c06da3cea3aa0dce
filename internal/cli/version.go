package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	aid "github.com/aidgen/aid"
)

func newVersion(s *streams) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the aid version",
		Example: "  aidgen version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(s.out, "aidgen %s %s/%s %s\n", aid.Version, runtime.GOOS, runtime.GOARCH, runtime.Version())
			return nil
		},
	}
}
