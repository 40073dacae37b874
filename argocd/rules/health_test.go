package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// hand-written state: healthWaitApp and failedAutoSyncApp build applications in memory for the pure rule tests,
// as the real controllers write them (gitops-engine's setRunningPhase; autoSync's SyncError condition, quoted in
// health.go and autosync.go); internal/conformance/argo drives the real v2.14.21 and v3.6.1 controllers into them.

// healthWaitApp is app shop waiting for the healthy state of its Deployment web since started ago, whose health is
// status (none when empty).
func healthWaitApp(started time.Duration, status health.HealthStatusCode, msg string) *v1alpha1.Application {
	a := app(runningOp(started, "waiting for healthy state of apps/Deployment/web", ""))
	r := v1alpha1.ResourceStatus{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "shop", Name: "web", Status: v1alpha1.SyncStatusCodeSynced}
	if status != "" {
		r.Health = &v1alpha1.HealthStatus{Status: status, Message: msg}
	}
	a.Status.Resources = []v1alpha1.ResourceStatus{{Version: "v1", Kind: "ConfigMap", Namespace: "shop", Name: "routes", SyncWave: 1}, r}
	return a
}

// failedAutoSyncApp is app shop with automated sync whose last sync, to 4f2c1e9 and finished ago, failed; cond is
// the controller's SyncError condition message ("" for none) and target the revision the app is compared to.
func failedAutoSyncApp(finished time.Duration, cond, target string) *v1alpha1.Application {
	op := &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: "4f2c1e9"}, InitiatedBy: v1alpha1.OperationInitiator{Automated: true},
			Retry: v1alpha1.RetryStrategy{Limit: 2}},
		Phase: synccommon.OperationFailed, Message: `one or more objects failed to apply, reason: Service "web" is invalid: spec.ports[0].port: Invalid value: 0`,
		StartedAt: *ago(finished + time.Minute), FinishedAt: ago(finished), RetryCount: 2,
		SyncResult: &v1alpha1.SyncOperationResult{Revision: "4f2c1e9"},
	}
	a := app(op)
	a.Spec.SyncPolicy = &v1alpha1.SyncPolicy{Automated: &v1alpha1.SyncPolicyAutomated{Prune: true}}
	a.Status.Sync = v1alpha1.SyncStatus{Status: v1alpha1.SyncStatusCodeOutOfSync, Revision: target}
	if cond != "" {
		a.Status.Conditions = []v1alpha1.ApplicationCondition{{Type: v1alpha1.ApplicationConditionSyncError, Message: cond + op.Message}}
	}
	return a
}

func TestWaitingForHealth(t *testing.T) {
	th := DefaultThresholds()
	tests := []evalCase{
		{
			name: "a sync waiting past the threshold for a Deployment that stays Progressing names it and its health",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: healthWaitApp(40*time.Minute, health.HealthStatusProgressing, "Waiting for rollout to finish: 0 of 2 updated replicas are available..."),
					StateSince: now.Add(-25 * time.Minute), UIURL: "https://cd.example.com"}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWaitingForHealth},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, "Sync of argocd/shop has waited 25m for Deployment shop/web to become healthy; it is Progressing: Waiting for rollout to finish: 0 of 2 updated replicas are available...", f.Summary)
				require.Equal(t, "Application", f.Object.Kind, "the finding is about the application whose sync is held")
				require.Equal(t, now.Add(-25*time.Minute), f.Since)
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "health of Deployment shop/web", Value: "Progressing: Waiting for rollout to finish: 0 of 2 updated replicas are available..."})
				require.Equal(t, "new syncs", f.Evidence[len(f.Evidence)-1].Field)
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action)
				require.False(t, f.Remedy.AutoSafe)
				require.Equal(t, []string{"kubectl -n shop describe deployment.apps web", "kubectl -n shop get events --field-selector involvedObject.name=web",
					"argocd app terminate-op argocd/shop"}, f.Remedy.Commands)
			},
		},
		{
			name: "a Deployment whose health is Missing holds the sync the same way",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: healthWaitApp(15*time.Minute, health.HealthStatusMissing, "")}
			},
			want: []syncmedic.RuleID{syncmedic.RuleWaitingForHealth},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Equal(t, "Sync of argocd/shop has waited 15m for Deployment shop/web to become healthy; it is Missing", fs[0].Summary)
			},
		},
		{
			name: "near miss: a healthy rollout briefly waiting for health is not reported",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: healthWaitApp(40*time.Second, health.HealthStatusProgressing, "Waiting for rollout to finish: 1 of 2 updated replicas are available...")}
			},
		},
		{
			name: "near miss: a wait that changed recently counts from the change",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: healthWaitApp(time.Hour, health.HealthStatusProgressing, ""), StateSince: now.Add(-time.Minute)}
			},
		},
		{
			name: "near miss: a resource already Healthy is the controller's next pass, not this rule's",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: healthWaitApp(15*time.Minute, health.HealthStatusHealthy, "")}
			},
		},
		{
			name: "near miss: a health not carried by the application leaves it to argocd/operation-stuck",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: healthWaitApp(45*time.Minute, "", "")}
			},
			want: []syncmedic.RuleID{syncmedic.RuleOperationStuck},
		},
		{
			name: "near miss: an operation waiting for its retry backoff waits for the retry, not the resource",
			obs: func(t *testing.T) AppObservation {
				a := healthWaitApp(15*time.Minute, health.HealthStatusProgressing, "")
				a.Status.OperationState.FinishedAt, a.Status.OperationState.RetryCount = ago(14*time.Minute), 1
				a.Status.OperationState.Operation.Retry = v1alpha1.RetryStrategy{Limit: 3, Backoff: &v1alpha1.Backoff{Duration: "1h"}}
				return AppObservation{App: a}
			},
		},
		{
			name: "near miss: a sync waiting for a hook is the hook rules'",
			obs: func(t *testing.T) AppObservation {
				a := healthWaitApp(15*time.Minute, health.HealthStatusProgressing, "")
				a.Status.OperationState.Message = "waiting for completion of hook batch/Job/migrate"
				return AppObservation{App: a}
			},
		},
	}
	runEvalCases(t, th, tests)
}

func TestAutoSyncNotRetried(t *testing.T) {
	th := DefaultThresholds()
	const v3, v2 = "Failed last sync attempt to [4f2c1e9]: ", "Failed sync attempt to 4f2c1e9: "
	tests := []evalCase{
		{
			name: "v3.6.1: a failed automated sync the controller will not retry is reported with its message and revision",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: failedAutoSyncApp(20*time.Minute, v3, "4f2c1e9")}
			},
			want: []syncmedic.RuleID{syncmedic.RuleAutoSyncNotRetried},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				f := fs[0]
				require.Equal(t, `Automated sync of argocd/shop to 4f2c1e9 failed 20m ago and Argo CD will not retry it: one or more objects failed to apply, reason: Service "web" is invalid: spec.ports[0].port: Invalid value: 0`, f.Summary)
				require.Equal(t, "Application", f.Object.Kind)
				require.Equal(t, now.Add(-20*time.Minute), f.Since)
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "condition SyncError", Value: v3 + f.Evidence[2].Value})
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "retries", Value: "2, all failed"})
				require.Contains(t, f.Evidence, syncmedic.Evidence{Field: "initiatedBy", Value: "automated sync"})
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action)
				require.Equal(t, []string{"argocd app get argocd/shop", "argocd app sync argocd/shop"}, f.Remedy.Commands)
			},
		},
		{
			name: "v2.14.21's wording is read the same way",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: failedAutoSyncApp(20*time.Minute, v2, "4f2c1e9")}
			},
			want: []syncmedic.RuleID{syncmedic.RuleAutoSyncNotRetried},
		},
		{
			name: "a failed sync an Error phase ended is not retried either",
			obs: func(t *testing.T) AppObservation {
				a := failedAutoSyncApp(20*time.Minute, v3, "4f2c1e9")
				a.Status.OperationState.Phase = synccommon.OperationError
				return AppObservation{App: a}
			},
			want: []syncmedic.RuleID{syncmedic.RuleAutoSyncNotRetried},
		},
		{
			name: "near miss: a failure less than the threshold ago",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: failedAutoSyncApp(time.Minute, v3, "4f2c1e9")}
			},
		},
		{
			name: "near miss: a new revision, which the controller syncs on its next pass",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: failedAutoSyncApp(20*time.Minute, v3, "77aa88b")}
			},
		},
		{
			name: "near miss: an attempt that failed with retries left stays Running: the controller retries it",
			obs: func(t *testing.T) AppObservation {
				a := failedAutoSyncApp(20*time.Minute, "", "4f2c1e9")
				op := a.Status.OperationState
				op.Phase, op.RetryCount, op.FinishedAt = synccommon.OperationRunning, 1, ago(5*time.Second)
				a.Operation = &op.Operation
				return AppObservation{App: a}
			},
		},
		{
			name: "near miss: no SyncError from the controller (it has not decided, or automated sync is off)",
			obs: func(t *testing.T) AppObservation {
				return AppObservation{App: failedAutoSyncApp(20*time.Minute, "", "4f2c1e9")}
			},
		},
		{
			name: "near miss: a sync a person requested since is running",
			obs: func(t *testing.T) AppObservation {
				a := failedAutoSyncApp(20*time.Minute, v3, "4f2c1e9")
				a.Operation = &v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: "4f2c1e9"}}
				return AppObservation{App: a}
			},
		},
		{
			name: "near miss: an application that is Synced again",
			obs: func(t *testing.T) AppObservation {
				a := failedAutoSyncApp(20*time.Minute, v3, "4f2c1e9")
				a.Status.Sync.Status = v1alpha1.SyncStatusCodeSynced
				return AppObservation{App: a}
			},
		},
		{
			name: "near miss: automated sync turned off",
			obs: func(t *testing.T) AppObservation {
				a := failedAutoSyncApp(20*time.Minute, v3, "4f2c1e9")
				a.Spec.SyncPolicy = nil
				return AppObservation{App: a}
			},
		},
	}
	runEvalCases(t, th, tests)
}

func TestNextDeadlineWakesTheNewRules(t *testing.T) {
	th := DefaultThresholds()
	// The other rules' deadlines later than these rules', so the one asserted is theirs.
	th.HookCompletion, th.HookDeletion, th.OperationStuck, th.HookFinalizer = time.Hour, time.Hour, time.Hour, time.Hour
	t.Run("a sync waiting for health is looked at again when its threshold is crossed", func(t *testing.T) {
		obs := AppObservation{App: healthWaitApp(time.Minute, health.HealthStatusProgressing, "")}
		require.Equal(t, now.Add(-time.Minute+th.WaitingForHealth), NextDeadline(obs, now, th))
	})
	t.Run("a failed sync is looked at again when its threshold is crossed", func(t *testing.T) {
		obs := AppObservation{App: failedAutoSyncApp(time.Minute, "Failed last sync attempt to [4f2c1e9]: ", "4f2c1e9")}
		require.Equal(t, now.Add(-time.Minute+th.AutoSyncNotRetried), NextDeadline(obs, now, th))
	})
}
