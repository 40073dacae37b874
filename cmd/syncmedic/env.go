package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envName is the environment variable that sets a flag: SYNCMEDIC_ and the flag name upper-cased with _ for -.
func envName(flag string) string {
	return "SYNCMEDIC_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// bindEnv sets every flag of cmd not given on the command line from its environment variable, and mentions the
// variable in the flag's help. Call it from PreRunE.
func bindEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if f.Value.Type() == "stringSlice" || f.Value.Type() == "stringArray" {
			for _, part := range strings.Split(v, ",") {
				if e := f.Value.Set(strings.TrimSpace(part)); e != nil {
					err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
					return
				}
			}
			return
		}
		if e := cmd.Flags().Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %w", envName(f.Name), v, e)
		}
	})
	return err
}

// documentEnv appends "[$SYNCMEDIC_X]" to each flag's usage so --help shows the variable.
func documentEnv(cmd *cobra.Command) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" && !strings.Contains(f.Usage, "$SYNCMEDIC_") {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
}
