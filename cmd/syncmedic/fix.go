package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
	"github.com/syncmedic/syncmedic/snapshot"
)

func init() { subcommands = append(subcommands, newFixCommand) }

// fixOptions are the flags of `syncmedic fix`.
type fixOptions struct {
	yes                       bool
	offline                   bool
	serveURL, serveTokenFile  string
	stateFile, stateConfigMap string
	thresholds                snapshot.Thresholds
	live                      liveOptions
}

func newFixCommand() *cobra.Command {
	o := &fixOptions{thresholds: snapshot.DefaultThresholds()}
	cmd := &cobra.Command{
		Use:   "fix ID",
		Short: "Apply the remedy of one finding through the tool's API (dry-run unless --yes)",
		Long: "fix applies the remedy of one finding — its fingerprint (the `fix:` line of `syncmedic scan -o yaml`) or an\n" +
			"incident ID (fingerprint-number, as Slack shows it).\n\n" +
			"With --serve-url (and --serve-token-file) it asks serve: serve's plan is printed, and with --yes confirmed, so\n" +
			"serve's kill switch, mode, scope, fixBy (the token's name), rate limit, never-repeat memory and per-application\n" +
			"claim apply, and the attempt is recorded on serve's incident like any fix on demand. Outside the cluster:\n" +
			"kubectl -n syncmedic port-forward svc/syncmedic 9292, then --serve-url http://127.0.0.1:9292.\n\n" +
			"Without --serve-url, fix scans live again and prints the exact steps it would take; --yes then refuses to\n" +
			"apply unless --offline is given, which applies directly through the tool's API and says what it skips.\n" +
			"With serve's incident store (--state-file or --state-configmap) it also knows the findings it saw before, and\n" +
			"says when one is gone.",
		Annotations: map[string]string{exitCodesAnnotation: "  0  done, or the live scan confirms a known finding is gone\n" +
			"  2  bad usage, an ID never seen, no automatic remedy, serve refused the fix (policy, conflict, rate limit),\n" +
			"     or --yes without --serve-url or --offline\n" +
			"  3  the action or a connection failed (serve not reachable included)"},
		Example: `  syncmedic fix 3f9a0c2d1e4b5a67 --argocd-server argocd.example.com:443 --argocd-token-file token
  syncmedic fix 3f9a0c2d1e4b5a67-1773144000 --argocd-server argocd.example.com:443 --argocd-token-file token --yes \
    --kubeconfig ~/.kube/config --state-configmap syncmedic/syncmedic-state`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runFix(cmd, o, args[0]) },
	}
	cmd.Flags().BoolVar(&o.yes, "yes", false, "apply the remedy (without it: dry-run, print the steps only); needs --serve-url or --offline")
	cmd.Flags().StringVar(&o.serveURL, "serve-url", "", "serve's base URL (e.g. http://127.0.0.1:9292 after kubectl -n syncmedic port-forward svc/syncmedic 9292): plan and apply through serve's fix API")
	cmd.Flags().StringVar(&o.serveTokenFile, "serve-token-file", "", "file holding one of serve's API tokens (its --api-token-file); the token's name is the caller fixBy sees")
	cmd.Flags().BoolVar(&o.offline, "offline", false, "with --yes and no --serve-url: apply directly through the tool's API, without serve's kill switch, rate limit, never-repeat memory, claim or incident record")
	cmd.Flags().StringVar(&o.stateFile, "state-file", "", "serve's incident file: tells an ID that is fixed from one never seen")
	cmd.Flags().StringVar(&o.stateConfigMap, "state-configmap", "", "serve's incident ConfigMap (namespace/name, read with --kubeconfig): tells an ID that is fixed from one never seen")
	addThresholdFlags(cmd, &o.thresholds)
	addLiveFlags(cmd, &o.live)
	documentEnv(cmd)
	return cmd
}

func runFix(cmd *cobra.Command, o *fixOptions, arg string) error {
	id, err := parseFixID(arg)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	switch {
	case o.serveURL != "" && o.offline:
		return &exitError{code: exitUsage, err: errors.New("give --serve-url or --offline, not both")}
	case o.serveURL != "":
		return fixThroughServe(cmd.Context(), cmd.OutOrStdout(), o, id)
	case o.yes && !o.offline:
		return &exitError{code: exitUsage, err: errors.New("nothing applied: fix --yes applies through serve, so that its kill switch, rate limit, never-repeat " +
			"memory, per-application claim and incident record apply: give --serve-url and --serve-token-file (outside the cluster: " +
			"kubectl -n syncmedic port-forward svc/syncmedic 9292, then --serve-url http://127.0.0.1:9292); or, when serve is not " +
			"running, --offline to apply directly through the tool's API without them")}
	}
	if err := o.live.resolve(false); err != nil {
		if errors.Is(err, errNothingToScan) {
			err = errors.New("fix needs a live source: give --argocd-server (and --argocd-token-file or ARGOCD_AUTH_TOKEN) or --argocd-context for Argo CD remedies, --kubeconfig or --context (or a kubeconfig in $KUBECONFIG or ~/.kube/config) for Flux and Argo Workflows remedies")
		}
		return &exitError{code: exitUsage, err: err}
	}
	sources, err := liveSources(&o.live, o.thresholds)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	store, err := o.stateStore()
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	var known *incident.Incident
	if store != nil {
		if known, err = storedIncident(cmd.Context(), store, id); err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("reading the incident store: %w", err)}
		}
	}
	found, problems, err := scanFor(cmd.Context(), sources, id.fingerprint)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if found == nil {
		return notFound(cmd.Context(), out, o, id, store != nil, known, problems)
	}
	if id.incident != "" {
		fmt.Fprintf(out, "Incident %s is the finding %s.\n", id.incident, id.fingerprint)
	}
	return applyFix(cmd, o, *found)
}

// scanFor scans every live source once and returns the finding with fingerprint (nil when none has it) and the
// problems the sources met. A source that fails fails the scan (exit 3): what was not read proves nothing.
func scanFor(ctx context.Context, sources []findingSource, fingerprint string) (*syncmedic.Finding, []string, error) {
	now := time.Now()
	var found *syncmedic.Finding
	var problems []string
	for _, s := range sources {
		fs, ps, err := s.scan(ctx, now)
		if err != nil {
			return nil, nil, &exitError{code: exitFailed, err: fmt.Errorf("%s: %w", s.name, err)}
		}
		problems = append(problems, ps...)
		for i := range fs {
			if fs[i].Fingerprint == fingerprint {
				found = &fs[i]
			}
		}
	}
	return found, problems, nil
}

// notFound explains an ID the live scan does not report. It is gone (exit 0) only when the store knows it, the scan
// covered it, and a second scan that judges with no threshold at all (serve's policy may use lower ones than these)
// does not find its condition either; otherwise exit 2, since an ID never seen, a finding the scan did not look for,
// or a condition that still holds, is not fixed.
func notFound(ctx context.Context, out io.Writer, o *fixOptions, id fixID, haveStore bool, known *incident.Incident, problems []string) error {
	if known == nil {
		how := "`syncmedic scan` with the same flags lists the current findings, each with its `fix:` command (-o yaml)"
		if !haveStore {
			return &exitError{code: exitUsage, err: fmt.Errorf("no current finding has ID %s: it was fixed, or never existed; without serve's incident store (--state-file or --state-configmap) fix cannot tell which. %s", id.raw, how)}
		}
		return &exitError{code: exitUsage, err: fmt.Errorf("ID %s was never seen: no current finding has fingerprint %s and no stored incident has this ID. %s; Slack messages show incident IDs", id.raw, id.fingerprint, how)}
	}
	f := known.Finding
	unconfirmed := func(why string) error {
		return &exitError{code: exitUsage, err: fmt.Errorf("incident %s (%s on %s) is not in this live scan, but the scan cannot confirm it is gone: %s", known.ID, f.Rule, f.Object, why)}
	}
	if ok, why := coverage(f, &o.live, problems); !ok {
		return unconfirmed(why)
	}
	sources, err := liveSources(&o.live, floorThresholds())
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	still, more, err := scanFor(ctx, sources, id.fingerprint)
	if err != nil {
		return err
	}
	if ok, why := coverage(f, &o.live, more); !ok {
		return unconfirmed(why)
	}
	if still != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("incident %s is not fixed: its condition still holds (%s), only not yet for as long as the thresholds given require; give the thresholds serve's policy uses (--*-threshold) to fix it now", known.ID, still.Summary)}
	}
	fmt.Fprintf(out, "Already fixed: the live scan no longer finds it (incident %s, %s on %s, %s in the store).\n", known.ID, f.Rule, f.Object, known.State)
	return nil
}

// floorThresholds sets every --*-threshold to 1ns, so a scan reports each condition as soon as it holds.
func floorThresholds() snapshot.Thresholds {
	th := snapshot.DefaultThresholds()
	flags := &cobra.Command{}
	addThresholdFlags(flags, &th)
	flags.Flags().VisitAll(func(f *pflag.Flag) { _ = f.Value.Set("1ns") })
	return th
}

// applyFix applies (or, without --yes, plans) the remedy of a current finding.
func applyFix(cmd *cobra.Command, o *fixOptions, found syncmedic.Finding) error {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "%s %s: %s\n", found.Rule, found.Object, found.Summary)
	if found.Remedy.Action == syncmedic.ActionNone {
		printManual(out, found.Remedy)
		return &exitError{code: exitUsage, err: fmt.Errorf("nothing applied: this %s finding has no action syncmedic can apply (the remedy above says why); run its commands by hand", found.Rule)}
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
	if o.yes {
		fmt.Fprintln(out, offlineSkips)
	}
	outcome, err := r.Remediate(cmd.Context(), found, !o.yes)
	printOutcome(out, outcome, err)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w", found.Remedy.Action, err)}
	}
	if !o.yes {
		fmt.Fprintln(out, "Dry run: nothing was changed. Re-run with --yes to apply.")
	}
	return nil
}

// printOutcome prints what the remedier did or would do; err is its error (a refusal or a failure: nothing or not
// everything was applied).
func printOutcome(w io.Writer, o syncmedic.Outcome, err error) {
	verb := "Applied"
	switch {
	case err != nil && !o.Changed:
		verb = "Not applied:"
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
