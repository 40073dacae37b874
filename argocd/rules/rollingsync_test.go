package rules

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// rollout builds an ApplicationSet "shop" with three RollingSync steps (region eu, us, ap) and its Applications:
// shop-eu in step 1 (Healthy), shop-us in step 2 (Progressing for an hour, its sync failed and it is Degraded),
// shop-ap in step 3 (Waiting), as the v3.6.1 controller records them.
func rollout() AppSetObservation {
	step := func(region string) v1alpha1.ApplicationSetRolloutStep {
		return v1alpha1.ApplicationSetRolloutStep{MatchExpressions: []v1alpha1.ApplicationMatchExpression{{Key: "region", Operator: "In", Values: []string{region}}}}
	}
	as := &v1alpha1.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "argocd", UID: "u-shop"},
		Spec: v1alpha1.ApplicationSetSpec{
			Strategy: &v1alpha1.ApplicationSetStrategy{Type: "RollingSync", RollingSync: &v1alpha1.ApplicationSetRolloutStrategy{
				Steps: []v1alpha1.ApplicationSetRolloutStep{step("eu"), step("us"), step("ap")}}},
			Template: v1alpha1.ApplicationSetTemplate{Spec: v1alpha1.ApplicationSpec{Project: "shop"}},
		},
		Status: v1alpha1.ApplicationSetStatus{
			ApplicationStatus: []v1alpha1.ApplicationSetApplicationStatus{
				{Application: "shop-eu", Status: RolloutHealthy, Step: "1", LastTransitionTime: ago(2 * time.Hour), Message: "Application resource became Healthy, updating status from Progressing to Healthy"},
				{Application: "shop-us", Status: RolloutProgressing, Step: "2", LastTransitionTime: ago(time.Hour), Message: "Application resource completed a sync, updating status from Pending to Progressing"},
				{Application: "shop-ap", Status: RolloutWaiting, Step: "3", LastTransitionTime: ago(2 * time.Hour), Message: "Application has pending changes, setting status to Waiting"},
			},
			Conditions: []v1alpha1.ApplicationSetCondition{{Type: v1alpha1.ApplicationSetConditionRolloutProgressing, Status: v1alpha1.ApplicationSetConditionStatusTrue, Message: "ApplicationSet is performing rollout of step 2"}},
		},
	}
	app := func(name string, h health.HealthStatusCode, s v1alpha1.SyncStatusCode, op *v1alpha1.OperationState) *v1alpha1.Application {
		a := &v1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd"}}
		a.Status.Health.Status, a.Status.Sync.Status, a.Status.Sync.Revision = h, s, "4f2c1e9b7d3a5c8e0f1a2b3c4d5e6f7a8b9c0d1e"
		// hand-written state: an in-memory fixture for the pure rule (nothing is written to a cluster); the real
		// applicationset-controller and application-controller produce it in internal/conformance/argo/rollingsync_test.go.
		a.Status.OperationState = op
		return a
	}
	failed := &v1alpha1.OperationState{Phase: synccommon.OperationFailed, StartedAt: *ago(time.Hour), FinishedAt: ago(59 * time.Minute),
		Message: "one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid: spec.template.spec.containers[0].image: Required value"}
	us := app("shop-us", health.HealthStatusDegraded, v1alpha1.SyncStatusCodeOutOfSync, failed)
	us.Status.Health.Message = "Deployment \"web\" exceeded its progress deadline"
	return AppSetObservation{AppSet: as, UIURL: "https://cd.example.com", Apps: map[string]*v1alpha1.Application{
		"shop-eu": app("shop-eu", health.HealthStatusHealthy, v1alpha1.SyncStatusCodeSynced, nil),
		"shop-us": us,
		"shop-ap": app("shop-ap", health.HealthStatusHealthy, v1alpha1.SyncStatusCodeOutOfSync, nil),
	}}
}

func TestRollingSyncStalled(t *testing.T) {
	th := DefaultThresholds()
	tests := []struct {
		name  string
		obs   func() AppSetObservation
		check func(t *testing.T, fs []syncmedic.Finding) // nil: nothing may be reported
	}{
		{
			name: "a step whose application's sync failed and which is Degraded holds the rollout: the step, the application and the fix",
			obs:  rollout,
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Len(t, fs, 1)
				f := fs[0]
				require.Equal(t, syncmedic.RuleRollingSyncStalled, f.Rule)
				require.Equal(t, "RollingSync of ApplicationSet argocd/shop is held at step 2 of 3 for 1h: shop-us is Degraded/OutOfSync, sync Failed; 1 application of a later step waits", f.Summary)
				require.Equal(t, syncmedic.ObjectRef{Tool: syncmedic.ToolArgoCD, Group: "argoproj.io", Version: "v1alpha1", Kind: "ApplicationSet", Namespace: "argocd", Name: "shop", UID: "u-shop", Project: "shop"}, f.Object)
				require.Equal(t, now.Add(-time.Hour), f.Since)
				since := now.Add(-time.Hour)
				require.Equal(t, []syncmedic.Evidence{
					{Field: "strategy", Value: "RollingSync, step 2 of 3 selects region in (us)"},
					{Field: "app shop-us", Value: "Progressing in the ApplicationSet's status since 2026-03-10T11:00:00Z: Application resource completed a sync, updating status from Pending to Progressing", Since: &since},
					{Field: "app shop-us health", Value: "Degraded: Deployment \"web\" exceeded its progress deadline"},
					{Field: "app shop-us sync", Value: "OutOfSync at 4f2c1e9"},
					{Field: "app shop-us last sync", Value: "Failed: one or more objects failed to apply, reason: Deployment.apps \"web\" is invalid: spec.template.spec.containers[0].image: Required value"},
					{Field: "waiting in later steps", Value: "shop-ap (step 3, Waiting)"},
					{Field: "condition RolloutProgressing", Value: "True: ApplicationSet is performing rollout of step 2"},
				}, f.Evidence)
				require.Equal(t, syncmedic.ActionNone, f.Remedy.Action)
				require.False(t, f.Remedy.AutoSafe)
				require.Equal(t, []string{
					"argocd app get argocd/shop-us",
					"argocd app sync argocd/shop-us",
					`kubectl -n argocd patch applicationset shop --type json -p '[{"op":"add","path":"/spec/strategy/rollingSync/steps/2/maxUpdate","value":0}]'`,
				}, f.Remedy.Commands)
				require.Contains(t, f.Remedy.Description, "does not retry a failed sync")
				require.Equal(t, []syncmedic.Link{{Title: "Argo CD: argocd/shop-us", URL: "https://cd.example.com/applications/argocd/shop-us"}}, f.Links)
				require.Equal(t, []syncmedic.ObjectRef{{Tool: syncmedic.ToolArgoCD, Group: "argoproj.io", Version: "v1alpha1", Kind: "Application",
					Namespace: "argocd", Name: "shop-us", App: "shop-us", AppNamespace: "argocd"}}, f.Related, "the holder, for the Argo CD extension's view of it")
				require.Equal(t, syncmedic.Fingerprint(f.Rule, f.Object), f.Fingerprint)
			},
		},
		{
			name: "an application Pending past the threshold whose sync never started (v2.14.21 keeps it Pending while it is Missing) holds the last step; no pause command then",
			obs: func() AppSetObservation {
				o := rollout()
				o.AppSet.Status.ApplicationStatus[1].Status = RolloutHealthy
				o.Apps["shop-us"] = o.Apps["shop-eu"]
				o.AppSet.Status.ApplicationStatus[2] = v1alpha1.ApplicationSetApplicationStatus{Application: "shop-ap", Status: RolloutPending, Step: "3", LastTransitionTime: ago(45 * time.Minute),
					Message: "Application moved to Pending status, watching for the Application resource to start Progressing."}
				o.Apps["shop-ap"].Status.Health.Status = health.HealthStatusMissing
				return o
			},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Len(t, fs, 1)
				require.Equal(t, "RollingSync of ApplicationSet argocd/shop is held at step 3 of 3 for 45m: shop-ap is Missing/OutOfSync", fs[0].Summary)
				require.Equal(t, []string{"argocd app get argocd/shop-ap", "argocd app sync argocd/shop-ap"}, fs[0].Remedy.Commands)
			},
		},
		{
			name: "two holders of one step are both named, counted from the older",
			obs: func() AppSetObservation {
				o := rollout()
				o.AppSet.Status.ApplicationStatus = append(o.AppSet.Status.ApplicationStatus, v1alpha1.ApplicationSetApplicationStatus{
					Application: "shop-us2", Status: RolloutPending, Step: "2", LastTransitionTime: ago(3 * time.Hour), Message: "Application moved to Pending status, watching for the Application resource to start Progressing"})
				a := o.Apps["shop-us"].DeepCopy()
				// hand-written state: an in-memory fixture of a second holder with no operation yet (pure rule test).
				a.Name, a.Status.Health.Status, a.Status.OperationState = "shop-us2", health.HealthStatusProgressing, nil
				o.Apps["shop-us2"] = a
				return o
			},
			check: func(t *testing.T, fs []syncmedic.Finding) {
				require.Len(t, fs, 1)
				require.Equal(t, "RollingSync of ApplicationSet argocd/shop is held at step 2 of 3 for 3h: shop-us is Degraded/OutOfSync, sync Failed, shop-us2 is Progressing/OutOfSync; 1 application of a later step waits", fs[0].Summary)
				require.Equal(t, now.Add(-3*time.Hour), fs[0].Since)
			},
		},
		{
			name: "near miss: the step is rolling out within the threshold",
			obs: func() AppSetObservation {
				o := rollout()
				o.AppSet.Status.ApplicationStatus[1].LastTransitionTime = ago(5 * time.Minute)
				return o
			},
		},
		{
			name: "near miss: maxUpdate 0 stops the step on purpose: its applications stay Waiting",
			obs: func() AppSetObservation {
				o := rollout()
				zero := intstr.FromInt32(0)
				o.AppSet.Spec.Strategy.RollingSync.Steps[1].MaxUpdate = &zero
				o.AppSet.Status.ApplicationStatus[1].Status = RolloutWaiting
				o.AppSet.Status.ApplicationStatus[1].Message = "Application has pending changes, setting status to Waiting"
				return o
			},
		},
		{
			name: "near miss: the application became Healthy and Synced; the controller records it on its next pass",
			obs: func() AppSetObservation {
				o := rollout()
				o.Apps["shop-us"] = o.Apps["shop-eu"]
				return o
			},
		},
		{
			name: "near miss: a sync window the person set blocks the step's sync",
			obs: func() AppSetObservation {
				o := rollout()
				op := o.Apps["shop-us"].Status.OperationState
				op.Phase, op.Message, op.FinishedAt = synccommon.OperationRunning, SyncWindowBlockedMessage, nil
				return o
			},
		},
		{
			name: "near miss: the rollout is complete",
			obs: func() AppSetObservation {
				o := rollout()
				for i := range o.AppSet.Status.ApplicationStatus {
					o.AppSet.Status.ApplicationStatus[i].Status = RolloutHealthy
				}
				return o
			},
		},
		{
			name: "near miss: an ApplicationSet without RollingSync (AllAtOnce) has no steps to stall",
			obs: func() AppSetObservation {
				o := rollout()
				o.AppSet.Spec.Strategy = &v1alpha1.ApplicationSetStrategy{Type: "AllAtOnce"}
				return o
			},
		},
		{
			name: "near miss: the ApplicationSet is being deleted",
			obs: func() AppSetObservation {
				o := rollout()
				o.AppSet.DeletionTimestamp = ago(time.Minute)
				return o
			},
		},
		{
			name: "near miss: the holding application was not seen (deleted, or not read): nothing is claimed about it",
			obs: func() AppSetObservation {
				o := rollout()
				delete(o.Apps, "shop-us")
				return o
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := RollingSyncStalled(tt.obs(), now, th)
			if tt.check == nil {
				require.Empty(t, fs)
				return
			}
			tt.check(t, fs)
		})
	}
}
