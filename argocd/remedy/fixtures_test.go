package remedy

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/syncmedic/syncmedic/internal/argoapi/health"
	synccommon "github.com/syncmedic/syncmedic/internal/argoapi/synccommon"
	"github.com/syncmedic/syncmedic/internal/argoapi/v1alpha1"
)

// The fixtures of the remedies' unit tests: the same applications and operations the rules' own tests
// (argocd/rules) are written against.

var now = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

func app(op *v1alpha1.OperationState) *v1alpha1.Application {
	a := &v1alpha1.Application{}
	a.Name, a.Namespace = "shop", "argocd"
	a.Spec.Project = "default"
	a.Spec.Destination.Namespace = "shop"
	a.Status.OperationState = op
	if op != nil && !op.Phase.Completed() {
		a.Operation = &op.Operation // a running operation is the one .operation holds
	}
	return a
}

// hand-written state: runningOp and failedOp build operation states in memory for the pure rule tests (nothing is
// written to an apiserver); the real controllers produce them in internal/conformance/argo (a running hook wave in
// TestSlowAndFastHookWaveIsNotStuckOnV3, the failed "field is immutable" sync and the person's delete of the old hook
// in TestImmutableHookTemplateChange, on v2.14.21 and v3.6.1).
func runningOp(started time.Duration, msg string, hookPhase synccommon.OperationPhase) *v1alpha1.OperationState {
	op := &v1alpha1.OperationState{
		Operation: v1alpha1.Operation{Sync: &v1alpha1.SyncOperation{Revision: "4f2c1e9", SyncOptions: []string{"CreateNamespace=true"}}},
		Phase:     synccommon.OperationRunning, Message: msg, StartedAt: *ago(started),
	}
	if hookPhase != "" {
		op.SyncResult = &v1alpha1.SyncOperationResult{Revision: "4f2c1e9", Resources: v1alpha1.ResourceResults{{
			Group: "batch", Version: "v1", Kind: "Job", Namespace: "shop", Name: "migrate",
			HookType: synccommon.HookTypePreSync, HookPhase: hookPhase,
		}}}
	}
	return op
}

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
