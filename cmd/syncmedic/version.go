package main

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/syncmedic/syncmedic"
)

func init() { subcommands = append(subcommands, newVersionCommand) }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the syncmedic version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "syncmedic %s (%s, %s/%s)\n", syncmedic.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}
