package flux

import (
	"strconv"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
)

// requestedAt is the value `flux reconcile` writes for a request made age ago.
func requestedAt(age time.Duration) string { return now.Add(-age).Format(time.RFC3339Nano) }

func TestKustomizationRequestNotHandled(t *testing.T) {
	th := DefaultThresholds() // 5m
	// interval 10m, no spec.timeout: v1.7.3's timeout is 9m30s, so a request is judged 14m30s after it was made.
	pending := func(age time.Duration) *Kustomization {
		k := kustomization("platform", cond(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Applied revision: "+gitRev, 2*time.Hour))
		k.Annotations = map[string]string{meta.ReconcileRequestAnnotation: requestedAt(age)}
		k.Status.LastHandledReconcileAt = requestedAt(3 * time.Hour)
		return k
	}
	only := func(k *Kustomization) []syncmedic.Finding {
		return KustomizationRequestNotHandled(KustomizationObservation{Kustomization: k}, now, th)
	}

	t.Run("unhandled past the timeout plus the threshold: reported with the request, what was handled and the fix", func(t *testing.T) {
		k := pending(15 * time.Minute)
		fs := EvaluateKustomization(KustomizationObservation{Kustomization: k, DependenciesKnown: true}, now, th)
		require.Len(t, fs, 1, "only this rule fires")
		f := fs[0]
		require.Equal(t, syncmedic.RuleReconcileRequestNotHandled, f.Rule)
		require.Equal(t, "flux-system", f.Object.Namespace)
		require.Equal(t, "platform", f.Object.Name)
		require.Equal(t, KustomizationKind, f.Object.Kind)
		require.Equal(t, now.Add(-15*time.Minute), f.Since)
		require.Equal(t, "Kustomization flux-system/platform: the reconcile request made 15m ago has not been handled; kustomize-controller handles a request when a reconcile ends, within its timeout (9m30s): no kustomize-controller is reconciling it", f.Summary)
		require.Equal(t, []syncmedic.Evidence{
			{Field: "metadata.annotations[reconcile.fluxcd.io/requestedAt]", Value: requestedAt(15 * time.Minute), Since: timePtr(now.Add(-15 * time.Minute))},
			{Field: "status.lastHandledReconcileAt", Value: requestedAt(3 * time.Hour)},
			{Field: "Ready", Value: kConditionText(k, meta.ReadyCondition)},
		}, f.Evidence)
		require.Empty(t, f.Remedy.Action, "notify only: nothing is written to the object")
		require.Contains(t, f.Remedy.Description, "--watch-label-selector '!sharding.fluxcd.io/key'")
		require.Contains(t, f.Remedy.Commands, "kubectl -n flux-system get pods -l app=kustomize-controller -o wide")
	})
	t.Run("a shard label no controller selects is named with the selector that would", func(t *testing.T) {
		k := pending(time.Hour)
		k.Labels = map[string]string{ShardLabel: "shard-b"}
		fs := only(k)
		require.Len(t, fs, 1)
		require.Equal(t, syncmedic.Evidence{Field: "metadata.labels[sharding.fluxcd.io/key]",
			Value: "shard-b: only a kustomize-controller started with --watch-label-selector 'sharding.fluxcd.io/key in (shard-b)' handles it"}, fs[0].Evidence[3])
	})
	t.Run("within the timeout plus the threshold: silent, and the watcher is told when to look again", func(t *testing.T) {
		k := pending(14 * time.Minute)
		require.Empty(t, only(k))
		require.Equal(t, now.Add(-14*time.Minute+9*time.Minute+30*time.Second+th.ReconcileRequest),
			KustomizationNextDeadline(KustomizationObservation{Kustomization: k}, now, th))
	})
	t.Run("spec.timeout sets the bound", func(t *testing.T) {
		k := pending(6 * time.Minute)
		k.Spec.Timeout = &metav1.Duration{Duration: 30 * time.Second}
		require.Len(t, only(k), 1, "30s + 5m < 6m")
	})
	t.Run("handled, suspended, deleting, or not a time: silent", func(t *testing.T) {
		handled := pending(time.Hour)
		handled.Status.LastHandledReconcileAt = handled.Annotations[meta.ReconcileRequestAnnotation]
		suspended := pending(time.Hour)
		suspended.Spec.Suspend = true
		deleting := pending(time.Hour)
		deleting.DeletionTimestamp = metav1Ago(time.Minute)
		word := pending(time.Hour)
		word.Annotations[meta.ReconcileRequestAnnotation] = "please"
		none := pending(time.Hour)
		none.Annotations = nil
		for name, k := range map[string]*Kustomization{"handled": handled, "suspended": suspended, "deleting": deleting, "not a time": word, "no request": none} {
			require.Empty(t, only(k), name)
			if name != "deleting" {
				require.True(t, KustomizationNextDeadline(KustomizationObservation{Kustomization: k}, now, th).IsZero(), name)
			}
		}
	})
	t.Run("Unix seconds are a time", func(t *testing.T) {
		k := pending(0)
		k.Annotations[meta.ReconcileRequestAnnotation] = strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)
		fs := only(k)
		require.Len(t, fs, 1)
		require.Equal(t, now.Add(-time.Hour), fs[0].Since)
	})
}

func TestReleaseRequestNotHandled(t *testing.T) {
	th := DefaultThresholds()
	// default spec.timeout 5m: helm-controller may take an action and its remediation, 10m, plus the threshold 5m.
	pending := func(age time.Duration) *helmv2.HelmRelease {
		hr := withHistory(release("redis", 3, 3, cond(meta.ReadyCondition, "True", helmv2.UpgradeSucceededReason, "Helm upgrade succeeded", 2*time.Hour)))
		hr.Annotations = map[string]string{meta.ReconcileRequestAnnotation: requestedAt(age)}
		return hr
	}
	t.Run("past twice the action timeout plus the threshold: reported, nothing handled yet", func(t *testing.T) {
		fs := EvaluateRelease(ReleaseObservation{Release: pending(16 * time.Minute), DependenciesKnown: true}, now, th)
		require.Len(t, fs, 1, "only this rule fires")
		f := fs[0]
		require.Equal(t, syncmedic.RuleReconcileRequestNotHandled, f.Rule)
		require.Equal(t, helmv2.HelmReleaseKind, f.Object.Kind)
		require.Equal(t, "apps", f.Object.Namespace)
		require.Equal(t, "redis", f.Object.Name)
		require.Equal(t, "HelmRelease apps/redis: the reconcile request made 16m ago has not been handled; helm-controller handles a request when a reconcile ends, within twice the action timeout (10m0s: an action and its remediation): no helm-controller is reconciling it", f.Summary)
		require.Equal(t, syncmedic.Evidence{Field: "status.lastHandledReconcileAt", Value: "(none)"}, f.Evidence[1])
		require.Contains(t, f.Remedy.Commands, "flux get helmreleases redis -n apps")
	})
	t.Run("within it: silent, and the next look is at its end", func(t *testing.T) {
		hr := pending(14 * time.Minute)
		require.Empty(t, ReleaseRequestNotHandled(ReleaseObservation{Release: hr}, now, th))
		at, ok := nextThreshold(hr, nil, now, th)
		require.True(t, ok)
		require.Equal(t, now.Add(-14*time.Minute+10*time.Minute+th.ReconcileRequest), at)
	})
	t.Run("a longer upgrade timeout sets the bound", func(t *testing.T) {
		hr := pending(20 * time.Minute)
		hr.Spec.Upgrade = &helmv2.Upgrade{Timeout: &metav1.Duration{Duration: 10 * time.Minute}}
		require.Empty(t, ReleaseRequestNotHandled(ReleaseObservation{Release: hr}, now, th), "2 × 10m + 5m > 20m")
	})
	t.Run("handled or suspended: silent", func(t *testing.T) {
		handled := pending(time.Hour)
		handled.Status.LastHandledReconcileAt = handled.Annotations[meta.ReconcileRequestAnnotation]
		suspended := pending(time.Hour)
		suspended.Spec.Suspend = true
		require.Empty(t, ReleaseRequestNotHandled(ReleaseObservation{Release: handled}, now, th))
		require.Empty(t, ReleaseRequestNotHandled(ReleaseObservation{Release: suspended}, now, th))
	})
}
