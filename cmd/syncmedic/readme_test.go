package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// TestReadmeNamesEveryFlag keeps the README true: every flag of every command is documented there.
func TestReadmeNamesEveryFlag(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" {
				return
			}
			t.Run(c.CommandPath()+" --"+f.Name+" is in the README", func(t *testing.T) {
				require.True(t, strings.Contains(string(readme), "--"+f.Name),
					"README.md does not mention --%s of `%s`: document it", f.Name, c.CommandPath())
			})
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCommand())
}
