package argocd

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic"
	"github.com/syncmedic/syncmedic/argocd/rules"
	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
	"github.com/syncmedic/syncmedic/internal/testenv/argofixture"
)

// The fixtures of the watcher, scan and poller tests: the same applications and operations the rules' own tests
// (argocd/rules) are written against.

// The shared fixtures (internal/testenv/argofixture).
var (
	now       = argofixture.Now
	ago       = argofixture.Ago
	app       = argofixture.App
	runningOp = argofixture.RunningOp
)

func ruleIDs(fs []syncmedic.Finding) []syncmedic.RuleID {
	var out []syncmedic.RuleID
	for _, f := range fs {
		out = append(out, f.Rule)
	}
	return out
}

// rollout builds an ApplicationSet "shop" with three RollingSync steps (region eu, us, ap) and its Applications:
// shop-eu in step 1 (Healthy), shop-us in step 2 (Progressing for an hour, its sync failed and it is Degraded),
// shop-ap in step 3 (Waiting), as the v3.6.1 controller records them.
func rollout() rules.AppSetObservation {
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
				{Application: "shop-eu", Status: rules.RolloutHealthy, Step: "1", LastTransitionTime: ago(2 * time.Hour), Message: "Application resource became Healthy, updating status from Progressing to Healthy"},
				{Application: "shop-us", Status: rules.RolloutProgressing, Step: "2", LastTransitionTime: ago(time.Hour), Message: "Application resource completed a sync, updating status from Pending to Progressing"},
				{Application: "shop-ap", Status: rules.RolloutWaiting, Step: "3", LastTransitionTime: ago(2 * time.Hour), Message: "Application has pending changes, setting status to Waiting"},
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
	return rules.AppSetObservation{AppSet: as, UIURL: "https://cd.example.com", Apps: map[string]*v1alpha1.Application{
		"shop-eu": app("shop-eu", health.HealthStatusHealthy, v1alpha1.SyncStatusCodeSynced, nil),
		"shop-us": us,
		"shop-ap": app("shop-ap", health.HealthStatusHealthy, v1alpha1.SyncStatusCodeOutOfSync, nil),
	}}
}
