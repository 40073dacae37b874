package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/snapshot"
)

func init() { subcommands = append(subcommands, newFixCommand) }

// fixOptions are the flags of `syncmedic fix`.
type fixOptions struct {
	yes        bool
	thresholds snapshot.Thresholds
	live       liveOptions
}

func newFixCommand() *cobra.Command {
	o := &fixOptions{thresholds: snapshot.DefaultThresholds()}
	cmd := &cobra.Command{
		Use:   "fix FINGERPRINT",
		Short: "Apply the remedy of one finding through the tool's API (dry-run unless --yes)",
		Long: "fix scans live again, finds the current finding with FINGERPRINT (see `syncmedic scan -o yaml`), and applies its\n" +
			"remedy through the owning tool's API. Without --yes it only prints the exact steps it would take.\n" +
			"Exit codes: 0 done (or nothing left to fix), 2 bad usage or no automatic remedy, 3 the action failed.",
		Example: `  syncmedic fix 3f9a0c2d1e4b5a67 --argocd-server argocd.example.com:443 --argocd-token-file token
  syncmedic fix 3f9a0c2d1e4b5a67 --argocd-server argocd.example.com:443 --argocd-token-file token --yes`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runFix(cmd, o, args[0]) },
	}
	cmd.Flags().BoolVar(&o.yes, "yes", false, "apply the remedy (without it: dry-run, print the steps only)")
	addThresholdFlags(cmd, &o.thresholds)
	addLiveFlags(cmd, &o.live)
	documentEnv(cmd)
	return cmd
}

func runFix(cmd *cobra.Command, o *fixOptions, fingerprint string) error {
	if !o.live.argocd.enabled() && o.live.kubeconfig == "" {
		return &exitError{code: exitUsage, err: errors.New("fix needs a live source: give --argocd-server (and --argocd-token-file or ARGOCD_AUTH_TOKEN) for Argo CD remedies, --kubeconfig for Flux and Argo Workflows remedies")}
	}
	sources, err := liveSources(&o.live, o.thresholds)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	now := time.Now()
	var found *syncmedic.Finding
	for _, s := range sources {
		fs, _, err := s.scan(cmd.Context(), now)
		if err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w", s.name, err)}
		}
		for i := range fs {
			if fs[i].Fingerprint == fingerprint {
				found = &fs[i]
			}
		}
	}
	out := cmd.OutOrStdout()
	if found == nil {
		fmt.Fprintf(out, "No current finding has fingerprint %s: nothing to fix (it may be fixed already; `syncmedic scan -o yaml` lists the fingerprints).\n", fingerprint)
		return nil
	}
	fmt.Fprintf(out, "%s %s: %s\n", found.Rule, found.Object, found.Summary)
	if found.Remedy.Action == syncmedic.ActionNone {
		printManual(out, found.Remedy)
		return &exitError{code: exitUsage, err: fmt.Errorf("rule %s only notifies: it has no automatic remedy", found.Rule)}
	}
	rems, closeAll, err := fixRemediers(&o.live, slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)))
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	defer closeAll()
	r, ok := rems[found.Remedy.Action]
	if !ok {
		printManual(out, found.Remedy)
		return &exitError{code: exitUsage, err: fmt.Errorf("action %s needs %s", found.Remedy.Action, neededSource(found.Remedy.Action))}
	}
	outcome, err := r.Remediate(cmd.Context(), *found, !o.yes)
	printOutcome(out, outcome)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w", found.Remedy.Action, err)}
	}
	if !o.yes {
		fmt.Fprintln(out, "Dry run: nothing was changed. Re-run with --yes to apply.")
	}
	return nil
}

func printOutcome(w io.Writer, o syncmedic.Outcome) {
	verb := "Applied"
	switch {
	case o.DryRun:
		verb = "Would apply"
	case !o.Changed:
		verb = "Already applied, nothing changed:"
	}
	fmt.Fprintf(w, "%s %s\n", verb, o.Action)
	for i, s := range o.Steps {
		fmt.Fprintf(w, "  %d. %s\n", i+1, s)
	}
}

func printManual(w io.Writer, r syncmedic.Remedy) {
	if r.Description != "" {
		fmt.Fprintln(w, r.Description)
	}
	for _, c := range r.Commands {
		fmt.Fprintln(w, "  "+c)
	}
}
