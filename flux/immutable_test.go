package flux

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/syncmedic/syncmedic"
)

// immutableMsg is kustomize-controller v1.7.3's Ready message for a Deployment whose selector changed in git.
const immutableMsg = `Deployment/apps/web dry-run failed (Invalid): Deployment.apps "web" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web2"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable`

func TestKustomizationImmutableField(t *testing.T) {
	th := DefaultThresholds()
	refused := func(age time.Duration) *Kustomization {
		k := kustomization("apps", cond(meta.ReadyCondition, "False", meta.ReconciliationFailedReason, immutableMsg, age))
		k.Status.LastAttemptedRevision = "main@sha1:0000002"
		return k
	}
	source := SourceArtifact{Kind: "GitRepository", Revision: "main@sha1:0000002", LastUpdateTime: now.Add(-2 * time.Hour)}
	t.Run("refused past the threshold: reported alone, naming the object and the field, notify only", func(t *testing.T) {
		k := refused(time.Hour)
		fs := EvaluateKustomization(KustomizationObservation{Kustomization: k, Source: source, SourceKnown: true, DependenciesKnown: true}, now, th)
		require.Len(t, fs, 1, "stale-revision leaves it to this rule")
		f := fs[0]
		require.Equal(t, syncmedic.RuleKustomizationImmutableField, f.Rule)
		require.Equal(t, "apps", f.Object.Name)
		require.Equal(t, "Kustomization flux-system/apps cannot apply Deployment/apps/web's spec.selector: the field is immutable, and kustomize-controller fails the same way every retry (1h)", f.Summary)
		require.Equal(t, now.Add(-time.Hour), f.Since)
		require.Equal(t, syncmedic.Evidence{Field: "spec.force", Value: "false"}, f.Evidence[1])
		require.Empty(t, f.Remedy.Action, "notify only")
		require.Contains(t, f.Remedy.Description, "kustomize.toolkit.fluxcd.io/force: enabled to Deployment/apps/web")
	})
	t.Run("within the threshold: silent, next look at its end", func(t *testing.T) {
		k := refused(time.Minute)
		require.Empty(t, KustomizationImmutableField(KustomizationObservation{Kustomization: k}, now, th))
		require.Equal(t, now.Add(-time.Minute+th.Kustomization), KustomizationNextDeadline(KustomizationObservation{Kustomization: k}, now, th))
	})
	t.Run("force on, suspended, another failure, Ready: silent", func(t *testing.T) {
		forced := refused(time.Hour)
		forced.Spec.Force = true
		suspended := refused(time.Hour)
		suspended.Spec.Suspend = true
		other := kustomization("apps", cond(meta.ReadyCondition, "False", meta.ReconciliationFailedReason, `Deployment/apps/web dry-run failed (Invalid): spec.replicas: Invalid value: -1`, time.Hour))
		ready := kustomization("apps", cond(meta.ReadyCondition, "True", meta.ReconciliationSucceededReason, "Applied revision: "+gitRev, time.Hour))
		for name, k := range map[string]*Kustomization{"force": forced, "suspended": suspended, "another failure": other, "ready": ready} {
			require.Empty(t, KustomizationImmutableField(KustomizationObservation{Kustomization: k}, now, th), name)
		}
	})
	t.Run("a message without the object's name still names the refusal", func(t *testing.T) {
		object, field, ok := immutableField(`Job.batch "migrate" is invalid: spec.template: Invalid value: core.PodTemplateSpec{}: field is immutable`)
		require.True(t, ok)
		require.Empty(t, object)
		require.Equal(t, "spec.template", field)
	})
}

// Each retry marks Ready=Unknown, then False with a new transition time: where the source remembers the refusal
// (serve), the finding holds during the retry and its clock starts at the first refusal.
func TestKustomizationImmutableFieldHoldsAcrossRetries(t *testing.T) {
	th := DefaultThresholds()
	first := now.Add(-time.Hour)
	refusal := &Refusal{Message: immutableMsg, Revision: "main@sha1:0000002", Since: first}
	retrying := kustomization("apps", cond(meta.ReadyCondition, "Unknown", meta.ProgressingReason, "Reconciliation in progress", 2*time.Second))
	retrying.Status.LastAttemptedRevision = "main@sha1:0000002"
	fs := KustomizationImmutableField(KustomizationObservation{Kustomization: retrying, Refused: refusal}, now, th)
	require.Len(t, fs, 1)
	require.Equal(t, first, fs[0].Since)
	require.Equal(t, "Kustomization flux-system/apps cannot apply Deployment/apps/web's spec.selector: the field is immutable, and kustomize-controller fails the same way every retry (1h)", fs[0].Summary)
	require.Equal(t, syncmedic.Evidence{Field: "last refusal (a retry is in progress)", Value: immutableMsg, Since: timePtr(first)}, fs[0].Evidence[4])

	again := kustomization("apps", cond(meta.ReadyCondition, "False", meta.ReconciliationFailedReason, immutableMsg, time.Second))
	again.Status.LastAttemptedRevision = "main@sha1:0000002"
	fs = KustomizationImmutableField(KustomizationObservation{Kustomization: again, Refused: refusal}, now, th)
	require.Len(t, fs, 1, "refused again a second ago, first refused an hour ago")
	require.Equal(t, first, fs[0].Since)

	newer := kustomization("apps", cond(meta.ReadyCondition, "Unknown", meta.ProgressingReason, "Reconciliation in progress", 2*time.Second))
	newer.Status.LastAttemptedRevision = "main@sha1:0000003"
	require.Empty(t, KustomizationImmutableField(KustomizationObservation{Kustomization: newer, Refused: refusal}, now, th), "a new revision is a new attempt")
	require.Empty(t, KustomizationImmutableField(KustomizationObservation{Kustomization: retrying}, now, th), "a scan knows no earlier refusal")
}

func TestWatcherRemembersARefusalAcrossRetries(t *testing.T) {
	w := &KustomizationWatcher{refused: map[types.NamespacedName]refusalSeen{}}
	k := func(status, reason, msg string, age time.Duration, attempted string) *Kustomization {
		k := kustomization("apps", cond(meta.ReadyCondition, status, reason, msg, age))
		k.UID, k.Status.LastAttemptedRevision = "uid-1", attempted
		return k
	}
	r := w.refusal(k("False", meta.ReconciliationFailedReason, immutableMsg, time.Hour, "rev2"), now)
	require.Equal(t, &Refusal{Message: immutableMsg, Revision: "rev2", Since: now.Add(-time.Hour)}, r)
	r = w.refusal(k("Unknown", meta.ProgressingReason, "Reconciliation in progress", time.Second, "rev2"), now)
	require.Equal(t, now.Add(-time.Hour), r.Since, "kept while the retry runs")
	r = w.refusal(k("False", meta.ReconciliationFailedReason, immutableMsg, 0, "rev2"), now)
	require.Equal(t, now.Add(-time.Hour), r.Since, "the first refusal's time, not the retry's")
	require.Nil(t, w.refusal(k("True", meta.ReconciliationSucceededReason, "Applied revision: rev2", 0, "rev2"), now), "applied: forgotten")
	require.Nil(t, w.refusal(k("Unknown", meta.ProgressingReason, "Reconciliation in progress", 0, "rev2"), now), "nothing to keep")
	w.refusal(k("False", meta.ReconciliationFailedReason, immutableMsg, time.Minute, "rev2"), now)
	require.Nil(t, w.refusal(k("Unknown", meta.ProgressingReason, "Reconciliation in progress", 0, "rev3"), now), "another revision: forgotten")
}
