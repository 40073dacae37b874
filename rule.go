package syncmedic

import (
	"fmt"
	"sort"
	"time"
)

// RuleID identifies a rule of the failure catalog. The IDs are part of the public interface (policy files, metrics
// labels, docs/rules.md anchors) and never change.
type RuleID string

// The failure catalog (DESIGN.md, "Failure catalog").
const (
	RuleHookFinalizerStuck       RuleID = "argocd/hook-finalizer-stuck"
	RuleHookCompletionMissed     RuleID = "argocd/hook-completion-missed"
	RuleHookImmutable            RuleID = "argocd/hook-immutable"
	RuleOperationStuck           RuleID = "argocd/operation-stuck"
	RuleControllerNotProcessing  RuleID = "argocd/controller-not-processing"
	RuleAppDeletionStuck         RuleID = "argocd/app-deletion-stuck"
	RuleHookNotDeleted           RuleID = "argocd/hook-not-deleted"
	RuleWaitingForHealth         RuleID = "argocd/waiting-for-health"
	RuleAutoSyncNotRetried       RuleID = "argocd/auto-sync-not-retried"
	RuleOperationOrphaned        RuleID = "argocd/operation-orphaned"
	RuleRollingSyncStalled       RuleID = "argocd/rollingsync-stalled"
	RuleWebhookBackendMissing    RuleID = "kube/webhook-backend-missing"
	RuleWebhookNamespaceOwned    RuleID = "kube/webhook-namespace-owned"
	RuleStuckTerminating         RuleID = "kube/stuck-terminating"
	RuleArtifactGCFinalizerStuck RuleID = "workflows/artifactgc-finalizer-stuck"
	RuleHelmReleaseStaleStatus   RuleID = "flux/helmrelease-stale-status"
	RuleDependencyNotReadyFalse  RuleID = "flux/dependency-not-ready-false"
	RuleRetriesExhausted         RuleID = "flux/retries-exhausted"
	RuleDeprecatedStoredVersion  RuleID = "flux/deprecated-stored-version"
	RuleReleaseDeletionStuck     RuleID = "flux/helmrelease-deletion-stuck"
	RuleReadyUnknownStuck        RuleID = "flux/helmrelease-ready-unknown"

	RuleKustomizationDependencyNotReady RuleID = "flux/kustomization-dependency-not-ready"
	RuleKustomizationHealthCheckStuck   RuleID = "flux/kustomization-health-check-stuck"
	RuleKustomizationDeletionStuck      RuleID = "flux/kustomization-deletion-stuck"
	RuleKustomizationStaleRevision      RuleID = "flux/kustomization-stale-revision"
	RuleReconcileRequestNotHandled      RuleID = "flux/reconcile-request-not-handled"
	RuleKustomizationImmutableField     RuleID = "flux/kustomization-immutable-field"
)

// Rule is a catalog entry: what a rule means and how it behaves by default.
type Rule struct {
	ID RuleID `json:"id"`
	// Title is a short noun phrase ("Hook finalizer never removed").
	Title string `json:"title"`
	// Meaning is one or two sentences for a person who has never heard of the rule.
	Meaning  string   `json:"meaning"`
	Severity Severity `json:"severity"`
	// Threshold is the default age after which the condition counts as stuck (zero: immediately).
	Threshold time.Duration `json:"threshold"`
	// Actions are the remedies the rule may propose, in the order they are tried.
	Actions []ActionID `json:"actions,omitempty"`
	// Automatic says whether syncmedic may apply the remedy unattended when the policy sets the rule to auto.
	Automatic Automatic `json:"automatic"`
}

// Automatic says when a rule's remedy may run unattended.
type Automatic string

// How far a rule's remedy may run unattended (with the policy's mode auto).
const (
	// AutoSafe: the remedy runs when the policy says auto.
	AutoSafe Automatic = "yes"
	// AutoWithRerunHooks: the remedy starts a new Argo CD sync, which runs every hook again; it runs only where the
	// policy also sets rerunHooks: true.
	AutoWithRerunHooks Automatic = "only with rerunHooks: true"
	// AutoNever: a remedy is proposed with its commands, never applied unattended.
	AutoNever Automatic = "no: proposed only"
	// AutoNone: the rule notifies; the finding carries the commands for a person.
	AutoNone Automatic = "no remedy: notify"
)

// DocsURL returns the rule's section in docs/rules.md.
func (r Rule) DocsURL() string { return DocsBaseURL + "#" + r.Anchor() }

// Anchor returns the Markdown heading anchor of the rule in docs/rules.md (the ID without punctuation).
func (r Rule) Anchor() string {
	b := make([]byte, 0, len(r.ID))
	for _, c := range []byte(r.ID) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
			b = append(b, c)
		}
	}
	return string(b)
}

// DocsBaseURL is where docs/rules.md is published.
const DocsBaseURL = "https://github.com/syncmedic/syncmedic/blob/main/docs/rules.md"

var catalog = map[RuleID]Rule{
	RuleHookFinalizerStuck: {
		ID: RuleHookFinalizerStuck, Automatic: AutoSafe, Title: "Argo CD hook finalizer never removed",
		Meaning:  "A hook object carries argocd.argoproj.io/hook-finalizer and no Argo CD controller will remove it: it is stuck terminating, or it blocks the next hook of the same name.",
		Severity: SeverityCritical, Threshold: 2 * time.Minute,
		Actions: []ActionID{ActionRemoveHookFinalizer},
	},
	RuleHookCompletionMissed: {
		ID: RuleHookCompletionMissed, Automatic: AutoWithRerunHooks, Title: "Argo CD missed a finished hook",
		Meaning:  "The sync operation still waits for a hook that has already finished: the hook completed before Argo CD looked (the fast-Job race).",
		Severity: SeverityCritical, Threshold: 5 * time.Minute,
		Actions: []ActionID{ActionTerminateAndResync},
	},
	RuleHookImmutable: {
		ID: RuleHookImmutable, Automatic: AutoWithRerunHooks, Title: "Hook cannot be replaced: field is immutable",
		Meaning:  "The sync failed with \"field is immutable\" because the previous hook object of the same name still exists, held by a finalizer or stuck deleting.",
		Severity: SeverityCritical, Threshold: 0,
		Actions: []ActionID{ActionRemoveHookFinalizer, ActionTerminateAndResync},
	},
	RuleOperationStuck: {
		ID: RuleOperationStuck, Automatic: AutoNever, Title: "Argo CD operation stuck",
		Meaning:  "A sync operation has been Running or Terminating past the threshold with no change in its state.",
		Severity: SeverityWarning, Threshold: 30 * time.Minute,
		Actions: []ActionID{ActionTerminateAndResync},
	},
	RuleControllerNotProcessing: {
		ID: RuleControllerNotProcessing, Automatic: AutoNone, Title: "Argo CD application-controller not processing the app",
		Meaning:  "An operation is in progress but the application-controller has not reconciled the application (status.reconciledAt) for several reconciliation periods: it is down, restarting, or the replica owning the app's shard is gone. Nothing is terminated meanwhile.",
		Severity: SeverityCritical, Threshold: 10 * time.Minute,
	},
	RuleAppDeletionStuck: {
		ID: RuleAppDeletionStuck, Automatic: AutoNone, Title: "Argo CD application deletion stuck",
		Meaning:  "An Application was deleted but Argo CD's resources or post-delete finalizer keeps it: a resource of the app stuck terminating, a destination cluster Argo CD cannot reach, or PostDelete hooks that never finished.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
	},
	RuleHookNotDeleted: {
		ID: RuleHookNotDeleted, Automatic: AutoNone, Title: "Old hook never deleted before its re-creation",
		Meaning:  "The sync waits for the deletion of the previous hook object (BeforeHookCreation), but that object is not being deleted at all, or another controller's finalizer holds it.",
		Severity: SeverityCritical, Threshold: 2 * time.Minute,
	},
	RuleWaitingForHealth: {
		ID: RuleWaitingForHealth, Automatic: AutoNone, Title: "Argo CD sync waiting for a resource that never becomes healthy",
		Meaning:  "The sync operation stays Running on \"waiting for healthy state of\" a resource whose health is not Healthy past the threshold (argo-cd #17314): it waits until the resource becomes Healthy or Degraded, and Argo CD refuses every new sync meanwhile.",
		Severity: SeverityWarning, Threshold: 10 * time.Minute,
	},
	RuleAutoSyncNotRetried: {
		ID: RuleAutoSyncNotRetried, Automatic: AutoNone, Title: "Failed automated sync never retried",
		Meaning:  "The last sync to the application's target revision failed, and Argo CD's automated sync will not try that revision again (\"Failed last sync attempt to\", argo-cd #18442, #23591): the application stays OutOfSync until a new commit or a manual sync.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
	},
	RuleOperationOrphaned: {
		ID: RuleOperationOrphaned, Automatic: AutoWithRerunHooks, Title: "Argo CD operation state Running with no operation",
		Meaning:  "The application's status.operationState says Running (or Terminating) while its .operation is empty (argo-cd #17155, #18613, #23765): the controller no longer processes it, the UI shows Syncing forever and Terminate answers \"No operation is in progress\"; a new sync replaces it.",
		Severity: SeverityWarning, Threshold: 10 * time.Minute,
		Actions: []ActionID{ActionResyncOrphaned},
	},
	RuleRollingSyncStalled: {
		ID: RuleRollingSyncStalled, Automatic: AutoNone, Title: "ApplicationSet RollingSync stalled",
		Meaning:  "A step of an ApplicationSet's RollingSync has had applications Pending or Progressing past the threshold that are not Healthy and Synced (a failed sync, a Degraded resource; argo-cd #19771): the ApplicationSet controller neither retries nor repairs them, and starts no later step until they are Healthy and Synced.",
		Severity: SeverityWarning, Threshold: 30 * time.Minute,
	},
	RuleWebhookBackendMissing: {
		ID: RuleWebhookBackendMissing, Automatic: AutoNone, Title: "Admission webhook backend missing",
		Meaning:  "A webhook configuration with failurePolicy Fail points at a Service that is gone or has no ready endpoints: every write it matches is rejected.",
		Severity: SeverityCritical, Threshold: time.Minute,
	},
	RuleWebhookNamespaceOwned: {
		ID: RuleWebhookNamespaceOwned, Automatic: AutoNone, Title: "Webhook configuration owned by a Namespace",
		Meaning:  "A webhook configuration has a controller ownerReference to a Namespace (Knative ≤1.15): Argo CD will never prune it, so deleting the app leaves a webhook without a backend.",
		Severity: SeverityWarning, Threshold: 0,
	},
	RuleStuckTerminating: {
		ID: RuleStuckTerminating, Automatic: AutoNone, Title: "Object stuck terminating",
		Meaning:  "An object was deleted but finalizers keep it alive past the threshold.",
		Severity: SeverityWarning, Threshold: 2 * time.Minute,
	},
	RuleArtifactGCFinalizerStuck: {
		ID: RuleArtifactGCFinalizerStuck, Automatic: AutoNever, Title: "Argo Workflow held by the artifact-gc finalizer",
		Meaning:  "A failed Workflow being deleted keeps workflows.argoproj.io/artifact-gc although it has no output artifacts to collect (argo-workflows #13499).",
		Severity: SeverityWarning, Threshold: 2 * time.Minute,
		Actions: []ActionID{ActionForceFinalizerRemoval},
	},
	RuleHelmReleaseStaleStatus: {
		ID: RuleHelmReleaseStaleStatus, Automatic: AutoSafe, Title: "HelmRelease status written by an old controller",
		Meaning:  "The HelmRelease status was written by a helm-controller older than v0.37 (Flux 2.2) and the current controller has not rewritten it.",
		Severity: SeverityWarning, Threshold: 10 * time.Minute,
		Actions: []ActionID{ActionFluxReconcile, ActionFluxForceReconcile},
	},
	RuleDependencyNotReadyFalse: {
		ID: RuleDependencyNotReadyFalse, Automatic: AutoSafe, Title: "HelmRelease says a Ready dependency is not ready",
		Meaning:  "The HelmRelease is Ready=False with reason DependencyNotReady while every dependsOn HelmRelease is Ready at its current generation.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
		Actions: []ActionID{ActionFluxReconcile},
	},
	RuleRetriesExhausted: {
		ID: RuleRetriesExhausted, Automatic: AutoNever, Title: "HelmRelease retries exhausted",
		Meaning:  "The HelmRelease is Stalled because install or upgrade retries are exhausted; helm-controller will not try again until reset.",
		Severity: SeverityCritical, Threshold: 0,
		Actions: []ActionID{ActionFluxResetReconcile},
	},
	RuleReleaseDeletionStuck: {
		ID: RuleReleaseDeletionStuck, Automatic: AutoNone, Title: "HelmRelease deletion stuck",
		Meaning:  "A HelmRelease was deleted but helm-controller's finalizer keeps it: the uninstall fails, or no helm-controller is handling it.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
	},
	RuleReadyUnknownStuck: {
		ID: RuleReadyUnknownStuck, Automatic: AutoSafe, Title: "HelmRelease in progress forever",
		Meaning:  "The HelmRelease's Ready condition has said Unknown (\"Running 'install' action\", \"reconciliation in progress\") for longer than the action's timeout plus the threshold (helm-controller #1101, #1409): no helm-controller is finishing the action. Helm's storage shows what was really done.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
		Actions: []ActionID{ActionFluxReconcile},
	},
	RuleKustomizationDependencyNotReady: {
		ID: RuleKustomizationDependencyNotReady, Automatic: AutoSafe, Title: "Kustomization says a Ready dependency is not ready",
		Meaning:  "The Kustomization is Ready=False with reason DependencyNotReady although every dependsOn Kustomization has been Ready (at its current generation and the source's revision) for longer than kustomize-controller's dependency re-check (30s) plus the threshold.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
		Actions: []ActionID{ActionFluxReconcileKustomization},
	},
	RuleKustomizationHealthCheckStuck: {
		ID: RuleKustomizationHealthCheckStuck, Automatic: AutoSafe, Title: "Kustomization health check in progress forever",
		Meaning:  "The Kustomization's Ready condition has said Unknown (\"Reconciliation in progress\", health checks running) for longer than spec.timeout plus the threshold, although kustomize-controller ends every health check by spec.timeout; the finding names the health-checked objects that are not ready.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
		Actions: []ActionID{ActionFluxReconcileKustomization},
	},
	RuleKustomizationDeletionStuck: {
		ID: RuleKustomizationDeletionStuck, Automatic: AutoNone, Title: "Kustomization deletion stuck",
		Meaning:  "A Kustomization was deleted but kustomize-controller's finalizer keeps it, typically because pruning its inventory fails (\"no matches for kind\" after a CRD was removed); v1.7.3 only records the Warning event \"pruning for deleted resource failed\".",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
	},
	RuleKustomizationStaleRevision: {
		ID: RuleKustomizationStaleRevision, Automatic: AutoSafe, Title: "Kustomization has not applied its source's revision",
		Meaning:  "The Kustomization's source has served a newer artifact than status.lastAppliedRevision for longer than spec.interval plus the threshold while the Kustomization is not suspended. A reconcile request is proposed only when the controller has not tried that revision; a failed apply is notified.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
		Actions: []ActionID{ActionFluxReconcileKustomization},
	},
	RuleKustomizationImmutableField: {
		ID: RuleKustomizationImmutableField, Automatic: AutoNone, Title: "Kustomization apply refused: field is immutable",
		Meaning:  "The Kustomization has been Ready=False for longer than the threshold because the apiserver refuses to change an immutable field of an object it applies (a selector, a Job's template, a Service's clusterIP) and spec.force is off: kustomize-controller fails the same way on every retry until the change is reverted or the object recreated.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
	},
	RuleReconcileRequestNotHandled: {
		ID: RuleReconcileRequestNotHandled, Automatic: AutoNone, Title: "Flux reconcile request never handled",
		Meaning:  "A HelmRelease's or Kustomization's reconcile.fluxcd.io/requestedAt has differed from status.lastHandledReconcileAt for longer than the object's timeout (twice a HelmRelease's action timeout) plus the threshold. The controllers mark a request handled when any reconcile ends, so none is reconciling the object: it is not running, its queue is stalled, or the object's sharding.fluxcd.io/key label is one no controller selects.",
		Severity: SeverityWarning, Threshold: 5 * time.Minute,
	},
	RuleDeprecatedStoredVersion: {
		ID: RuleDeprecatedStoredVersion, Automatic: AutoNone, Title: "HelmRelease CRD still stores a deprecated version",
		Meaning:  "The HelmRelease CRD's status.storedVersions still lists v2beta1 or v2beta2; Flux 2.7 removes v2beta1 and the upgrade fails until the objects are migrated.",
		Severity: SeverityWarning, Threshold: 0,
	},
}

// Rules returns the whole catalog, sorted by ID.
func Rules() []Rule {
	out := make([]Rule, 0, len(catalog))
	for _, r := range catalog {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// LookupRule returns the catalog entry for id.
func LookupRule(id RuleID) (Rule, bool) {
	r, ok := catalog[id]
	return r, ok
}

// ParseRuleID validates a rule ID given by a user (a flag or a policy file).
func ParseRuleID(s string) (RuleID, error) {
	id := RuleID(s)
	if _, ok := catalog[id]; !ok {
		return "", fmt.Errorf("unknown rule %q: see `syncmedic rules` or docs/rules.md for the catalog", s)
	}
	return id, nil
}

// NewFinding starts a finding for rule id about o with the catalog's severity and a fingerprint.
func NewFinding(id RuleID, o ObjectRef, summary string) Finding {
	r, ok := catalog[id]
	if !ok {
		panic(fmt.Sprintf("syncmedic: rule %q is not in the catalog", id))
	}
	return Finding{Rule: id, Severity: r.Severity, Object: o, Summary: summary, Fingerprint: Fingerprint(id, o)}
}
