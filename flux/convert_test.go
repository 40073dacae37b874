package flux

import (
	"encoding/json"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmv2beta1 "github.com/fluxcd/helm-controller/api/v2beta1"
	helmv2beta2 "github.com/fluxcd/helm-controller/api/v2beta2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
)

// decodeAs decodes obj, marshalled as the apiserver returns it at version, the way the watcher's informer does:
// through a scheme in which the v2 types stand for that version.
func decodeAs(t *testing.T, version string, obj any) *helmv2.HelmRelease {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, AddReleaseTypes(s, version))
	data, err := json.Marshal(obj)
	require.NoError(t, err)
	out, gvk, err := serializer.NewCodecFactory(s).UniversalDeserializer().Decode(data, nil, nil)
	require.NoError(t, err)
	require.Equal(t, ReleaseGroupVersion(version).WithKind("HelmRelease"), *gvk)
	hr, ok := out.(*helmv2.HelmRelease)
	require.True(t, ok, "decoded into %T, not the v2 HelmRelease", out)
	return hr
}

// requireSameJSON compares values as the apiserver would store them (times lose their location in JSON).
func requireSameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}

var (
	since  = metav1.NewTime(now.Add(-20 * time.Minute))
	deps   = []meta.NamespacedObjectReference{{Name: "database"}, {Name: "cache", Namespace: "infra"}}
	legacy = metav1.ObjectMeta{Name: "podinfo", Namespace: "apps", Generation: 2, UID: "u-1",
		Labels: map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}}
)

// A status helm-controller v0.36 (Flux 2.1, API v2beta1) wrote: the old Ready message, revisions, no history.
func v2beta1OldStatus() *helmv2beta1.HelmRelease {
	hr := &helmv2beta1.HelmRelease{TypeMeta: metav1.TypeMeta{APIVersion: "helm.toolkit.fluxcd.io/v2beta1", Kind: "HelmRelease"}, ObjectMeta: legacy}
	hr.Spec.ReleaseName, hr.Spec.TargetNamespace, hr.Spec.StorageNamespace = "web", "prod", "prod"
	hr.Spec.DependsOn = deps
	hr.Spec.Chart = &helmv2beta1.HelmChartTemplate{Spec: helmv2beta1.HelmChartTemplateSpec{Chart: "podinfo", ValuesFile: "values-prod.yaml"}}
	hr.Status.ObservedGeneration = 1
	hr.Status.Conditions = []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionTrue, Reason: meta.ReconciliationSucceededReason,
		Message: "Release reconciliation succeeded", LastTransitionTime: since}}
	hr.Status.LastAppliedRevision, hr.Status.LastAttemptedRevision, hr.Status.LastReleaseRevision = "6.5.0", "6.5.0", 4
	hr.Status.StorageNamespace = "prod"
	hr.Status.LastHandledReconcileAt = "2026-03-10T11:00:00Z"
	return hr
}

// What helm-controller v0.37 (Flux 2.2, API v2beta2) writes when install retries run out.
func v2beta2Stalled() *helmv2beta2.HelmRelease {
	hr := &helmv2beta2.HelmRelease{TypeMeta: metav1.TypeMeta{APIVersion: "helm.toolkit.fluxcd.io/v2beta2", Kind: "HelmRelease"}, ObjectMeta: legacy}
	hr.Generation = 1
	hr.Spec.DependsOn = deps
	hr.Status.ObservedGeneration = 1
	hr.Status.Conditions = []metav1.Condition{
		{Type: meta.StalledCondition, Status: metav1.ConditionTrue, Reason: RetriesExceededReason, Message: "Failed to install after 3 attempt(s)", LastTransitionTime: since},
		{Type: meta.ReadyCondition, Status: metav1.ConditionFalse, Reason: "InstallFailed", Message: "Helm install failed for release apps/podinfo", LastTransitionTime: since},
	}
	hr.Status.InstallFailures, hr.Status.Failures = 3, 3
	hr.Status.LastAttemptedRevision = "1.0.0"
	hr.Status.History = helmv2.Snapshots{{Name: "podinfo", Namespace: "apps", Version: 3, Status: "uninstalled", ChartName: "podinfo", ChartVersion: "1.0.0"}}
	hr.Status.LastHandledReconcileAt, hr.Status.LastHandledResetAt = "2026-03-10T11:00:00Z", "2026-03-10T11:00:00Z"
	return hr
}

// What helm-controller v0.37 writes on a dependent whose dependency is not ready.
func v2beta2DependencyNotReady() *helmv2beta2.HelmRelease {
	hr := v2beta2Stalled()
	hr.Status = helmv2beta2.HelmReleaseStatus{ObservedGeneration: 1, Conditions: []metav1.Condition{{Type: meta.ReadyCondition, Status: metav1.ConditionFalse,
		Reason: meta.DependencyNotReadyReason, Message: "dependency 'apps/database' is not ready", LastTransitionTime: since}}}
	return hr
}

func TestReleasesOfOlderAPIVersionsReadAsV2(t *testing.T) {
	ready := func(name, ns string) *helmv2.HelmRelease {
		return release(name, 1, 1, cond(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "ok", 30*time.Minute))
	}
	readyDeps := map[types.NamespacedName]*helmv2.HelmRelease{
		{Namespace: "apps", Name: "database"}: ready("database", "apps"), {Namespace: "infra", Name: "cache"}: ready("cache", "infra"),
	}
	tests := []struct {
		name    string
		version string
		obj     any
		// check compares what the rules read with the source object.
		check func(t *testing.T, hr *helmv2.HelmRelease)
		rule  syncmedic.RuleID
	}{
		{name: "a v2beta1 status an old controller wrote keeps its revisions, has no history, and is reported stale",
			version: "v2beta1", obj: v2beta1OldStatus(), rule: syncmedic.RuleHelmReleaseStaleStatus,
			check: func(t *testing.T, hr *helmv2.HelmRelease) {
				src := v2beta1OldStatus()
				require.Empty(t, hr.Status.History)
				require.Equal(t, src.Status.LastAttemptedRevision, hr.Status.LastAttemptedRevision)
				require.Equal(t, src.Status.LastReleaseRevision, hr.Status.LastReleaseRevision)
				require.Equal(t, src.Status.ObservedGeneration, hr.Status.ObservedGeneration)
				require.Equal(t, src.Status.StorageNamespace, hr.Status.StorageNamespace)
				require.Equal(t, src.Status.LastHandledReconcileAt, hr.Status.LastHandledReconcileAt)
				requireSameJSON(t, src.Status.Conditions, hr.Status.Conditions)
				require.Equal(t, src.Spec.DependsOn, hr.Spec.DependsOn)
				require.Equal(t, src.GetReleaseName(), hr.GetReleaseName())
				require.Equal(t, "prod", hr.Spec.TargetNamespace)
				require.Equal(t, src.Labels, hr.Labels)
				require.Equal(t, "podinfo", hr.Spec.Chart.Spec.Chart)
			}},
		{name: "a v2beta2 release whose retries ran out keeps its Stalled condition, counters and history",
			version: "v2beta2", obj: v2beta2Stalled(), rule: syncmedic.RuleRetriesExhausted,
			check: func(t *testing.T, hr *helmv2.HelmRelease) {
				src := v2beta2Stalled()
				requireSameJSON(t, src.Status.Conditions, hr.Status.Conditions)
				require.Equal(t, src.Status.InstallFailures, hr.Status.InstallFailures)
				require.Equal(t, src.Status.UpgradeFailures, hr.Status.UpgradeFailures)
				requireSameJSON(t, src.Status.History, hr.Status.History)
				require.Equal(t, src.Status.LastHandledResetAt, hr.Status.LastHandledResetAt)
				require.Equal(t, src.Status.LastAttemptedRevision, hr.Status.LastAttemptedRevision)
			}},
		{name: "a v2beta2 dependent waiting on dependencies keeps its dependsOn and is judged against them",
			version: "v2beta2", obj: v2beta2DependencyNotReady(), rule: syncmedic.RuleDependencyNotReadyFalse,
			check: func(t *testing.T, hr *helmv2.HelmRelease) {
				require.Equal(t, deps, hr.Spec.DependsOn)
				require.Equal(t, meta.DependencyNotReadyReason, hr.Status.Conditions[0].Reason)
				require.False(t, hr.Spec.Suspend)
			}},
		{name: "a v2beta1 object read as v2beta2 (the same stored object, CRD conversion None) reads the same",
			version: "v2beta2", obj: func() any { o := v2beta1OldStatus(); o.APIVersion = "helm.toolkit.fluxcd.io/v2beta2"; return o }(),
			rule: syncmedic.RuleHelmReleaseStaleStatus,
			check: func(t *testing.T, hr *helmv2.HelmRelease) {
				require.Equal(t, v2beta1OldStatus().Status.LastReleaseRevision, hr.Status.LastReleaseRevision)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hr := decodeAs(t, tt.version, tt.obj)
			require.Equal(t, "podinfo", hr.Name)
			require.Equal(t, types.UID("u-1"), hr.UID)
			tt.check(t, hr)
			fs := EvaluateRelease(ReleaseObservation{Release: hr, Dependencies: readyDeps, DependenciesKnown: true}, now, DefaultThresholds())
			require.Len(t, fs, 1, "%v", fs)
			require.Equal(t, tt.rule, fs[0].Rule)
			require.Equal(t, "HelmRelease", fs[0].Object.Kind)
			require.Equal(t, "Kustomization/flux-system/apps", fs[0].Object.FluxOwner)
		})
	}
}

func TestAddReleaseTypes(t *testing.T) {
	tests := []struct {
		name    string
		version string
		wantErr bool
	}{
		{name: "v2 types stand for v2", version: "v2"},
		{name: "v2 types stand for v2beta2 on Flux 2.2", version: "v2beta2"},
		{name: "v2 types stand for v2beta1 on Flux 2.1", version: "v2beta1"},
		{name: "an unknown version is refused", version: "v3", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.NewScheme()
			err := AddReleaseTypes(s, tt.version)
			if tt.wantErr {
				require.ErrorContains(t, err, `"v3" is not one of`)
				return
			}
			require.NoError(t, err)
			// Exactly one kind per type: clients and caches address the served version and nothing else.
			for obj, kind := range map[runtime.Object]string{&helmv2.HelmRelease{}: "HelmRelease", &helmv2.HelmReleaseList{}: "HelmReleaseList"} {
				gvks, _, err := s.ObjectKinds(obj)
				require.NoError(t, err)
				require.Equal(t, []string{ReleaseGroupVersion(tt.version).WithKind(kind).String()}, []string{gvks[0].String()})
				require.Len(t, gvks, 1)
			}
		})
	}
}
