package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/syncmedic/syncmedic"
)

func init() { subcommands = append(subcommands, newRulesCommand) }

func newRulesCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "rules",
		Short: "List the failure catalog: every rule with its severity, threshold, remedy and whether it may run unattended",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rules := syncmedic.Rules()
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				b, err := json.MarshalIndent(rules, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(w, string(b))
				return err
			case "yaml":
				b, err := yaml.Marshal(rules)
				if err != nil {
					return err
				}
				_, err = w.Write(b)
				return err
			case "table":
			default:
				return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want table, json or yaml", output)}
			}
			tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
			fmt.Fprintln(tw, "RULE\tSEVERITY\tTHRESHOLD\tREMEDY\tAUTOMATIC\tTITLE")
			for _, r := range rules {
				remedy := "-"
				if len(r.Actions) > 0 {
					parts := make([]string, len(r.Actions))
					for i, a := range r.Actions {
						parts[i] = string(a)
					}
					remedy = strings.Join(parts, ", ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Severity, threshold(r.Threshold), remedy, r.Automatic, r.Title)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			_, err := fmt.Fprintf(w, "\nEach rule is explained in docs/rules.md (%s); the policy sets its mode (off, notify, auto) and threshold.\n", syncmedic.DocsBaseURL)
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table, json or yaml")
	documentEnv(cmd)
	return cmd
}

func threshold(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return syncmedic.HumanDuration(d)
}
