package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/syncmedic/syncmedic"
)

// TestHookCompletionMissedNeedsTheControllersReconciliation: a hook is missed only when the application-controller
// reconciled the app after the hook finished and the operation still waits; a controller that has not reconciled it
// for longer than the bound is reported as not processing the app, with nothing to terminate.
func TestHookCompletionMissedNeedsTheControllersReconciliation(t *testing.T) {
	const waitMsg = "waiting for completion of hook batch/Job/migrate"
	shopRef := syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "argoproj.io", Version: "v1alpha1", Kind: "Application",
		Namespace: "argocd", Name: "shop", App: "shop", AppNamespace: "argocd", Project: "default"}
	notProcessing := func(age string) func(t *testing.T, fs []syncmedic.Finding) {
		return func(t *testing.T, fs []syncmedic.Finding) {
			f := fs[0]
			require.Equal(t, shopRef, f.Object)
			require.Equal(t, "Argo CD's application-controller is not processing argocd/shop: it last reconciled it "+age+
				" ago while its operation is Running; nothing is terminated until it does", f.Summary)
			require.Equal(t, syncmedic.ActionNone, f.Remedy.Action, "nothing to apply, not even proposed as automatic")
			require.False(t, f.Remedy.AutoSafe)
			require.Equal(t, "status.reconciledAt", f.Evidence[0].Field)
			require.Contains(t, f.Remedy.Description, "ARGOCD_CONTROLLER_REPLICAS")
			require.Contains(t, f.Remedy.Commands[1], "kubectl -n argocd get configmap argocd-app-controller-shard-cm")
		}
	}
	tests := []evalCase{
		{
			name: "a hook that finished 6m ago, the app last reconciled 8m ago (before it finished): nothing yet, the controller may be slow",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), 8*time.Minute), HooksKnown: true, ServerVersion: "v2.14.21",
					StateSince: now.Add(-7 * time.Minute), Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 6*time.Minute, nil)}}
			},
		},
		{
			name: "the same hook with the app last reconciled 12m ago: the controller is not processing the app, and only that is reported",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), 12*time.Minute), HooksKnown: true, ServerVersion: "v2.14.21",
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 6*time.Minute, nil)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleControllerNotProcessing},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				notProcessing("12m")(t, fs)
				require.Equal(t, now.Add(-12*time.Minute), fs[0].Since)
				require.Contains(t, fs[0].Evidence, syncmedic.Evidence{Field: "hook batch/Job/migrate",
					Value: "finished: condition Complete=True at " + now.Add(-6*time.Minute).Format(time.RFC3339) + " (the controller has not recorded it)"})
			},
		},
		{
			name: "a hook that finished 10m ago, the app reconciled 2s ago (a snapshot: the first reconciliation since is unknown): nothing until the operation pass has had its time",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), 2*time.Second), HooksKnown: true, ServerVersion: "v2.14.21",
					StateSince: now.Add(-11 * time.Minute), Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 10*time.Minute, nil)}}
			},
		},
		{
			name: "v3.6.1 continued after a stop: reconciled 12m ago, then 10s ago, the hook finished 10m ago: nothing until the operation pass the controller runs within 30s",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), 10*time.Second), HooksKnown: true, ServerVersion: "v3.6.1",
					StateSince: now.Add(-13 * time.Minute), Reconciled: []time.Time{now.Add(-12 * time.Minute), now.Add(-10 * time.Second)},
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 10*time.Minute, nil)}}
			},
		},
		{
			name: "the same 40s after the controller came back, reconciled again since: a missed completion",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), 10*time.Second), HooksKnown: true, ServerVersion: "v3.6.1",
					StateSince: now.Add(-13 * time.Minute), Reconciled: []time.Time{now.Add(-12 * time.Minute), now.Add(-40 * time.Second), now.Add(-10 * time.Second)},
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 10*time.Minute, nil)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookCompletionMissed},
		},
		{
			name: "a hook that finished 10m ago, the app reconciled 1m ago and the operation still waits: a missed completion whose remedy carries when it finished",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), time.Minute), HooksKnown: true, ServerVersion: "v2.14.21",
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", nil, 10*time.Minute, nil)}}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookCompletionMissed},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "migrate", fs[0].Object.Name)
				require.Equal(t, "Job", fs[0].Object.Kind)
				require.Equal(t, now.Add(-10*time.Minute).Format(time.RFC3339), fs[0].Remedy.Params[ParamEvidenceAt])
				require.Contains(t, fs[0].Evidence, syncmedic.Evidence{Field: "status.reconciledAt", Value: now.Add(-time.Minute).Format(time.RFC3339), Since: at(time.Minute)})
			},
		},
		{
			name: "a hook not found, the operation unchanged for 20m, the app last reconciled 25m ago: the controller is not processing the app",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "migrate")), 25*time.Minute), HooksKnown: true, StateSince: now.Add(-20 * time.Minute)}
			},
			want: []syncmedic.RuleID{syncmedic.RuleControllerNotProcessing},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				notProcessing("25m")(t, fs)
				require.Contains(t, fs[0].Evidence, syncmedic.Evidence{Field: "hook batch/Job/migrate", Value: "not found in Argo CD's resource tree"})
			},
		},
		{
			name: "v3: a deleted hook held by the finalizer the operation waits to delete, the app last reconciled 30m ago: no finalizer removal, the controller is not processing the app",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp("waiting for deletion of hook batch/Job/migrate")), 30*time.Minute), HooksKnown: true, ServerVersion: "v3.0.12",
					Hooks: []*unstructured.Unstructured{finishedHook(t, "migrate", []string{HookFinalizer}, 40*time.Minute, ago(40*time.Minute))}}
			},
			want:  []syncmedic.RuleID{syncmedic.RuleControllerNotProcessing},
			check: notProcessing("30m"),
		},
	}
	runEvalCases(t, DefaultThresholds(), tests)
}

// at is the instant d before now, as Evidence.Since holds it.
func at(d time.Duration) *time.Time { t := now.Add(-d); return &t }

// TestOfflineScanFindsTheV3HookHeldAfterItCompleted is the kyverno/kyverno#13149 shape read from a dump (no watcher,
// so no StateSince): a v3 operation still "waiting for completion of hook" 50 minutes after that hook Job completed
// and was deleted by its TTL, held by argocd.argoproj.io/hook-finalizer. status.reconciledAt, a minute old, is the
// controller's evidence that it looked after the hook finished and still waits: the hook rule finds it, not only the
// generic argocd/operation-stuck.
func TestOfflineScanFindsTheV3HookHeldAfterItCompleted(t *testing.T) {
	const waitMsg = "waiting for completion of hook batch/Job/kyverno-clean-reports"
	hook := func(t *testing.T) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{finishedHook(t, "kyverno-clean-reports", []string{HookFinalizer}, 50*time.Minute, ago(50*time.Minute))}
	}
	tests := []evalCase{
		{
			name: "reconciled a minute ago: the hook rule finds it, with the reconciliation as evidence",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "kyverno-clean-reports")), time.Minute), HooksKnown: true, ServerVersion: "v3.0.12", Hooks: hook(t)}
			},
			want: []syncmedic.RuleID{syncmedic.RuleHookFinalizerStuck},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, "Job", f.Object.Kind)
				require.Equal(t, "kyverno-clean-reports", f.Object.Name)
				require.Equal(t, "Job shop/kyverno-clean-reports is stuck terminating: Argo CD's hook finalizer was never removed", f.Summary)
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "operation waits for", Value: "completion of hook this hook"})
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "status.reconciledAt", Value: now.Add(-time.Minute).Format(time.RFC3339), Since: at(time.Minute)})
				require.Equal(t, "also ("+string(syncmedic.RuleHookCompletionMissed)+")", f.Evidence[len(f.Evidence)-1].Field)
				require.Equal(t, syncmedic.ActionRemoveHookFinalizer, f.Remedy.Action)
			},
		},
		{
			name: "last reconciled before the hook finished, 52m ago: the controller is not processing the app, nothing is removed",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: reconciled(app(waveOp(waitMsg, "kyverno-clean-reports")), 52*time.Minute), HooksKnown: true, ServerVersion: "v3.0.12", Hooks: hook(t)}
			},
			want: []syncmedic.RuleID{syncmedic.RuleControllerNotProcessing},
		},
	}
	runEvalCases(t, DefaultThresholds(), tests)
}
