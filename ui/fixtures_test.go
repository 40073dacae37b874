package ui

import (
	"time"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/incident"
)

// Secrets that live next to incidents in serve and must never appear in an API answer.
const (
	slackToken  = "xoxb-1111-2222-secretslacktoken"
	argocdToken = "eyJhbGciOiJIUzI1NiJ9.argocd-secret-token"
	apiToken    = "api-token-for-tests-0123456789abcdef"
	proxyToken  = "proxy-token-for-tests-0123456789abcdef"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := t0.Add(d); return &t }

// fixtureIncidents are one open Argo CD incident (shop/checkout, with a dry-run attempt), one remediating Flux
// incident (podinfo HelmRelease), one open cluster-check incident about an object checkout tracks (its project and
// app namespace unknown), and one resolved incident of another Argo CD app (billing).
func fixtureIncidents() []incident.Incident {
	hook := syncmedic.Finding{
		Rule: "argocd/hook-finalizer-stuck", Severity: syncmedic.SeverityCritical,
		Object: syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop",
			Name: "migrate", App: "checkout", AppNamespace: "argocd", Project: "payments"},
		Summary: `hook Job shop/migrate is being deleted but keeps argocd.argoproj.io/hook-finalizer, so the sync of "checkout" waits on it`,
		Since:   *at(-25 * time.Minute),
		Evidence: []syncmedic.Evidence{
			{Field: "metadata.deletionTimestamp", Value: "2026-03-10T11:35:00Z", Since: at(-25 * time.Minute)},
			{Field: "metadata.finalizers", Value: "[argocd.argoproj.io/hook-finalizer]"},
			{Field: "status.operationState.message", Value: "waiting for completion of hook batch/Job/migrate"},
		},
		Remedy: syncmedic.Remedy{Action: syncmedic.ActionRemoveHookFinalizer, AutoSafe: true,
			Description: "Remove argocd.argoproj.io/hook-finalizer from the Job through Argo CD PatchResource (test, then remove).",
			Commands:    []string{`kubectl -n shop patch job migrate --type json -p '[{"op":"remove","path":"/metadata/finalizers/0"}]'`},
			Params:      map[string]string{"patch": "internal"}},
		Links:      []syncmedic.Link{{Title: "Argo CD: argocd/checkout", URL: "https://argocd.example.com/applications/argocd/checkout"}},
		Advisories: []string{"Argo CD v3.0.0–v3.0.15 leak hook finalizers; fixed in v3.0.16 (gitops-engine #761)."},
	}.WithFingerprint()
	hr := syncmedic.Finding{
		Rule: "flux/helmrelease-stale-status", Severity: syncmedic.SeverityWarning,
		Object: syncmedic.ObjectRef{Tool: syncmedic.ToolFlux, Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease",
			Namespace: "apps", Name: "podinfo", FluxOwner: "Kustomization/flux-system/apps"},
		Summary:  "HelmRelease apps/podinfo carries a status written by a pre-v2beta2 helm-controller",
		Evidence: []syncmedic.Evidence{{Field: "status.conditions[Ready].message", Value: "Helm upgrade succeeded"}},
		Remedy: syncmedic.Remedy{Action: syncmedic.ActionFluxReconcile, AutoSafe: true, Description: "Request a reconciliation.",
			Commands: []string{"flux reconcile helmrelease podinfo -n apps"}},
	}.WithFingerprint()
	tracked := syncmedic.Finding{
		Rule: "kube/stuck-terminating", Severity: syncmedic.SeverityWarning,
		Object: syncmedic.ObjectRef{Tool: syncmedic.ToolKubernetes, Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop",
			Name: "seed", App: "checkout"},
		Summary: "Job shop/seed has been terminating for 10m, held by example.com/cleanup",
	}.WithFingerprint()
	billing := hook
	billing.Object.Namespace, billing.Object.App, billing.Object.Project = "billing", "billing", "finance"
	billing = billing.WithFingerprint()
	return []incident.Incident{
		{ID: hook.Fingerprint + "-1773144000", Fingerprint: hook.Fingerprint, State: incident.StateFiring, Finding: hook,
			OpenedAt: t0, UpdatedAt: t0.Add(5 * time.Minute), Plan: "policy: notify only (dry-run)",
			Attempts: []incident.Attempt{{At: t0.Add(time.Minute), Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultDryRun,
				Steps: []string{"PatchResource batch/Job shop/migrate: test+remove /metadata/finalizers/0"}, Reason: "policy: notify for this rule"}},
			Notes: map[string]string{"slack.channel": "C123", "slack.ts": "1773144000.000100", "slack.token": slackToken, "argocd.token": argocdToken}},
		{ID: hr.Fingerprint + "-1773144600", Fingerprint: hr.Fingerprint, State: incident.StateRemediating, Finding: hr,
			OpenedAt: t0.Add(10 * time.Minute), UpdatedAt: t0.Add(11 * time.Minute), Auto: true, Plan: "policy: auto",
			Attempts: []incident.Attempt{{At: t0.Add(11 * time.Minute), Action: syncmedic.ActionFluxReconcile, Result: incident.ResultStarted}}},
		{ID: tracked.Fingerprint + "-1773144900", Fingerprint: tracked.Fingerprint, State: incident.StateFiring, Finding: tracked,
			OpenedAt: t0.Add(15 * time.Minute), UpdatedAt: t0.Add(15 * time.Minute)},
		{ID: billing.Fingerprint + "-1773140400", Fingerprint: billing.Fingerprint, State: incident.StateResolved, Finding: billing,
			OpenedAt: t0.Add(-time.Hour), UpdatedAt: t0.Add(-30 * time.Minute), ResolvedAt: at(-30 * time.Minute), Auto: true,
			Attempts: []incident.Attempt{
				{At: t0.Add(-50 * time.Minute), Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultFailed, Error: "PatchResource: rpc error: code = Unavailable"},
				{At: t0.Add(-40 * time.Minute), Action: syncmedic.ActionRemoveHookFinalizer, Result: incident.ResultSucceeded, Changed: true,
					Steps: []string{"PatchResource batch/Job billing/migrate: test+remove /metadata/finalizers/0"}}}},
	}
}
