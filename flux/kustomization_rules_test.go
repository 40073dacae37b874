package flux

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
)

const gitRev = "main@sha1:4f1c2d3e"

func kustomization(name string, conds ...metav1.Condition) *Kustomization {
	k := &Kustomization{}
	k.Name, k.Namespace, k.Generation = name, "flux-system", 2
	k.Spec.Interval = metav1.Duration{Duration: 10 * time.Minute}
	k.Spec.SourceRef = SourceReference{Kind: "GitRepository", Name: "flux-system"}
	k.Status.ObservedGeneration = 2
	k.Status.Conditions = conds
	k.Status.LastAppliedRevision = gitRev
	return k
}

func TestEvaluateKustomization(t *testing.T) {
	th := DefaultThresholds()
	source := SourceArtifact{Kind: "GitRepository", Revision: gitRev, LastUpdateTime: now.Add(-time.Hour)}
	infra := func(readyAge time.Duration) *Kustomization {
		return kustomization("infra", cond(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Applied revision: "+gitRev, readyAge))
	}
	apps := func() *Kustomization {
		k := kustomization("apps", cond(meta.ReadyCondition, "False", meta.DependencyNotReadyReason, "dependency 'flux-system/infra' is not ready", time.Hour))
		k.Spec.DependsOn = []KustomizationDependency{{Name: "infra"}}
		return k
	}
	deps := func(d *Kustomization) map[types.NamespacedName]*Kustomization {
		return map[types.NamespacedName]*Kustomization{{Namespace: "flux-system", Name: "infra"}: d}
	}
	inProgress := func(age time.Duration) *Kustomization {
		k := kustomization("web", cond(meta.ReadyCondition, "Unknown", meta.ProgressingReason, "Reconciliation in progress", age),
			cond(meta.HealthyCondition, "Unknown", meta.ProgressingReason, "Running health checks for revision "+gitRev+" with a timeout of 1m0s", age))
		k.Spec.Timeout = &metav1.Duration{Duration: time.Minute}
		return k
	}
	deleting := func(age time.Duration) *Kustomization {
		k := infra(time.Hour)
		k.Finalizers = []string{KustomizationFinalizer}
		k.Spec.Prune = true
		k.DeletionTimestamp = metav1Ago(age)
		return k
	}
	pruneFailed := []KubeEvent{{Type: "Warning", Reason: "error", Message: PruneFailedMessage, Count: 7, Last: now.Add(-time.Minute)}}
	tests := []struct {
		name        string
		obs         KustomizationObservation
		wantRule    syncmedic.RuleID
		wantSummary string
		wantAction  syncmedic.ActionID
	}{
		{
			name:        "DependencyNotReady while the dependency has been Ready at the source's revision for long is reported",
			obs:         KustomizationObservation{Kustomization: apps(), Dependencies: deps(infra(10 * time.Minute)), DependenciesKnown: true, Source: source, SourceKnown: true},
			wantRule:    syncmedic.RuleKustomizationDependencyNotReady,
			wantSummary: "Kustomization flux-system/apps says a dependency is not ready, but every dependency has been Ready for 10m (kustomize-controller re-checks every 30s)",
			wantAction:  syncmedic.ActionFluxReconcileKustomization,
		},
		{
			name: "near miss: a bootstrap chain whose dependency turned Ready within the re-check plus threshold",
			obs:  KustomizationObservation{Kustomization: apps(), Dependencies: deps(infra(time.Minute)), DependenciesKnown: true, Source: source, SourceKnown: true},
		},
		{
			name: "near miss: a dependency on the same source that has not applied its revision is rightly not ready",
			obs: KustomizationObservation{Kustomization: apps(), Dependencies: deps(infra(time.Hour)), DependenciesKnown: true,
				Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}, SourceKnown: true},
		},
		{
			name: "near miss: a dependency with a readyExpr is judged by CEL, not by its Ready condition",
			obs: func() KustomizationObservation {
				k := apps()
				k.Spec.DependsOn[0].ReadyExpr = "dep.status.x == 'y'"
				return KustomizationObservation{Kustomization: k, Dependencies: deps(infra(time.Hour)), DependenciesKnown: true, Source: source, SourceKnown: true}
			}(),
		},
		{
			name:        "Ready=Unknown past spec.timeout plus the threshold is reported with the object that holds it",
			obs:         KustomizationObservation{Kustomization: inProgress(10 * time.Minute), HealthKnown: true, NotReady: []HeldBy{{Ref: "Deployment/web/frontend", Status: "0 of 2 replicas available"}}},
			wantRule:    syncmedic.RuleKustomizationHealthCheckStuck,
			wantSummary: "Kustomization flux-system/web has been in progress for 10m, longer than its timeout 1m0s; held by Deployment/web/frontend",
			wantAction:  syncmedic.ActionFluxReconcileKustomization,
		},
		{
			name: "near miss: a health check still within spec.timeout plus the threshold",
			obs:  KustomizationObservation{Kustomization: inProgress(5 * time.Minute)},
		},
		{
			name:        "a deletion held by the finalizer while the prune fails is reported from the Warning event",
			obs:         KustomizationObservation{Kustomization: deleting(10 * time.Minute), Events: pruneFailed, EventsKnown: true},
			wantRule:    syncmedic.RuleKustomizationDeletionStuck,
			wantSummary: "Kustomization flux-system/infra was deleted 10m ago and kustomize-controller's finalizer still holds it: the prune of its inventory fails",
		},
		{
			name: "near miss: a deletion within the threshold",
			obs:  KustomizationObservation{Kustomization: deleting(time.Minute), Events: pruneFailed, EventsKnown: true},
		},
		{
			name: "a source revision not applied past interval plus threshold, never attempted, is reported with a reconcile",
			obs: KustomizationObservation{Kustomization: infra(time.Hour), SourceKnown: true,
				Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-20 * time.Minute)}},
			wantRule:    syncmedic.RuleKustomizationStaleRevision,
			wantSummary: "Kustomization flux-system/infra has not applied GitRepository flux-system/flux-system's revision main@sha1:99, served for 20m",
			wantAction:  syncmedic.ActionFluxReconcileKustomization,
		},
		{
			name: "a source revision attempted and failed is notified, not reconciled",
			obs: func() KustomizationObservation {
				k := kustomization("infra", cond(meta.ReadyCondition, "False", meta.ReconciliationFailedReason, "kustomize build failed", time.Hour))
				k.Status.LastAttemptedRevision = "main@sha1:99"
				return KustomizationObservation{Kustomization: k, SourceKnown: true,
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-20 * time.Minute)}}
			}(),
			wantRule:    syncmedic.RuleKustomizationStaleRevision,
			wantSummary: "Kustomization flux-system/infra has not applied GitRepository flux-system/flux-system's revision main@sha1:99, served for 20m: its apply of that revision failed",
		},
		{
			name: "near miss: a new revision within interval plus threshold",
			obs: KustomizationObservation{Kustomization: infra(time.Hour), SourceKnown: true,
				Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-10 * time.Minute)}},
		},
		{
			// Failed before: a Kustomization created after its source's artifact was reported at once (seen on the real
			// kustomize-controller when the source had served its artifact for longer than interval plus threshold).
			name: "near miss: a Kustomization created after the artifact, within interval plus threshold of its creation",
			obs: func() KustomizationObservation {
				k := infra(time.Hour)
				k.CreationTimestamp = *metav1Ago(time.Minute)
				k.Status = KustomizationStatus{}
				return KustomizationObservation{Kustomization: k, SourceKnown: true, GenerationSeen: now.Add(-time.Minute),
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}}
			}(),
		},
		{
			name: "a Kustomization created after the artifact, past interval plus threshold of its creation, is reported",
			obs: func() KustomizationObservation {
				k := infra(time.Hour)
				k.CreationTimestamp = *metav1Ago(20 * time.Minute)
				return KustomizationObservation{Kustomization: k, SourceKnown: true,
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}}
			}(),
			wantRule:    syncmedic.RuleKustomizationStaleRevision,
			wantSummary: "Kustomization flux-system/infra has not applied GitRepository flux-system/flux-system's revision main@sha1:99, served for 20m",
			wantAction:  syncmedic.ActionFluxReconcileKustomization,
		},
		{
			// Failed before: resumed from suspend, its new generation not yet run, it was reported at once.
			name: "near miss: a spec not yet run to success (resumed from suspend) within interval plus threshold of when it was seen",
			obs: func() KustomizationObservation {
				k := infra(time.Hour)
				k.Generation = 3
				return KustomizationObservation{Kustomization: k, SourceKnown: true, GenerationSeen: now.Add(-time.Second),
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}}
			}(),
		},
		{
			name: "a spec not yet run to success, past interval plus threshold of when it was seen, is reported from then",
			obs: func() KustomizationObservation {
				k := infra(time.Hour)
				k.Generation = 3
				return KustomizationObservation{Kustomization: k, SourceKnown: true, GenerationSeen: now.Add(-15 * time.Minute),
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}}
			}(),
			wantRule:    syncmedic.RuleKustomizationStaleRevision,
			wantSummary: "Kustomization flux-system/infra has not applied GitRepository flux-system/flux-system's revision main@sha1:99, served for 15m",
			wantAction:  syncmedic.ActionFluxReconcileKustomization,
		},
		{
			name: "near miss: a spec not yet run to success, with no idea since when (a one-shot scan), is not judged",
			obs: func() KustomizationObservation {
				k := infra(time.Hour)
				k.Generation = 3
				return KustomizationObservation{Kustomization: k, SourceKnown: true,
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}}
			}(),
		},
		{
			name: "near miss: a suspended Kustomization is not stale",
			obs: func() KustomizationObservation {
				k := infra(time.Hour)
				k.Spec.Suspend = true
				return KustomizationObservation{Kustomization: k, SourceKnown: true,
					Source: SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:99", LastUpdateTime: now.Add(-time.Hour)}}
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := EvaluateKustomization(tt.obs, now, th)
			if tt.wantRule == "" {
				require.Empty(t, fs)
				return
			}
			require.Len(t, fs, 1)
			require.Equal(t, tt.wantRule, fs[0].Rule)
			require.Equal(t, tt.wantSummary, fs[0].Summary)
			require.Equal(t, tt.wantAction, fs[0].Remedy.Action)
			require.Equal(t, "Kustomization", fs[0].Object.Kind)
			require.Equal(t, tt.obs.Kustomization.Name, fs[0].Object.Name)
		})
	}
}

func TestKustomizationFromUnstructuredReadsTheV1Fields(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "apps", "namespace": "flux-system", "finalizers": []any{"finalizers.fluxcd.io"}},
		"spec": map[string]any{"interval": "10m", "timeout": "2m", "prune": true, "path": "./apps",
			"dependsOn": []any{map[string]any{"name": "infra"}}, "sourceRef": map[string]any{"kind": "GitRepository", "name": "flux-system"}},
		"status": map[string]any{"lastAppliedRevision": gitRev, "inventory": map[string]any{"entries": []any{map[string]any{"id": "web_frontend_apps_Deployment", "v": "v1"}}}},
	}}
	k, err := KustomizationFromUnstructured(u)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, k.Timeout())
	k.Spec.Timeout = &metav1.Duration{Duration: 20 * time.Second}
	require.Equal(t, 30*time.Second, k.Timeout(), "v1.7.3 never waits less than 30s")
	k.Spec.Timeout = nil
	require.Equal(t, 9*time.Minute+30*time.Second, k.Timeout(), "unset: the interval minus 30s")
	require.Equal(t, 10*time.Minute, k.RetryInterval())
	require.Equal(t, types.NamespacedName{Namespace: "flux-system", Name: "infra"}, k.dependencyKey(k.Spec.DependsOn[0]))
	require.Equal(t, "web_frontend_apps_Deployment", k.Status.Inventory.Entries[0].ID)
	require.True(t, k.hasFinalizer())
}
