package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/snapshot"
)

func init() { subcommands = append(subcommands, newScanCommand) }

// scanOptions are the flags of `syncmedic scan`.
type scanOptions struct {
	snapshots  []string
	output     string
	rules      []string
	now        string
	thresholds snapshot.Thresholds
	live       liveOptions
}

// findingSource is one place findings come from (a snapshot, a live Argo CD, a live cluster).
type findingSource struct {
	name string
	// input marks a source whose errors are the user's input (exit 2); other sources' errors are failures (exit 3).
	input bool
	scan  func(ctx context.Context, now time.Time) (findings []syncmedic.Finding, problems []string, err error)
	// read, when set, is filled by scan with what it read ("12 objects: 5 Application, …"), for the report.
	read *string
	// newest, when set, is filled by scan with the newest timestamp of a dump, for the report's OldDump notice.
	newest *time.Time
}

func newScanCommand() *cobra.Command {
	o := &scanOptions{thresholds: snapshot.DefaultThresholds()}
	cmd := &cobra.Command{
		Use:   "scan",
		Short: "Diagnose stuck syncs once, from a dump or a live cluster, and exit 1 if anything is stuck",
		Example: `  # a dump made with kubectl and the argocd CLI
  syncmedic scan --snapshot examples/stuck-cluster
  # only one rule, with the evidence and the exact fix
  syncmedic scan --snapshot dump/ --rule argocd/hook-finalizer-stuck -o yaml
  # a live Argo CD and cluster
  syncmedic scan --argocd-server argocd.example.com --argocd-token-file token --kubeconfig ~/.kube/config
  # the kubeconfig's current context ($KUBECONFIG or ~/.kube/config) and the current context of argocd login
  syncmedic scan
  # another context of each
  syncmedic scan --context prod --argocd-context argocd.prod.example.com`,
		Args: cobra.NoArgs,
		Annotations: map[string]string{exitCodesAnnotation: "  0  nothing is stuck\n" +
			"  1  something is stuck\n" +
			"  2  bad usage or unreadable input (a dump with no Kubernetes object in it)\n" +
			"  3  a live source could not be reached or refused the scan"},
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := bindEnv(cmd); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return runScan(cmd, o) },
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.snapshots, "snapshot", nil, "file or directory of kubectl get -o yaml/json and argocd app get -o json output to diagnose (repeatable)")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table, wide (adds the app, project and evidence columns), json or yaml")
	f.StringArrayVar(&o.rules, "rule", nil, "report only this rule ID (repeatable); see docs/rules.md")
	f.StringVar(&o.now, "now", "", "judge ages at this RFC3339 instant instead of the current time (for old dumps)")
	addThresholdFlags(cmd, &o.thresholds)
	addLiveFlags(cmd, &o.live)
	documentEnv(cmd)
	return cmd
}

func addThresholdFlags(cmd *cobra.Command, th *snapshot.Thresholds) {
	f := cmd.Flags()
	f.DurationVar(&th.ArgoCD.HookFinalizer, "hook-finalizer-threshold", th.ArgoCD.HookFinalizer, "how long a hook may be deleting with argocd.argoproj.io/hook-finalizer before it is stuck")
	f.DurationVar(&th.ArgoCD.HookCompletion, "hook-completion-threshold", th.ArgoCD.HookCompletion, "how long an operation may wait on a hook that already finished")
	f.DurationVar(&th.ArgoCD.OperationStuck, "operation-stuck-threshold", th.ArgoCD.OperationStuck, "how long an operation may stay Running/Terminating with no change")
	f.DurationVar(&th.ArgoCD.ControllerNotProcessing, "controller-not-processing-threshold", th.ArgoCD.ControllerNotProcessing, "how long an operation may be in progress while Argo CD's application-controller has not reconciled its app (status.reconciledAt)")
	f.DurationVar(&th.ArgoCD.AppDeletion, "app-deletion-threshold", th.ArgoCD.AppDeletion, "how long an Application may be deleting, held by Argo CD's finalizers")
	f.DurationVar(&th.ArgoCD.HookDeletion, "hook-deletion-threshold", th.ArgoCD.HookDeletion, "how long an operation may wait for the deletion of an old hook that is not being deleted")
	f.DurationVar(&th.ArgoCD.WaitingForHealth, "waiting-for-health-threshold", th.ArgoCD.WaitingForHealth, "how long an operation may wait for the healthy state of a resource that is not healthy")
	f.DurationVar(&th.ArgoCD.AutoSyncNotRetried, "auto-sync-not-retried-threshold", th.ArgoCD.AutoSyncNotRetried, "how long a failed automated sync may stay unretried before it is reported")
	f.DurationVar(&th.ArgoCD.OperationOrphaned, "operation-orphaned-threshold", th.ArgoCD.OperationOrphaned, "how long an operation state may say Running with no operation behind it")
	f.DurationVar(&th.ArgoCD.RollingSyncStalled, "rollingsync-stalled-threshold", th.ArgoCD.RollingSyncStalled, "how long an ApplicationSet RollingSync step may hold an application that is not Healthy and Synced")
	f.DurationVar(&th.Kube.Terminating, "terminating-threshold", th.Kube.Terminating, "how long an object may be terminating with finalizers left")
	f.DurationVar(&th.Kube.WebhookBackend, "webhook-backend-threshold", th.Kube.WebhookBackend, "how long a webhook's backend may be missing or without ready endpoints")
	f.DurationVar(&th.Kube.ArtifactGC, "artifactgc-threshold", th.Kube.ArtifactGC, "how long a deleted Workflow may wait on the artifact-gc finalizer")
	f.DurationVar(&th.Flux.StaleStatus, "stale-status-threshold", th.Flux.StaleStatus, "how long a HelmRelease may keep a pre-v2beta2 status with an unobserved generation")
	f.DurationVar(&th.Flux.DependencyNotReady, "dependency-not-ready-threshold", th.Flux.DependencyNotReady, "how long a HelmRelease may say DependencyNotReady after its last dependency became Ready")
	f.DurationVar(&th.Flux.ReleaseDeletion, "release-deletion-threshold", th.Flux.ReleaseDeletion, "how long a HelmRelease may be deleting, held by helm-controller's finalizer")
	f.DurationVar(&th.Flux.ReadyUnknown, "ready-unknown-threshold", th.Flux.ReadyUnknown, "how long past its action's timeout a HelmRelease may stay Ready=Unknown (in progress)")
	f.DurationVar(&th.Flux.ReconcileRequest, "reconcile-request-threshold", th.Flux.ReconcileRequest, "how long past the object's timeout (twice a HelmRelease's action timeout) a Flux reconcile request may stay unhandled")
	f.DurationVar(&th.Flux.Kustomization, "kustomization-threshold", th.Flux.Kustomization, "the margin the Kustomization rules add to kustomize-controller's own timing (dependency re-check, spec.timeout, spec.interval) , how long a Kustomization may be deleting, held by its finalizer, and how long its apply may be refused for an immutable field")
}

func runScan(cmd *cobra.Command, o *scanOptions) error {
	now := time.Now()
	if o.now != "" {
		t, err := time.Parse(time.RFC3339, o.now)
		if err != nil {
			return &exitError{code: exitUsage, err: fmt.Errorf("--now %q: want an RFC3339 time such as 2026-03-10T12:00:00Z", o.now)}
		}
		now = t
	}
	want := map[syncmedic.RuleID]bool{}
	for _, r := range o.rules {
		id, err := syncmedic.ParseRuleID(r)
		if err != nil {
			return &exitError{code: exitUsage, err: err}
		}
		want[id] = true
	}
	switch o.output {
	case "table", "wide", "json", "yaml":
	default:
		return &exitError{code: exitUsage, err: fmt.Errorf("-o %q: want table, wide, json or yaml", o.output)}
	}
	if err := o.live.resolve(len(o.snapshots) > 0); err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	sources, err := scanSources(o)
	if err != nil {
		return &exitError{code: exitUsage, err: err}
	}
	report := syncmedic.Report{GeneratedAt: now}
	var newest time.Time
	for _, s := range sources {
		fs, problems, err := s.scan(cmd.Context(), now)
		if err != nil {
			code := exitFailed // a live source that cannot be reached or refuses us
			if s.input {
				code = exitUsage // an unreadable snapshot is an input error
			}
			return &exitError{code: code, err: fmt.Errorf("%s: %w", s.name, err)}
		}
		report.Findings = append(report.Findings, fs...)
		report.Problems = append(report.Problems, problems...)
		if s.read != nil && *s.read != "" {
			report.Read = append(report.Read, s.name+": "+*s.read)
		}
		if s.newest != nil && s.newest.After(newest) {
			newest = *s.newest
		}
	}
	if o.now == "" {
		report.OldDump = syncmedic.NewOldDump(newest, now)
	}
	report.Findings = syncmedic.DropShadowed(report.Findings)
	if len(want) > 0 {
		kept := report.Findings[:0]
		for _, f := range report.Findings {
			if want[f.Rule] {
				kept = append(kept, f)
			}
		}
		report.Findings = kept
	}
	syncmedic.SortFindings(report.Findings)
	if err := syncmedic.WriteReport(cmd.OutOrStdout(), o.output, report); err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if len(report.Findings) > 0 {
		return &exitError{code: exitStuck}
	}
	return nil
}

func scanSources(o *scanOptions) ([]findingSource, error) {
	var out []findingSource
	for _, p := range o.snapshots {
		path := p
		read, newest := new(string), new(time.Time)
		out = append(out, findingSource{name: "snapshot " + path, input: true, read: read, newest: newest, scan: func(_ context.Context, now time.Time) ([]syncmedic.Finding, []string, error) {
			s, err := snapshot.ReadPaths(path)
			if err != nil {
				return nil, nil, err
			}
			if s.Len() == 0 {
				// Never an all-clear for a read that found nothing to judge.
				why := "no Kubernetes object in it"
				if len(s.Problems) > 0 {
					why = fmt.Sprintf("no usable Kubernetes object in it (%d problem(s), first: %s)", len(s.Problems), s.Problems[0])
				}
				return nil, nil, fmt.Errorf("%s: nothing was checked; give files as `kubectl get … -o yaml|json` and `argocd app list -o json` print them (.yaml, .yml, .json; .txt and .log when they hold such a dump)", why)
			}
			*read = s.Summary()
			*newest = s.Newest(now)
			obs := s.Observe()
			var problems []string
			for _, p := range append(s.Problems, obs.Problems...) {
				problems = append(problems, p.String())
			}
			return snapshot.Scan(obs, now, o.thresholds), problems, nil
		}})
	}
	live, err := liveSources(&o.live, o.thresholds)
	if err != nil {
		return nil, err
	}
	return append(out, live...), nil
}
