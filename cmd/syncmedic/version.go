package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/syncmedic/syncmedic"
)

func init() { subcommands = append(subcommands, newVersionCommand) }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the syncmedic version, commit and build date",
		Long: "Prints the version, the Go version and the platform, then the Git commit and the build date when the binary\n" +
			"carries them (a release is stamped with both; `go build` in a Git checkout records the commit and its time).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), syncmedic.ReadBuildInfo())
			return err
		},
	}
}

// setVersionFlag gives root `--version`, printing what `syncmedic version` prints.
func setVersionFlag(root *cobra.Command) {
	root.Version = syncmedic.Version
	root.SetVersionTemplate(syncmedic.ReadBuildInfo().String())
}
